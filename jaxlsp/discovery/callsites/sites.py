"""Call sites as plain data: where the workspace calls a target, of what kind, with which values.

A :class:`CallSite` is what ``discovery/callsites/finder.py`` finds and what ``jaxlsp examples`` lists:
the file and line, the kind of example it belongs to (``test`` | ``script`` | ``module``) and the
example to run to reach it, and (static sites) the constructor and call arguments as recipe input
specs, with what is missing. :meth:`CallSite.rank` orders them: complete first, then those not
inside an expected-error block, then tests before scripts before modules, then the smaller inputs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

SiteKind = Literal["test", "script", "module"]
KIND_RANK = {"test": 0, "script": 1, "module": 2}
_TEST_FILE = re.compile(r"(?:test_.*|.*_test)\.py")
SCRIPT_FOLDERS = frozenset({"examples", "example", "scripts", "script", "demos", "demo", "tutorials", "notebooks"})


@dataclass(frozen=True, slots=True)
class Missing:
    """What a partial site could not tell: ``where`` in the profile (``inputs.args[0]``), and why."""

    where: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "why": self.why}


@dataclass(frozen=True, slots=True)
class CallSite:
    path: Path  # the file of the call (or of the construction when nothing calls it)
    line: int  # 1-based
    kind: SiteKind
    example: str | None  # the runnable example, relative to the root: ``tests/t.py::test_x``, ``train.py``
    static: bool  # False: only a run of the example shows the inputs
    init: dict[str, Any] | None = None  # constructor arguments {args, kwargs} as input specs
    inputs: dict[str, Any] | None = None  # call arguments {args, kwargs}
    extra: dict[str, Any] = field(default_factory=dict)  # other profile keys: rngs, mutable, method, x64
    missing: tuple[Missing, ...] = ()
    via: str | None = None  # how the target is reached: "ResNet18 (models.py:40)", "passed to ResNet"
    elements: int = 0  # array elements in all, for ranking
    # reached through a workspace function the target is handed to (``tree_at(_inferences, ...)``):
    # that function's other users seldom hand it the target, so such examples come last
    handed: bool = False
    hops: int = 0  # definitions between the target and the example's use (0: it uses the target itself)
    cell: tuple[int, int] | None = None  # in a notebook: (cell index, 1-based line in that cell)
    # called inside ``with self.assertRaises(...)`` / ``pytest.raises(...)``: the call is meant to
    # fail, so it is never a complete example, and a run of its test comes after the others
    raises: bool = False

    @property
    def complete(self) -> bool:
        return self.static and not self.missing and self.inputs is not None

    def rank(self) -> tuple[int, int, int, int, int, int, int, int, int, int, int, str, int]:
        return (
            0 if self.complete else 1,
            1 if self.raises else 0,
            KIND_RANK[self.kind],
            0 if self.static else 1,
            1 if self.handed else 0,
            self.hops,  # a use of the target itself before one through another definition
            0 if self.example is None or "::" in self.example else 1,  # one test before a whole file
            len(self.missing),
            1 if self.extra.get("mutable") is True else 0,  # an init call: apply's are what runs later
            1 if self.extra.get("method") else 0,  # a class's own __call__ before its other methods
            self.elements,
            str(self.path),
            self.line,
        )

    def where(self, root: Path) -> str:
        return place(self.path, self.line, root, self.cell)

    def to_json(self, root: Path) -> dict[str, Any]:
        cell = self.cell
        out: dict[str, Any] = {
            "path": relative(self.path, root),
            "line": self.line if cell is None else cell[1],
            **({"cell": cell[0]} if cell is not None else {}),
            "kind": self.kind,
            "example": self.example,
            "static": self.static,
            "complete": self.complete,
            "missing": [m.to_json() for m in self.missing],
        }
        if self.init is not None:
            out["init"] = self.init
        if self.inputs is not None:
            out["inputs"] = self.inputs
        if self.extra:
            out["extra"] = self.extra
        if self.via:
            out["via"] = self.via
        return out


@dataclass(frozen=True, slots=True)
class SiteTarget:
    """The target a search is for: its file, its name as discovery writes it, and its kind."""

    path: Path
    name: str  # as discovery names it: ``MLP``, ``Outer.Inner``, ``VAE.encode``
    kind: str
    cls: str | None  # the class of a method target, or of a module target
    method: str | None  # a method target's method
    fields: tuple[Any, ...] = ()

    @property
    def word(self) -> str:
        return self.name.split(".", 1)[0]


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root``, with forward slashes."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return os.path.relpath(path, root).replace(os.sep, "/")


def is_test_file(path: Path) -> bool:
    """pytest's default test files (``test_*.py``, ``*_test.py``) and ``conftest.py``."""
    return bool(_TEST_FILE.fullmatch(path.name)) or path.name == "conftest.py"


def dedupe(sites: list[CallSite]) -> list[CallSite]:
    """One site per profile and example; no dynamic entry for an example a complete site covers."""
    out: list[CallSite] = []
    seen: set[tuple[Any, ...]] = set()
    covered = {s.example for s in sites if s.complete}
    for s in sites:
        if not s.static and s.example in covered:
            continue
        key = (s.example, s.static, repr(s.init), repr(s.inputs), repr(s.extra)) if s.static else (s.example, s.static)
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out


def place(path: Path, line: int, root: Path, cell: tuple[int, int] | None = None) -> str:
    """``PATH:LINE`` relative to ``root``; in a notebook ``PATH:cell C:LINE`` (the line in that
    cell, as the editor shows it: discovery reads a notebook as one module of its code cells)."""
    return f"{relative(path, root)}:{line}" if cell is None else f"{relative(path, root)}:cell {cell[0]}:{cell[1]}"


def import_folders(path: Path, root: Path) -> list[Path]:
    """Where a call site's file imports from when it runs, as pytest's default ``prepend`` import
    mode sets it up: the file's basedir (the first folder up from it without ``__init__.py``),
    then those of the ``conftest.py`` files between it and ``root``, nearest first. A trace whose
    inputs came from the site needs them to load the site's own names (a ``ref`` to a helper class
    in the test file) and what it imports beside itself (``from fixtures import Tiny``)."""
    out = [_basedir(path)]
    folder = path.parent
    while True:
        conftest = folder / "conftest.py"
        if conftest.is_file():
            out.append(_basedir(conftest))
        if folder == root or folder.parent == folder or root not in folder.parents:
            break
        folder = folder.parent
    return list(dict.fromkeys(out))


def _basedir(path: Path) -> Path:
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder
