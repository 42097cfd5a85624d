"""Learned call signatures, kept per workspace and interpreter (issue 46).

Every capture asks the worker to record the abstract call of each workspace function and module
class that runs (``worker/examples/signatures.py``): one trace of ``Transformer`` teaches
``Block``, ``Attention`` and ``rms_norm``. They are kept here, in the per-user cache
(``$XDG_CACHE_HOME/jaxlsp/signatures/``), one JSON file per workspace root, each signature under
the interpreter that recorded it. Plain data only: a table in the recipe form, the call's line,
and the sha256 of the files that made the call. Nothing in a workspace can write or name this
file, and nothing in it is executable: using a signature traces its target in the (trusted)
capture sandbox with the arguments it spells, exactly as a saved profile would.

Freshness: a signature is used only while every file of the call's chain (the caller's files,
not the target's own: an edit inside a layer is re-traced on the inputs its caller gave it) has
the hash it had when the call was recorded; otherwise it is dropped, never used for other code,
and the next capture that makes the call records it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jaxlsp.capture.launch.staging import default_cache_dir

FORMAT = "jaxlsp.signatures"
VERSION = 1
MAX_KEPT = 4096  # signatures one workspace keeps (the oldest go first)


@dataclass
class Signature:
    """One target's learned call: ``table`` is its profile in the recipe form (no ``target``)."""

    path: str  # absolute, resolved
    name: str
    kind: str
    table: dict[str, Any]
    python: str  # the interpreter that recorded it
    callsite: dict[str, Any] | None = None  # {path, line}: the user's line that made the call
    sources: dict[str, str] = field(default_factory=dict)  # absolute path -> sha256
    learned_from: str = ""  # "a trace of model.py::Transformer", "tests/test_model.py"

    def where(self, root: Path) -> str:
        """``tests/test_model.py:14`` (relative to ``root``), or the target's own file."""
        if not self.callsite:
            return _relative(self.path, root)
        return f"{_relative(str(self.callsite.get('path', self.path)), root)}:{self.callsite.get('line', '?')}"


def _relative(path: str, root: Path) -> str:
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:
        return path


def _sha(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


_LOCK = threading.Lock()


class SignatureStore:
    """The signatures of one workspace root, read from and written to the per-user cache."""

    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.root = root.resolve()
        base = (cache_dir or default_cache_dir()) / "signatures"
        digest = hashlib.sha256(str(self.root).encode("utf-8", "surrogateescape")).hexdigest()[:32]
        self.file = base / f"{digest}.json"

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
            return {}
        if data.get("root") != str(self.root):  # another root whose name hashed alike: never mixed
            return {}
        entries = data.get("signatures")
        return entries if isinstance(entries, dict) else {}

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        if len(entries) > MAX_KEPT:
            entries = dict(list(entries.items())[-MAX_KEPT:])
        data = {"format": FORMAT, "version": VERSION, "root": str(self.root), "signatures": entries}
        self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".signatures-", dir=self.file.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, separators=(",", ":"))
            os.replace(tmp, self.file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @staticmethod
    def key(python: str, path: str, name: str) -> str:
        return f"{python}\0{os.path.realpath(path)}\0{name}"

    def add(self, records: list[dict[str, Any]], python: str, learned_from: str) -> int:
        """Keep the worker's records (``WorkerResult.signatures``); the number kept."""
        kept = 0
        changed = False
        with _LOCK:
            entries = self._read()
            for record in records:
                try:
                    signature = Signature(
                        path=os.path.realpath(str(record["path"])),
                        name=str(record["name"]),
                        kind=str(record["kind"]),
                        table=dict(record["table"]),
                        python=python,
                        callsite=dict(record["callsite"]) if isinstance(record.get("callsite"), dict) else None,
                        sources={str(k): str(v) for k, v in dict(record.get("sources") or {}).items()},
                        learned_from=learned_from,
                    )
                except (KeyError, TypeError, ValueError):
                    continue  # a record the worker spelled otherwise: not kept
                if not Path(signature.path).is_relative_to(self.root):
                    continue  # the workspace's own targets only
                key = self.key(python, signature.path, signature.name)
                kept += 1
                if entries.get(key) == asdict(signature):
                    continue  # the call every capture of a model records again: nothing to write
                entries.pop(key, None)  # re-inserted last: the newest are kept longest
                entries[key] = asdict(signature)
                changed = True
            if changed:
                self._write(entries)
        return kept

    def lookup(self, python: str, path: Path, name: str) -> Signature | None:
        """The fresh signature of ``path::name`` recorded by ``python``; a stale one is dropped."""
        key = self.key(python, str(path), name)
        with _LOCK:
            entries = self._read()
            raw = entries.get(key)
            if raw is None:
                return None
            try:
                signature = Signature(**raw)
            except TypeError:
                signature = None
            if signature is None or any(_sha(p) != h for p, h in signature.sources.items()):
                del entries[key]
                self._write(entries)
                return None
        return signature

    def all(self, python: str | None = None) -> list[Signature]:
        """Every kept signature (of ``python``), fresh or not."""
        out: list[Signature] = []
        for raw in self._read().values():
            with contextlib.suppress(TypeError):
                signature = Signature(**raw)
                if python is None or signature.python == python:
                    out.append(signature)
        return out
