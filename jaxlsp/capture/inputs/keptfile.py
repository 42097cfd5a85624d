"""What learning keeps for a workspace root in the per-user cache: one JSON file per root (named by
a hash of its path, never inside the workspace), read leniently and written whole, atomically. The
learned signatures (:mod:`.signatures`) and the learned examples (:mod:`.examplecache`) each keep
one, under their own folder, format and entry key."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxlsp.capture.launch.staging import default_cache_dir


def sha256_of(path: str) -> str | None:
    """The file's sha256, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class KeptFile:
    """``{format, version, root, <entries>: {key: entry}}`` for one workspace root."""

    file: Path
    root: Path
    format: str
    version: int
    entries: str  # the top-level key that holds the entries
    max_kept: int  # the newest kept when there are more (a dict keeps insertion order)

    @classmethod
    def of(
        cls, root: Path, cache_dir: Path | None, folder: str, format: str, version: int, entries: str, max_kept: int
    ) -> KeptFile:
        root = root.resolve()
        digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:32]
        file = (cache_dir or default_cache_dir()) / folder / f"{digest}.json"
        return cls(file, root, format, version, entries, max_kept)

    def read(self) -> dict[str, dict[str, Any]]:
        """The entries; none when the file is missing, unreadable, of another format or version,
        or another root's whose path hashed alike (never mixed)."""
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != self.format or data.get("version") != self.version:
            return {}
        if data.get("root") != str(self.root):
            return {}
        found = data.get(self.entries)
        return found if isinstance(found, dict) else {}

    def write(self, entries: dict[str, dict[str, Any]]) -> None:
        if len(entries) > self.max_kept:
            entries = dict(list(entries.items())[-self.max_kept :])
        data = {"format": self.format, "version": self.version, "root": str(self.root), self.entries: entries}
        self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.entries}-", dir=self.file.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, separators=(",", ":"))
            os.replace(tmp, self.file)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
