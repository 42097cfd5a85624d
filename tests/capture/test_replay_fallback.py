"""The learned example as the fallback of a spelled learned call (issue 56): learning keeps the test
that reached every target, spelled or not (capture/inputs/learning.py, capture/inputs/replays.py);
a trace whose learned call fails where Python needs a value replays it instead
(capture/learnedretry.py ``replay_retry``), and planning (capture/inputs/plan.py) replays it first
from then on, while the failure holds and the replay itself did not fail. A spellable learned call
still comes first otherwise."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jaxlsp.capture import engine
from jaxlsp.capture.environment.interpreters import select_interpreter
from jaxlsp.capture.inputs import learning
from jaxlsp.capture.inputs.plan import plan
from jaxlsp.capture.inputs.replays import ReplayStore, replay_helps
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.learnedretry import replay_retry
from jaxlsp.capture.request import TraceFailure, TraceRequest
from jaxlsp.worker.protocol import ErrorKind, ExampleSpec

TABLE = {"kind": "function", "inputs": {"args": [{"kind": "array", "shape": [4]}]}}
FAILED = (
    "tracing fit failed: TracerBoolConversionError: Attempted boolean conversion of traced array with shape "
    "bool[]. See https://docs.jax.dev/en/latest/errors.html#jax.errors.TracerBoolConversionError"
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (root / "fit.py").write_text("def fit(x):\n    return x\n\n\ndef other(f, x):\n    return f(x)\n")
    (root / "tests" / "test_fit.py").write_text(
        "from fit import fit, other\n\n\ndef test_fit():\n    fit(1.0)\n    other(abs, 1.0)\n"
    )
    return root


def _record(root: Path, name: str, line: int, **extra: Any) -> dict[str, Any]:
    caller = root / "tests" / "test_fit.py"
    return {
        "path": str(root / "fit.py"),
        "name": name,
        "kind": "function",
        "test": "tests/test_fit.py::test_fit",
        "callsite": {"path": str(caller), "line": line},
        "sources": {str(caller): hashlib.sha256(caller.read_bytes()).hexdigest()},
        **extra,
    }


def _example(root: Path) -> ExampleSpec:
    path = root / "tests" / "test_fit.py"
    return {"kind": "test", "path": str(path), "text": "tests/test_fit.py", "tests": [str(path)]}


def _python(ws: Path) -> str:
    return select_interpreter(workspace_root=ws, request=sys.executable).python


def _request(ws: Path, cache: Path) -> TraceRequest:
    return TraceRequest(ws / "fit.py", "fit", ws, python=sys.executable, signature_cache=cache, run_examples=False)


def test_learning_keeps_the_example_of_spelled_calls_too(ws: Path, tmp_path: Path) -> None:
    spelled, unspelled = _record(ws, "fit", 5, table=TABLE), _record(ws, "other", 6)

    async def run(request: dict[str, Any], python: str, options: CaptureOptions) -> Any:
        ended = {"outcome": "finished", "message": "tests/test_fit.py finished", "unspelled": [unspelled]}
        return SimpleNamespace(result={"ok": True, "signatures": [spelled, dict(spelled)], "learn": ended})

    store = SignatureStore(ws, tmp_path / "cache")
    report = asyncio.run(learning.learn_async(ws, [_example(ws)], "/py/a", store=store, run=run))
    assert report.targets == ["fit.py::fit", "fit.py::other"]
    assert report.examples[0].learned == 3  # two calls of fit kept as signatures, other's example: as before
    replays = ReplayStore.beside(store)
    for name in ("fit", "other"):
        kept = replays.lookup("/py/a", ws / "fit.py", name)
        assert kept is not None and kept.text() == "tests/test_fit.py::test_fit", name


def test_a_remembered_failure_puts_the_replay_first_while_it_holds(ws: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    python = _python(ws)
    replays = ReplayStore(ws, cache)
    assert replays.add([_record(ws, "fit", 5)], python, _example(ws))
    assert SignatureStore(ws, cache).add([_record(ws, "fit", 5, table=TABLE)], python, "tests/test_fit.py") == 1
    assert plan(_request(ws, cache)).origin.line() == "inputs from a learned call at tests/test_fit.py:5 (learned)"

    why = "at fit.py:2: TracerBoolConversionError: Attempted boolean conversion"
    assert replays.mark_failed(python, ws / "fit.py", "fit", why, [])
    assert replays.failed_first(python, ws / "fit.py", "fit")
    first = plan(_request(ws, cache))
    assert (
        first.origin.line()
        == f"inputs from tests/test_fit.py::test_fit (learned example; the learned call failed {why})"
    )
    assert first.resolved.profile["example"]["text"] == "tests/test_fit.py::test_fit"

    assert replays.add([_record(ws, "fit", 5)], python, _example(ws))  # learned again: the failure stays
    assert replays.failed_first(python, ws / "fit.py", "fit")
    assert replays.mark_replay_failed(python, ws / "fit.py", "fit")  # the replay failed as well
    assert not replays.failed_first(python, ws / "fit.py", "fit")
    kept = replays.lookup(python, ws / "fit.py", "fit")
    assert kept is not None and replay_helps(kept.failed) is False
    assert (
        plan(_request(ws, cache)).origin.how == "learned"
        and "example" not in plan(_request(ws, cache)).resolved.profile
    )

    (ws / "fit.py").write_text("def fit(x):\n    return x + 1\n\n\ndef other(f, x):\n    return f(x)\n")
    kept = replays.lookup(python, ws / "fit.py", "fit")
    assert kept is not None and replay_helps(kept.failed) is None  # the target changed: tried afresh
    assert kept.note() == "inputs from tests/test_fit.py::test_fit (learned example)"
    assert not replays.mark_replay_failed(python, ws / "fit.py", "other")  # nothing remembered for it


def test_a_concretization_error_of_a_learned_call_replays_the_example(ws: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    python = _python(ws)
    ReplayStore(ws, cache).add([_record(ws, "fit", 5)], python, _example(ws))
    SignatureStore(ws, cache).add([_record(ws, "fit", 5, table=TABLE)], python, "tests/test_fit.py")
    prepared = engine.prepare(_request(ws, cache))
    assert prepared.origin is not None and prepared.origin.example is None  # the learned call

    frame = {"path": str(ws / "fit.py"), "line": 2}
    for other in (
        TraceFailure(ErrorKind.TRACE, "tracing fit failed: TypeError: unsupported operand", frame=frame),
        TraceFailure(ErrorKind.TIMEOUT, "the capture ran past its 60 s deadline"),
    ):
        assert replay_retry(prepared, other) is None  # not a value Python needed: the failure stands
    assert not ReplayStore(ws, cache).failed_first(python, ws / "fit.py", "fit")

    retried = replay_retry(prepared, TraceFailure(ErrorKind.TRACE, FAILED, frame=frame))
    assert retried is not None and retried.origin is not None
    assert retried.request["profile"]["example"]["text"] == "tests/test_fit.py::test_fit"
    assert retried.origin.line() == (
        "inputs from tests/test_fit.py::test_fit (learned example; the learned call failed at fit.py:2: "
        "TracerBoolConversionError: Attempted boolean conversion of traced array with shape bool[].)"
    )
    assert ReplayStore(ws, cache).failed_first(python, ws / "fit.py", "fit")  # the next trace replays first
    assert engine.prepare(_request(ws, cache)).origin.line() == retried.origin.line()

    assert replay_retry(retried, TraceFailure(ErrorKind.TRACE, FAILED, frame=frame)) is None  # failed there too
    assert not ReplayStore(ws, cache).failed_first(python, ws / "fit.py", "fit")
    assert replay_retry(prepared, TraceFailure(ErrorKind.TRACE, FAILED, frame=frame)) is None  # not run again
