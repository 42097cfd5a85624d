"""How long each example of a learn may run (``capture/inputs/learning.py``).

An example's limit keeps one slow example from taking the others' time. On jax-resnet (a Flax
Linen library with one test file that can run, 26 ResNet inits), the file was stopped at the
default 120 s of a 900 s budget, with 5 of the 14 targets its tests call learned: where the budget
holds fewer rounds of examples than it has room for, the default limit grows to each one's share.
A limit the caller gives (``jaxlsp learn --timeout``) holds as given.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jaxlsp.capture.inputs import learning
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.worker.protocol import ExampleSpec


def _limits(tmp_path: Path, count: int, **options: Any) -> list[float]:
    """The time limit each of ``count`` test files was run with, two side by side, in a learn
    whose runs end at once."""
    seen: list[float] = []

    async def run(request: dict[str, Any], python: str, capture: CaptureOptions) -> Any:
        seen.append(float(capture.example_timeout or 0))
        ended = {"outcome": "finished", "message": f"{request['profile']['example']['text']} finished"}
        return SimpleNamespace(result={"ok": True, "signatures": [], "learn": ended})

    examples: list[ExampleSpec] = []
    for i in range(count):
        path = tmp_path / "tests" / f"test_{i}.py"
        examples.append({"kind": "test", "path": str(path), "text": f"tests/test_{i}.py", "tests": [str(path)]})
    store = SignatureStore(tmp_path, tmp_path / "cache")
    report = asyncio.run(learning.learn_async(tmp_path, examples, "python", store=store, jobs=2, run=run, **options))
    assert len(report.examples) == count
    return seen


def test_one_test_file_may_use_the_budget(tmp_path: Path) -> None:
    [limit] = _limits(tmp_path, 1, budget=900.0)
    assert limit > 800.0  # the budget, less the moment the learn took to start it


def test_each_example_gets_its_share_of_the_budget(tmp_path: Path) -> None:
    assert learning.example_limit(120.0, 900.0, 10, 2) == pytest.approx(180.0)
    assert max(_limits(tmp_path, 10, budget=900.0)) <= 180.0


def test_many_examples_keep_the_default_limit(tmp_path: Path) -> None:
    assert learning.example_limit(120.0, 900.0, 40, 2) == learning.EXAMPLE_TIMEOUT
    assert set(_limits(tmp_path, 40, budget=900.0)) == {learning.EXAMPLE_TIMEOUT}


def test_a_limit_the_caller_gives_holds(tmp_path: Path) -> None:
    assert _limits(tmp_path, 1, budget=900.0, example_timeout=30.0) == [30.0]
