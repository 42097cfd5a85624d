"""From ``FILE::NAME`` to a graph: recipe, profile, interpreter, capture. Shared by the CLI and
the server; no pygls here.

Failures come back as :class:`TraceFailure` with the protocol's error kinds (``needs_input`` and
``refused`` for recipe problems, ``import``, ``trace``, ``timeout``, ``crash``, ``memory``), the
user's source frame when there is one, and one paragraph of text for humans.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxlsp.capture.client import DEFAULT_TIMEOUT, capture_sync
from jaxlsp.capture.supervise import CaptureOutcome
from jaxlsp.graph import io
from jaxlsp.graph.model import Graph
from jaxlsp.recipes import NeedsInput, RecipeError, Resolved, find_recipe, load_recipe, select_profile


@dataclass
class TraceRequest:
    file: Path
    name: str
    workspace_root: Path
    profile: str | None = None
    recipe: Path | None = None
    python: str | None = None
    device: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    # How to find the target's entrypoint (for proposals); the server passes its warm index.
    find_entrypoint: Callable[[Path, str], Any] | None = None


@dataclass
class TraceFailure(Exception):
    kind: str
    message: str
    frame: dict[str, Any] | None = None
    needs: NeedsInput | None = None
    logs: str = ""
    problems: list[Any] = field(default_factory=list)  # recipe problems (path, line, key_path, message)

    def paragraph(self) -> str:
        where = ""
        if self.frame:
            where = f" at {self.frame.get('path')}:{self.frame.get('line')}"
            if self.frame.get("column") is not None:
                where += f":{int(self.frame['column']) + 1}"
        return f"{self.kind.replace('_', ' ')}{where}: {self.message}"


@dataclass
class TraceOutcome:
    graph: Graph
    capture: CaptureOutcome
    resolved: Resolved
    request: dict[str, Any] = field(default_factory=dict)


def parse_target(spec: str) -> tuple[Path, str]:
    """``path/to/file.py::Name`` (``Name`` may be dotted) into its parts."""
    path, sep, name = spec.rpartition("::")
    if not sep or not path or not name:
        raise TraceFailure("refused", f"expected FILE::NAME (e.g. model.py::MLP), got {spec!r}")
    return Path(path), name


def workspace_root_for(file: Path, cwd: Path) -> Path:
    """The current directory when the target is inside it, else the target's folder."""
    file = file.resolve()
    cwd = cwd.resolve()
    return cwd if file.is_relative_to(cwd) else file.parent


def select(req: TraceRequest) -> tuple[Resolved, Path | None]:
    """The resolved profile for the target, or a TraceFailure (recipe errors, needs-input)."""
    file = req.file.resolve()
    if not file.is_file():
        raise TraceFailure("refused", f"no such file: {req.file}")
    recipe_path = req.recipe.resolve() if req.recipe else find_recipe(file, req.workspace_root.resolve())
    try:
        recipe = load_recipe(recipe_path) if recipe_path else None
    except RecipeError as exc:
        raise TraceFailure("refused", str(exc), problems=list(exc.problems)) from None
    find = req.find_entrypoint or (lambda path, name: _entrypoint(path, name, req.workspace_root))
    entrypoint = find(file, req.name)
    try:
        selected = select_profile(
            recipe, file, req.name, req.profile, entrypoint=entrypoint, workspace_root=req.workspace_root.resolve()
        )
    except RecipeError as exc:  # no such profile, several candidates, a target file gone...
        raise TraceFailure("refused", str(exc), problems=list(exc.problems)) from None
    if isinstance(selected, NeedsInput):
        missing = "; ".join(str(m.get("message") or m.get("path")) for m in selected.missing)
        where = f" (recipe {recipe_path})" if recipe_path else " (no jaxlsp.toml profile for it: one was proposed)"
        raise TraceFailure("needs_input", f"{req.name}{where} needs input: {missing}", needs=selected)
    return selected, recipe_path


def _entrypoint(file: Path, name: str, root: Path) -> Any:
    from jaxlsp.discovery import Classifier, WorkspaceIndex

    found = Classifier(WorkspaceIndex([root])).discover(file)
    return next((e for e in (*found.entrypoints, *found.drivers) if e.name == name), None)


def choose_python(req: TraceRequest, resolved: Resolved) -> str:
    """``--python``, else the recipe's ``python``, else the workspace's ``.venv``, else ours."""
    if req.python:
        return req.python
    if resolved.python:
        return resolved.python
    for venv in (".venv", "venv"):
        candidate = req.workspace_root / venv / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return sys.executable


def build_request(req: TraceRequest, resolved: Resolved, recipe_path: Path | None) -> dict[str, Any]:
    target: dict[str, Any] = {**resolved.target}
    path = Path(str(target["path"]))
    target["path"] = str(path if path.is_absolute() else req.file.resolve())
    profile = dict(resolved.profile)
    if req.device:
        profile["device"] = req.device
    request: dict[str, Any] = {"target": target, "profile": profile, "workspaceRoot": str(req.workspace_root.resolve())}
    if recipe_path is not None:
        request["recipePath"] = str(recipe_path)
    return request


@dataclass
class Prepared:
    """Everything decided before a capture runs: what to send, to which interpreter."""

    request: dict[str, Any]
    python: str
    resolved: Resolved


def prepare(req: TraceRequest) -> Prepared:
    """Select the profile and build the worker request; raises TraceFailure."""
    if sys.platform == "win32":
        raise TraceFailure("refused", "capture runs on Linux and macOS only; Windows is not supported yet")
    resolved, recipe_path = select(req)
    return Prepared(build_request(req, resolved, recipe_path), choose_python(req, resolved), resolved)


def finish(prepared: Prepared, outcome: CaptureOutcome) -> TraceOutcome:
    """Decode a capture's outcome into a graph; raises TraceFailure."""
    result = outcome.result
    if not result.get("ok"):
        error = result.get("error") or {"kind": "internal", "message": "the worker returned no result"}
        raise TraceFailure(error["kind"], error["message"], error.get("frame"), logs=outcome.logs[-4000:])
    graph_json = result.get("graph")
    if graph_json is None:
        raise TraceFailure("internal", "the worker reported success without a graph")
    return TraceOutcome(io.from_json(graph_json), outcome, prepared.resolved, prepared.request)


def trace(req: TraceRequest) -> TraceOutcome:
    """Select, capture in the chosen interpreter (a fresh worker), decode; raises TraceFailure."""
    prepared = prepare(req)
    return finish(prepared, capture_sync(prepared.request, python=prepared.python, timeout=req.timeout))
