"""Structured capture errors and the user's source position of an exception (stdlib only)."""

from __future__ import annotations

import errno
import functools
import linecache
import os
import re
import sys
import traceback
from types import ModuleType, TracebackType
from typing import Any

from jaxlsp.notebook import Module
from jaxlsp.worker.protocol import ErrorInfo, ErrorKind, ErrorKindName, SymbolicFailure

_LIBRARY_PARTS = ("site-packages", "dist-packages")
_MESSAGE_LIMIT = 1200
# JAX names the function it was tracing: the worker's own wrapper, which means nothing to the user.
_JAX_WHERE = re.compile(
    r"The error occurred while tracing the function .*? for \w+\."
    r"(?: This concrete value was not available in Python because it depends on the value of the argument[^.]*\.)?"
)
_TRACEBACK_LIMIT = 20000
# A symbolic dimension's remainder in JAX's shape-polymorphism errors (``mod(d*n, - 3)``).
_REMAINDER = re.compile(r"\b(?:remainder|rest is) mod\((?P<expr>[^()]*(?:\([^()]*\)[^()]*)*?),\s*-?\s*(?P<k>\d+)\)")
# A NamedSharding in a message, written whole with its abstract mesh's every field: its spec
# (``P('x', None)``) is what the user wrote and what differs. One level of nested parentheses
# (``axis_types=(Explicit,)``, ``P(('x', 'y'), None)``) is all jax prints inside either.
_NESTED = r"(?:[^()]|\([^()]*\))*"
_NAMED_SHARDING = re.compile(
    rf"NamedSharding\(mesh=\w*Mesh\({_NESTED}\), spec=(P\({_NESTED}\))(?:, memory_kind=\w+)?\)"
)
SHARDING_HINT = (
    "the operands' shardings must agree: reshard one of them (jax.sharding.reshard(x, P(...))) "
    "or give the result's sharding (out_sharding=...)"
)
# path -> os.path.realpath(path). The contract check asks of every loaded module whether it is the
# workspace's: 1,400 realpath calls (0.1-0.25 s) per capture for jax, flax and equinox alone. The
# warm spare fills this for the modules it preloaded (``remember_loaded``), so that a forked
# capture asks only about the modules it imported itself.
_REAL: dict[str, str] = {}
# name -> module, of the modules loaded when the warm spare last remembered them: jax, flax,
# equinox and the installed libraries it preloaded, never a workspace file (forkserver.py). The
# contract check looks for the workspace's functions only in the other modules (``imported_since``):
# 1,500 library modules' files and namespaces were 20-40 ms of every forked capture.
_WARM: dict[str, ModuleType] = {}


def realpath(path: str) -> str:
    """``os.path.realpath``, remembered for this process (and the captures forked from it)."""
    real = _REAL.get(path)
    if real is None:
        real = _REAL[path] = os.path.realpath(path)
    return real


def installed(real: str) -> bool:
    """A real path in an installed package (site-packages, dist-packages) or the standard library:
    what the warm spare may preload, and what is never the user's code."""
    return (
        any(part in _LIBRARY_PARTS for part in real.split(os.sep))
        or real.startswith(_stdlib())
        or real.startswith(_user_path())
    )


@functools.cache
def _user_path() -> tuple[str, ...]:
    """The user's ``PYTHONPATH`` entries the client passed (``JAXLSP_USER_PATH``, capture/environment/userpath.py):
    where JAX lives on a TPU image or a cluster module, installed code as site-packages is."""
    import json

    try:
        entries = json.loads(os.environ.get("JAXLSP_USER_PATH") or "{}").get("path") or []
    except (ValueError, AttributeError):
        return ()
    return tuple(sorted({realpath(p).rstrip(os.sep) + os.sep for p in entries if isinstance(p, str) and p}))


@functools.cache
def _stdlib() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(sorted({realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths}))


def remember_loaded() -> None:
    """Remember the real path of every loaded module's file, and the modules themselves (the warm
    spare, before it forks: it has imported no workspace file)."""
    for name, module in list(sys.modules.items()):
        _WARM[name] = module
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and not path.startswith("<"):
            realpath(path)


def imported_since() -> list[ModuleType]:
    """The loaded modules that :func:`remember_loaded` did not see (the same module object under
    the same name): in a capture forked from the warm spare, those it imported itself; every
    loaded module in a process that never remembered."""
    return [m for name, m in list(sys.modules.items()) if _WARM.get(name) is not m]


class CaptureError(Exception):
    """A failure with a protocol error kind; ``frame`` is the user's position when known."""

    def __init__(
        self,
        kind: ErrorKind | ErrorKindName,
        message: str,
        frame: dict[str, Any] | None = None,
        tb: str | None = None,
    ):
        super().__init__(message)
        self.kind = ErrorKind(kind)
        self.message = message
        self.frame = frame
        self.tb = tb
        self.skipped: str | None = None  # the name a ``definitions`` load left unset (ErrorInfo.skipped)
        self.symbolic: SymbolicFailure | None = None  # a dimension that could not stay a symbol

    def info(self) -> ErrorInfo:
        info: ErrorInfo = {"kind": self.kind, "message": self.message}
        if self.frame is not None:
            info["frame"] = self.frame
        if self.skipped is not None:
            info["skipped"] = self.skipped
        if self.symbolic is not None:
            info["symbolic"] = self.symbolic
        if self.tb:
            info["traceback"] = self.tb[-_TRACEBACK_LIMIT:]
        return info


class Workspace:
    """Which files belong to the user's workspace (under the root, outside installed packages)."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root) if root else ""
        self._under = self.root.rstrip(os.sep) + os.sep
        self._cache: dict[str, bool] = {}
        # Notebooks whose cells ran, by path (as compiled and real): their code's line numbers
        # are module lines (jaxlsp.notebook), which frames give back as (cell, line).
        self.notebooks: dict[str, Module] = {}

    def add_notebook(self, path: str, cells: Module) -> None:
        self.notebooks[path] = self.notebooks[os.path.realpath(path)] = cells

    def in_cell(self, path: str, line: int) -> tuple[int, int] | None:
        """A notebook's module line (1-based) as (cell index, 1-based line in the cell)."""
        cells = self.notebooks.get(path)
        found = cells.locate(line - 1) if cells is not None else None
        return (found[0], found[1] + 1) if found is not None else None

    def place(self, frame: dict[str, Any]) -> dict[str, Any]:
        """A frame dict in a notebook gets its ``cell`` and lines within that cell."""
        found = self.in_cell(str(frame["path"]), int(frame["line"]))
        if found is None:
            return frame
        cell, line = found
        return {**frame, "cell": cell, "line": line, "endLine": int(frame["endLine"]) - int(frame["line"]) + line}

    def contains(self, path: str) -> bool:
        hit = self._cache.get(path)
        if hit is None:
            hit = self._contains(path)
            self._cache[path] = hit
        return hit

    def _contains(self, path: str) -> bool:
        if not self.root or not path or path.startswith("<"):
            return False
        real = realpath(path)
        # both real paths, so under the root is a prefix (commonpath was 20 us a call, and the
        # contract check asks about every module a capture imported)
        if real != self.root and not real.startswith(self._under):
            return False
        rel = os.path.relpath(real, self.root)
        parts = rel.split(os.sep)
        return not any(p in _LIBRARY_PARTS for p in parts) and not any(
            p.startswith(".venv") or p == "venv" for p in parts[:1]
        )


def code_points(path: str, line: int, byte_column: int) -> int:
    """Convert a 0-based UTF-8 byte column on ``line`` (1-based) to a code-point column."""
    if byte_column <= 0:
        return max(byte_column, 0)
    text = linecache.getline(path, line)
    if not text or text.isascii():
        return byte_column
    return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))


def frame_dict(
    path: str, line: int, column: int | None, end_line: int | None, end_column: int | None
) -> dict[str, Any]:
    """The protocol's frame object; byte columns (or None) converted to code points."""
    col = code_points(path, line, column) if column is not None else 0
    end_l = end_line if end_line is not None else line
    if end_column is not None:
        end_c = code_points(path, end_l, end_column)
    else:
        end_c = len(linecache.getline(path, line).rstrip("\r\n"))
    return {"path": path, "line": line, "column": col, "endLine": end_l, "endColumn": end_c}


def user_frame_of(exc: BaseException, workspace: Workspace) -> dict[str, Any] | None:
    """The innermost workspace frame of ``exc`` (a SyntaxError's own position first), else None."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno and workspace.contains(exc.filename):
        offset = (exc.offset or 1) - 1
        end_offset = (exc.end_offset or (offset + 2)) - 1
        return workspace.place(
            {
                "path": os.path.realpath(exc.filename),
                "line": exc.lineno,
                "column": max(offset, 0),
                "endLine": exc.end_lineno or exc.lineno,
                "endColumn": max(end_offset, offset + 1),
            }
        )
    found: dict[str, Any] | None = None
    for summary in _chain_frames(exc):
        if summary.lineno and workspace.contains(summary.filename):
            found = frame_dict(
                os.path.realpath(summary.filename),
                summary.lineno,
                getattr(summary, "colno", None),
                getattr(summary, "end_lineno", None),
                getattr(summary, "end_colno", None),
            )
    return workspace.place(found) if found is not None else None


def _chain_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    tb: TracebackType | None = exc.__traceback__
    return list(traceback.extract_tb(tb)) if tb is not None else []


def first_paragraph(exc: BaseException) -> str:
    text = str(exc).strip()
    para = text.split("\n\n", 1)[0].strip()
    para = " ".join(line.strip() for line in para.splitlines())
    para = " ".join(_JAX_WHERE.sub("", para).split())
    para = _NAMED_SHARDING.sub(r"\1", para)
    para += _for_sizes(para)
    if len(para) > _MESSAGE_LIMIT:
        para = para[: _MESSAGE_LIMIT - 3] + "..."
    return f"{type(exc).__name__}: {para}" if para else type(exc).__name__


def _for_sizes(text: str) -> str:
    """For which sizes a shape error of symbolic dimensions holds: JAX says what must divide
    (``The remainder mod(n, - 4) should be 0``, ``rest is mod(n, 2)``), not which sizes pass."""
    found = _REMAINDER.search(text)
    if found is None:
        return ""
    expr, divisor = found.group("expr").strip(), found.group("k")
    return f" (this line works only for the sizes where {expr} is a multiple of {divisor}; it fails for the others)"


def format_tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def from_exception(
    kind: ErrorKind | ErrorKindName, exc: BaseException, workspace: Workspace, context: str = ""
) -> CaptureError:
    """A CaptureError for ``exc`` naming its cause; the user's line is its ``frame`` (whoever shows
    the message shows the frame with it, so the text does not repeat it)."""
    frame = user_frame_of(exc, workspace)
    message = first_paragraph(exc)
    if sharding_error(exc):  # the shardings the message names are the ones at the user's line
        message = f"sharding mismatch: {message}"
        if type(exc).__name__ == "ShardingTypeError":
            message += f" ({SHARDING_HINT})"
    if context:
        message = f"{context}: {message}"
    if kind != "memory" and out_of_memory(exc):
        kind, message = "memory", f"the capture ran out of memory (the worker's memory cap); {message}"
    error = CaptureError(kind, message, frame, format_tb(exc))
    error.symbolic = symbolic_failure(exc)
    return error


# JAX's shape-polymorphism errors that say a dimension cannot stay a symbol, not that the shapes
# are wrong for some sizes: ``int(n)`` ("used in a context that requires a constant"), ``if n > 3``
# ("comparison 'n' > '3' is inconclusive"), a dimension handed to NumPy or ``range``.
_CONDITIONAL = ("Cannot divide evenly", "remainder", "equal division")  # wrong for some sizes: the user's error
_NOT_AN_INT = re.compile(r"'_DimExpr'")
_QUOTED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


def symbolic_failure(exc: BaseException) -> SymbolicFailure | None:
    """Whether ``exc`` (or what it was raised from) is a dimension that could not stay a symbol,
    with the names JAX quoted; None for any other failure, a shape error for some sizes included.
    Read here, where the exception is, so that the client goes by this field, never the text."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        if type(current).__name__ == "InconclusiveDimensionOperation":
            if any(c in text for c in _CONDITIONAL):
                return None
            return {"dimensions": _QUOTED.findall(text)}
        if isinstance(current, TypeError) and _NOT_AN_INT.search(text):
            return {"dimensions": []}
        current = current.__cause__ or current.__context__
    return None


def sharding_error(exc: BaseException) -> bool:
    """Whether ``exc`` is jax refusing the shardings of an operation's operands under an explicit
    mesh: a ``ShardingTypeError`` (``add got incompatible shardings for broadcasting``, an
    illegally sharded result), or ``with_sharding_constraint``'s assertion that a value already
    has the sharding it names (with explicit axes it checks, it does not reshard), or a
    ``shard_map`` whose ``in_specs`` differ from its arguments' shardings."""
    if type(exc).__name__ == "ShardingTypeError":
        return True
    text = str(exc)
    if isinstance(exc, AssertionError):
        return "`with_sharding_constraint`" in text
    return isinstance(exc, ValueError) and text.startswith("in_specs passed to shard_map") and "does not match" in text


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the system refusing memory: a ``MemoryError``, or an
    ``OSError`` with ``ENOMEM``, which is how ``mmap`` and ``os.fork`` say it under the cap."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MemoryError) or (isinstance(current, OSError) and current.errno == errno.ENOMEM):
            return True
        current = current.__cause__ or current.__context__
    return False
