"""Shared helpers of the capture worker tests: requests for the fixture workspace, in-process capture."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "capture"


def array(*shape: int | str, dtype: str = "float32") -> dict[str, Any]:
    return {"kind": "array", "shape": list(shape), "dtype": dtype, "generator": {"kind": "normal"}}


def static(value: Any) -> dict[str, Any]:
    return {"kind": "static", "value": value}


def request(
    file: str,
    name: str,
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    workspace: Path = WORKSPACE,
    kind: str | None = None,
    **profile: Any,
) -> dict[str, Any]:
    """A worker request for ``workspace/file::name`` with these call arguments (input specs);
    ``kind`` names the target kind (None: the worker infers it), ``profile`` adds profile keys."""
    prof: dict[str, Any] = {
        "name": None,
        "device": "cpu",
        "seed": 0,
        "x64": False,
        "inputs": {"args": list(args), "kwargs": kwargs or {}},
        "load": "module",
    }
    prof.update(profile)
    target: dict[str, Any] = {"path": str(workspace / file), "name": name}
    if kind is not None:
        target["kind"] = kind
    return {
        "target": target,
        "profile": prof,
        "workspaceRoot": str(workspace),
        "resultFd": -1,
    }


def in_fresh_python(script: str, req: dict[str, Any]) -> Any:
    """Run ``script`` in a fresh interpreter (``-B``) in the fixture workspace, with ``req`` as its
    one argument (JSON, in the compact transport the server asks for), and return what its last
    line printed (JSON): for a warm spare's forks, which this process (it may have started an
    XLA backend) must not make itself."""
    import json
    import subprocess

    from tests.deadlines import scaled

    done = subprocess.run(
        [sys.executable, "-B", "-c", script, json.dumps({**req, "transport": "packed"})],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
        cwd=str(WORKSPACE),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def run_capture() -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """``capture()`` in this process, with ``sys.path``, ``sys.modules`` and the cwd restored after."""
    from jaxlsp.worker.process.main import capture

    path, cwd = list(sys.path), os.getcwd()
    modules = set(sys.modules)

    def run(req: dict[str, Any]) -> dict[str, Any]:
        return dict(capture(req))

    yield run
    sys.path[:] = path
    os.chdir(cwd)
    for name in set(sys.modules) - modules:
        module = sys.modules.get(name)
        file = str(getattr(module, "__file__", "") or "")
        if file.startswith(str(WORKSPACE)):
            del sys.modules[name]


def graph_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["ok"], result.get("error")
    graph: dict[str, Any] = result["graph"]
    return graph
