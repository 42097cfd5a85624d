"""What each example taught, kept with the hashes of the sources it loaded (issue 56).

A learning run of an example (``capture/inputs/learning.py``) is worth repeating only when something
it loaded changed: the workspace files its imports reach (:mod:`.importers`), the files of the calls
it recorded and the targets' own files. Each run that ended by itself (or was stopped idle, as a
script is, or at its own time limit) is kept here with their sha256 and the targets it taught; a
later learn, in this process or after a restart, skips every example whose sources all still hash
the same and whose signatures the store still holds, and says so (outcome ``cached``). A save
changes one hash: only the examples that loaded that file run again.

Plain data in the per-user cache (``$XDG_CACHE_HOME/jaxlsp/learned-examples/``), one JSON file per
workspace root, beside the signatures (:mod:`.signatures`); nothing in the workspace.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jaxlsp.capture.inputs.keptfile import KeptFile, sha256_of

FORMAT = "jaxlsp.learned-examples"
VERSION = 1
MAX_KEPT = 2000  # examples one workspace keeps (the oldest go first)
# how a run ended that another run of the same sources would repeat: an error or a timeout may be
# the machine's (a missing package, a busy CPU); a run the whole learn's budget cut short did not finish
KEPT_OUTCOMES = frozenset({"finished", "stopped", "failed", "exited"})

_LOCK = threading.Lock()


@dataclass
class CachedExample:
    outcome: str
    message: str
    learned: int  # signatures it recorded
    targets: list[str]  # "path::Name", relative to the root
    keys: list[str]  # the signature store's keys of what it recorded (still there: still taught)
    sources: dict[str, str] = field(default_factory=dict)  # absolute path -> sha256
    # the example's own time limit when it was stopped there (a test suite longer than it): a run
    # with the same limit would stop there again, a longer one may teach more
    deadline: float | None = None


def kept(outcome: str, message: str, own_deadline: bool = False) -> bool:
    """Whether a run that ended so is kept: it ended by itself, or was stopped idle, or at its own
    time limit (``own_deadline``: not cut short by the whole run's budget)."""
    return outcome in KEPT_OUTCOMES and ("deadline" not in message or own_deadline)


class ExampleCache:
    """The learned examples of one workspace root, in the per-user cache."""

    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.kept = KeptFile.of(root, cache_dir, "learned-examples", FORMAT, VERSION, "examples", MAX_KEPT)
        self.root, self.file = self.kept.root, self.kept.file
        self._read, self._write = self.kept.read, self.kept.write

    @staticmethod
    def key(python: str, text: str) -> str:
        return f"{python}\0{text}"

    def fresh(self, python: str, text: str, signatures: set[str]) -> CachedExample | None:
        """What ``text`` taught when it last ran under ``python``, while every source it loaded
        hashes the same and ``signatures`` (the store's keys) still hold what it recorded."""
        raw = self._read().get(self.key(python, text))
        if raw is None:
            return None
        try:
            entry = CachedExample(**raw)
        except TypeError:
            return None
        if not entry.sources or any(sha256_of(p) != h for p, h in entry.sources.items()):
            return None
        if not set(entry.keys) <= signatures:
            return None  # dropped from the store (a caller changed, or the oldest went): run again
        return entry

    def put(self, python: str, text: str, entry: CachedExample) -> None:
        with _LOCK:
            entries = self._read()
            key = self.key(python, text)
            entries.pop(key, None)
            entries[key] = asdict(entry)
            self._write(entries)

    def forget(self, python: str, text: str) -> None:
        with _LOCK:
            entries = self._read()
            if entries.pop(self.key(python, text), None) is not None:
                self._write(entries)
