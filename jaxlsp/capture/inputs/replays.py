"""Learned examples to replay: what a target keeps when its learned call cannot be spelled (issue 56.7).

A learning run (:mod:`.learning`) records each call of a workspace target as a recipe table
(:mod:`.signatures`). A call whose arguments no recipe can spell (diffrax's ``diffeqsolve(terms,
...)``, whose term holds a Python function; an object of the workspace) used to be dropped, and
the target stayed dark. It is kept here instead as the example that reached it: the pytest test
that made the call (``tests/test_x.py::test_y``), or the test file or script when no test was
running. Input planning (``plan.py``) replays that example up to the target's first call, as
``jaxlsp trace --from`` does, when the target has no spellable learned call (which wins: it needs
no run).

Every learned target keeps its example here, a spelled call's too (issue 56): a learned call
spells shapes and dtypes only, so a target that checks its arguments' values while it runs
(interpax's ``PPoly``: ``if jnp.any(dx < 0): raise``) fails to trace on it; the capture then
replays the example instead (``capture/learnedretry.py``), and :meth:`ReplayStore.mark_failed`
makes planning replay it first from then on, until the target's file or the failing line's file
changes.

Freshness is a learned call's: a kept example is used while every file of the call's chain (the
callers' files, the test file among them) hashes as it did, and dropped once one changed (the
call may no longer be made). The target's own file is left out on purpose, as for a learned
call: the replay runs the target as it is now, so an edit inside it is traced fresh. Plain data
in the per-user cache (``$XDG_CACHE_HOME/jaxlsp/learned-replays/``), one JSON file per workspace
root, beside the signatures; nothing in the workspace.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from jaxlsp.capture.inputs.keptfile import KeptFile, sha256_of
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.worker.protocol import ExampleSpec

FORMAT = "jaxlsp.learned-replays"
VERSION = 1
MAX_KEPT = 4096  # targets one workspace keeps an example for (the oldest go first)
_PARAMETERS = re.compile(r"\[.*\]$")  # a parametrized test's ids: ``test_y[a-b]``

_LOCK = threading.Lock()


@dataclass
class Replay:
    """The example that reached one target: the one way in for a call no recipe can spell, the
    fallback of a spelled call that fails to trace."""

    path: str  # the target's file, absolute and resolved
    name: str
    kind: str  # the target's kind, as a learned call's (function, linen, nnx, equinox)
    python: str  # the interpreter that ran the example
    example: dict[str, Any]  # the ExampleSpec to run: one test, else the test file or the script
    callsite: dict[str, Any] | None = None  # {path, line}: the user's line that made the call
    sources: dict[str, str] = field(default_factory=dict)  # the call's chain: absolute path -> sha256
    # the learned call failed to trace (a value check): {message, files: the target's and the
    # failing line's files -> sha256, replay_fails: the replay failed too}; while the files hold,
    # planning replays this first, unless that failed too (a check of the target's own arguments)
    failed: dict[str, Any] | None = None

    def spec(self) -> ExampleSpec:
        return cast("ExampleSpec", dict(self.example))  # kept as learning spelled it (example_of)

    def text(self) -> str:
        return str(self.example.get("text") or self.example.get("path"))

    def note(self) -> str:
        """The trace's origin line: ``inputs from T (learned example)``, and why the learned call
        was not used when it failed (:meth:`ReplayStore.mark_failed`)."""
        why = f"; the learned call failed {self.failed.get('message')}" if _holds(self.failed) and self.failed else ""
        return f"inputs from {self.text()} (learned example{why})"


def example_of(test: object, example: Mapping[str, Any]) -> dict[str, Any]:
    """The example to replay for a call made while ``example`` ran: the one pytest test that made
    it (``test``, pytest's node id, its parameters left out: the test runs them all and the first
    call stops it), or ``example`` itself when no test of its file was running (a call at import,
    a script)."""
    whole = dict(example)
    if not isinstance(test, str) or example.get("kind") != "test":
        return whole
    file, sep, node = test.partition("::")
    parts = [_PARAMETERS.sub("", p) for p in node.split("::")] if sep else []
    path = str(example.get("path", ""))
    if not parts or not all(p.isidentifier() for p in parts) or Path(file).name != Path(path).name:
        return whole
    name = "::".join(parts)
    relative = str(example.get("text") or path).partition("::")[0]
    return {"kind": "test", "path": path, "text": f"{relative}::{name}", "tests": [f"{path}::{name}"]}


class ReplayStore:
    """The kept examples of one workspace root, in the per-user cache."""

    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.kept = KeptFile.of(root, cache_dir, "learned-replays", FORMAT, VERSION, "replays", MAX_KEPT)
        self.root = self.kept.root

    @classmethod
    def beside(cls, store: SignatureStore) -> ReplayStore:
        """The store in the same cache as ``store`` (``<cache>/signatures/<hash>.json``)."""
        return cls(store.root, store.file.parent.parent)

    def add(self, records: Iterable[Mapping[str, Any]], python: str, example: Mapping[str, Any]) -> list[str]:
        """Keep, for each target of the worker's records (its spelled calls, ``signatures``, and
        its unspelled ones, ``learn.unspelled``), the example that reached it; the keys kept
        (:meth:`SignatureStore.key`'s), each once. A failure :meth:`mark_failed` remembered stays."""
        kept: list[str] = []
        with _LOCK:
            entries = self.kept.read()
            for record in records:
                try:
                    replay = Replay(
                        path=os.path.realpath(str(record["path"])),
                        name=str(record["name"]),
                        kind=str(record["kind"]),
                        python=python,
                        example=example_of(record.get("test"), example),
                        callsite=dict(record["callsite"]) if isinstance(record.get("callsite"), dict) else None,
                        sources={str(k): str(v) for k, v in dict(record.get("sources") or {}).items()},
                    )
                except (KeyError, TypeError, ValueError):
                    continue  # a record the worker spelled otherwise: not kept
                if not Path(replay.path).is_relative_to(self.root):
                    continue  # the workspace's own targets only
                key = SignatureStore.key(python, replay.path, replay.name)
                if key in kept:
                    continue  # a target called again in this run: its first call's test reaches it first
                before = entries.pop(key, None)  # re-inserted last: the newest are kept longest
                if isinstance(before, dict) and isinstance(before.get("failed"), dict):
                    replay.failed = before["failed"]  # a value check fails whichever call taught it
                entries[key] = asdict(replay)
                kept.append(key)
            if kept:
                self.kept.write(entries)
        return kept

    def lookup(self, python: str, path: Path, name: str) -> Replay | None:
        """The fresh kept example of ``path::name`` run by ``python``; a stale one is dropped."""
        key = SignatureStore.key(python, str(path), name)
        with _LOCK:
            entries = self.kept.read()
            raw = entries.get(key)
            if raw is None:
                return None
            try:
                replay: Replay | None = Replay(**raw)
            except TypeError:
                replay = None
            if replay is None or not replay.sources or not _unchanged(replay.sources):
                del entries[key]
                self.kept.write(entries)
                return None
        return replay

    def mark_failed(self, python: str, path: Path, name: str, message: str, files: Iterable[str]) -> bool:
        """Remember that ``path::name``'s learned call failed to trace (``message``: ``at FILE:LINE:
        ...``) where its example would not: planning replays the example first while the target's
        file and ``files`` (the failing line's) are unchanged. False when no example is kept."""
        key = SignatureStore.key(python, str(path), name)
        with _LOCK:
            entries = self.kept.read()
            raw = entries.get(key)
            if raw is None:
                return False
            hashes = {p: h for p in {os.path.realpath(str(path)), *files} if (h := sha256_of(p)) is not None}
            entries[key] = {**raw, "failed": {"message": message[:300], "files": hashes}}
            self.kept.write(entries)
        return True

    def mark_replay_failed(self, python: str, path: Path, name: str) -> bool:
        """Remember that the replay :meth:`mark_failed` chose failed too (the target checks its own
        arguments, which are traced either way): the learned call goes first again, alone, while
        the failure holds. False when no failure was remembered."""
        key = SignatureStore.key(python, str(path), name)
        with _LOCK:
            entries = self.kept.read()
            raw = entries.get(key)
            if raw is None or not isinstance(raw.get("failed"), dict):
                return False
            entries[key] = {**raw, "failed": {**raw["failed"], "replay_fails": True}}
            self.kept.write(entries)
        return True

    def failed_first(self, python: str, path: Path, name: str) -> bool:
        """Whether ``path::name``'s learned call failed to trace and still would (:meth:`mark_failed`)
        while its replay did not, so that its kept example goes first; one read of the store,
        nothing hashed for the other targets."""
        raw = self.kept.read().get(SignatureStore.key(python, str(path), name))
        return raw is not None and replay_helps(raw.get("failed")) is True

    def keys(self, python: str) -> set[str]:
        """The keys of every kept example of ``python``, fresh or not."""
        return {k for k, v in self.kept.read().items() if v.get("python") == python}


def _unchanged(sources: Mapping[str, str]) -> bool:
    return all(sha256_of(p) == h for p, h in sources.items())


def _holds(failed: object) -> bool:
    """Whether a remembered failure still holds: every file it was read in hashes as it did."""
    files = failed.get("files") if isinstance(failed, dict) else None
    return isinstance(files, dict) and bool(files) and _unchanged(files)


def replay_helps(failed: object) -> bool | None:
    """For a remembered failure (:attr:`Replay.failed`): True when the learned call still fails
    and its replay did not, False when both still fail, None when nothing holds (no failure, or
    a file it was read in changed: the learned call is tried first again)."""
    if not _holds(failed) or not isinstance(failed, dict):
        return None
    return not failed.get("replay_fails")
