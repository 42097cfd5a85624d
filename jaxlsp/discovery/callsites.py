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
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import libcst as cst

from jaxlsp.discovery.classify import Classifier
from jaxlsp.discovery.entrypoints import Entrypoint
from jaxlsp.discovery.index import WorkspaceIndex, iter_python_files
from jaxlsp.discovery.literals import (
    CALL_WITH_REST,
    Arr,
    Bound,
    Built,
    Evaluator,
    Lit,
    Map,
    Partial,
    Ref,
    Seq,
    Unknown,
    Value,
    Wrapped,
)
from jaxlsp.discovery.namespaces import ParseCache, Scope, SourceFile, module_value, names_in
from jaxlsp.discovery.reach import MAX_PARENT_DEPTH, Reach, header_name, imports_only, uses_names
from jaxlsp.discovery.sites import (
    CallSite,
    Missing,
    SiteKind,
    SiteTarget,
    dedupe,
    is_test_file,
    place,
    relative,
)
from jaxlsp.discovery.sitespecs import SpecWriter
from jaxlsp.discovery.summary import code_of

_INIT_LIKE = frozenset({"init", "init_with_output", "tabulate", "lazy_init"})
_FILLED_BY_WORKER = {"nnx": "rngs", "equinox": "key"}
_NOT_CALLS = frozenset({"replace", "tree_flatten"})  # methods of module instances that do not run the model
# context managers that expect the calls inside to raise: unittest's, absltest's, pytest's, numpy's
_RAISES = re.compile(r"assertRaises\w*|assert_raises\w*|raises")
MAX_SITES = 64


class CallSiteFinder(Evaluator):
    """Call sites of entrypoints across the workspace under ``root``; see the module docstring."""

    def __init__(self, index: WorkspaceIndex, root: Path, classifier: Classifier | None = None) -> None:
        self.index = index
        self.classifier = classifier or Classifier(index)
        self.root = root.resolve()
        self.cache = ParseCache()
        self.specs = SpecWriter(index)
        self.reach = Reach(index, self.root, self.elsewhere)
        self._files: dict[Path, tuple[tuple[int, int], SourceFile]] = {}
        self._open_paths: frozenset[Path] = frozenset()
        self._names: set[str] = set()
        self._bound: dict[int, dict[str, Value]] = {}  # by id of a factory's scope being followed
        self._following: set[tuple[Path, str]] = set()

    # -- files -------------------------------------------------------------------------------------------
    def files(self) -> list[SourceFile]:
        """Every Python file under the root, read once and again only when it changed."""
        out: list[SourceFile] = []
        seen: set[Path] = set()
        self._open_paths = self.index.open_paths()
        for path in iter_python_files(self.root):  # under the resolved root: absolute already
            seen.add(path)
            found = self.source(path)
            if found is not None:
                out.append(found)
        for gone in set(self._files) - seen:
            del self._files[gone]
        # every folder and module name of the workspace: a dotted name that starts with none of
        # them is a library's (``absltest.main``), one that does may be a module not located
        self._names = {part.removesuffix(".py") for p in seen for part in p.relative_to(self.root).parts}
        return out

    def source(self, path: Path) -> SourceFile | None:
        try:
            st = path.stat()
        except OSError:
            return None
        opened = path in self._open_paths
        stamp = (0, hash(self.index.text(path))) if opened else (st.st_mtime_ns, st.st_size)
        known = self._files.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        text = self.index.text(path)
        if text is None:
            return None
        made = SourceFile(path, text, self.index.summary(path), self.cache)
        self._files[path] = (stamp, made)
        return made

    # -- names across files (Evaluator) ------------------------------------------------------------------
    def global_value(self, file: SourceFile, name: str, before: int | None, depth: int) -> Value:
        fs = file.summary
        binding = fs.binding(name, before) if fs is not None else None
        assigned = module_value(file, name, before)
        if assigned is not None and (binding is None or binding.line <= assigned[0].line):
            a, scope = assigned
            saved = self.current_line
            self.current_line = a.line
            try:
                return self.assigned(a, scope, depth + 1)
            finally:
                self.current_line = saved
        if binding is None and fs is not None and fs.stars and depth <= 16:
            for star in fs.stars:  # ``from jax_resnet import *``, a package re-exporting ``from .resnet import *``
                base = self.index.modules.absolute(file.path, star.target, star.level)
                found = self.qualified(f"{base}.{name}", file.path, depth + 1)
                if not isinstance(found, Unknown) and not (isinstance(found, Ref) and found.path is None):
                    return found  # only a name a workspace module defines: a library's star is not read
        if binding is None or fs is None:
            return Unknown(f"{name} is not defined in {file.path.name}")
        if binding.how == "local":
            return Ref(f"{fs.module}.{name}", file.path, name)
        q = self.classifier.qualify(fs, name, before)
        if q is None:
            return Unknown(f"{name} cannot be resolved")
        if q.instance:  # ``params = train_step(params, batch)``: the call's result, never its callee
            return Unknown(f"{name}: the result of {q.callee.rpartition('.')[2] if q.callee else 'a call'}(...)")
        return self.qualified(q.name, file.path, depth + 1)

    def import_value(self, file: SourceFile, name: str, scope: Scope, depth: int) -> Value:
        fs = file.summary
        if fs is None:
            return Unknown(f"{name}: no summary of {file.path.name}")
        q = self.classifier.qualify(fs, name, None, scope.imports)
        if q is None:
            return Unknown(f"{name} cannot be resolved")
        return self.qualified(q.name, file.path, depth + 1)

    def qualified(self, qual: str, importer: Path, depth: int) -> Value:
        """A dotted absolute name: a workspace module or definition (followed into its file), or a
        library name."""
        parts = qual.split(".")
        for i in range(len(parts), 0, -1):
            path = self.index.modules.locate(".".join(parts[:i]), importer)
            if path is None:
                continue
            value: Value = Ref(".".join(parts[:i]), path, "")  # the module itself
            for attr in parts[i:]:
                value = self.member(value, attr, depth) if isinstance(value, Ref) else Unknown(qual)
            return value
        return Ref(qual)

    def member(self, ref: Ref, attr: str, depth: int) -> Value:
        if ref.path is None:
            return Ref(f"{ref.qual}.{attr}")
        if ref.name == "":  # an attribute of a workspace module: a name defined (or imported) there
            file = self.source(ref.path)
            if file is None:
                return Unknown(f"{ref.qual}: {ref.path} cannot be read")
            return self.global_value(file, attr, None, depth + 1)
        return super().member(ref, attr, depth)

    # -- config factories (``ModelConfig.small()``) and their fields ---------------------------------------
    def name(self, name: str, scope: Scope, order: int, depth: int) -> Value:
        bound = self._bound.get(id(scope))
        if bound is not None and name in bound and name not in scope.assigns:
            return bound[name]  # a parameter of a factory being followed, bound to its argument
        return super().name(name, scope, order, depth)

    def attribute(self, expr: cst.Attribute, scope: Scope, order: int, depth: int) -> Value:
        value = super().attribute(expr, scope, order, depth)
        if isinstance(value, Bound) and isinstance(value.obj, Built):
            found = self.config_field(value.obj, value.attr)
            if found is not None:
                return found  # ``cfg.dim`` of a config built from literals
        return value

    def config_field(self, built: Built, attr: str) -> Value | None:
        """Field ``attr`` of a workspace dataclass (or NamedTuple, struct) instance ``built``: the
        argument that set it, else the class's literal default; None when it is not a field."""
        callee = built.callee
        if not isinstance(callee, Ref) or callee.path is None or callee.name is None or "." in callee.name:
            return None
        fs = self.index.summary(callee.path)
        found = fs.classes.get(callee.name) if fs is not None else None
        if found is None:
            return None
        names = [f.name for f in found[1].linen_fields]
        if attr not in names:
            return None
        given = dict(built.kwargs)
        if attr in given:
            return given[attr]
        position = names.index(attr)
        if position < len(built.args):
            return built.args[position]
        defaults = dict(self.specs.defaults(callee, len(built.args), set(given)))
        return defaults.get(attr, Unknown(f"{callee.name}.{attr} has no literal default"))

    def apply(
        self, callee: Value, args: list[Value], kwargs: list[tuple[str, Value]], path: Path, line: int, node: cst.Call
    ) -> Value:
        made = self.factory(callee, args, kwargs)
        if made is not None:
            return made
        return super().apply(callee, args, kwargs, path, line, node)

    def factory(self, callee: Value, args: list[Value], kwargs: list[tuple[str, Value]]) -> Built | None:
        """What a classmethod or staticmethod of a workspace class that returns a config
        (``return cls(dim=4, layers=2)``, ``return ModelConfig(...)``) returns for these
        arguments, followed statically so that the site is complete without running it; None
        when ``callee`` is no such factory or its result is not a construction."""
        if not isinstance(callee, Ref) or callee.path is None or callee.name is None or callee.name.count(".") != 1:
            return None
        key = (callee.path, callee.name)
        if key in self._following or len(self._following) >= 4:
            return None
        cls_name = callee.name.split(".")[0]
        file = self.source(callee.path)
        if file is None:
            return None
        scope = next(
            (
                sc
                for i in range(len(file.statements))
                if file.defines(i) and header_name(file.lines[file.statements[i].header]) == cls_name
                for sc in file.scopes_of(i)
                if sc.owner == callee.name
            ),
            None,
        )
        if scope is None or scope.node is None:
            return None
        kind = next((d for d in scope.decorators if d in ("classmethod", "staticmethod")), None)
        returned = _single_return(scope.node)
        if kind is None or returned is None:
            return None
        params = [p for p in (*scope.node.params.posonly_params, *scope.node.params.params)]
        bound: dict[str, Value] = {}
        if kind == "classmethod":
            if not params:
                return None
            bound[params[0].name.value] = Ref(callee.qual.rpartition(".")[0], callee.path, cls_name)
            params = params[1:]
        given = dict(kwargs)
        saved = self._values, self.current_line
        self._values, self.current_line = None, None  # the values depend on the arguments bound
        self._following.add(key)
        try:
            for i, p in enumerate([*params, *scope.node.params.kwonly_params]):
                here = p.name.value
                if i < len(params) and i < len(args):
                    bound[here] = args[i]
                elif here in given:
                    bound[here] = given[here]
                elif p.default is not None:
                    bound[here] = self.value(p.default, scope, 0, 1)
            self._bound[id(scope)] = bound
            value = self.value(returned, scope, 1 << 30, 1)
        finally:
            self._following.discard(key)
            self._bound.pop(id(scope), None)
            self._values, self.current_line = saved
        if isinstance(value, Built) and isinstance(value.callee, Ref) and value.callee.path is not None:
            return value
        return None

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

    def _is_target(self, value: Value, target: SiteTarget) -> bool:
        return isinstance(value, Ref) and value.same(target.path, target.cls or target.name)

    def _construction(self, value: Value, target: SiteTarget) -> Built | None:
        """``value`` as an instance of the target class (through partials), else None."""
        if isinstance(value, Built):
            callee = value.callee
            while isinstance(callee, Partial):
                callee = callee.func
            if self._is_target(callee, target):
                return value
        return None

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

    def _result_of_target(self, value: Built, target: SiteTarget) -> bool:
        callee = value.callee
        while isinstance(callee, (Partial, Wrapped)):
            callee = callee.func if isinstance(callee, Partial) else callee.inner
        return self._is_target(callee, target)

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

    def _call_site(
        self, target: SiteTarget, scope: Scope, call: cst.Call, order: int, line: int
    ) -> tuple[CallSite, Built | None] | None:
        """The site made by ``call`` when it calls the target (or an instance of it)."""
        found = self._call_site_of(target, scope, call, order, line)
        expected = _expected_error(scope, call)
        if found is not None and expected is not None:
            why = f"it is called inside `with {expected}`: the call is expected to fail"
            site = found[0]
            found = replace(site, missing=(*site.missing, Missing("raises", why)), raises=True), found[1]
        if found is not None and found[0].static:
            context = self._jax_context(scope, call, order)
            if context is not None:  # ``with jax.set_mesh(mesh):`` around the call: a run keeps it
                why = f"it is called inside `with {context}`: a run of the example traces it in that context"
                found = replace(found[0], missing=(*found[0].missing, Missing("context", why))), found[1]
        if found is None or target.kind not in ("nnx", "equinox") or found[1] is None:
            return found
        changed = _changed_before(scope, call, order)
        if changed is None:
            return found
        site = found[0]
        why = f"the instance is changed before this call ({changed}): a run shows it as it is called"
        return replace(site, missing=(*site.missing, Missing("init", why))), found[1]

    def _jax_context(self, scope: Scope, call: cst.Call, order: int) -> str | None:
        """The first JAX or Flax context manager a ``with`` around ``call`` enters (a mesh,
        ``jax.default_device``, ``enable_x64``, Flax's axis rules), as written; None if none."""
        for item in scope.contexts.get(id(call), ()):
            value = self.value(item, scope, order)
            while isinstance(value, Built):
                value = value.callee
            if isinstance(value, Ref) and value.qual.split(".", 1)[0] in ("jax", "flax"):
                return code_of(item)
        return None

    def _call_site_of(
        self, target: SiteTarget, scope: Scope, call: cst.Call, order: int, line: int
    ) -> tuple[CallSite, Built | None] | None:
        callee = self.value(call.func, scope, order)
        got = self.arguments(call, scope, order, 0)
        if isinstance(got, Unknown):
            args: list[Value] = [got]
            kwargs: list[tuple[str, Value]] = []
        else:
            args, kwargs = got
        if isinstance(callee, Ref) and callee.qual in CALL_WITH_REST and args:
            callee, args = args[0], args[1:]  # jax.eval_shape(f, x) calls f(x)
        maps = False
        while isinstance(callee, Wrapped):
            maps = maps or callee.maps
            callee = callee.inner
        if isinstance(callee, Partial):
            base = callee
            merged = dict(base.kwargs)
            merged.update(kwargs)
            args, kwargs = [*base.args, *args], list(merged.items())
            callee = base.func
        if target.kind == "function" and target.method is None:
            if self._is_target(callee, target):
                return self._site(target, scope, line, None, (args, kwargs, maps), "call"), None
            return None
        if target.method is not None and isinstance(callee, Bound) and callee.attr == target.method:
            built = self._construction(callee.obj, target)
            if built is not None:
                return self._site(target, scope, line, built, (args, kwargs, maps), "call"), built
            return None
        built = self._construction(callee, target)
        if built is not None:  # ``model(x)``, ``Cls(...)(x)``
            if target.kind == "linen":
                return None  # an unbound Linen module cannot be called
            return self._site(target, scope, line, built, (args, kwargs, maps), "call"), built
        if isinstance(callee, Bound):
            built = self._construction(callee.obj, target)
            if built is None:
                return None
            attr = callee.attr
            extra: dict[str, Any] = {}
            if target.kind == "linen" and attr in _INIT_LIKE | {"apply"}:
                if not args:
                    return None
                first, rest = args[0], args[1:]
                plain: list[tuple[str, Value]] = []
                for k, v in kwargs:
                    if k == "rngs":
                        extra["rngs"] = _streams(v)
                    elif k == "mutable" and attr == "apply":
                        if isinstance(v, Seq) and all(isinstance(i, Lit) and isinstance(i.value, str) for i in v.items):
                            extra["mutable"] = [i.value for i in v.items if isinstance(i, Lit)]
                        elif isinstance(v, Lit) and isinstance(v.value, str):
                            extra["mutable"] = [v.value]
                    elif k == "method":
                        method = _method_name(v)
                        if method is None:
                            return None
                        if method != "__call__":
                            extra["method"] = method
                    elif k == "mutable":
                        continue
                    else:
                        plain.append((k, v))
                if attr in _INIT_LIKE:
                    extra.setdefault("rngs", _streams(first))
                    extra["mutable"] = True  # init runs with every collection mutable
                if not extra.get("rngs"):
                    extra.pop("rngs", None)
                return self._site(target, scope, line, built, (rest, plain, maps), "call", extra), built
            if target.kind in ("nnx", "equinox") and not attr.startswith("_") and attr not in _NOT_CALLS:
                if attr == "__call__":
                    return self._site(target, scope, line, built, (args, kwargs, maps), "call"), built
                if target.method is None and self._defines_method(target, attr):
                    extra = {"method": attr}
                    return self._site(target, scope, line, built, (args, kwargs, maps), "call", extra), built
        return None

    def _defines_method(self, target: SiteTarget, attr: str) -> bool:
        """Whether the target class's own body defines ``attr`` (``model.encode(x)``), which the
        library's methods (``model.eval()``, ``model.train()``, ``sow``...) are not."""
        file = self.source(target.path)
        if file is None:
            return False
        pattern = re.compile(rf"^\s+def\s+{re.escape(attr)}\s*\(", re.M)
        for i in range(len(file.statements)):
            if file.defines(i) and header_name(file.lines[file.statements[i].header]) == target.word:
                return pattern.search(file.text_of(i)) is not None
        return False

    # -- sites -------------------------------------------------------------------------------------------
    def _site(
        self,
        target: SiteTarget,
        scope: Scope,
        line: int,
        built: Built | None,
        call: tuple[list[Value], list[tuple[str, Value]], bool] | None,
        how: str,
        extra: dict[str, Any] | None = None,
    ) -> CallSite:
        kind, example = self._example(scope)
        missing: list[Missing] = []
        extra = dict(extra or {})
        count = 0
        wide = False
        init: dict[str, Any] | None = None
        via: str | None = None
        if built is not None:
            init_args, init_kwargs, alias = self._init_arguments(built, target)
            via = alias
            init, n, w = self._section(init_args, init_kwargs, "init", missing)
            count, wide = count + n, wide or w
        inputs: dict[str, Any] | None = None
        if call is not None:
            args, kwargs, maps = call
            if maps:
                args = [_unmapped(a) for a in args]
                kwargs = [(k, _unmapped(v)) for k, v in kwargs]
            inputs, n, w = self._section(args, kwargs, "inputs", missing)
            count, wide = count + n, wide or w
        elif target.kind != "function":
            missing.append(Missing("inputs", "the instance made here is never called in this scope"))
        if wide:
            extra["x64"] = True
        return CallSite(
            path=scope.file.path,
            line=line,
            kind=kind,
            example=example,
            static=True,
            init=init if built is not None else None,
            inputs=inputs,
            extra=extra,
            missing=tuple(missing),
            via=via,
            elements=count,
        )

    def _init_arguments(
        self, built: Built, target: SiteTarget
    ) -> tuple[list[Value], list[tuple[str, Value]], str | None]:
        """The constructor's arguments (partials merged), without what the worker fills."""
        args: list[Value] = []
        kwargs: dict[str, Value] = {}
        callee: Value = built.callee
        layers: list[Partial] = []
        while isinstance(callee, Partial):
            layers.append(callee)
            callee = callee.func
        for layer in reversed(layers):
            args.extend(layer.args)
            kwargs.update(layer.kwargs)
        args.extend(built.args)
        kwargs.update(built.kwargs)
        via = "a functools.partial of it" if layers or built.partial else None
        skip = _FILLED_BY_WORKER.get(target.kind)
        if skip is not None:
            kwargs.pop(skip, None)
            positional = [f.name for f in target.fields if f.kind in ("positional", "positional_only")]
            if skip in positional and positional.index(skip) < len(args):
                args = [a for i, a in enumerate(args) if i != positional.index(skip)]
        return args, list(kwargs.items()), via

    def _section(
        self, args: list[Value], kwargs: list[tuple[str, Value]], where: str, missing: list[Missing]
    ) -> tuple[dict[str, Any], int, bool]:
        """``init`` or ``inputs`` of a profile: ``{args?, kwargs?}``, elements counted, whether wide."""
        section: dict[str, Any] = {}
        specs, count, wide = self._specs(args, f"{where}.args", missing)
        if specs:
            section["args"] = specs
        named, n, w = self._named_specs(kwargs, f"{where}.kwargs", missing)
        if named:
            section["kwargs"] = named
        return section, count + n, wide or w

    def _specs(self, values: Iterable[Value], where: str, missing: list[Missing]) -> tuple[list[Any], int, bool]:
        out: list[Any] = []
        count, wide = 0, False
        for i, v in enumerate(values):
            spec = self.specs.spec(v)
            if isinstance(spec, Unknown):
                missing.append(Missing(f"{where}[{i}]", spec.why))
                out.append({"kind": "array"})
                continue
            out.append(spec[0])
            count += spec[1]
            wide = wide or spec[2]
        return out, count, wide

    def _named_specs(
        self, values: Iterable[tuple[str, Value]], where: str, missing: list[Missing]
    ) -> tuple[dict[str, Any], int, bool]:
        out: dict[str, Any] = {}
        count, wide = 0, False
        for k, v in values:
            spec = self.specs.spec(v)
            if isinstance(spec, Unknown):
                missing.append(Missing(f"{where}.{k}", spec.why))
                out[k] = {"kind": "array"}
                continue
            out[k] = spec[0]
            count += spec[1]
            wide = wide or spec[2]
        return out, count, wide

    # -- examples ----------------------------------------------------------------------------------------
    def _example(self, scope: Scope) -> tuple[SiteKind, str | None]:
        return self.reach.example_of(scope.file, scope.owner, scope.is_module)

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

    def elsewhere(self, file: SourceFile, text: str, words: set[str], path: Path, name: str) -> bool:
        """Whether every use of ``words`` in ``text`` (a statement of ``file``) resolves to
        something other than ``name`` of ``path``: ``modeling.forward`` with ``from
        proj.models.a import modeling`` is a's ``forward``, not b's; ``absltest.main()`` is a
        library's. A use that cannot be resolved may be the target (False: a run shows)."""
        fs = file.summary
        if fs is None:
            return False
        uses = 0
        for dotted in _dotted_uses(text, words):
            uses += 1
            if "." not in dotted:
                binding = fs.binding(dotted)
                if binding is None or binding.how not in ("import", "from"):
                    return False  # a local name, a parameter, an alias: values decide
            q = self.classifier.qualify(fs, dotted)
            if q is None or q.instance:
                return False  # ``self.forward``, ``model.forward``: an object's attribute
            self.current_line = None
            value = self.qualified(q.name, file.path, 0)
            if not isinstance(value, Ref):
                return False
            if value.path is None:
                if q.name.split(".", 1)[0] in self._names:
                    return False  # a workspace module that was not located: it may be the target's
                continue  # a library's name
            if value.same(path, name):
                return False
        return uses > 0

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


def _dotted_uses(text: str, words: set[str]) -> list[str]:
    """The dotted names (``modeling.forward``, ``forward``) through which the code of ``text``
    uses one of ``words``, from its tokens (strings and comments are not code)."""
    out: list[str] = []
    try:
        code = (tokenize.NAME, tokenize.OP)
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type in code]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or tok.string not in words:
            continue
        if i + 1 < len(tokens) and tokens[i + 1].string == "=" and i > 0 and tokens[i - 1].string in ("(", ","):
            continue  # a keyword argument's name (``fn(forward=...)``)
        parts = [tok.string]
        j = i
        while j >= 2 and tokens[j - 1].string == "." and tokens[j - 2].type == tokenize.NAME:
            parts.insert(0, tokens[j - 2].string)
            j -= 2
        if j >= 1 and tokens[j - 1].string in (".", ")", "]"):
            return []  # an attribute of an expression (``make().forward``): values decide
        out.append(".".join(parts))
    return out


def _single_return(node: cst.FunctionDef) -> cst.BaseExpression | None:
    """The value of a function body's one top-level ``return`` (after a docstring or plain
    assignments), else None: only a plain factory is followed."""
    if not isinstance(node.body, cst.IndentedBlock):
        return None
    found: cst.BaseExpression | None = None
    for stmt in node.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        for small in stmt.body:
            if isinstance(small, cst.Return):
                if found is not None or small.value is None:
                    return None
                found = small.value
            elif not isinstance(small, (cst.Expr, cst.Assign, cst.AnnAssign)):
                return None
    return found


def _root_name(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _expected_error(scope: Scope, call: cst.Call) -> str | None:
    """The ``with`` item around ``call`` that expects it to raise (``self.assertRaises(E)``,
    ``self.assertRaisesRegex(E, ...)``, ``pytest.raises(E)``, ``np.testing.assert_raises``), as
    written; None if none. By name: a test's own ``self`` is not followed to unittest."""
    for item in scope.contexts.get(id(call), ()):
        func = item.func if isinstance(item, cst.Call) else item
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if _RAISES.fullmatch(name):
            return code_of(item)
    return None


def _changed_before(scope: Scope, call: cst.Call, order: int) -> str | None:
    """An earlier call in the scope that may change the NNX or Equinox instance ``call`` uses:
    one of its methods (``cell.eval()``: a mode switch) or a call it is given to
    (``optimizer.update(model, grads)``); then the literal construction is not what is called."""
    name = _root_name(call.func)
    if name is None:
        return None
    for earlier in scope.calls:
        if earlier.order >= order:
            continue
        func = earlier.node.func
        if isinstance(func, cst.Attribute) and _root_name(func) == name and func is not call.func:
            return f"{name}.{func.attr.value}() at line {earlier.line}"
        if any(isinstance(a.value, cst.Name) and a.value.value == name for a in earlier.node.args):
            return f"given to a call at line {earlier.line}"
    return None


def _class_body(node: cst.ClassDef) -> list[cst.BaseStatement]:
    return list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []


def _defined_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return node.name.value
    return None


def _streams(value: Value) -> list[str]:
    """Extra Linen rng streams named by an ``init``/``apply`` ``rngs`` argument (``params`` is implied)."""
    if isinstance(value, Map):
        return [k for k, _ in value.items if k != "params"]
    return []


def _method_name(value: Value) -> str | None:
    if isinstance(value, Lit) and isinstance(value.value, str):
        return value.value
    if isinstance(value, Ref) and value.name is not None:
        return value.name.rpartition(".")[2]
    if isinstance(value, Bound):
        return value.attr
    return None


def _unmapped(value: Value) -> Value:
    """What a ``vmap`` hands the function: each array without its leading axis."""
    if isinstance(value, Arr):
        if not value.shape:
            return Unknown("a vmap over a scalar")
        return Arr(value.shape[1:], value.dtype, value.generator)
    if isinstance(value, Seq):
        return Seq(tuple(_unmapped(v) for v in value.items))
    if isinstance(value, Map):
        return Map(tuple((k, _unmapped(v)) for k, v in value.items))
    return value
