"""Workspace trust kept per user, outside every workspace (no pygls here).

A folder is trusted when it or a folder above it is in the store. The store lives in the user's
config directory (``$XDG_CONFIG_HOME/jaxlsp/trusted.json``, else ``~/.config/jaxlsp/``): nothing a
workspace contains can add to it, and the server reads trust from nowhere else but the user's own
answers and the editor's ``initializationOptions``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from jaxlsp.textfiles import real_path


def default_store_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jaxlsp" / "trusted.json"


class TrustStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_store_path()

    def folders(self) -> list[Path]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        items = data.get("folders", []) if isinstance(data, dict) else []
        return [Path(item) for item in items if isinstance(item, str)]

    def is_trusted(self, folder: Path) -> bool:
        folder = real_path(folder)
        return any(folder == trusted or folder.is_relative_to(trusted) for trusted in self.folders())

    def add(self, folder: Path) -> None:
        folders = self.folders()
        folder = real_path(folder)
        if folder not in folders:
            self._write([*folders, folder])

    def remove(self, folder: Path) -> bool:
        folders = self.folders()
        kept = [f for f in folders if f != real_path(folder)]
        if len(kept) == len(folders):
            return False
        self._write(kept)
        return True

    def _write(self, folders: list[Path]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"folders": [str(f) for f in folders]}, indent=2), encoding="utf-8")
        os.replace(tmp, self.path)
