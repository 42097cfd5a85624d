"""The one place the worker touches private JAX modules (``jax._src``): small, tested accessors,
one module per concern, gathered here as one face (``jaxcompat.user_frames``, ``jaxcompat.segment``).

Every function degrades gracefully: when an internal moves, the graph loses frames or scopes but
the capture still succeeds. ``tests/worker/tracing/test_jaxcompat.py`` pins the behaviour.

- ``frames``: source information (user frames, name stacks, equation contexts);
- ``runtime``: backends, meshes, shardings, caches, params, costs and HLO text, tracer probes,
  the linear input check;
- ``staged``, ``linear``, ``partial``: a call's equations recorded and replayed under a staging
  trace, a linearization and a partial evaluation (``worker/reuse/replay.py``);
- ``transpose``: transposition rules memoised for a gradient of repeated layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxlsp.worker.tracing.jaxcompat.frames import RawFrame, equation_context, name_stack_items, user_frames
from jaxlsp.worker.tracing.jaxcompat.linear import (
    LinearSegment,
    current_name_stack,
    linear_mark,
    linear_replay,
    linear_segment,
    linearize_trace,
    linearized_input,
    staging_context,
    tangent_prefix,
)
from jaxlsp.worker.tracing.jaxcompat.partial import (
    PartialSegment,
    partial_input,
    partial_mark,
    partial_replay,
    partial_segment,
    partial_trace,
)
from jaxlsp.worker.tracing.jaxcompat.runtime import (
    backends_initialized,
    bind_params,
    bound_axes,
    cheap_tracer_probes,
    cost_dict,
    hlo_cost_analysis,
    hlo_text,
    jaxpr_as_fun,
    linear_input_check,
    own_caches,
    surrounding_mesh,
    typed_sharding,
    warm,
)
from jaxlsp.worker.tracing.jaxcompat.staged import (
    Segment,
    emit,
    frame_mark,
    inputs_named,
    own_prefix,
    replay,
    segment,
    staged_input,
    staged_since,
    staging_trace,
)
from jaxlsp.worker.tracing.jaxcompat.transpose import TransposeMemo

if TYPE_CHECKING:  # the types of what these functions take and give (jax's own, named here)
    from jaxlsp.worker.tracing.jaxcompat.linear import LinearInput as LinearInput
    from jaxlsp.worker.tracing.jaxcompat.linear import LinearMark as LinearMark
    from jaxlsp.worker.tracing.jaxcompat.partial import PartialInput as PartialInput
    from jaxlsp.worker.tracing.jaxcompat.partial import PartialMark as PartialMark
    from jaxlsp.worker.tracing.jaxcompat.staged import FrameMark as FrameMark
    from jaxlsp.worker.tracing.jaxcompat.staged import NameItem as NameItem
    from jaxlsp.worker.tracing.jaxcompat.staged import Spec as Spec
    from jaxlsp.worker.tracing.jaxcompat.staged import StagedEqn as StagedEqn

__all__ = [
    "LinearSegment",
    "PartialSegment",
    "RawFrame",
    "Segment",
    "TransposeMemo",
    "backends_initialized",
    "bind_params",
    "bound_axes",
    "cheap_tracer_probes",
    "cost_dict",
    "current_name_stack",
    "emit",
    "equation_context",
    "frame_mark",
    "hlo_cost_analysis",
    "hlo_text",
    "inputs_named",
    "jaxpr_as_fun",
    "linear_input_check",
    "linear_mark",
    "linear_replay",
    "linear_segment",
    "linearize_trace",
    "linearized_input",
    "name_stack_items",
    "own_caches",
    "own_prefix",
    "partial_input",
    "partial_mark",
    "partial_replay",
    "partial_segment",
    "partial_trace",
    "replay",
    "segment",
    "staged_input",
    "staged_since",
    "staging_context",
    "staging_trace",
    "surrounding_mesh",
    "tangent_prefix",
    "typed_sharding",
    "user_frames",
    "warm",
]
