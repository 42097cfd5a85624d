"""Re-traces that skip the abstract init, checked on the second core.

A Linen target's capture spends a quarter of its time in ``jax.eval_shape(model.init)``, only to
learn the shapes of its variables, which rarely change between two traces of the same target.
With the structure the last capture reported as a hint, two children of the warm spare run at
once: one traces with the hinted variables (no init), the other runs only the real abstract init
and reports the structure it finds. The first child's graph is kept only when the two
structures are equal; otherwise it is killed and the target is captured the usual way. Both
import the current files, so the graph is as fresh as an unhinted one, and identical to it (a
test compares them). No pygls here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from typing import Any

from jaxlsp.capture import phases
from jaxlsp.capture.options import CaptureOptions
from jaxlsp.capture.spare import SparePool
from jaxlsp.capture.supervise import CaptureOutcome


async def capture_speculatively(
    pool: SparePool, request: Mapping[str, Any], python: str, options: CaptureOptions, *, hint: Any
) -> tuple[CaptureOutcome, bool]:
    """The capture's outcome, and whether the hint held (the init was skipped)."""
    if hint is None:
        return await pool.capture(request, python, options), False
    traced = asyncio.ensure_future(pool.capture({**request, "structureHint": hint}, python, options))
    checked = asyncio.ensure_future(
        _unmarked(pool.capture({**request, "mode": "structure"}, python, replace(options, on_phase=None, on_log=None)))
    )
    try:
        check = await checked
        if traced.done():
            phases.mark("check")  # the traced capture had ended: how long its graph waited for the check
        if check.ok and check.result.get("structure") == hint:
            return await traced, True
        traced.cancel()  # the model changed, or its init fails: the usual capture says how
        with contextlib.suppress(asyncio.CancelledError):
            await traced
    except BaseException:
        for task in (traced, checked):
            task.cancel()
        await asyncio.gather(traced, checked, return_exceptions=True)  # both groups killed first
        raise
    return await pool.capture(request, python, options), False


async def _unmarked(work: Awaitable[CaptureOutcome]) -> CaptureOutcome:
    """``work`` outside the live trace's phases (capture/phases.py): the check is not the trace."""
    phases.CURRENT.set(None)  # this task's own copy of the context
    return await work


def structure_of(outcome: CaptureOutcome) -> Any:
    """The hint a successful capture leaves for the next one (None: nothing to hint)."""
    return outcome.result.get("structure") if outcome.ok else None
