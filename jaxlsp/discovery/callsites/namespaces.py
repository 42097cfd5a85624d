"""Files and scopes for call-site inference: statements parsed on demand, names looked up by scope.

A :class:`SourceFile` splits a file into top-level statements (the discovery scanner, no parse)
and parses only those asked for, with libcst, caching them by their text. A :class:`Scope` is a
function body or a file's top level: its assignments in source order, its parameters and its
imports, so that a name at a call site resolves to the expression it was last bound to there (or
in the enclosing scopes). Lines of calls come from the statement's own text (a search for the
call's code, in source order), not from libcst's position metadata, which costs twice the parse.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from jaxlsp.discovery import budget
from jaxlsp.discovery.chunks import Statement, logical_lines, normalize_newlines, statements
from jaxlsp.discovery.index import FileSummary
from jaxlsp.discovery.summary import Binding, code_of

_WORD = re.compile(r"[A-Za-z_]\w*")
# ``name = ...``, ``name: T = ...`` and ``a, b = ...`` at the start of a logical line.
_ASSIGNED = re.compile(r"[ \t]*\(?([A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)\)?[ \t]*(?::[^=\n]*)?=(?!=)")
_CONFIG = cst.PartialParserConfig(python_version="3.11")
_EMPTY = cst.parse_module("")
_DEFINES = frozenset({"def", "class", "async"})
_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]", re.M)


@dataclass(slots=True)
class Parsed:
    """One parsed top-level statement and what a scope needs from it."""

    node: cst.BaseStatement
    code: str  # the statement's text, for line numbers of calls


class ParseCache:
    """Parsed statements by text, least recently used evicted (bounded: trees are large)."""

    def __init__(self, size: int = 4_000) -> None:
        self.size = size
        self._items: OrderedDict[str, Parsed | None] = OrderedDict()

    def get(self, text: str) -> Parsed | None:
        if text in self._items:
            self._items.move_to_end(text)
            return self._items[text]
        node: cst.BaseStatement | None = None
        if budget.scan(text).refusal is None:  # what libcst may be given (discovery/budget.py)
            try:
                node = cst.parse_statement(text, _CONFIG)
            except (cst.ParserSyntaxError, RecursionError, ValueError):
                node = None
        parsed = Parsed(node, text) if node is not None else None
        self._items[text] = parsed
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return parsed


class SourceFile:
    """A workspace file's text, split into top-level statements; parsed statement by statement."""

    def __init__(self, path: Path, text: str, summary: FileSummary | None, cache: ParseCache) -> None:
        self.path = path
        self.summary = summary
        self.cache = cache
        text = normalize_newlines(text)
        self.lines = text.split("\n")
        self.logical = logical_lines(text)
        self.statements: list[Statement] = statements(self.logical)
        self.words = frozenset(_WORD.findall(text))
        self.main_guard = _MAIN_GUARD.search(text) is not None
        self._assigned: dict[str, list[int]] | None = None  # name -> statement indexes, in order
        self._scopes: dict[int, Scope] = {}
        self._texts: dict[int, str] = {}
        self._words: dict[int, frozenset[str]] = {}
        self._function_scopes: dict[int, list[Scope]] = {}

    def text_of(self, index: int) -> str:
        text = self._texts.get(index)
        if text is None:
            st = self.statements[index]
            text = self._texts[index] = "\n".join(self.lines[st.start : st.end + 1]) + "\n"
        return text

    def words_of(self, index: int) -> frozenset[str]:
        """The identifiers statement ``index`` holds (strings and comments included): a quick
        first test before a statement is looked at closer."""
        found = self._words.get(index)
        if found is None:
            found = self._words[index] = frozenset(_WORD.findall(self.text_of(index)))
        return found

    def parsed(self, index: int) -> Parsed | None:
        return self.cache.get(self.text_of(index))

    def defines(self, index: int) -> bool:
        """Whether statement ``index`` is a ``def`` or ``class`` (decorated or not)."""
        st = self.statements[index]
        if st.word in _DEFINES:
            return True
        header = self.lines[st.header].lstrip()
        return st.word == "@" and header.split(" ", 1)[0] in _DEFINES

    def statement_at(self, line: int) -> int | None:
        """The index of the top-level statement holding 0-based ``line``."""
        for i, st in enumerate(self.statements):
            if st.start <= line <= st.end:
                return i
        return None

    def assigned(self) -> dict[str, list[int]]:
        """Names bound at the top level (also inside top-level ``if``/``with``/``try``/``for``)."""
        if self._assigned is None:
            found: dict[str, list[int]] = {}
            spans = [(i, st) for i, st in enumerate(self.statements) if not self.defines(i)]
            for ll in self.logical:
                if not ll.code:
                    continue
                m = _ASSIGNED.match(self.lines[ll.start])
                if m is None:
                    continue
                owner = next((i for i, st in spans if st.start <= ll.start <= st.end), None)
                if owner is None:
                    continue
                for name in m.group(1).replace(" ", "").replace("\t", "").split(","):
                    bucket = found.setdefault(name, [])
                    if not bucket or bucket[-1] != owner:
                        bucket.append(owner)
            self._assigned = found
        return self._assigned

    def statement_scope(self, index: int) -> Scope:
        """A top-level statement walked on its own (its assignments, for lookups), cached."""
        scope = self._scopes.get(index)
        if scope is None:
            scope = self._scopes[index] = Scope(self, None, "", index)
            scope.walk_module_statement(index)
        return scope

    def module_scope(self) -> Scope:
        scope = self._scopes.get(-1)
        if scope is None:
            scope = self._scopes[-1] = Scope(self, None, "", -1)
        return scope

    def scopes_of(self, index: int) -> Iterator[Scope]:
        """The scopes of statement ``index``: the module scope for plain statements; each
        function (and method, and nested function) for a definition."""
        if not self.defines(index):
            yield self.module_scope()
            return
        found = self._function_scopes.get(index)
        if found is None:
            parsed = self.parsed(index)
            node = parsed.node if parsed is not None else None
            if isinstance(node, cst.FunctionDef):
                found = list(_function_scopes(self, node, None, "", index))
            elif isinstance(node, cst.ClassDef):
                found = list(_class_scopes(self, node, None, "", index))
            else:
                found = []
            self._function_scopes[index] = found
        yield from found


def _function_scopes(
    file: SourceFile, node: cst.FunctionDef, parent: Scope | None, prefix: str, index: int, cls: str | None = None
) -> Iterator[Scope]:
    scope = Scope(file, parent, prefix + node.name.value, index, node, cls)
    yield scope
    for inner in scope.nested:
        yield from _function_scopes(file, inner, scope, scope.owner + ".", index)


def _class_scopes(
    file: SourceFile, node: cst.ClassDef, parent: Scope | None, prefix: str, index: int
) -> Iterator[Scope]:
    name = prefix + node.name.value
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    shared: dict[str, list[Assignment]] = {}  # ``self.x = ...`` in any method, seen by all of them
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef):
            for scope in _function_scopes(file, stmt, parent, name + ".", index, name):
                scope.self_attrs = shared
                if scope.parent is None:
                    for attr, found in scope.own_self_attrs.items():
                        shared.setdefault(attr, []).extend(found)
                yield scope
        elif isinstance(stmt, cst.ClassDef):
            yield from _class_scopes(file, stmt, parent, name + ".", index)


@dataclass(slots=True)
class Assignment:
    """``target = value``; ``index`` picks an item when the target was unpacked (``a, b = ...``)."""

    order: int  # position in the scope's walk, for "the latest before"
    value: cst.BaseExpression
    index: int | None = None
    line: int = -1  # 0-based file line of the statement, when known (module scope)


@dataclass(slots=True)
class Call:
    """A call in a scope, in source order, with its 1-based file line."""

    node: cst.Call
    order: int
    line: int


class Scope:
    """A function body (``node``) or a file's top level (``node`` None)."""

    def __init__(
        self,
        file: SourceFile,
        parent: Scope | None,
        owner: str,
        index: int,
        node: cst.FunctionDef | None = None,
        cls: str | None = None,
    ) -> None:
        self.file = file
        self.parent = parent
        self.owner = owner  # qualified name of the function ("" at the top level)
        self.index = index  # the top-level statement it belongs to (-1: the whole top level)
        self.node = node
        self.cls = cls  # the class a method belongs to
        self.params: frozenset[str] = frozenset()
        self.imports: dict[str, Binding] = {}
        self.assigns: dict[str, list[Assignment]] = {}
        self.own_self_attrs: dict[str, list[Assignment]] = {}
        self.self_attrs: dict[str, list[Assignment]] = {}
        self.nested: list[cst.FunctionDef] = []
        self.calls: list[Call] = []
        # the context managers of the ``with`` blocks a call is inside (by the call node's id)
        self.contexts: dict[int, tuple[cst.BaseExpression, ...]] = {}
        # the ``with`` items around each nested function's ``def`` (by the def node's id): a
        # helper defined inside ``with pytest.raises(E):`` and called there is inside it too
        self.nested_contexts: dict[int, tuple[cst.BaseExpression, ...]] = {}
        self.decorators: tuple[str, ...] = ()
        self._statements: set[int] = set()
        if node is not None:
            self.decorators = tuple(code_of(d.decorator) for d in node.decorators)
            p = node.params
            names = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
            for star in (p.star_arg, p.star_kwarg):
                if isinstance(star, cst.Param):
                    names.append(star.name.value)
            self.params = frozenset(names)
            self._walk_function(node)

    @property
    def is_module(self) -> bool:
        return self.node is None

    # -- walking --------------------------------------------------------------------------------------
    def _walk_function(self, node: cst.FunctionDef) -> None:
        parsed = self.file.parsed(self.index)
        if parsed is None:
            return
        start = self.file.statements[self.index].start
        walker = _Walker(self, parsed.code, start)
        around = self.parent.nested_contexts.get(id(node)) if self.parent is not None else None
        if around:
            walker.within.append(around)
        walker.visit(node.body)

    def walk_module_statement(self, index: int) -> None:
        """Walk only the top-level statement ``index`` (lookups of other names parse lazily)."""
        if index in self._statements:
            return
        self._statements.add(index)
        parsed = self.file.parsed(index)
        if parsed is not None:
            _Walker(self, parsed.code, self.file.statements[index].start).visit(parsed.node)


class _Walker:
    """Collects a scope's assignments, imports, calls and nested functions in source order."""

    def __init__(self, scope: Scope, code: str, first_line: int) -> None:
        self.scope = scope
        self.code = code
        self.first_line = first_line  # 0-based file line of the statement's first line
        self.cursor = 0
        self.order = len(scope.calls) + sum(len(v) for v in scope.assigns.values())
        self.within: list[tuple[cst.BaseExpression, ...]] = []  # the items of the enclosing ``with`` blocks

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def line_of(self, node: cst.CSTNode) -> int:
        """1-based file line of ``node``: found in the statement's text after the previous one."""
        text = _EMPTY.code_for_node(node)
        found = self.code.find(text, self.cursor)
        if found < 0:
            found = self.code.find(text.strip())
        if found < 0 and "\n" in text:
            # a call spread over lines inside an indented block: its code made alone lacks the
            # block's indentation, so the lines are matched with any whitespace between words
            loose = re.compile(r"\s*".join(re.escape(word) for word in text.split()))
            match = loose.search(self.code, self.cursor) or loose.search(self.code)
            found = match.start() if match is not None else -1
        if found < 0:
            return self.first_line + 1
        self.cursor = found
        return self.first_line + 1 + self.code.count("\n", 0, found)

    def visit(self, node: cst.CSTNode) -> None:
        stack: list[cst.CSTNode | None] = [node]
        while stack:
            n = stack.pop()
            if n is None:  # the end of a ``with`` block's walk
                self.within.pop()
                continue
            if isinstance(n, cst.With):
                self.within.append(tuple(item.item for item in n.items))
                stack.append(None)
            if isinstance(n, cst.FunctionDef):
                if n is not self.scope.node:
                    self.scope.nested.append(n)
                    if self.within:
                        self.scope.nested_contexts[id(n)] = tuple(x for items in self.within for x in items)
                    continue
            elif isinstance(n, (cst.ClassDef, cst.Lambda)):
                continue
            elif isinstance(n, (cst.Import, cst.ImportFrom)):
                _imports_of(n, self.scope.imports)
                continue
            elif isinstance(n, cst.Call):
                self.scope.calls.append(Call(n, self.next_order(), self.line_of(n)))
                if self.within:
                    self.scope.contexts[id(n)] = tuple(x for items in self.within for x in items)
            elif isinstance(n, cst.Assign):
                for t in n.targets:
                    self._bind(t.target, n.value)
            elif (isinstance(n, cst.AnnAssign) and n.value is not None) or isinstance(n, cst.NamedExpr):
                assert n.value is not None
                self._bind(n.target, n.value)
            elif isinstance(n, cst.WithItem) and n.asname is not None:
                self._bind(n.asname.name, n.item)
            elif isinstance(n, (cst.For, cst.CompFor)):
                self._unknown(n.target)
            stack.extend(reversed(children(n)))

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, index: int | None = None) -> None:
        order = self.next_order()
        if isinstance(target, cst.Name):
            # At the top level lookups go by line: a call's own line, so that the loop-carried
            # ``state = train_step(state, batch)`` reads the ``state`` bound before it.
            line = self.line_of(value) - 1 if self.scope.is_module and isinstance(value, cst.Call) else self.first_line
            self.scope.assigns.setdefault(target.value, []).append(Assignment(order, value, index, line))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for i, el in enumerate(target.elements):
                if isinstance(el, cst.StarredElement):
                    self._unknown(el.value)
                else:
                    self._bind(el.value, value, i if index is None else None)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            found = self.scope.own_self_attrs.setdefault(target.attr.value, [])
            found.append(Assignment(order, value, index, self.first_line))

    def _unknown(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            unknown = Assignment(self.next_order(), cst.Name("__unknown__"))
            self.scope.assigns.setdefault(target.value, []).append(unknown)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._unknown(el.value)


def _imports_of(node: cst.Import | cst.ImportFrom, out: dict[str, Binding]) -> None:
    from jaxlsp.discovery.summary import dotted

    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out[alias.asname.name.value] = Binding(alias.asname.name.value, 0, "import", full)
            else:
                head = full.split(".", 1)[0]
                out[head] = Binding(head, 0, "import", head)
        return
    if isinstance(node.names, cst.ImportStar):
        return
    module = dotted(node.module) if node.module is not None else ""
    for alias in node.names:
        attr = dotted(alias.name) or ""
        local = attr
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        out[local] = Binding(local, 0, "from", f"{module}.{attr}" if module else attr, len(node.relative))


_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` in source order, read from the dataclass fields directly: libcst's own
    property runs a visitor per call, five times slower over a statement (measured)."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    out: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            out.append(value)
        elif isinstance(value, (tuple, list)):
            out.extend(v for v in value if isinstance(v, cst.CSTNode))
    return out


_NAMES: dict[int, tuple[cst.CSTNode, frozenset[str]]] = {}


def names_in(node: cst.CSTNode) -> frozenset[str]:
    """Every identifier ``node`` uses (names and attribute names), without generating its code;
    cached by node while the node lives (the cache holds it, and is bounded)."""
    found = _NAMES.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    names: set[str] = set()
    stack: list[cst.CSTNode] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            names.add(n.value)
        stack.extend(children(n))
    result = frozenset(names)
    if len(_NAMES) > 20_000:
        _NAMES.clear()
    _NAMES[id(node)] = (node, result)
    return result


def module_value(file: SourceFile, name: str, before: int | None) -> tuple[Assignment, Scope] | None:
    """The top-level assignment of ``name`` in ``file`` that is in force at 0-based line ``before``
    (the latest one before it; the latest of all when ``before`` is None)."""
    indexes = file.assigned().get(name)
    if not indexes:
        return None
    candidates = [i for i in indexes if before is None or file.statements[i].start < before] or (
        indexes if before is None else []
    )
    for i in reversed(candidates):
        probe = file.statement_scope(i)
        found = [a for a in probe.assigns.get(name, ()) if before is None or a.line < before]
        if found:
            # evaluated in the statement's own scope, which holds its calls: a value made there
            # gets the call's line (in the module's scope it got line 0, so ``model = MLP(...)``
            # and ``model(x)`` seemed two constructions)
            return found[-1], probe
    return None
