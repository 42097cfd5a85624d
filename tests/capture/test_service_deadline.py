"""The capture service's time limit for a run of one of the workspace's examples."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jaxlsp.capture.engine import Prepared, TraceFailure
from jaxlsp.capture.launch.options import DEFAULT_TIMEOUT, EXAMPLE_TIMEOUT, CaptureOptions
from jaxlsp.capture.service import CaptureService
from jaxlsp.worker.protocol import ErrorKind


@pytest.mark.parametrize(
    ("profile", "options", "expected"),
    [
        ({}, CaptureOptions(), DEFAULT_TIMEOUT),
        ({"example": {"kind": "test", "path": "t.py", "text": "t.py"}}, CaptureOptions(), EXAMPLE_TIMEOUT),
        ({"example": {"kind": "test", "path": "t.py", "text": "t.py"}}, CaptureOptions(7, example_timeout=7), 7),
    ],
)
def test_an_example_run_gets_the_example_time_limit(
    monkeypatch: pytest.MonkeyPatch, profile: dict[str, Any], options: CaptureOptions, expected: float
) -> None:
    """A run of a test or script up to the target's call counts the example's own work, so it gets
    300 s unless the caller set a limit (``--timeout``, ``jaxlsp.timeout`` set both)."""
    seen: list[float] = []

    async def capture(self: CaptureService, prepared: Prepared, options: CaptureOptions) -> Any:
        seen.append(options.timeout)
        raise TraceFailure(ErrorKind.INTERNAL, "stopped here")

    monkeypatch.setattr(CaptureService, "capture", capture)
    prepared = Prepared({"profile": profile, "target": {"path": "m.py", "name": "f"}}, "python", None)  # type: ignore[arg-type]
    with pytest.raises(TraceFailure):
        asyncio.run(CaptureService(warm=False).run(prepared, options))
    assert seen == [expected]
