"""Where the workspace itself calls a target, and what those calls say its inputs are.

For an entrypoint, :class:`CallSiteFinder` reads the workspace's own tests, scripts and modules
(with libcst, statement by statement, only those that name the target or one of its aliases; a
``functools.partial`` alias such as ``ResNet18 = partial(ResNet, ...)`` is followed through) and
returns its call sites, ranked: those that fill every input first, then tests before
examples/scripts before anything else, then the smaller inputs. A site is

- a construction (``ResNet(stage_sizes=[2, 2], block_cls=ResNetBlock)``, the constructor
  arguments as recipe input specs) linked, through the name it was bound to, with its calls
  (``model.init(key, x)``, ``model.apply(variables, x, train=False)``, ``model(x)``, wrapped in
  ``jax.jit`` / ``nnx.jit`` / ``eqx.filter_jit`` / ``jax.vmap``), or a call of a function target;
- *static* when its values are literals (arrays from ``jnp.ones``-style constructors,
  ``jax.random``, ``ShapeDtypeStruct``; names bound to literals in the same scope; config objects
  built from literals, their unstated fields filled from the class's literal defaults, also
  through the class's classmethod and staticmethod factories, and their fields; references
  to workspace and library objects), with what is missing named otherwise;
- or *dynamic*: an example that reaches the target at run time (a test or script that mentions
  it, one that runs a target it is passed to or used by, a test that imports its module), which
  the capture worker can run up to the target's first call.

Every site keeps its ``file:line`` and the runnable example it belongs to (``tests/test_x.py::
test_y``, a script, a module). Nothing is imported and nothing runs; the index's summaries are used
for imports, and parse trees are kept only in a bounded cache.

This module holds the search (which statements name the target, its aliases, the definitions and
examples that reach it); the rooms beside it: :mod:`sitevalues` (what names are worth across the
workspace), :mod:`sitecalls` (one call read into a site), :mod:`sites` (the site and its rank),
:mod:`sitespecs` (values as recipe input specs), :mod:`reach` (examples found from names alone).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import libcst as cst

from jaxlsp.discovery.callsites.calls import CallReader
from jaxlsp.discovery.callsites.literals import Bound, Built, Map, Partial, Ref, Seq, Value, Wrapped
from jaxlsp.discovery.callsites.namespaces import Scope, SourceFile, names_in
from jaxlsp.discovery.callsites.reach import MAX_PARENT_DEPTH, imports_only, uses_names
from jaxlsp.discovery.callsites.sites import CallSite, SiteTarget, dedupe, is_test_file, place, relative
from jaxlsp.discovery.entrypoints import Entrypoint

MAX_SITES = 64


class CallSiteFinder(CallReader):
    """Call sites of entrypoints across the workspace under ``root``; see the module docstring."""

    # -- the search --------------------------------------------------------------------------------------
    def find(self, entry: Entrypoint) -> list[CallSite]:
        """The ranked call sites of ``entry`` (at most :data:`MAX_SITES`)."""
        self._memo: dict[tuple[Path, str], list[CallSite]] = {}  # one search: parents are shared
        self.reach.memo = {}
        self._values = {}
        try:
            found = self._find(self._target(entry), 0, set(), self.files())
        finally:
            self._values = None
        return [replace(s, cell=self.cell_of(s.path, s.line)) if s.path.suffix == ".ipynb" else s for s in found]

    def cell_of(self, path: Path, line: int) -> tuple[int, int] | None:
        """A notebook's 1-based module line as (cell index, 1-based line in that cell), from the
        module the index read (an open notebook's unsaved cells included); None elsewhere."""
        cells = self.index.cells(path)
        found = cells.locate(line - 1) if cells is not None else None
        return (found[0], found[1] + 1) if found is not None else None

    def _target(self, entry: Entrypoint) -> SiteTarget:
        name = entry.name
        head, _, last = name.rpartition(".")
        if head and not last[:1].isupper() and entry.kind == "function":
            return SiteTarget(entry.path.resolve(), name, entry.kind, head, last, entry.fields)
        if entry.kind != "function":
            return SiteTarget(entry.path.resolve(), name, entry.kind, name, None, entry.fields)
        return SiteTarget(entry.path.resolve(), name, entry.kind, None, None, entry.fields)

    def _find(
        self, target: SiteTarget, depth: int, seen: set[tuple[Path, str]], files: list[SourceFile]
    ) -> list[CallSite]:
        key = (target.path, target.name)
        if key in self._memo:
            return self._memo[key]
        seen.add(key)
        self._memo[key] = []  # while it is being searched: a cycle adds nothing
        found = self._search(target, depth, seen, files)
        self._memo[key] = found
        return found

    def _search(
        self, target: SiteTarget, depth: int, seen: set[tuple[Path, str]], files: list[SourceFile]
    ) -> list[CallSite]:
        words = self._aliases(target, files)
        sites: list[CallSite] = []
        mentioned: list[tuple[SourceFile, int]] = []
        parents: list[tuple[Ref, str]] = []
        for file in files:
            if not words & file.words:
                continue
            top_level: list[int] = []
            names = set(words)
            for i in range(len(file.statements)):
                if not (names & file.words_of(i)):
                    continue
                text = file.text_of(i)
                if imports_only(text):
                    continue
                if file.defines(i):
                    if uses_names(text, words):
                        mentioned.append((file, i))
                        here = list(self._sites_in(target, file, [i], words, parents))
                        nested: list[CallSite] = []
                        if not here and self._may_name(file, [i], words, target):
                            nested = self.reach.test_use(file, i, words)
                        sites.extend(nested or here)
                elif uses_names(text, names):
                    top_level.append(i)
                    mentioned.append((file, i))
                    # names bound here follow the target into later statements (``y = model(x)``)
                    names.update(n for n, found in file.assigned().items() if i in found)
            if top_level:
                here = list(self._sites_in(target, file, top_level, words, parents))
                script = None
                if not here and self._may_name(file, top_level, words, target):
                    script = self.reach.script_use(file, top_level, words)
                sites.extend([script] if script is not None else here)
        if depth < MAX_PARENT_DEPTH:
            sites.extend(self._inherited(target, mentioned, parents, depth, seen, files))
        sites.extend(self.reach.importing_tests(target, files, sites))
        return dedupe(sorted(sites, key=CallSite.rank))[:MAX_SITES]

    def _aliases(self, target: SiteTarget, files: list[SourceFile]) -> set[str]:
        """The target's name and the top-level names bound to it or to a partial of it
        (``ResNet18 = partial(ResNet, ...)``, ``Model = ResNet``), wherever they are."""
        words = {target.word}
        for _ in range(3):
            added = False
            for file in files:
                if not words & file.words:
                    continue
                for name, indexes in file.assigned().items():
                    if name in words or not any(words & file.words_of(i) for i in indexes):
                        continue
                    self.current_line = None
                    value = self.global_value(file, name, None, 0)
                    while isinstance(value, Partial):
                        value = value.func
                    if self._is_target(value, target):
                        words.add(name)
                        added = True
            if not added:
                break
        return words

    def _sites_in(
        self, target: SiteTarget, file: SourceFile, indexes: list[int], words: set[str], parents: list[tuple[Ref, str]]
    ) -> Iterator[CallSite]:
        """Static sites in the statements ``indexes`` (one definition, or top-level statements),
        and a dynamic one for each runnable example there that uses the target without a complete
        static site."""
        index = indexes[-1]  # names bound up to here count
        for scope in file.scopes_of(indexes[0]):
            if scope.is_module:
                for i in indexes:
                    scope.walk_module_statement(i)
                calls = [c for c in scope.calls if file.statement_at(c.line - 1) in indexes]
            else:
                calls = scope.calls
            interesting = self._interesting_names(scope, index, words)
            used: set[tuple[Path, int]] = set()
            constructions: list[tuple[Built, int]] = []
            first_use: int | None = None
            complete = False
            raising = calm = False  # uses inside an expected-error block; uses outside any
            handed = False  # given to a library call (``eqx.nn.make_with_state(Model)(key)``)
            for call in calls:
                used_names = names_in(call.node)
                if not (words & used_names or interesting & used_names):
                    continue
                self.current_line = call.line - 1 if scope.is_module else None
                found = self._call_site(target, scope, call.node, call.order, call.line)
                if found is not None:
                    first_use = call.line if first_use is None else first_use
                    site, built = found
                    raising, calm = raising or site.raises, calm or not site.raises
                    if built is not None:
                        used.add((built.path, built.line))
                    if site.complete or site.example is not None:
                        complete = complete or site.complete
                        yield site
                    continue
                value = self.value(call.node, scope, call.order + 1)
                built = self._construction(value, target) if target.cls is not None and target.method is None else None
                if built is not None:
                    first_use = call.line if first_use is None else first_use
                    constructions.append((built, call.line))
                    continue
                parent = self._passed_to(value, target)
                if parent is not None:
                    # ``ResNet18 = partial(ResNet, block_cls=Block)``: the alias's users run the
                    # target, not every user of ResNet (a ResNeSt built from it has its own block)
                    alias = self._alias_bound(file, call.line) if scope.is_module else None
                    parents.append((alias or parent, f"{relative(file.path, self.root)}:{call.line}"))
                if parent is not None or self._involves(value, target):
                    first_use = call.line if first_use is None else first_use  # passed on, wrapped...
                    handed = handed or parent is None
            for built, line in constructions:
                if (built.path, built.line) not in used:
                    site = self._site(target, scope, line, built, None, "construction")
                    if site.example is not None:
                        yield site
            if first_use is not None and not complete:
                kind, example = self._example(scope)
                direct = bool(used or constructions or handed)
                if kind == "module" and not direct:
                    continue  # a module that only passes the target on to a workspace function: see _inherited
                if example is not None and not _defines_target(file, indexes[0], target):
                    # a test that calls the target only where it expects an error runs after the others
                    only_raises = raising and not calm and not (constructions or handed)
                    yield CallSite(
                        file.path, first_use, kind, example, static=False, via="uses it here", raises=only_raises
                    )

    def _alias_bound(self, file: SourceFile, line: int) -> Ref | None:
        """The one top-level name that the statement holding 1-based ``line`` binds, as a
        reference to it (``ResNet18`` of ``ResNet18 = partial(ResNet, ...)``), else None."""
        index = file.statement_at(line - 1)
        if index is None or file.defines(index):
            return None
        names = [n for n, found in file.assigned().items() if index in found]
        if len(names) != 1 or file.summary is None:
            return None
        return Ref(f"{file.summary.module}.{names[0]}", file.path, names[0])

    def _passed_to(self, value: Value, target: SiteTarget) -> Ref | None:
        """The workspace callable that ``value`` (a call's result) hands the target to as an
        argument (``ResNet(block_cls=Block)``, ``partial(ResNet, block_cls=Block)``), if any."""
        callee: Value = value
        args: list[Value] = []
        while isinstance(callee, (Built, Partial)):
            args += [*callee.args, *(v for _, v in callee.kwargs)]
            callee = callee.callee if isinstance(callee, Built) else callee.func
        if not isinstance(callee, Ref) or callee.path is None or self._is_target(callee, target):
            return None
        return callee if any(self._holds(a, target) for a in args) else None

    def _refers(self, file: SourceFile, index: int, target: SiteTarget) -> bool:
        """Whether the definition ``index`` really uses the target: a call in it involves the
        target, or (a class) a field's default is it (``block_cls: ModuleDef = ResNetBlock``)."""
        for scope in file.scopes_of(index):
            for call in scope.calls:
                self.current_line = None
                result = self.value(call.node, scope, call.order + 1)
                if isinstance(result, Built) and self._result_of_target(result, target):
                    return True  # it calls the target (``_padding_init(padding, n)`` in ``Conv``)
                if self._involves(result, target):
                    return True
        parsed = file.parsed(index)
        if parsed is not None and isinstance(parsed.node, cst.ClassDef):
            module = file.module_scope()
            self.current_line = file.statements[index].start
            for base in parsed.node.bases:  # a subclass runs the target's code (``super().__init__``)
                if self._is_target(self.value(base.value, module, 0), target):
                    return True
            for stmt in _class_body(parsed.node):
                for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                    value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
                    if value is not None and self._involves(self.value(value, module, 0), target):
                        return True
        return False

    def _involves(self, value: Value, target: SiteTarget, depth: int = 0) -> bool:
        """Whether running ``value`` (a call's result) may run the target: it is the target, made
        from it, wraps it, or was given it (``jax.lax.scan(f, ...)``, ``train(model)``)."""
        if depth > 8:
            return False
        if self._is_target(value, target):
            return True
        if isinstance(value, Built):
            if target.cls is None and self._result_of_target(value, target):
                return False  # ``state = train_step(state)``: the result, not the function
            parts = [value.callee, *value.args, *(v for _, v in value.kwargs)]
        elif isinstance(value, Partial):
            parts = [value.func, *value.args, *(v for _, v in value.kwargs)]
        elif isinstance(value, Wrapped):
            parts = [value.inner]
        elif isinstance(value, Bound):
            parts = [value.obj]
        elif isinstance(value, Seq):
            parts = list(value.items)
        elif isinstance(value, Map):
            parts = [v for _, v in value.items]
        else:
            return False
        return any(self._involves(part, target, depth + 1) for part in parts)

    def _holds(self, value: Value, target: SiteTarget, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if self._is_target(value, target):
            return True
        if target.cls is not None and self._construction(value, target) is not None:
            return True  # an instance of the target class (a function's result is no use of it)
        if isinstance(value, Seq):
            return any(self._holds(v, target, depth + 1) for v in value.items)
        if isinstance(value, Map):
            return any(self._holds(v, target, depth + 1) for _, v in value.items)
        if isinstance(value, (Built, Partial)):
            inner = [*value.args, *(v for _, v in value.kwargs)]
            return any(self._holds(v, target, depth + 1) for v in inner)
        return False

    def _interesting_names(self, scope: Scope, index: int, words: set[str]) -> set[str]:
        """Names whose values mention the target, transitively (``model = ResNet(...)``,
        ``apply = jax.jit(model.apply)``): in the function, or at the top level before ``index``."""
        names: set[str] = set()
        for _ in range(4):
            grew = False
            for assigns in (scope.assigns, scope.self_attrs):
                for name, found in assigns.items():
                    if name not in names and any((words | names) & names_in(a.value) for a in found):
                        names.add(name)
                        grew = True
            if scope.is_module or scope.parent is None:
                for name, indexes in scope.file.assigned().items():
                    if name in names:
                        continue
                    if any(i <= index and (words | names) & scope.file.words_of(i) for i in indexes):
                        names.add(name)
                        grew = True
            if not grew:
                break
        return names

    # -- examples of the definitions that use the target ------------------------------------------------
    def _inherited(
        self,
        target: SiteTarget,
        mentioned: list[tuple[SourceFile, int]],
        passed: list[tuple[Ref, str]],
        depth: int,
        seen: set[tuple[Path, str]],
        files: list[SourceFile],
    ) -> Iterator[CallSite]:
        """The examples of the workspace definitions that use the target (``Block(...)`` inside
        ``ResNet``) or that it is passed to (``partial(ResNet, block_cls=Block)``): running them
        reaches it."""
        parents: list[tuple[Path, str, str, bool]] = []
        for file, i in mentioned:
            if not file.defines(i) or is_test_file(file.path):
                continue
            parsed = file.parsed(i)
            name = _defined_name(parsed.node) if parsed is not None else None
            if name is None or (file.path, name) == (target.path, target.word):
                continue
            if self._refers(file, i, target) or self._names_target(file, target):
                line = file.statements[i].header + 1
                parents.append(
                    (file.path, name, place(file.path, line, self.root, self.cell_of(file.path, line)), False)
                )
        for ref, where in passed:
            if ref.path is not None and ref.name is not None:
                parents.append((ref.path, ref.name.split(".", 1)[0], f"passed to it at {where}", True))
        done: set[str] = set()
        for path, name, where, handed in parents:
            for site in self.reach.reached(path, name, depth + 1, files, {(target.path, target.word)}):
                if site.example is None or site.example in done:
                    continue
                done.add(site.example)
                yield replace(site, via=f"through {name} ({where})", handed=handed or site.handed, hops=site.hops + 1)

    def _may_name(self, file: SourceFile, indexes: list[int], words: set[str], target: SiteTarget) -> bool:
        """Whether the statements ``indexes`` may use the target where their calls are not read:
        as an attribute (``eqx.nn.Shared``) of a module that can reach it, or by a bare name
        bound to it (a file with its own ``loss`` does not)."""
        text = "".join(file.text_of(i) for i in indexes)
        if any(re.search(rf"\.\s*{re.escape(w)}\b", text) for w in words):
            if self.elsewhere(file, text, words, target.path, target.word):
                return False
            return self.reach.sees(file, target.path, self.index.modules.module_name(target.path))
        return self._names_target(file, target)

    def _names_target(self, file: SourceFile, target: SiteTarget) -> bool:
        """Whether the name a definition of ``file`` uses can only be the target, though its
        values were not worked out (``jit_fn(nnx_eval_step if cfg.nnx else jax_eval_step)``):
        the target's own file with the name bound by its definition, or a file that binds the name
        to it (``from models import Block``, ``MlpMixer = models_mixer.MlpMixer``). A run shows
        whether it reaches it."""
        fs = file.summary
        binding = fs.binding(target.word) if fs is not None else None
        if binding is None or fs is None:
            return False
        if file.path == target.path:
            return binding.how == "local"
        if binding.how not in ("from", "alias", "import"):
            return False
        q = self.classifier.qualify(fs, target.word)  # an import, or ``MlpMixer = models_mixer.MlpMixer``
        return (
            q is not None
            and q.callee is None
            and q.name == f"{self.index.modules.module_name(target.path)}.{target.word}"
        )

    def _entry(self, path: Path, name: str) -> SiteTarget | None:
        found = self.classifier.discover(path)
        for e in (*found.entrypoints, *found.drivers):
            if e.name == name:
                return self._target(e)
        return SiteTarget(path, name, "function", None, None)


def _defines_target(file: SourceFile, index: int, target: SiteTarget) -> bool:
    """Whether statement ``index`` is the target's own definition (its body uses its name)."""
    if file.path != target.path or not file.defines(index):
        return False
    header = file.lines[file.statements[index].header]
    return re.search(rf"\b(?:def|class)\s+{re.escape(target.word)}\b", header) is not None


def _class_body(node: cst.ClassDef) -> list[cst.BaseStatement]:
    return list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []


def _defined_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return node.name.value
    return None
