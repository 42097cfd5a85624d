"""Workspace trust, and what the user chose to run, kept per user outside every workspace (no pygls).

A folder is trusted when it or a folder above it is in the store. The store lives in the user's
config directory (``$XDG_CONFIG_HOME/jaxlsp/trusted.json``, else ``~/.config/jaxlsp/``): nothing a
workspace contains can add to it, and the server reads trust from nowhere else but the user's own
answers and the editor's ``initializationOptions``.

:class:`ChoiceStore` (``chosen.json`` beside it) records what the user's own traces ran, so that
live shapes run only that (docs/live-shapes.md): the examples a target was traced with, and the
files whose top level a trace imported whole. Entries are keyed by real paths, so a workspace
can neither write one nor name a file the user did not trace; a recipe shipped with a repository
is the author's choice and counts for nothing here. :class:`LearnOnOpenStore` (``learn-on-open.json``
beside it) keeps whether the user chose to learn shapes on opening a file in a folder (issue 56).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


MAX_CHOICES = 2000  # entries of each kind kept (oldest dropped): the store stays small for ever


def default_choices_path() -> Path:
    return default_store_path().with_name("chosen.json")


def example_key(example: Mapping[str, Any]) -> str:
    """An example as it runs: its kind, its file's real path, its arguments and its tests."""
    path = str(example.get("path") or "")
    return json.dumps(
        [
            str(example.get("kind") or ""),
            str(real_path(Path(path))) if path else "",
            [str(a) for a in example.get("argv") or []],
            [str(t) for t in example.get("tests") or []],
        ]
    )


class ChoiceStore:
    """What the user's own traces ran on this machine: ``examples`` by target (``REALPATH::NAME``)
    and ``modules``, the files whose top level a trace imported as a module."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_choices_path()

    def _read(self) -> tuple[dict[str, list[str]], list[str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}, []
        if not isinstance(data, dict):
            return {}, []
        raw = data.get("examples")
        examples = {
            str(k): [str(e) for e in v if isinstance(e, str)]
            for k, v in (raw.items() if isinstance(raw, dict) else ())
            if isinstance(v, list)
        }
        modules = [m for m in data.get("modules") or [] if isinstance(m, str)]
        return examples, modules

    def ran_example(self, file: Path, name: str, example: Mapping[str, Any]) -> bool:
        examples, _ = self._read()
        return example_key(example) in examples.get(_target_key(file, name), [])

    def ran_module(self, file: Path) -> bool:
        _, modules = self._read()
        return str(real_path(file)) in modules

    def record(self, file: Path, name: str, *, module: bool, example: Mapping[str, Any] | None) -> None:
        """The user traced ``name`` of ``file``: with ``example`` run, the file imported whole or not."""
        examples, modules = self._read()
        changed = False
        if example is not None:
            key, one = _target_key(file, name), example_key(example)
            if one not in examples.get(key, []):
                examples[key] = [*examples.pop(key, []), one]  # newest last, for the cut below
                changed = True
        real = str(real_path(file))
        if module and real not in modules:
            modules.append(real)
            changed = True
        if not changed:
            return
        kept = dict(list(examples.items())[-MAX_CHOICES:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")  # servers of other editors write it too
        tmp.write_text(json.dumps({"examples": kept, "modules": modules[-MAX_CHOICES:]}, indent=2), encoding="utf-8")
        os.replace(tmp, self.path)


def _target_key(file: Path, name: str) -> str:
    return f"{real_path(file)}::{name}"


# -- learning on open (issue 56) ---------------------------------------------------------------------
# ``jaxlsp.learn.onOpen`` left at ``"ask"``: the first file with a dark target opened in a trusted
# folder asks once whether to learn shapes on open there (server/features/learning.py); the answer
# is kept here, per user, for that folder and the folders below it. As for trust, nothing a
# workspace contains can write or name this file: only the user's answer does.
MAX_LEARN_FOLDERS = 2000  # answers kept (the oldest go first)


def default_learn_choices_path() -> Path:
    return default_store_path().with_name("learn-on-open.json")


class LearnOnOpenStore:
    """The user's answers, by real folder path: True (learn on open) or False (never here)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_learn_choices_path()

    def _read(self) -> dict[str, bool]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        folders = data.get("folders") if isinstance(data, dict) else None
        if not isinstance(folders, dict):
            return {}
        return {str(k): v for k, v in folders.items() if isinstance(v, bool)}

    def choice(self, folder: Path) -> bool | None:
        """The answer for ``folder``, or for the nearest folder above it that has one; None: not asked."""
        answers = self._read()
        here = real_path(folder)
        for candidate in (here, *here.parents):
            found = answers.get(str(candidate))
            if found is not None:
                return found
        return None

    def set(self, folder: Path, learn: bool) -> None:
        answers = self._read()
        key = str(real_path(folder))
        answers.pop(key, None)
        answers[key] = learn
        kept = dict(list(answers.items())[-MAX_LEARN_FOLDERS:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")  # servers of other editors write it too
        tmp.write_text(json.dumps({"folders": kept}, indent=2), encoding="utf-8")
        os.replace(tmp, self.path)
