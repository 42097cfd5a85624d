"""Why a line shows no shape (issue 46.5): a hover on a body line of a target that no trace gave a
shape answers one line, the cause and the one action that would give it one.

The causes, in the order they are told apart:

- the target was never traced (no graph covers its body): its live state says why (not live:
  needs input, so *Learn shapes*; its live trace failed, so the failure's first line; being
  traced; or nothing ran yet, so *Trace graph*);
- the file changed since the trace that covers it: save (live shapes re-trace) or re-trace;
- the line is in a block that computed nothing while the rest of the target did: a branch not
  taken, a loop body that did not run, an exception handler not entered, a nested function or a
  method not called (or that computes Python values only);
- else the line ran and computes no array: a Python-only line (shapes, configuration, control
  flow), which no trace can give a shape.

Only ``.py`` documents: a notebook's lines keep the plain hover (None where nothing was traced).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jaxlsp.discovery import Entrypoint

LEARN = "run **Learn shapes** (a code action here, or the command) to learn its inputs from the workspace's tests"
TRACE = "click **Trace graph** above it, or run **Learn shapes** to learn its inputs from the workspace's tests"
KEEP_TREES = 8  # parsed documents kept (a hover's file, again and again)
# Not-live causes that running the workspace's examples can answer (tracing.py's reasons): no
# inputs without asking, an example nobody picked, a call site a live trace may not import.
# Not an untrusted folder, an interpreter to fix, the network, a notebook's cells.
LEARNABLE = ("needs input", "example", "call site")


def learnable(live: tuple[str, str] | None) -> bool:
    """Whether *Learn shapes* would give this target inputs: it is not live for want of them."""
    return live is not None and live[0] == "notLive" and any(word in live[1] for word in LEARNABLE)


@dataclass(frozen=True)
class Place:
    """Where a line is: its innermost statement's block (the statements around it), of which kind,
    and the name of the nested function or method it is in, if any."""

    kind: str  # "body", "branch", "loop", "handler", "function"
    first: int  # 1-based lines of the block
    last: int
    function: str | None


class Trees:
    """Parsed texts by digest, the newest :data:`KEEP_TREES`."""

    def __init__(self) -> None:
        self._trees: OrderedDict[str, ast.Module | None] = OrderedDict()

    def parse(self, text: str) -> ast.Module | None:
        key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        if key in self._trees:
            self._trees.move_to_end(key)
            return self._trees[key]
        try:
            tree: ast.Module | None = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = None
        self._trees[key] = tree
        while len(self._trees) > KEEP_TREES:
            self._trees.popitem(last=False)
        return tree


def innermost_entry(entries: Iterable[Entrypoint], line: int) -> Entrypoint | None:
    """The innermost entrypoint whose body holds the 0-based ``line`` below its ``def``/``class`` line."""
    around = [e for e in entries if e.header.line < line <= e.body.end_line]
    return max(around, key=lambda e: e.header.line, default=None)


def place(tree: ast.Module, entry: Entrypoint, line: int) -> Place | None:
    """Where the 1-based ``line`` is in ``entry``'s definition; None on a docstring, a comment or
    a line of no statement."""
    node = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.lineno == entry.line
        ),
        None,
    )
    if node is None:
        return None
    found: Place | None = None
    function: str | None = None
    body: Sequence[ast.stmt] = node.body
    kind = "body"
    while True:
        statement = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if statement is None:
            return found
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            return None  # a docstring
        found = Place(kind, body[0].lineno, _last(body), function)
        inner = _blocks(statement)
        block = next(
            ((k, b) for k, b in inner if b and b[0].lineno <= line <= (b[-1].end_lineno or b[-1].lineno)), None
        )
        if block is None:
            return found  # the statement's own line (an `if`'s test, a `def` line) or a simple statement
        kind, body = block
        if kind == "function":
            function = getattr(statement, "name", None)
        elif kind == "same":
            kind = found.kind  # a `with` body runs when the `with` does


def _last(block: Sequence[ast.stmt]) -> int:
    return block[-1].end_lineno or block[-1].lineno


def _blocks(statement: ast.stmt) -> list[tuple[str, Sequence[ast.stmt]]]:
    """The statement lists a compound statement holds, each with what running it depends on."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [("function" if not isinstance(statement, ast.ClassDef) else "body", statement.body)]
    if isinstance(statement, ast.If):
        return [("branch", statement.body), ("branch", statement.orelse)]
    if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
        return [("loop", statement.body), ("branch", statement.orelse)]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [("same", statement.body)]
    if isinstance(statement, ast.Try) or (hasattr(ast, "TryStar") and isinstance(statement, ast.TryStar)):
        blocks: list[tuple[str, Sequence[ast.stmt]]] = [("same", statement.body)]
        blocks += [("handler", h.body) for h in statement.handlers]
        return [*blocks, ("branch", statement.orelse), ("same", statement.finalbody)]
    if isinstance(statement, ast.Match):
        return [("branch", case.body) for case in statement.cases]
    return []


def no_shape(
    entry: Entrypoint,
    where: Place,
    covered: frozenset[int],
    stale: bool,
    live: tuple[str, str] | None,
) -> str:
    """The hover's one line for a line of ``entry`` with no shape. ``covered``: the file's lines
    where some trace has nodes (1-based); ``stale``: those traces' files changed since;
    ``live``: the target's live state and cause."""
    ran = any(entry.line <= n <= entry.end_line for n in covered)
    if not ran:
        why, action = _untraced(entry, live)
    elif stale:
        why = "the file changed since the trace that covers it"
        action = "save it (live shapes trace it again)" if live and live[0] != "notLive" else "click **Re-trace**"
    elif where.kind != "body" and not any(where.first <= n <= where.last for n in covered):
        why, action = _not_run(where), "trace it with inputs that run it (a profile or an example)"
    else:
        why = "a Python-only line: it computes no array operation in this trace (shapes, configuration, control flow)"
        action = ""
    return f"**jaxlsp** · no shape here: {why}" + (f" · {action}" if action else "")


def _untraced(entry: Entrypoint, live: tuple[str, str] | None) -> tuple[str, str]:
    state, cause = live or ("", "")
    first = cause.strip().splitlines()[0] if cause.strip() else ""
    if state == "notLive":
        if learnable(live):  # the cause without its own advice (trace it once and answer)
            said = re.split(r"(?<=\))[:;] ", first, maxsplit=1)[0]
            return f"`{entry.name}` is not traced: not learned yet ({said})", LEARN
        return f"`{entry.name}` is not traced: not live ({first})", "trace it once (**Trace graph**)"
    if state == "failed":
        return f"`{entry.name}`'s trace failed: {first}", "fix it and save (the diagnostic is at the failing line)"
    if state in ("queued", "tracing"):
        return f"`{entry.name}` is being traced (live shapes)", "its shapes appear when the trace ends"
    return f"`{entry.name}` has not been traced", TRACE


def _not_run(where: Place) -> str:
    if where.kind == "function":
        name = f"`{where.function}`" if where.function else "this function"
        return f"{name} computed no array in this trace (not called, or Python values only)"
    if where.kind == "loop":
        return "the loop's body did not run in this trace"
    if where.kind == "handler":
        return "the exception was not raised in this trace"
    return "the branch was not taken in this trace"
