"""An NNX or Equinox model's abstract init kept from one capture to the next (issue 29).

A Linen re-trace skips the abstract init with a structure hint its own trace checks (worker/hints.py).
An NNX or Equinox model has no such check: its variables are made by the user's constructor,
under ``nnx.eval_shape`` / ``eqx.filter_eval_shape``, and only running it says what it makes (an
NNX Gemma 3 1B: 0.3 s of a 0.8 s re-trace). But an edit to the forward pass changes nothing the
constructor ran, and that can be known without running it:

- :func:`recording`: while the constructor runs, note which of the workspace's functions ran (by
  file and code qualname: a trace hook, the capture that makes a snapshot pays it) and whether it
  opened any file other than Python source (a config or a tokenizer read: then no snapshot).
- :func:`make`: the abstract model pickled, with a fingerprint of every workspace file the capture
  imported: the file's syntax tree (``ast.dump``, no line numbers, no comments) with the body of
  every module-level function or method that did NOT run replaced by ``...``. Everything that
  runs at import (module and class bodies, decorators, signatures, defaults) and every function
  the constructor ran is in the fingerprint as it is.
- :func:`reuse`, in the next capture (after the import, where the constructor would run): the same
  workspace files imported, each with the same fingerprint over the same functions, the same
  libraries and Python; then the pickled model is the init. An edit inside a function the
  constructor did not run (``__call__``) keeps it; any other edit, a new import, a new method, a
  changed default or constant, makes the init run again (and a new snapshot).

The server carries a snapshot as the target's structure hint (capture/speculate.py), keyed by file,
target and profile. Only the warm spare's captures record (the CLI traces once). What the model
holds beyond its arrays is pickled (a config object is a copy, not the module's own global).
``tests/capture/worker/test_initsnap.py`` compares the graphs with and without a snapshot.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import hashlib
import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

#: the pickled model's bytes at most (a larger model's init runs each time)
MAX_PICKLE = 2 << 20
_FORMAT = "jaxlsp.initsnap/1"
#: when this process's capture began (``time.time()``, set by worker/main.py): a workspace file
#: written since may not be the source the model was built from, and is no snapshot's
CAPTURE_STARTED = 0.0


class Recording:
    """What ran while the constructor ran: workspace functions by file, and other files opened."""

    def __init__(self, root: str) -> None:
        self.root = os.path.join(os.path.realpath(root), "") if root else ""
        self.executed: dict[str, set[str]] = {}
        self.opened: list[str] = []
        self.active = False


@contextlib.contextmanager
def recording(root: str) -> Iterator[Recording]:
    """Note the workspace functions that run in the block, and the non-Python files it opens."""
    found = Recording(root)
    if not found.root:
        yield found
        return
    files: dict[str, bool] = {}  # a code object's file -> under the root (realpath once each)

    def under(path: str) -> bool:
        hit = files.get(path)
        if hit is None:
            hit = files[path] = not path.startswith("<") and os.path.realpath(path).startswith(found.root)
        return hit

    def trace(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if under(code.co_filename):
                found.executed.setdefault(os.path.realpath(code.co_filename), set()).add(code.co_qualname)

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if found.active and event == "open" and args and isinstance(args[0], str | bytes):
            path = os.fsdecode(args[0])
            if not path.endswith((".py", ".pyc", ".so", ".pyd")):
                found.opened.append(path)

    _AUDITS.append(audit)
    if len(_AUDITS) == 1:
        sys.addaudithook(_audit)  # (audit hooks stay for the process: one dispatches to those active)
    previous = sys.gettrace()
    found.active = True
    sys.settrace(trace)
    try:
        yield found
    finally:
        sys.settrace(previous)
        found.active = False
        _AUDITS.remove(audit)


_AUDITS: list[Any] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    for hook in _AUDITS:
        hook(event, args)


# --- fingerprints ---------------------------------------------------------------------------------
def fingerprint(source: str, executed: set[str]) -> str | None:
    """The file's syntax tree with the bodies of the module-level functions and methods outside
    ``executed`` (code qualnames) left out, hashed; None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    _mask(tree.body, "", executed)
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def _mask(body: list[ast.stmt], prefix: str, executed: set[str]) -> None:
    """Replace the bodies of functions that did not run (in classes too, at any depth of classes,
    but never inside a function: what a function that ran defined ran with it)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if prefix + node.name not in executed:
                node.body = [ast.Expr(ast.Constant(...))]
        elif isinstance(node, ast.ClassDef):
            _mask(node.body, f"{prefix}{node.name}.", executed)
        else:  # a def under `if`, `try`, `with` at the same level
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    _mask(inner, prefix, executed)
            for handler in getattr(node, "handlers", None) or []:
                _mask(handler.body, prefix, executed)


def _source(path: str) -> str | None:
    import tokenize

    try:
        with tokenize.open(path) as f:
            return f.read()
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _workspace_files(root: str) -> list[str]:
    """The real paths of the Python files under ``root`` this process imported."""
    under = os.path.join(os.path.realpath(root), "")
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py"):
            real = os.path.realpath(path)
            if real.startswith(under):
                out.add(real)
    return sorted(out)


def _context(kind: str) -> dict[str, Any]:
    from jaxlsp.capture.worker.main import versions

    return {"format": _FORMAT, "kind": kind, "python": list(sys.version_info[:3]), "versions": versions()}


# --- making and reusing ---------------------------------------------------------------------------
def make(model: Any, kind: str, found: Recording, root: str) -> dict[str, Any] | None:
    """The snapshot of an abstract model the constructor just made, or None (it opened another
    file, a workspace file does not parse, the model does not pickle or is too large)."""
    if found.opened or not found.root:
        return None
    files: dict[str, Any] = {}
    for path in _workspace_files(root):
        try:
            if os.stat(path).st_mtime >= CAPTURE_STARTED:
                return None  # saved while this capture ran: not surely what was imported
        except OSError:
            return None
        executed = found.executed.get(path, set())
        source = _source(path)
        mark = fingerprint(source, executed) if source is not None else None
        if mark is None:
            return None
        files[path] = {"fingerprint": mark, "ran": sorted(executed)}
    try:
        data = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a lambda, a lock, a module: the init runs each time
        return None
    if len(data) > MAX_PICKLE:
        return None
    return {**_context(kind), "files": files, "model": base64.b64encode(data).decode("ascii")}


def reuse(snapshot: Any, kind: str, root: str) -> Any:
    """The model the snapshot holds, when nothing the constructor depends on changed; else None."""
    if not isinstance(snapshot, dict) or not root:
        return None
    if {k: snapshot.get(k) for k in ("format", "kind", "python", "versions")} != _context(kind):
        return None
    files = snapshot.get("files")
    if not isinstance(files, dict) or sorted(files) != _workspace_files(root):
        return None
    for path, recorded in files.items():
        if not isinstance(recorded, dict) or not isinstance(recorded.get("ran"), list):
            return None
        source = _source(path)
        if source is None or fingerprint(source, {str(q) for q in recorded["ran"]}) != recorded.get("fingerprint"):
            return None
    try:
        return pickle.loads(base64.b64decode(str(snapshot["model"])))
    except Exception:  # the classes it names changed in a way the fingerprints do not see: run it
        return None
