"""Re-traces that skip the abstract init, checked by the trace itself.

A Linen target's capture spends a quarter to a half of its time in ``jax.eval_shape(model.init)``,
only to learn the shapes of its variables, which rarely change between two traces of the same
target. With the structure the last capture reported as a hint, the worker traces ``apply`` on
the hinted variables with no init, and checks each variable the call reads against its own
initialiser as it goes (worker/reuse/hints.py ``HintCheck``: a handful of cached abstract
initialiser calls, not a forward pass). When parameters changed shape or were added (a width, a
dtype, a layer more), or hinted statistics changed shape, the hinted trace goes on with the
shapes their initialisers give and the worker traces again on the repaired hint, checked as
strictly: two traces, no init. When the check fails otherwise (a layer removed, a new variable
that is no parameter, a change inside ``nn.scan``, the hint is garbage) the same
worker initialises for real and traces again. Either way the graph is as fresh as an unhinted
one, and identical to it (tests compare them).

Until 2026-12 a second child of the warm spare ran the real init beside the hinted trace and the
graph waited for it to agree: on two loaded cores that wait was most of a warm re-trace (0.5 s of
1.2 s on a 1,000-equation model, the init being a whole forward pass). No pygls here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.launch.supervise import CaptureOutcome


async def capture_speculatively(
    pool: SparePool,
    request: Mapping[str, Any],
    python: str,
    options: CaptureOptions,
    *,
    hint: Any,
    initialisers: Mapping[str, Any] | None = None,
) -> tuple[CaptureOutcome, bool]:
    """The capture's outcome, and whether the hint held or was repaired (the init was skipped).
    ``initialisers``: the library initialisers' outputs the target's last capture met
    (:func:`initialisers_of`), which the hint's check then need not run again."""
    if hint is None:
        return await pool.capture(request, python, options), False
    sent = {**request, "structureHint": hint}
    if initialisers:
        sent["initialisers"] = dict(initialisers)
    outcome = await pool.capture(sent, python, options)
    return outcome, outcome.ok and outcome.result.get("hint") in ("held", "repaired")


def is_init_snapshot(hint: Any) -> bool:
    """Whether a kept hint is an NNX or Equinox init's snapshot (worker/reuse/initsnap.py), which
    stands for running the constructor, rather than a structure the trace itself checks."""
    return isinstance(hint, dict) and str(hint.get("format", "")).startswith("jaxlsp.initsnap/")


def structure_of(outcome: CaptureOutcome) -> Any:
    """The hint a successful capture leaves for the next one (None: nothing to hint)."""
    return outcome.result.get("structure") if outcome.ok else None


def initialisers_of(outcome: CaptureOutcome, last: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
    """The library initialisers' outputs a successful capture's check met, for the next one; a
    capture that ran the real init met none, and ``last`` (those it was given) stay."""
    found = outcome.result.get("initialisers") if outcome.ok else None
    return found if isinstance(found, dict) else last
