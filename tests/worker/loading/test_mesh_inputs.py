"""A profile's mesh in the worker (issue 28): a mesh larger than the devices the capture has is
refused with the mesh's key path and both counts, as on an accelerator, where the recipe cannot
count the devices before the worker runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, request

pytest.importorskip("jax")

MESH_RECIPE = Path(__file__).resolve().parents[2] / "workspaces" / "mesh_recipe"


@pytest.fixture
def capture_mesh(run_capture: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[Callable[..., Any]]:
    def run(**profile: Any) -> dict[str, Any]:
        params = {"w1": array(16, 64), "w2": array(64, 4)}
        req = request("mlp.py", "mlp", {"kind": "dict", "items": params}, array(8, 16), workspace=MESH_RECIPE)
        req["profile"].update(profile)  # its name too, which request() takes as the target's
        return run_capture(req)

    yield run
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(MESH_RECIPE)):
            del sys.modules[name]


def test_a_mesh_larger_than_the_devices_is_refused_at_its_key(capture_mesh: Callable[..., Any]) -> None:
    mesh = {"axisNames": ["data", "model"], "axisSizes": [128, 2], "axisTypes": ["Explicit", "Explicit"]}
    result = capture_mesh(name="big", mesh=mesh)
    assert not result["ok"], "a mesh of 256 devices traced on this machine's CPU devices"
    error = result["error"]
    assert error["kind"] == "refused", error
    assert error["message"].startswith(
        "profiles.big.mesh: a mesh of 256 devices (data: 128, model: 2) needs at least 256 devices, and this "
        "capture has "
    ), error["message"]
    assert "cpu device(s) (set devices = 256 or more)" in error["message"], error["message"]
