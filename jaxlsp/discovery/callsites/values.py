"""What the workspace's names are worth, for call-site inference: :class:`WorkspaceValues`.

An :class:`~jaxlsp.discovery.callsites.literals.Evaluator` that follows names across files (imports, star
re-exports, workspace modules and their attributes), reads the workspace's Python files once and
again only when they change, and works out config objects: a dataclass field of an instance built
from literals (``cfg.dim``) and what a classmethod or staticmethod factory (``ModelConfig.small()``)
returns for its arguments. It also tells whether a statement's uses of a name all resolve to
something else than a given definition. Finding the sites is :mod:`callsites`; reading one call
into a site is :mod:`sitecalls`.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import libcst as cst

from jaxlsp.discovery.callsites.literals import Bound, Built, Evaluator, Ref, Unknown, Value
from jaxlsp.discovery.callsites.namespaces import ParseCache, Scope, SourceFile, module_value
from jaxlsp.discovery.callsites.reach import header_name
from jaxlsp.discovery.callsites.specs import SpecWriter
from jaxlsp.discovery.classify import Classifier
from jaxlsp.discovery.index import WorkspaceIndex, iter_python_files


class WorkspaceValues(Evaluator):
    """Values of names across the workspace under ``root``; see the module docstring."""

    def __init__(self, index: WorkspaceIndex, root: Path, classifier: Classifier | None = None) -> None:
        self.index = index
        self.classifier = classifier or Classifier(index)
        self.root = root.resolve()
        self.cache = ParseCache()
        self.specs = SpecWriter(index)
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
            value = self.global_value(file, attr, None, depth + 1)
            if isinstance(value, Unknown) and ref.path.name == "__init__.py":
                # ``import pkg.model`` then ``pkg.model.double(x)``: the import made the submodule
                # an attribute of its package, which the package's own file need not name
                sub = self.index.modules.locate(f"{ref.qual}.{attr}", ref.path)
                if sub is not None:
                    return Ref(f"{ref.qual}.{attr}", sub, "")
            return value
        return super().member(ref, attr, depth)

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
