"""Summaries of single top-level statements, made with libcst and cached by their text.

A summary holds names and text, never a parse tree, and its lines are relative to the statement,
so an unchanged statement that moved keeps its summary. Function bodies and class bodies are
parsed lazily: most files only need the import lines and class headers.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from jaxlsp.discovery import budget
from jaxlsp.discovery.budget import Refusal
from jaxlsp.discovery.chunks import LogicalLine, logical_lines, statements

_WORD = re.compile(r"[A-Za-z_]\w*")
_DEF_NAME = re.compile(r"(?:async\s+)?def\s+([A-Za-z_]\w*)")
_CLASS_NAME = re.compile(r"class\s+([A-Za-z_]\w*)")
_ASSIGN = re.compile(r"[A-Za-z_]\w*\s*(?::[^=\n]*)?=\s*[A-Za-z_][\w.]*\s*(?:\(|\[|$|\n|#)")
_ANN_FIELD = re.compile(r"\s*[A-Za-z_]\w*\s*:(?!=)")
_INIT = re.compile(r"\s*(?:@.*\n\s*)*def\s+__init__\s*\(")
_EMPTY_MODULE = cst.parse_module("")
_CONFIG = cst.PartialParserConfig(python_version="3.11")


def code_of(node: cst.CSTNode) -> str:
    return _EMPTY_MODULE.code_for_node(node).strip()


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _parse(text: str) -> cst.BaseStatement | None:
    try:
        return cst.parse_statement(text, _CONFIG)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None


def _dedent(lines: list[str], indent: int) -> str:
    out = []
    for line in lines:
        head = line[:indent]
        out.append(line[indent:] if not head.strip() else line.lstrip())
    return "\n".join(out) + "\n"


@dataclass(frozen=True, slots=True)
class Binding:
    """A module-level name. ``how`` says what it is bound to:

    - ``import``: the module ``target`` (absolute dotted name);
    - ``from``: ``target`` is ``module.attr`` relative to the package ``level`` dots up;
    - ``star``: every public name of ``target`` (same convention as ``from``);
    - ``alias``: the dotted expression ``target`` (``Dense = nn.Dense``);
    - ``instance``: the result of calling ``target`` (``model = MLP()``).
    """

    name: str
    line: int
    how: str
    target: str
    level: int = 0


@dataclass(frozen=True, slots=True)
class SetupField:
    """A value a user fills in to build the target: a dataclass field or a parameter."""

    name: str
    annotation: str | None
    default: str | None
    kind: str  # field | positional_only | positional | var_positional | keyword_only | var_keyword

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "annotation": self.annotation, "default": self.default, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class Decorator:
    text: str
    callee: str | None  # the decorator, or the function it calls (``jax.jit`` in ``jax.jit(...)``)
    first_arg: str | None  # the first positional argument of that call (for ``partial(jax.jit)``)


def _bindings_of(node: cst.CSTNode, line: int, out: list[Binding]) -> None:
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out.append(Binding(alias.asname.name.value, line, "import", full))
            else:
                head = full.split(".", 1)[0]
                out.append(Binding(head, line, "import", head))
    elif isinstance(node, cst.ImportFrom):
        module = dotted(node.module) if node.module is not None else ""
        level = len(node.relative)
        if isinstance(node.names, cst.ImportStar):
            out.append(Binding("*", line, "star", module or "", level))
            return
        for alias in node.names:
            attr = dotted(alias.name) or ""
            local = attr
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            target = f"{module}.{attr}" if module else attr
            out.append(Binding(local, line, "from", target, level))
    elif isinstance(node, (cst.Assign, cst.AnnAssign)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        value = node.value
        if value is None or len(targets) != 1 or not isinstance(targets[0], cst.Name):
            return
        name = targets[0].value
        if isinstance(value, cst.Subscript):  # ``Dense = nn.Dense[...]`` style generics
            value = value.value
        if isinstance(value, cst.Call):
            called = dotted(value.func)
            if called:
                out.append(Binding(name, line, "instance", called))
        else:
            aliased = dotted(value)
            if aliased:
                out.append(Binding(name, line, "alias", aliased))


def _collect_bindings(
    stmt: cst.CSTNode, line: int, out: list[Binding], defs: list[cst.FunctionDef] | None = None
) -> None:
    """Bindings of a statement, looking inside ``if``/``try``/``with`` but never into defs.

    The body of ``if TYPE_CHECKING:`` runs only for type checkers: its imports and stubs bind
    nothing at run time (its ``else`` branch does). ``def``s nested in these blocks are collected
    into ``defs`` when it is given (a module-level function all the same)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            _bindings_of(small, line, out)
        return
    if isinstance(stmt, cst.FunctionDef):
        if defs is not None:
            defs.append(stmt)
        return
    if isinstance(stmt, cst.ClassDef):
        return
    if isinstance(stmt, cst.If) and _is_type_checking(stmt.test):
        if stmt.orelse is not None:
            _collect_bindings(stmt.orelse, line, out, defs)
        return
    for child in stmt.children:
        if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.ExceptHandler, cst.Else, cst.Finally, cst.If)):
            _collect_bindings(child, line, out, defs)


def _is_type_checking(test: cst.BaseExpression) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (any module spelling)."""
    name = dotted(test)
    return name is not None and (name == "TYPE_CHECKING" or name.endswith(".TYPE_CHECKING"))


def _fields_of_params(params: cst.Parameters, skip_self: bool) -> tuple[SetupField, ...]:
    out: list[SetupField] = []

    def add(p: cst.Param, kind: str) -> None:
        ann = code_of(p.annotation.annotation) if p.annotation is not None else None
        default = code_of(p.default) if p.default is not None else None
        out.append(SetupField(p.name.value, ann, default, kind))

    for p in params.posonly_params:
        add(p, "positional_only")
    for p in params.params:
        add(p, "positional")
    if isinstance(params.star_arg, cst.Param):
        add(params.star_arg, "var_positional")
    for p in params.kwonly_params:
        add(p, "keyword_only")
    if params.star_kwarg is not None:
        add(params.star_kwarg, "var_keyword")
    if skip_self and out and out[0].kind in ("positional", "positional_only"):
        out.pop(0)
    return tuple(out)


def _decorators(decs: Sequence[cst.Decorator]) -> tuple[Decorator, ...]:
    out = []
    for d in decs:
        expr = d.decorator
        first: str | None = None
        callee: str | None
        if isinstance(expr, cst.Call):
            callee = dotted(expr.func)
            positional = [a for a in expr.args if a.keyword is None and not a.star]
            if positional:
                first = dotted(positional[0].value)
        else:
            callee = dotted(expr)
        out.append(Decorator(code_of(expr), callee, first))
    return tuple(out)


class ClassInfo:
    """A class statement: header facts now, fields and ``__init__`` parameters when asked."""

    __slots__ = ("__dict__", "_body", "bases", "column", "decorators", "end", "header", "name", "nested", "start")

    def __init__(
        self,
        name: str,
        header: int,
        column: int,
        end: int,
        bases: tuple[str, ...],
        decorators: tuple[Decorator, ...],
        nested: tuple[ClassInfo, ...],
        body: tuple[str, ...],
    ) -> None:
        self.name = name
        self.start = 0  # its first line (a decorator's), relative to the top-level statement
        self.header = header  # line of the ``class`` keyword, relative to the top-level statement
        self.column = column
        self.end = end
        self.bases = bases  # dotted names as written ("" when a base is not a name)
        self.decorators = decorators
        self.nested = nested
        self._body = body  # dedented texts of the body-level statements that may be fields

    @cached_property
    def linen_fields(self) -> tuple[SetupField, ...]:
        out = []
        for text in self._body:
            if not _ANN_FIELD.match(text):
                continue
            stmt = _parse(text)
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    ann = code_of(small.annotation.annotation)
                    if ann.startswith(("ClassVar", "typing.ClassVar", "tp.ClassVar")):
                        continue
                    name = small.target.value
                    if name in ("parent", "name"):
                        continue
                    default = code_of(small.value) if small.value is not None else None
                    out.append(SetupField(name, ann, default, "field"))
        return tuple(out)

    @cached_property
    def init_params(self) -> tuple[SetupField, ...] | None:
        for text in self._body:
            if not _INIT.match(text):
                continue
            stmt = _parse(text)
            if isinstance(stmt, cst.FunctionDef):
                return _fields_of_params(stmt.params, skip_self=True)
        return None


class FunctionInfo:
    """A top-level ``def``: its name and words now, the parsed details when asked."""

    __slots__ = ("__dict__", "_text", "end", "header", "is_async", "name", "words")

    def __init__(self, name: str, header: int, end: int, words: frozenset[str], is_async: bool, text: str) -> None:
        self.name = name
        self.header = header
        self.end = end
        self.words = words
        self.is_async = is_async
        self._text = text

    @cached_property
    def detail(self) -> FunctionDetail | None:
        stmt = _parse_function(self._text, self.header)
        if stmt is None:
            return None
        walker = _BodyWalker()
        walker.walk(stmt.body)
        for p in (*stmt.params.params, *stmt.params.kwonly_params, *stmt.params.posonly_params):
            if p.default is not None:
                walker.walk(p.default)
        return FunctionDetail(
            decorators=_decorators(stmt.decorators),
            params=_fields_of_params(stmt.params, skip_self=False),
            refs=frozenset(walker.refs),
            nested_refs=frozenset(walker.nested_refs - walker.refs),
            local_bindings=tuple(walker.bindings),
            has_yield=walker.has_yield,
            has_loop=walker.has_loop,
            loop_refs=frozenset(walker.loop_refs),
            assert_refs=frozenset(walker.assert_refs),
            has_assert=walker.has_assert,
            local_calls=tuple(walker.local_calls),
            nested_defs=tuple(walker.nested_defs),
            returns_function=walker.returned_function(_param_names(stmt.params)),
            returns_refs=walker.returned_references(),
            callees=frozenset(walker.callees),
        )


def _param_names(params: cst.Parameters) -> frozenset[str]:
    return frozenset(p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params))


def _parse_function(text: str, header: int) -> cst.FunctionDef | None:
    """Parse a ``def`` statement, salvaging what parses when it is damaged.

    A broken decorator line is dropped (parse from the ``def`` line), then the body is cut to the
    longest run of leading body statements that parses (bisected: a damaged tail costs a few
    parses, not one per statement), so a half-typed line at the end of a body keeps the function.
    """
    stmt = _parse(text)
    if isinstance(stmt, cst.FunctionDef):
        return stmt
    lines = text.split("\n")
    own = "\n".join(lines[header:])
    stmt = _parse(own)
    if isinstance(stmt, cst.FunctionDef):
        return stmt
    lls = logical_lines(own)
    body = [ll for ll in lls if ll.start > 0 and ll.code]
    if not body or body[0].indent == 0:
        return None
    starts = [st.start for st in statements(lls, indent=body[0].indent, first=body[0].start)]
    own_lines = own.split("\n")
    best: cst.FunctionDef | None = None
    lo, hi = 1, len(starts) - 1  # keep starts[:k] statements, k in [1, len - 1]
    while lo <= hi:
        k = (lo + hi) // 2
        candidate = _parse("\n".join(own_lines[: starts[k]]) + "\n")
        if isinstance(candidate, cst.FunctionDef):
            best, lo = candidate, k + 1
        else:
            hi = k - 1
    return best


@dataclass(frozen=True, slots=True)
class FunctionDetail:
    decorators: tuple[Decorator, ...]
    params: tuple[SetupField, ...]
    refs: frozenset[str]  # dotted names used as code in the body (not strings, not annotations)
    nested_refs: frozenset[str]  # ... used only inside nested defs and classes
    local_bindings: tuple[Binding, ...]  # imports inside the body
    has_yield: bool
    has_loop: bool
    # For the driver rule (docs/discovery.md): names used inside the body's own loops (the loop's
    # iterable included) and inside its assert statements, whether it asserts, and the body's own
    # ``name = callee(...)`` assignments (a step made in the function: ``p_step = jax.pmap(step)``).
    loop_refs: frozenset[str] = frozenset()
    assert_refs: frozenset[str] = frozenset()
    has_assert: bool = False
    local_calls: tuple[tuple[str, str], ...] = ()
    nested_defs: tuple[tuple[str, tuple[Decorator, ...]], ...] = ()  # the body's own defs, decorated
    # what every ``return`` of the body hands back is a function it makes (a nested ``def``, a
    # ``lambda``, a ``partial``, a transform of one, or a tuple of them): a factory (the name)
    returns_function: str | None = None
    # the dotted names every ``return`` hands back when each is a bare reference, not a call
    # (``return jax.nn.gelu``: an activation looked up by name); empty otherwise
    returns_refs: tuple[str, ...] = ()
    # what the body's own calls call (dotted names; "" for anything else: ``f(x)(y)``)
    callees: frozenset[str] = frozenset()


_WHITESPACE = (
    cst.BaseParenthesizableWhitespace,
    cst.EmptyLine,
    cst.TrailingWhitespace,
    cst.Newline,
    cst.Comment,
    cst.SimpleString,
    cst.Integer,
    cst.Float,
    cst.Imaginary,
)


_FIELDS: dict[type, tuple[str, ...]] = {}


_OWN, _LAMBDA, _NESTED_DEF = 0, 1, 2
# transforms that wrap a function into a function (``return jax.jit(step)`` returns a function);
# narrower than ecosystem's decorator transforms: ``jax.lax.scan(body, ...)``, ``eval_shape`` or
# ``jvp`` of a nested def return values, not a function
_WRAPPERS = frozenset(
    {"jit", "vmap", "pmap", "grad", "value_and_grad", "checkpoint", "remat", "shard_map", "filter_jit",
     "filter_vmap", "filter_grad", "filter_value_and_grad", "filter_pmap", "custom_jvp", "custom_vjp"}
)  # fmt: skip
_IN_LOOP, _IN_ASSERT = 1, 2  # flags of a node: inside one of the body's own loops / assert statements


class _BodyWalker:
    """Collects the dotted names a body uses as code, with an explicit stack (deep bodies are fine).

    Names used inside nested ``def``s and classes are kept apart (``nested_refs``): they are
    helpers the function defines, which matters for telling drivers from model functions.
    """

    def __init__(self) -> None:
        self.refs: set[str] = set()
        self.nested_refs: set[str] = set()
        self.loop_refs: set[str] = set()
        self.assert_refs: set[str] = set()
        self.bindings: list[Binding] = []
        self.local_calls: list[tuple[str, str]] = []
        self.nested_defs: list[tuple[str, tuple[Decorator, ...]]] = []
        self.returns: list[cst.BaseExpression | None] = []
        self.assigned: dict[str, cst.BaseExpression] = {}  # the body's own ``name = value``
        self.callees: set[str] = set()
        self.has_yield = False
        self.has_loop = False
        self.has_assert = False

    def _add(self, name: str, scope: int, flags: int) -> None:
        if scope == _NESTED_DEF:
            self.nested_refs.add(name)
            return
        self.refs.add(name)
        if flags & _IN_LOOP:
            self.loop_refs.add(name)
        if flags & _IN_ASSERT:
            self.assert_refs.add(name)

    def walk(self, root: cst.CSTNode) -> None:
        stack: list[tuple[cst.CSTNode, int, int]] = [(root, _OWN, 0)]
        while stack:
            node, scope, flags = stack.pop()
            t = type(node)
            if t is cst.Name:
                self._add(node.value, scope, flags)  # type: ignore[attr-defined]
                continue
            if t is cst.Attribute:
                name = dotted(node)  # type: ignore[arg-type]
                if name is not None:
                    self._add(name, scope, flags)
                else:
                    stack.append((node.value, scope, flags))  # type: ignore[attr-defined]
                continue
            if t is cst.Annotation or isinstance(node, _WHITESPACE):
                continue
            if t is cst.Arg:
                stack.append((node.value, scope, flags))  # type: ignore[attr-defined]
                continue
            if t is cst.Param:
                if node.default is not None:  # type: ignore[attr-defined]
                    stack.append((node.default, scope, flags))  # type: ignore[attr-defined]
                continue
            if t is cst.Yield and scope == _OWN:
                self.has_yield = True
            elif t in (cst.For, cst.While) and scope == _OWN:
                self.has_loop = True
                flags |= _IN_LOOP
            elif t is cst.Assert and scope == _OWN:
                self.has_assert = True
                flags |= _IN_ASSERT
            elif t is cst.Assign and scope == _OWN:
                self._local_call(node)  # type: ignore[arg-type]
            elif t is cst.Return and scope == _OWN:
                self.returns.append(node.value)  # type: ignore[attr-defined]
            elif t is cst.Call and scope == _OWN:
                self.callees.add(dotted(node.func) or "")  # type: ignore[attr-defined]
            elif t in (cst.Import, cst.ImportFrom):
                _bindings_of(node, 0, self.bindings)
                continue
            elif t is cst.Lambda and scope == _OWN:
                scope = _LAMBDA
            elif t in (cst.FunctionDef, cst.ClassDef):
                if t is cst.FunctionDef and scope == _OWN:
                    self.nested_defs.append((node.name.value, _decorators(node.decorators)))  # type: ignore[attr-defined]
                scope = _NESTED_DEF
            names = _FIELDS.get(t)
            if names is None:
                names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(node))
            for name in names:
                value = getattr(node, name)
                if isinstance(value, cst.CSTNode):
                    stack.append((value, scope, flags))
                elif isinstance(value, (tuple, list)):
                    for item in value:
                        if isinstance(item, cst.CSTNode):
                            stack.append((item, scope, flags))

    def returned_function(self, params: frozenset[str] = frozenset()) -> str | None:
        """The name of what every ``return`` hands back when each is a function the body makes
        (a factory: ``return step``, ``return lambda x: ...``, ``return partial(f, ...)``,
        ``return jax.jit(step)``, ``return init_fn, apply_fn``); None otherwise."""
        if not self.returns:
            return None
        nested = {name for name, _ in self.nested_defs}
        names: list[str] = []
        for value in self.returns:
            made = self._made_function(value, nested, params, 0)
            if made is None:
                return None
            names.append(made)
        return ", ".join(dict.fromkeys(names))

    def returned_references(self) -> tuple[str, ...]:
        """The dotted names of what every ``return`` hands back, when each is a name or an
        attribute (``return jax.nn.relu``), not a call nor any other expression; () otherwise."""
        names = [dotted(value) if isinstance(value, cst.Name | cst.Attribute) else None for value in self.returns]
        if not names or any(n is None for n in names):
            return ()
        return tuple(dict.fromkeys(n for n in names if n))

    def _made_function(
        self, value: cst.BaseExpression | None, nested: set[str], params: frozenset[str], depth: int
    ) -> str | None:
        if value is None or depth > 4:
            return None
        if isinstance(value, cst.Lambda):
            return "a lambda"
        if isinstance(value, cst.Name):
            if value.value in nested:
                return value.value
            bound = self.assigned.get(value.value)
            made = self._made_function(bound, nested, params, depth + 1) if bound is not None else None
            return value.value if made is not None else None
        if isinstance(value, cst.Tuple) and value.elements:
            parts = [self._made_function(e.value, nested, params, depth + 1) for e in value.elements]
            return None if any(p is None for p in parts) else ", ".join(p for p in parts if p)
        if isinstance(value, cst.Call):
            callee = (dotted(value.func) or "").rpartition(".")[2]
            if callee == "partial":
                return "a partial"
            if callee in _WRAPPERS and value.args:
                first = value.args[0].value
                if isinstance(first, cst.Name) and first.value in params:
                    return f"{callee}({first.value})"  # it transforms what it is given: a decorator
                inner = self._made_function(first, nested, params, depth + 1)
                return f"{callee}({inner})" if inner is not None else None
        return None

    def _local_call(self, node: cst.Assign) -> None:
        """``name = callee(...)`` in the body (``p_train_step = jax.pmap(train_step)``)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        value = node.value
        self.assigned[node.targets[0].target.value] = value
        if isinstance(value, cst.Call):
            callee = dotted(value.func)
            if callee is not None:
                self.local_calls.append((node.targets[0].target.value, callee))


@dataclass(slots=True)
class ChunkInfo:
    """The summary of one top-level statement, with lines relative to its first line."""

    kind: str  # import | class | function | assign | compound | other | error | skipped
    bindings: tuple[Binding, ...] = ()
    cls: ClassInfo | None = None
    fn: FunctionInfo | None = None
    words: frozenset[str] = field(default_factory=frozenset)
    # module-level functions defined inside an if/else, try or with block (the run-time branch
    # of ``if TYPE_CHECKING``): judged like any function when called, never given a lens
    defs: tuple[tuple[int, FunctionInfo], ...] = ()  # (line of the def, relative to the statement)
    skipped: Refusal | None = None  # why the statement was not parsed (discovery/budget.py)
    cost: int = 0  # what it costs its file's budget for long expressions


def summarize(text: str, word: str, header: int) -> ChunkInfo:
    """Summarize one top-level statement ``text`` whose header is ``header`` lines in, unless its
    pre-scan says libcst must not see it."""
    is_class = word == "class" or (word == "@" and _header_word(text, header) == "class")
    cost = budget.scan(text, None if is_class else budget.MAX_TOKENS)
    if cost.refusal is not None:
        return ChunkInfo("skipped", skipped=cost.refusal)
    try:
        info = _summarize(text, word, header)
    except _Refused as refused:
        return ChunkInfo("skipped", skipped=refused.refusal)
    info.cost = cost.units
    return info


def _summarize(text: str, word: str, header: int) -> ChunkInfo:
    if word in ("import", "from"):
        stmt = _parse(text)
        if stmt is None:
            return ChunkInfo("error")
        out: list[Binding] = []
        _collect_bindings(stmt, 0, out)
        return ChunkInfo("import", tuple(out))
    if word in ("def", "async") or (word == "@" and _header_word(text, header) in ("def", "async")):
        m = _DEF_NAME.match(text.split("\n", header + 1)[header])
        if m is None:
            return ChunkInfo("error")
        end = text.count("\n") - 1
        words = frozenset(map(sys.intern, _WORD.findall(text)))
        is_async = text.split("\n", header + 1)[header].startswith("async")
        return ChunkInfo("function", fn=FunctionInfo(m.group(1), header, end, words, is_async, text))
    if word == "class" or word == "@":
        cls = summarize_class(text, header, 0)
        return ChunkInfo("class", cls=cls) if cls is not None else ChunkInfo("error")
    if word in ("if", "try", "with"):
        if "import" not in text and "=" not in text and "def " not in text:
            return ChunkInfo("compound")
        stmt = _parse(text)
        if stmt is None:
            return ChunkInfo("error")
        out = []
        nested: list[cst.FunctionDef] = []
        _collect_bindings(stmt, 0, out, nested)
        return ChunkInfo("compound", tuple(out), defs=tuple(_nested_defs(text, nested)))
    if _ASSIGN.match(text):
        stmt = _parse(text)
        if stmt is None:
            return ChunkInfo("error")
        out = []
        _collect_bindings(stmt, 0, out)
        return ChunkInfo("assign", tuple(out))
    return ChunkInfo("other")


def _nested_defs(text: str, nodes: list[cst.FunctionDef]) -> list[tuple[int, FunctionInfo]]:
    """A FunctionInfo for each ``def`` of a compound statement, with the line of its ``def``
    keyword in the statement (the last one of that name: a run-time ``else`` branch comes after
    the ``if TYPE_CHECKING`` stubs)."""
    lines = text.split("\n")
    out = []
    for node in nodes:
        name = node.name.value
        own = code_of(node)
        header = next((i for i, ln in enumerate(own.split("\n")) if _DEF_NAME.match(ln.lstrip())), 0)
        pattern = re.compile(rf"\s*(?:async\s+)?def\s+{re.escape(name)}\b")
        line = max((i for i, ln in enumerate(lines) if pattern.match(ln)), default=0)
        words = frozenset(map(sys.intern, _WORD.findall(own)))
        out.append(
            (line, FunctionInfo(name, header, own.count("\n"), words, node.asynchronous is not None, own + "\n"))
        )
    return out


def _shift(cls: ClassInfo, delta: int) -> None:
    cls.start += delta
    cls.header += delta
    cls.end += delta
    for inner in cls.nested:
        _shift(inner, delta)


def _header_word(text: str, header: int) -> str:
    line = text.split("\n", header + 1)[header]
    m = _WORD.match(line.lstrip())
    return m.group() if m else ""


class _Refused(Exception):
    """A class statement that libcst must not see: classes nested deeper than
    ``budget.MAX_CLASS_NESTING``, or a header over the pre-scan's bounds (lines relative to it)."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal


def summarize_class(text: str, header: int, column: int) -> ClassInfo | None:
    """Summarize a class statement whose text starts at column 0 (decorators included); raises
    :class:`_Refused` past ``budget.MAX_CLASS_NESTING`` nested classes or a header over budget."""
    lls = logical_lines(text)
    too_deep = _too_deep(lls)
    if too_deep is not None:
        raise _Refused(Refusal(too_deep, f"classes nest more than {budget.MAX_CLASS_NESTING} deep"))
    return _summarize_class(text.split("\n"), lls, header, column, 0)


def _too_deep(lls: list[LogicalLine]) -> int | None:
    """The line of the first class nested more than ``budget.MAX_CLASS_NESTING`` deep (each in the
    body of the one before), found in one pass over the logical lines before anything is parsed.
    The summary refused it only once there, having dedented and re-indexed the rest of the
    statement at each level on the way: 1,000 nested classes held the event loop 0.2 s (issue 25)."""
    stack: list[tuple[int, int]] = []  # (indent, classes it is nested in, -1 when not a class) per open line
    for ll in lls:
        if not ll.code:
            continue
        while stack and stack[-1][0] >= ll.indent:
            stack.pop()
        depth = -1
        if ll.word == "class":
            depth = stack[-1][1] + 1 if stack and stack[-1][1] >= 0 else (0 if not stack else -1)
            if depth > budget.MAX_CLASS_NESTING:
                return ll.start
        stack.append((ll.indent, depth))
    return None


def _summarize_class(
    lines: list[str], lls: list[LogicalLine], header: int, column: int, depth: int
) -> ClassInfo | None:
    """:func:`summarize_class` over the statement's lines and logical lines. A nested class gets
    its part of both (shifted and dedented), never a new scan of its text: 1,000 nested classes
    cost 13.9 s of rescans and then a RecursionError (issue 25)."""
    if depth > budget.MAX_CLASS_NESTING:
        raise _Refused(Refusal(header, f"classes nest more than {budget.MAX_CLASS_NESTING} deep"))
    head: LogicalLine | None = next((ll for ll in lls if ll.start == header), None)
    if head is None:
        return None
    header_text = "\n".join(lines[: head.end + 1])
    refused = budget.scan(header_text).refusal  # the body is not scanned for tokens: only its parts
    if refused is not None:
        raise _Refused(refused)
    stmt = _parse(header_text + "\n    pass\n") or _parse(header_text + "\n")
    if not isinstance(stmt, cst.ClassDef):
        return None
    bases = []
    for arg in stmt.bases:
        if arg.keyword is not None or arg.star:
            continue
        value = arg.value
        if isinstance(value, cst.Subscript):
            value = value.value
        bases.append(dotted(value) or "")
    body_lines = [ll for ll in lls if ll.start > head.end and ll.code]
    nested: list[ClassInfo] = []
    body: list[str] = []
    end = max((ll.end for ll in body_lines), default=head.end)
    if body_lines:
        indent = body_lines[0].indent
        starts = [ll.start for ll in lls]
        for st in statements(lls, indent=indent, first=head.end + 1):
            own = _dedent(lines[st.start : st.end + 1], indent)
            if st.word == "class" or (st.word == "@" and _header_word(own, st.header - st.start) == "class"):
                part = lls[bisect.bisect_left(starts, st.start) : bisect.bisect_right(starts, st.end)]
                inner_lls = [
                    LogicalLine(
                        ll.start - st.start, ll.end - st.start, max(ll.indent - indent, 0), ll.word, ll.code, ll.broken
                    )
                    for ll in part
                ]
                try:
                    inner = _summarize_class(
                        own.split("\n"), inner_lls, st.header - st.start, column + indent, depth + 1
                    )
                except _Refused as refused_inner:
                    inner_refusal = refused_inner.refusal
                    raise _Refused(Refusal(inner_refusal.line + st.start, inner_refusal.reason)) from None
                if inner is not None:
                    _shift(inner, st.start)
                    nested.append(inner)
            elif (_ANN_FIELD.match(own) or _INIT.match(own)) and budget.scan(own).refusal is None:
                body.append(own)
    return ClassInfo(
        name=stmt.name.value,
        header=header,
        column=column,
        end=end,
        bases=tuple(bases),
        decorators=_decorators(stmt.decorators),
        nested=tuple(nested),
        body=tuple(body),
    )
