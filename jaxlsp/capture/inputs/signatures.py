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
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from jaxlsp.capture.inputs.keptfile import KeptFile, sha256_of

FORMAT = "jaxlsp.signatures"
VERSION = 1
MAX_KEPT = 4096  # signatures one workspace keeps (the oldest go first)
MAX_CALLS = 8  # distinct calls kept per target (issue 56.5: where they disagree is symbolic)


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
    config: dict[str, Any] = field(default_factory=dict)  # what the call ran under: x64, precision, mesh
    # the target's earlier distinct calls, newest first: {table, callsite, sources, learned_from, config}
    others: list[dict[str, Any]] = field(default_factory=list)
    # a symbolic trace of these calls failed: {dimension, message, target (its file's sha256)}
    concrete: dict[str, Any] | None = None
    # lookup's answer only: each symbolic dimension's sizes in the learned calls, the newest call's
    # own table (``table`` is symbolic), and which dimension made it concrete after all
    sizes: dict[str, list[int]] = field(default_factory=dict)
    newest: dict[str, Any] | None = None
    forced: str = ""

    def where(self, root: Path) -> str:
        """``tests/test_model.py:14`` (relative to ``root``), or the target's own file; with the
        symbolic dimensions the calls disagree on, or the one that made it concrete."""
        if not self.callsite:
            at = _relative(self.path, root)
        else:
            at = f"{_relative(str(self.callsite.get('path', self.path)), root)}:{self.callsite.get('line', '?')}"
        if self.sizes:
            said = "; ".join(f"{k} = {', '.join(map(str, v))}" for k, v in self.sizes.items())
            return f"{at} and others, symbolic where they disagree: {said}"
        if self.forced:
            return f"{at}, concrete: {self.forced}"
        return at


def _relative(path: str, root: Path) -> str:
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:
        return path


_LOCK = threading.Lock()


class SignatureStore:
    """The signatures of one workspace root, read from and written to the per-user cache."""

    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.kept = KeptFile.of(root, cache_dir, "signatures", FORMAT, VERSION, "signatures", MAX_KEPT)
        self.root, self.file = self.kept.root, self.kept.file
        self._read, self._write = self.kept.read, self.kept.write

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
                        config=dict(record["config"]) if isinstance(record.get("config"), dict) else {},
                    )
                except (KeyError, TypeError, ValueError):
                    continue  # a record the worker spelled otherwise: not kept
                if not Path(signature.path).is_relative_to(self.root):
                    continue  # the workspace's own targets only
                key = self.key(python, signature.path, signature.name)
                kept += 1
                _keep_others(signature, entries.get(key))
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
            fresh = _fresh(signature) if signature is not None else None
            if fresh is None:
                del entries[key]
                self._write(entries)
                return None
            if asdict(fresh) != raw:  # an earlier call whose callers changed: dropped, the others kept
                entries[key] = asdict(fresh)
                self._write(entries)
        return _answer(fresh)

    def mark_concrete(self, python: str, path: Path, name: str, dimension: str, message: str) -> bool:
        """Remember that the symbolic trace of ``path::name``'s learned calls failed at
        ``dimension``: its lookups answer the newest concrete call until the target's file or its
        calls change. False when nothing is kept for it."""
        key = self.key(python, str(path), name)
        with _LOCK:
            entries = self._read()
            raw = entries.get(key)
            if raw is None:
                return False
            raw = {
                **raw,
                "concrete": {"dimension": dimension, "message": message[:300], "target": sha256_of(raw["path"])},
            }
            entries[key] = raw
            self._write(entries)
        return True

    def all(self, python: str | None = None) -> list[Signature]:
        """Every kept signature (of ``python``), fresh or not."""
        out: list[Signature] = []
        for raw in self._read().values():
            with contextlib.suppress(TypeError):
                signature = Signature(**raw)
                if python is None or signature.python == python:
                    out.append(signature)
        return out


def _keep_others(signature: Signature, before: dict[str, Any] | None) -> None:
    """``signature`` (the newest call) with the target's earlier distinct calls kept behind it, at
    most :data:`MAX_CALLS` in all; the same call again moves to the front. A failed symbolic
    trace is forgotten when the calls change."""
    if not before:
        return
    try:
        old = Signature(**before)
    except TypeError:
        return
    calls = [_call_of(old), *old.others]
    others = [c for c in calls if c.get("table") != signature.table][: MAX_CALLS - 1]
    signature.others = others
    if _tables([signature.table, *(c.get("table") for c in others)]) == _tables(c.get("table") for c in calls):
        signature.concrete = old.concrete  # the same calls, in another order: the same failure


def _tables(tables: Iterable[Any]) -> set[str]:
    return {json.dumps(t, sort_keys=True) for t in tables}


def _call_of(signature: Signature) -> dict[str, Any]:
    return {
        "table": signature.table,
        "callsite": signature.callsite,
        "sources": signature.sources,
        "learned_from": signature.learned_from,
        "config": signature.config,
    }


def _fresh(signature: Signature) -> Signature | None:
    """``signature`` with only the calls whose callers are unchanged (the newest of them in
    front); None when none is."""
    calls = [c for c in [_call_of(signature), *signature.others] if _unchanged(c.get("sources"))]
    if not calls:
        return None
    if calls[0]["table"] == signature.table and len(calls) == 1 + len(signature.others):
        return signature
    first, rest = calls[0], calls[1:]
    return Signature(
        path=signature.path,
        name=signature.name,
        kind=signature.kind,
        table=dict(first["table"]),
        python=signature.python,
        callsite=first.get("callsite"),
        sources=dict(first.get("sources") or {}),
        learned_from=str(first.get("learned_from") or ""),
        config=dict(first.get("config") or {}),
        others=rest,
    )


def _unchanged(sources: Any) -> bool:
    return isinstance(sources, dict) and all(sha256_of(p) == h for p, h in sources.items())


def _answer(signature: Signature) -> Signature:
    """What a lookup answers: the calls merged, their disagreeing dimensions symbolic
    (learnedshapes.py), unless a symbolic trace of them failed since the target's file changed."""
    from jaxlsp.capture.inputs import learnedshapes

    if not signature.others:
        return signature
    if signature.concrete and signature.concrete.get("target") == sha256_of(signature.path):
        forced = f"{signature.concrete.get('dimension')} failed symbolically ({signature.concrete.get('message')})"
        return replace(signature, forced=forced)
    tables = [signature.table, *(dict(c["table"]) for c in signature.others if isinstance(c.get("table"), dict))]
    table, sizes = learnedshapes.merged(tables, Path(signature.path), signature.name)
    if not sizes:
        return signature
    return replace(signature, table=table, sizes=sizes, newest=signature.table)
