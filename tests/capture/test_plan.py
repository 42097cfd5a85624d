"""Input planning (``capture/inputs/plan.py``) reads a request of plain data: what the caller's
discovery found comes as data, call sites are asked for only where planning needs them, a live
trace's load is a field of the request, and a worker's failure keeps its kind and what a
``definitions`` load left unset."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jaxlsp.capture.engine import Prepared, finish, prepare
from jaxlsp.capture.inputs.plan import plan
from jaxlsp.capture.launch.supervise import CaptureOutcome
from jaxlsp.capture.request import Discovered, SitesWanted, TraceFailure, TraceRequest
from jaxlsp.worker.protocol import ErrorKind

RECIPE = """version = 1

[profiles.f]
target = "model.py::f"
inputs.args = [{ kind = "array", shape = [3] }]

[profiles.h]
target = "model.py::h"
load = "definitions"
inputs.args = [{ kind = "array", shape = [3] }]
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(
        "def f(x):\n    return x\n\n\ndef g(x):\n    return x\n\n\ndef h(x):\n    return x\n"
    )
    (tmp_path / "jaxlsp.toml").write_text(RECIPE)
    return tmp_path


def ask(ws: Path, name: str, **fields: object) -> TraceRequest:
    return TraceRequest(ws / "model.py", name, ws, python=sys.executable, signatures=False, **fields)  # type: ignore[arg-type]


def test_a_profile_that_names_the_target_needs_no_call_sites(ws: Path) -> None:
    planned = plan(ask(ws, "f", discovered=Discovered(None)))
    assert planned.origin.how == "profile" and planned.resolved.name == "f"


def test_call_sites_are_asked_for_only_where_planning_needs_them(ws: Path) -> None:
    with pytest.raises(SitesWanted) as wanted:
        plan(ask(ws, "g", discovered=Discovered(None)))
    assert wanted.value.entrypoint is None
    with pytest.raises(TraceFailure) as failure:  # no site, nothing proposed from no entrypoint: asked
        plan(ask(ws, "g", discovered=Discovered(None, sites=())))
    assert failure.value.kind is ErrorKind.NEEDS_INPUT and failure.value.needs is not None


@pytest.mark.parametrize(
    ("name", "definitions_only", "load", "changed"),
    [("f", True, "definitions", True), ("h", True, "definitions", False), ("f", False, "module", False)],
)
def test_a_live_trace_loads_definitions_only_where_the_profile_imports_the_file_whole(
    ws: Path, name: str, definitions_only: bool, load: str, changed: bool
) -> None:
    prepared = prepare(ask(ws, name, discovered=Discovered(None), definitions_only=definitions_only))
    assert prepared.request["profile"].get("load") == load
    assert prepared.definitions_only is changed


def test_a_worker_failure_keeps_its_kind_and_the_name_a_definitions_load_left_unset(ws: Path) -> None:
    prepared = Prepared({"profile": {}, "target": {"path": str(ws / "model.py"), "name": "f"}}, "python", None)  # type: ignore[arg-type]
    error = {"kind": "import", "message": "importing model.py failed", "skipped": "data"}
    with pytest.raises(TraceFailure) as failure:
        finish(prepared, CaptureOutcome({"ok": False, "error": error}, "", "", 0.0, "python", "cold"))  # type: ignore[typeddict-item]
    assert failure.value.kind is ErrorKind.IMPORT and failure.value.skipped == "data"
    assert failure.value.paragraph() == "import: importing model.py failed"
