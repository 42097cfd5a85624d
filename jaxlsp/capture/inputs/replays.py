"""Learned examples to replay: what a target keeps when its learned call cannot be spelled (issue 56.7).

A learning run (:mod:`.learning`) records each call of a workspace target as a recipe table
(:mod:`.signatures`). A call whose arguments no recipe can spell (diffrax's ``diffeqsolve(terms,
...)``, whose term holds a Python function; an object of the workspace) used to be dropped, and
the target stayed dark. It is kept here instead as the example that reached it: the pytest test
that made the call (``tests/test_x.py::test_y``), or the test file or script when no test was
running. Input planning (``plan.py``) replays that example up to the target's first call, as
``jaxlsp trace --from`` does, when the target has no spellable learned call (which wins: it needs
no run).

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
    """The example that reached one target with a call no recipe can spell."""

    path: str  # the target's file, absolute and resolved
    name: str
    kind: str  # the target's kind, as a learned call's (function, linen, nnx, equinox)
    python: str  # the interpreter that ran the example
    example: dict[str, Any]  # the ExampleSpec to run: one test, else the test file or the script
    callsite: dict[str, Any] | None = None  # {path, line}: the user's line that made the call
    sources: dict[str, str] = field(default_factory=dict)  # the call's chain: absolute path -> sha256

    def spec(self) -> ExampleSpec:
        return cast("ExampleSpec", dict(self.example))  # kept as learning spelled it (example_of)

    def text(self) -> str:
        return str(self.example.get("text") or self.example.get("path"))


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
        """Keep, for each of the worker's unspelled calls (``learn.unspelled``), the example that
        reached it; the keys kept (:meth:`SignatureStore.key`'s)."""
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
                entries.pop(key, None)  # re-inserted last: the newest are kept longest
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

    def keys(self, python: str) -> set[str]:
        """The keys of every kept example of ``python``, fresh or not."""
        return {k for k, v in self.kept.read().items() if v.get("python") == python}


def _unchanged(sources: Mapping[str, str]) -> bool:
    return all(sha256_of(p) == h for p, h in sources.items())
