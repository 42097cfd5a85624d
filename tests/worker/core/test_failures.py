"""Failures come back structured with the user's line: import, trace, refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.worker.conftest import WORKSPACE, array, request

pytest.importorskip("jax")

Run = Callable[[dict[str, Any]], dict[str, Any]]


def test_import_error_names_the_users_line(run_capture: Run) -> None:
    result = run_capture(request("broken_import.py", "ok", array(4)))
    assert not result["ok"]
    error = result["error"]
    assert error["kind"] == "import"
    assert "RuntimeError: the dataset is missing" in error["message"]
    assert error["frame"]["path"] == str(WORKSPACE / "broken_import.py")
    assert error["frame"]["line"] == 12
    assert "Traceback" in error["traceback"]


def test_concretization_error_is_a_trace_error(run_capture: Run) -> None:
    result = run_capture(request("funcs.py", "concrete", array(4)))
    error = result["error"]
    assert error["kind"] == "trace"
    assert error["message"].startswith("tracing concrete failed: TracerBoolConversionError")
    assert "jaxlsp" not in error["message"]  # JAX's note about the worker's own wrapper is dropped
    frame = error["frame"]
    assert (frame["path"], frame["line"], frame["column"], frame["endColumn"]) == (
        str(WORKSPACE / "funcs.py"),
        54,
        7,
        18,
    )


def test_shape_error_is_a_trace_error(run_capture: Run) -> None:
    result = run_capture(request("funcs.py", "loss", array(3, 2), array(5, 4)))
    assert result["error"]["kind"] == "trace"
    assert result["error"]["frame"]["line"] == 60


def test_64_bit_without_x64_is_refused(run_capture: Run) -> None:
    result = run_capture(request("funcs.py", "double", array(4, dtype="float64")))
    assert result["error"]["kind"] == "refused"
    assert "x64" in result["error"]["message"]
    graph = run_capture(request("funcs.py", "double", array(4, dtype="float64"), x64=True))
    assert graph["ok"]
    assert {v["dtype"] for v in graph["graph"]["values"]} == {"float64"}


def test_missing_target_and_bad_ref(run_capture: Run) -> None:
    result = run_capture(request("funcs.py", "nope", array(4)))
    assert result["error"]["kind"] == "import" and "nope" in result["error"]["message"]
    req = request("funcs.py", "double", {"kind": "ref", "ref": "funcs:MISSING"})
    assert run_capture(req)["error"]["kind"] == "import"


def test_unknown_device_is_refused(run_capture: Run) -> None:
    result = run_capture(request("funcs.py", "double", array(4), device="tpu:0"))
    assert result["error"]["kind"] == "refused"
