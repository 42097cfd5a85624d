"""The one place the worker touches private JAX modules (``jax._src``): small, tested accessors.

Every function degrades gracefully: when an internal moves, the graph loses frames or scopes but
the capture still succeeds. ``tests/capture/worker/test_jaxcompat.py`` pins the behaviour.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
from collections.abc import Callable
from typing import Any, NamedTuple


class RawFrame(NamedTuple):
    """A user frame as JAX records it: 1-based lines, 0-based UTF-8 byte columns."""

    file: str
    function: str
    line: int
    column: int
    end_line: int
    end_column: int


# Keyed by (code, file, instruction): code objects compare by value, and two files holding the
# same function (a copied model file) have equal code objects that differ only in co_filename.
_FRAME_CACHE: dict[tuple[Any, str, int], RawFrame | None] = {}
_TRACEBACK_CACHE: dict[Any, list[RawFrame]] = {}


def user_frames(source_info: Any) -> list[RawFrame]:
    """The user frames of an equation's ``source_info``, innermost first (jax-internal frames removed).

    Same result as ``source_info_util.user_frames``, with each (code, instruction) converted once:
    a large model repeats the same few hundred frames in thousands of tracebacks.
    """
    traceback = getattr(source_info, "traceback", None)
    if traceback is None:
        return []
    try:
        cached = _TRACEBACK_CACHE.get(traceback)
    except TypeError:  # an unhashable traceback (another jaxlib): no whole-traceback caching
        cached = None
        traceback_key = None
    else:
        traceback_key = traceback
    if cached is not None:
        return cached
    try:
        from jax._src import source_info_util as siu

        codes, lastis = traceback.raw_frames()
    except Exception:
        return _user_frames_slow(traceback)
    out: list[RawFrame] = []
    for code, lasti in zip(codes, lastis, strict=False):
        key = (code, code.co_filename, lasti)
        if key in _FRAME_CACHE:
            frame = _FRAME_CACHE[key]
        else:
            frame = None
            try:
                if siu.is_user_filename(code.co_filename):
                    frame = _raw(siu.raw_frame_to_frame(code, lasti))
            except Exception:
                frame = None
            _FRAME_CACHE[key] = frame
        if frame is not None:
            out.append(frame)
    if traceback_key is not None:
        # Tracebacks compare by content: a gradient's transposed equations and repeated layers
        # share them, so each distinct stack is walked once.
        _TRACEBACK_CACHE[traceback_key] = out
    return out


def _user_frames_slow(traceback: Any) -> list[RawFrame]:
    try:
        from jax._src import source_info_util

        return [_raw(f) for f in source_info_util.user_frames(traceback)]
    except Exception:
        return []


def _raw(f: Any) -> RawFrame:
    line = int(getattr(f, "start_line", 0) or 0)
    return RawFrame(
        file=str(getattr(f, "file_name", "")),
        function=str(getattr(f, "function_name", "")),
        line=line,
        column=int(getattr(f, "start_column", 0) or 0),
        end_line=int(getattr(f, "end_line", line) or line),
        end_column=int(getattr(f, "end_column", 0) or 0),
    )


def name_stack_items(source_info: Any) -> list[tuple[str, str]]:
    """The equation's name stack as ``(kind, name)`` pairs, kind ``"scope"`` or ``"transform"``."""
    stack = getattr(getattr(source_info, "name_stack", None), "stack", None)
    if stack is None:
        return []
    items: list[tuple[str, str]] = []
    for item in stack:
        name = str(getattr(item, "name", item))
        kind = "transform" if type(item).__name__ == "Transform" else "scope"
        items.append((kind, name))
    return items


def equation_context(eqn: Any) -> Any:
    """The context an equation runs under when evaluated (``eqn.ctx.manager``: the PRNG
    implementation's partitioning, XLA metadata), as ``jax.core.eval_jaxpr`` enters it; a null
    context when this jax has none."""
    import contextlib

    manager = getattr(getattr(eqn, "ctx", None), "manager", None)
    return manager if manager is not None else contextlib.nullcontext()


def backends_initialized() -> bool:
    """Whether an XLA backend exists in this process (forking after that is unsafe)."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:
        return True


def warm() -> None:
    """Compile JAX's user-frame patterns once, in the warm spare, instead of in every forked capture
    (2-3 ms: a third of a small model's graph building). They are rebuilt when a library the user
    imports registers another exclusion, as JAX clears them then."""
    try:
        from jax._src import source_info_util as siu

        siu._exclude_path_regex()
        siu._include_path_regex()
    except Exception:
        pass


def bound_axes() -> list[tuple[Any, int]]:
    """The named axes bound where this runs (``jax.vmap(f, axis_name="batch")`` around a call),
    with their sizes: a call traced on its own needs them bound again (``make_jaxpr``'s
    ``axis_env``), else its collectives fail with "unbound axis name". Empty when none are bound
    or JAX keeps them elsewhere."""
    try:
        from jax._src import core

        sizes = core.get_axis_env().axis_sizes  # type: ignore[no-untyped-call]
        return [(name, int(size)) for name, size in sizes.items() if isinstance(size, int)]
    except Exception:
        return []


def surrounding_mesh() -> Callable[[], contextlib.AbstractContextManager[Any]] | None:
    """The mesh set where this runs (``with jax.set_mesh(mesh):``, ``jax.sharding.use_abstract_mesh``,
    or the older ``with mesh:``), as a function that enters it again: JAX keeps it per thread, so
    a call traced on its own in another thread needs it entered there, else raw
    ``PartitionSpec``s and NNX's ``out_sharding`` fail for want of a mesh. None when none is set."""
    try:
        import jax
        from jax._src import mesh as mesh_lib

        concrete = mesh_lib.get_concrete_mesh()
        if concrete is not None and not concrete.empty and hasattr(jax, "set_mesh"):
            return lambda: jax.set_mesh(concrete)
        abstract = mesh_lib.get_abstract_mesh()
        if abstract is not None and not abstract.empty and hasattr(jax.sharding, "use_abstract_mesh"):
            return lambda: jax.sharding.use_abstract_mesh(abstract)
        legacy = mesh_lib.thread_resources.env.physical_mesh
        if legacy is not None and not legacy.empty:
            return lambda: legacy
    except Exception:
        return None  # JAX keeps it elsewhere: the trace runs without it, as before
    return None


def typed_sharding(x: Any) -> Any:
    """The sharding that is part of ``x``'s type (``jax.typeof(x).sharding``), when its mesh has
    explicit axes and is the mesh set here (``jax.set_mesh`` of a mesh with ``AxisType.Explicit``):
    under such a mesh an abstract copy of ``x`` without it is another type, and operations that
    need equal shardings fail (``select 'which' must be scalar or have the same sharding as
    cases``). None otherwise: a sharding that is no part of the type, or of another mesh, is left
    out of the abstract copy, as before."""
    try:
        import jax
        from jax._src import mesh as mesh_lib

        sharding = getattr(jax.typeof(x), "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        if mesh is None or getattr(mesh, "empty", True) or not getattr(mesh, "_any_axis_explicit", False):
            return None
        return sharding if mesh == mesh_lib.get_abstract_mesh() else None
    except Exception:
        return None


_OWN_CACHES: Any = None


def own_caches() -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A context, entered in the thread that traces a call it found paused in another thread,
    under which JAX's tracing caches miss everything that thread has in flight. The example's
    thread is paused inside the trace of the target's own ``jit`` (``@nn.jit`` over
    ``@nn.compact``, ``@nnx.jit`` or ``@eqx.filter_jit`` on ``__call__``): JAX holds that cache
    entry until its trace ends, and the same function traced here on the same shapes waited on it
    for ever. ``jax.make_user_context`` adds a value to every cache key; made here, in the paused
    example's thread (making one is not thread-safe). A null context where this JAX has none."""
    global _OWN_CACHES
    import jax

    make = getattr(jax, "make_user_context", None)
    if make is None:
        return contextlib.nullcontext
    if _OWN_CACHES is None:
        _OWN_CACHES = make(default_value=None)
    context = _OWN_CACHES
    return lambda: context("jaxlsp-first-call")


def bind_params(eqn: Any) -> dict[str, Any]:
    """The params to ``bind`` an equation's primitive with (``get_bind_params``: custom_jvp/vjp
    keep their rules there). Older JAX returned ``(subfuns, params)``: those with no subfuns fit."""
    get = getattr(eqn.primitive, "get_bind_params", None)
    if get is None:
        return dict(eqn.params)
    got = get(eqn.params)
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], dict):
        subfuns, params = got
        if subfuns:
            raise TypeError(f"{eqn.primitive.name} binds with sub-functions")
        return dict(params)
    return dict(got)


def cost_dict(analysis: Any) -> dict[str, Any]:
    """``Lowered.cost_analysis()`` as one dict (older JAX returned a list with one per device)."""
    if isinstance(analysis, list | tuple):
        analysis = analysis[0] if analysis else {}
    return dict(analysis or {})


def jaxpr_as_fun(closed: Any) -> Any:
    """The traced program as a function of its inputs (``jax.extend.core.jaxpr_as_fun``)."""
    try:
        from jax.extend.core import jaxpr_as_fun as as_fun
    except ImportError:  # jax < 0.4.36
        from jax.core import jaxpr_as_fun as as_fun  # type: ignore[attr-defined,no-redef]
    return as_fun(closed)


def hlo_text(lowered: Any) -> str:
    """The HLO text of a ``jax.jit(...).lower(...)`` result (its computations, ENTRY last)."""
    hlo: Any = importlib.import_module("jaxlib._hlo")  # the HLO printer and parser jaxlib ships

    options = hlo.HloPrintOptions()
    options.print_metadata = False  # source positions refer to tables the parser would then lack
    options.print_large_constants = True  # "{...}" would not parse back
    return str(lowered._lowering.hlo().as_hlo_module().to_string(options))


def hlo_cost_analysis(text: str) -> dict[str, Any]:
    """XLA's cost analysis of an HLO module given as text, as ``Lowered.cost_analysis()`` runs it.
    A backend with no analysis of its own (a PJRT plugin: CUDA) leaves it to the CPU backend's,
    which counts the same HLO; when neither works the error goes up (the equation is then
    lowered alone, and compiled if it must be)."""
    from jax._src import xla_bridge
    from jax._src.lib import _jax  # type: ignore[attr-defined]

    hlo: Any = importlib.import_module("jaxlib._hlo")
    module = hlo.hlo_module_from_text(text)
    try:
        return dict(_jax.hlo_module_cost_analysis(xla_bridge.get_backend(), module))
    except Exception:
        return dict(_jax.hlo_module_cost_analysis(xla_bridge.get_backend("cpu"), module))


# Tracer attributes that only concrete arrays have, whose AttributeError libraries probe for with
# ``getattr(x, "sharding", None)`` (Flax NNX does on every write to a Variable: each RNG draw).
_PROBED_ATTRIBUTES = ("sharding", "device")


class _TracerAttributeError(AttributeError):
    """JAX's AttributeError for a tracer's ``sharding`` / ``device``, its text made when shown.

    JAX writes the text eagerly, and its origin part (which operation the value came from) walks
    every equation traced so far: a probe that is caught and discarded cost O(equations), and a
    model whose construction draws N keys under ``nnx.eval_shape`` took O(N x equations) (16 of the
    23 s of a Qwen3-1.7B's abstract init). The text, when someone reads it, is JAX's own."""

    def __init__(self, tracer: Any, attribute: str) -> None:
        super().__init__(attribute)
        self._tracer: Any = tracer
        self._attribute = attribute
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            tracer, origin = self._tracer, ""
            with contextlib.suppress(Exception):
                origin = tracer._origin_msg()
            self._text = f"The '{self._attribute}' attribute is not available on {tracer._error_repr()}.{origin}"
        return self._text


@contextlib.contextmanager
def cheap_tracer_probes() -> Any:
    """Within the block, ``getattr(tracer, "sharding", None)`` (and ``device``) costs O(1): see
    :class:`_TracerAttributeError`. Nothing changes when this jax defines them otherwise."""
    try:
        from jax._src import core
    except ImportError:
        yield
        return
    tracer_type: Any = getattr(core, "Tracer", None)
    saved: dict[str, Any] = {}
    for name in _PROBED_ATTRIBUTES:
        attr = tracer_type.__dict__.get(name) if isinstance(tracer_type, type) else None
        if isinstance(attr, property) and hasattr(tracer_type, "_origin_msg") and hasattr(tracer_type, "_error_repr"):
            saved[name] = attr
    for name in saved:

        def probe(self: Any, _name: str = name) -> Any:
            raise _TracerAttributeError(self, _name)

        setattr(tracer_type, name, property(probe, doc=saved[name].__doc__))
    try:
        yield
    finally:
        for name, attr in saved.items():
            setattr(tracer_type, name, attr)


# -- A quadratic check of jax's partial evaluation made linear -----------------------------------

#: ``pe.tracers_to_jaxpr`` checks that each input it meets is one of the inputs by walking all of
#: them: quadratic in a function's inputs. Flax's ``nn.scan`` partially evaluates its body, whose
#: inputs are every scanned parameter: at 1,492 layers a stage (13,000 inputs) that check was 90
#: million identity tests, a third of the trace. The same test against a set of their ids.
_INPUT_CHECK = "      if not any(t is in_tracer for in_tracer in in_tracers):"
_INPUT_CHECK_FAST = "      if id(t) not in in_ids:"
_REACHABLE = "  tracers = reachable((*in_tracers, *out_tracers, *effect_handles))"
_REACHABLE_IDS = _REACHABLE + "; in_ids = set(map(id, in_tracers))"
_LINEAR_CHECK: list[Any] = []  # [jax's own function, ours] once installed


def linear_input_check() -> bool:
    """Put a copy of ``pe.tracers_to_jaxpr`` whose input check looks ids up in a set in jax's
    place, for good (the worker's process): made from the installed jax's own source with those
    two lines changed (each on its line, so tracebacks keep their line numbers), and only when
    both lines read as expected. False when not installed (another jax: its own check runs)."""
    if _LINEAR_CHECK:
        return True
    try:
        import inspect

        from jax._src.interpreters import partial_eval as pe

        original = pe.tracers_to_jaxpr
        lines, first = inspect.getsourcelines(original)
        source = "".join(lines)
        if source.count(_INPUT_CHECK + "\n") != 1 or source.count(_REACHABLE + "\n") != 1:
            return False
        source = source.replace(_INPUT_CHECK + "\n", _INPUT_CHECK_FAST + "\n").replace(
            _REACHABLE + "\n", _REACHABLE_IDS + "\n"
        )
        made: dict[str, Any] = {}
        code = compile("\n" * (first - 1) + source, inspect.getsourcefile(original) or "<jax>", "exec")
        exec(code, pe.__dict__, made)
        fast = made[original.__name__]
        fast.__doc__, fast.__wrapped__ = original.__doc__, original
        pe.tracers_to_jaxpr = fast
        _LINEAR_CHECK.extend([original, fast])
        return True
    except Exception:
        return False


# -- Staged equations, recorded and replayed (worker/replay.py) ------------------------------------


class Segment(NamedTuple):
    """The equations one call added to a staging trace, in order, held as data: no tracer of that
    trace, so that holding a segment keeps no equation alive past jax's dead-code elimination.

    ``eqns``: ``(primitive, params, effects, ctx, traceback, name stack after the call's prefix,
    inputs, output avals)``, each input ``("lit", literal)``, ``("in", i)`` (the call's i-th input)
    or ``("eq", j, k)`` (output k of equation j); ``outputs``: the call's results, spelled alike."""

    eqns: list[tuple[Any, ...]]
    outputs: list[tuple[Any, ...]]


def staging_trace() -> Any | None:
    """The current trace when it is one that stages a jaxpr (``make_jaxpr``'s, a scan body's),
    else None (a JVP, a vmap, eager evaluation, or a jax whose internals moved)."""
    try:
        from jax._src import core
        from jax._src.interpreters import partial_eval as pe

        trace = core.trace_ctx.trace
        if type(trace) is not pe.DynamicJaxprTrace:
            return None
        frame = trace.frame
        if not isinstance(frame.tracing_eqns, list):
            return None
        return trace
    except Exception:
        return None


def staged_input(x: Any, trace: Any) -> tuple[Any, Any] | None:
    """``(tracer, variable)`` standing for ``x`` in ``trace`` when ``x`` is an unknown value there:
    a tracer of ``trace`` (no literal, no constant: jax folds operations on those), or a tracer of
    an enclosing trace that ``trace`` already took in (a scan body's broadcast operand, which the
    body reads as a constant of its own); else None."""
    try:
        from jax._src import core
        from jax._src.interpreters import partial_eval as pe

        if not isinstance(x, core.Tracer):
            return None
        if type(x) is pe.DynamicJaxprTracer and x._trace is trace:
            atom = x.val
            if type(atom) is not core.Var or atom in trace.frame.constvar_to_val or atom.aval.has_qdd:
                return None
            return x, atom
        inner = trace.frame.constid_to_tracer.get(id(x))  # taken in before: the body's own tracer
        if inner is None or trace.frame.constvar_to_val.get(inner.val) is not x or inner.val.aval.has_qdd:
            return None
        return inner, inner.val
    except Exception:
        return None


def frame_mark(trace: Any) -> tuple[Any, ...]:
    """Where ``trace``'s frame stands: equations so far, and what a call must leave as it was to
    be replayed (arguments, effects, mutable state, higher-order types)."""
    frame = trace.frame
    eqns, qdds = len(frame.tracing_eqns), len(frame.mutable_qdds)
    return (eqns, len(frame.invars), frame.is_high, qdds, frozenset(frame.effects))


def _staged_since(
    frame: Any, start: int, where: dict[Any, tuple[Any, ...]], prefix: tuple[Any, ...], end: int | None = None
) -> tuple[list[tuple[Any, ...]], dict[Any, tuple[Any, ...]]] | None:
    """The live equations of ``frame`` from ``start`` on, as data: each input a literal, a value
    ``where`` names, or an output of an earlier one of them; their outputs (``made``). None when
    an equation has an effect, reads any other value, or is staged outside the name stack
    ``prefix`` (compared with its items' types: Scope and Transform are equal named tuples)."""
    import weakref

    from jax._src import core
    from jax._src.interpreters import partial_eval as pe

    cut = len(prefix)
    typed = [(type(item), item) for item in prefix]
    made: dict[Any, tuple[Any, ...]] = {}
    eqns: list[tuple[Any, ...]] = []
    for ref in frame.tracing_eqns[start:end]:
        eqn = ref() if isinstance(ref, weakref.ReferenceType) else ref
        if eqn is None:  # dead already: a trace of the call would have dropped it too
            continue
        if type(eqn) is not pe.TracingEqn or eqn.effects:
            return None
        source = eqn.source_info
        stack = source.name_stack.stack
        if len(stack) < cut or any(type(a) is not t or a != b for a, (t, b) in zip(stack, typed, strict=False)):
            return None
        ins: list[tuple[Any, ...]] = []
        for tracer in eqn.in_tracers:
            atom = tracer.val
            if type(atom) is core.Literal:
                ins.append(("lit", atom))
            elif atom in made:
                ins.append(made[atom])
            elif atom in where:
                ins.append(where[atom])
            else:  # a constant, or a value the call reached other than through its inputs
                return None
        for k, var in enumerate(eqn.outvars):
            if var.aval.has_qdd:
                return None
            made[var] = ("eq", len(eqns), k)
        avals = [var.aval for var in eqn.outvars]
        suffix = tuple(stack[cut:])
        eqns.append((eqn.primitive, eqn.params, eqn.effects, eqn.ctx, source.traceback, suffix, ins, avals))
    return eqns, made


def _inputs_named(variables: list[Any]) -> dict[Any, tuple[Any, ...]]:
    """Each input variable as a segment spells it, ``("in", i)``: the first input it is."""
    where: dict[Any, tuple[Any, ...]] = {}
    for i, var in enumerate(variables):
        where.setdefault(var, ("in", i))
    return where


def _own(prefix: tuple[Any, ...], own: str | None) -> tuple[Any, ...]:
    from jax._src import source_info_util as siu

    return prefix if own is None else (*prefix, siu.Scope(own))


def segment(
    trace: Any,
    mark: tuple[Any, ...],
    inputs: list[Any],
    outputs: list[Any],
    prefix: tuple[Any, ...],
    own: str | None = None,
    originals: list[Any] | None = None,
) -> Segment | None:
    """The equations ``trace`` staged since ``mark``, as a :class:`Segment` over ``inputs`` (the
    call's input variables) giving ``outputs`` (its result tracers); None when the call did
    anything a replay would not repeat: an effect, a new constant or argument, a read of a value
    that is no input, an equation outside the name stack ``prefix`` (followed by the scope
    ``own``, when given: the call's own, which a replay renames), a result that is no tracer."""
    try:
        from jax._src.interpreters import partial_eval as pe

        frame = trace.frame
        if frame_mark(trace)[1:] != mark[1:]:
            return None
        where = _inputs_named(inputs)
        staged = _staged_since(frame, mark[0], where, _own(prefix, own))
        if staged is None:
            return None
        eqns, made = staged
        passed = {id(value): i for i, value in reversed(list(enumerate(originals or [])))}
        outs: list[tuple[Any, ...]] = []
        for out in outputs:
            if id(out) in passed:  # an input returned as it came (an enclosing trace's value)
                outs.append(("arg", passed[id(out)]))
                continue
            if type(out) is not pe.DynamicJaxprTracer or out._trace is not trace:
                return None
            spec = made.get(out.val) or where.get(out.val)
            if spec is None:
                return None
            outs.append(spec)
        return Segment(eqns, outs)
    except Exception:
        return None


def _emit(
    trace: Any,
    eqns: list[tuple[Any, ...]],
    resolve: Callable[[tuple[Any, ...]], Any],
    prefix: tuple[Any, ...],
    *,
    traceback: Any = None,
    stack: Any = None,
    made: list[list[Any]] | None = None,
    before: Callable[[list[list[Any]]], None] | None = None,
) -> list[list[Any]]:
    """Stage ``eqns`` (a segment's, see :class:`Segment`) in ``trace`` under the name stack
    ``prefix`` (``stack``: the one to use as it is where an equation's suffix is empty), each with
    its recorded traceback or ``traceback``; ``resolve`` gives the tracers of the inputs that are
    no literal and no earlier equation's. The outputs, appended to ``made`` (the caller's, to
    resolve its own specs with), equation by equation; ``before(made)`` runs ahead of each."""
    from jax._src import source_info_util as siu
    from jax._src.interpreters import partial_eval as pe

    made = [] if made is None else made
    # one name stack per scope, as a trace shares one among the equations staged in it (the
    # graph builder places equations by name stack: once each)
    stacks: dict[tuple[Any, ...], Any] = {} if stack is None else {(): stack}
    for primitive, params, effects, ctx, recorded, suffix, ins, avals in eqns:
        if before is not None:
            before(made)
        named = stacks.get(suffix)
        if named is None:
            named = stacks[suffix] = siu.NameStack(prefix + suffix)
        source = siu.SourceInfo(recorded if traceback is None else traceback, named)
        tracers = []
        for spec in ins:
            if spec[0] == "eq":
                tracers.append(made[spec[1]][spec[2]])
            elif spec[0] == "lit":
                tracers.append(pe.DynamicJaxprTracer(trace, spec[1].aval, spec[1], source))
            else:
                tracers.append(resolve(spec))
        made.append(trace.emit_eqn(tracers, avals, primitive, params, effects, source, ctx))
    return made


def replay(
    trace: Any,
    seg: Segment,
    inputs: list[Any],
    prefix: tuple[Any, ...],
    own: str | None = None,
    originals: list[Any] | None = None,
) -> list[Any]:
    """Stage ``seg``'s equations again in ``trace`` on ``inputs`` (tracers, in the recorded call's
    order; ``originals``: the values passed, where a segment returns one as it came), under the
    name stack ``prefix`` and the scope ``own`` (when the segment was recorded with one), each with
    its recorded traceback: the equations a trace of the same call would stage. The results, in
    order."""
    made = _emit(trace, seg.eqns, lambda spec: inputs[spec[1]], _own(prefix, own))
    out: list[Any] = []
    for spec in seg.outputs:
        if spec[0] == "arg":
            assert originals is not None
            out.append(originals[spec[1]])
        else:
            out.append(inputs[spec[1]] if spec[0] == "in" else made[spec[1]][spec[2]])
    return out


# -- The same under a gradient: jax's direct linearization over two staging traces ------------------


class LinearSegment(NamedTuple):
    """A call recorded under :func:`linearize_trace`: the equations it staged in the primal trace
    (as a :class:`Segment`'s), the residuals the tangent trace took in during the call, in order
    (each ``("pin", i)``: input i's primal, or ``("eq", j, k)``: a primal equation's output), the
    tangent equations (their inputs also ``("tin", i)``: input i's tangent, ``("lifted", i)``: input
    i's primal taken in before the call, ``("const", c)``: residual c), and per output its primal
    and tangent (None: a symbolic zero, the output is its primal alone)."""

    primal: list[tuple[Any, ...]]
    residuals: list[tuple[Any, ...]]
    tangent: list[tuple[Any, ...]]
    outputs: list[tuple[tuple[Any, ...], tuple[Any, ...] | None]]


def linearize_trace() -> Any | None:
    """The current trace when it is jax's direct linearization (a gradient's forward pass) with a
    staging trace for the primal values (``make_jaxpr``'s) and one for the tangents, else None."""
    try:
        from jax._src import core
        from jax._src.interpreters import ad
        from jax._src.interpreters import partial_eval as pe

        trace = core.trace_ctx.trace
        if type(trace) is not ad.LinearizeTrace or not isinstance(trace._name_stack_prefix_len, int):
            return None
        if (
            type(trace.parent_trace) is not pe.DynamicJaxprTrace
            or type(trace.tangent_trace) is not pe.DynamicJaxprTrace
        ):
            return None
        return trace
    except Exception:
        return None


def linearized_input(x: Any, trace: Any) -> tuple[Any, Any, Any, Any, bool] | None:
    """``(primal, its variable, tangent or None, its variable or None, primal already taken in by
    the tangent trace)`` of ``x`` under the linearization ``trace``; None when ``x`` is no such
    value (a constant, another trace's, a symbolic zero that is no primal)."""
    try:
        from jax._src.interpreters import ad

        if type(x) is ad.LinearizeTracer and x._trace is trace:
            primal, tangent = x.primal, x.tangent
            if type(tangent) is getattr(ad, "Zero", None):  # a symbolic zero: no tangent to stand for
                return None
        else:
            primal, tangent = x, None
        staged = staged_input(primal, trace.parent_trace)
        if staged is None or staged[0] is not primal:
            return None
        tangent_var = None
        if tangent is not None:
            inner = staged_input(tangent, trace.tangent_trace)
            if inner is None or inner[0] is not tangent:
                return None
            tangent_var = inner[1]
        lifted = id(primal) in trace.tangent_trace.frame.constid_to_tracer
        return primal, staged[1], tangent, tangent_var, lifted
    except Exception:
        return None


def linear_mark(trace: Any) -> tuple[Any, ...]:
    tangent = trace.tangent_trace
    return (frame_mark(trace.parent_trace), frame_mark(tangent), set(tangent.frame.constvar_to_val))


def tangent_prefix(trace: Any) -> tuple[Any, ...]:
    """The name stack a tangent equation staged now gets: the part after the linearization's start."""
    from jax._src import source_info_util as siu

    return tuple(siu.current_name_stack().stack)[trace._name_stack_prefix_len :]


def linear_segment(
    trace: Any,
    mark: tuple[Any, ...],
    inputs: list[tuple[Any, Any, Any, Any, bool]],
    outputs: list[Any],
    prefix: tuple[Any, ...],
    tangents: tuple[Any, ...],
    own: str | None,
) -> LinearSegment | None:
    """What ``trace`` (a :func:`linearize_trace`) staged in its two traces since ``mark``, over
    ``inputs`` (:func:`linearized_input`'s) giving ``outputs``, its primal equations under the name
    stack ``prefix`` and its tangent ones under ``tangents`` (:func:`tangent_prefix`), each then
    under ``own``; None when anything was staged that a replay would not repeat (as
    :func:`segment` says, in either trace)."""
    try:
        from jax._src.interpreters import ad

        parent, tangent = trace.parent_trace, trace.tangent_trace
        if frame_mark(parent)[1:] != mark[0][1:] or frame_mark(tangent)[1:] != mark[1][1:]:
            return None
        where = _inputs_named([var for _, var, _, _, _ in inputs])
        staged = _staged_since(parent.frame, mark[0][0], where, _own(prefix, own))
        if staged is None:
            return None
        primal, made = staged
        before = mark[2]
        residuals: list[tuple[Any, ...]] = []
        where_t: dict[Any, tuple[Any, ...]] = {}
        for i, (_, _, _, tangent_var, _) in enumerate(inputs):
            if tangent_var is not None:
                where_t.setdefault(tangent_var, ("tin", i))
        lifted_before: dict[Any, tuple[Any, ...]] = {}
        for i, (p, _, _, _, lifted) in enumerate(inputs):
            if lifted:
                lifted_before.setdefault(tangent.frame.constid_to_tracer[id(p)].val, ("lifted", i))
        for constvar, value in tangent.frame.constvar_to_val.items():
            if constvar in before:
                if constvar in lifted_before:
                    where_t[constvar] = lifted_before[constvar]
                continue
            source = made.get(getattr(value, "val", None)) or where.get(getattr(value, "val", None))
            if source is None or getattr(value, "_trace", None) is not parent:
                return None
            where_t[constvar] = ("const", len(residuals))
            residuals.append(("pin", source[1]) if source[0] == "in" else source)
        staged_t = _staged_since(tangent.frame, mark[1][0], where_t, _own(tangents, own))
        if staged_t is None:
            return None
        tangent_eqns, made_t = staged_t
        outs: list[tuple[tuple[Any, ...], tuple[Any, ...] | None]] = []
        for out in outputs:
            if type(out) is ad.LinearizeTracer and out._trace is trace:
                p, t = out.primal, out.tangent
                t_spec = made_t.get(getattr(t, "val", None)) or where_t.get(getattr(t, "val", None))
                if t_spec is None or t_spec[0] in ("const", "lifted") or getattr(t, "_trace", None) is not tangent:
                    return None
            else:
                p, t_spec = out, None
            if getattr(p, "_trace", None) is not parent:
                return None
            p_spec = made.get(p.val) or where.get(p.val)
            if p_spec is None:
                return None
            outs.append((p_spec, t_spec))
        return LinearSegment(primal, residuals, tangent_eqns, outs)
    except Exception:
        return None


def staging_context() -> tuple[Any, ...] | None:
    """What the staged equations of a call depend on besides the call itself and its name stack:
    jax's trace context (its configuration), the equation context and the Python call stack above
    (code and instruction of every frame: the equations' tracebacks). None when unknown."""
    try:
        from jax._src import config, core
        from jax._src import source_info_util as siu

        # the traceback equations staged now get (a jax user_context's, when one is set)
        return (config.trace_context(), core.current_jaxpr_eqn_context(), siu.current().traceback)
    except Exception:
        return None


def current_name_stack() -> tuple[Any, ...] | None:
    """The items of the name stack equations staged now get (None when unknown)."""
    try:
        from jax._src import source_info_util as siu

        return tuple(siu.current_name_stack().stack)
    except Exception:
        return None


def linear_replay(
    trace: Any,
    seg: LinearSegment,
    inputs: list[tuple[Any, Any, Any, Any, bool]],
    prefix: tuple[Any, ...],
    tangents: tuple[Any, ...],
    own: str | None,
) -> list[Any]:
    """Stage ``seg`` again under the linearization ``trace`` on ``inputs``: its primal equations,
    the tangent trace's residuals in their order, its tangent equations; the results as a trace of
    the call gives them (a primal and tangent pair, or a primal alone)."""
    from jax._src import source_info_util as siu
    from jax._src.interpreters import ad

    pair: Any = ad.LinearizeTracer
    parent, tangent = trace.parent_trace, trace.tangent_trace
    primal = _emit(parent, seg.primal, lambda spec: inputs[spec[1]][0], _own(prefix, own))

    def value(spec: tuple[Any, ...]) -> Any:
        return inputs[spec[1]][0] if spec[0] in ("in", "pin") else primal[spec[1]][spec[2]]

    source = siu.current()
    residuals = [tangent.new_const(value(spec), source) for spec in seg.residuals]

    def resolve(spec: tuple[Any, ...]) -> Any:
        if spec[0] == "tin":
            return inputs[spec[1]][2]
        if spec[0] == "lifted":
            return tangent.frame.constid_to_tracer[id(inputs[spec[1]][0])]
        return residuals[spec[1]]

    made = _emit(tangent, seg.tangent, resolve, _own(tangents, own))
    out: list[Any] = []
    for p_spec, t_spec in seg.outputs:
        if t_spec is None:
            out.append(value(p_spec))
        else:
            t = made[t_spec[1]][t_spec[2]] if t_spec[0] == "eq" else resolve(t_spec)
            out.append(pair(trace, value(p_spec), t))
    return out


# -- The same under partial evaluation: known equations in the parent trace, recipes in this one ----


class PartialSegment(NamedTuple):
    """A call recorded under :func:`partial_trace` (jax's partial evaluation, which Flax's
    ``nn.scan`` runs its body under once to find the loop's invariant outputs): the equations its
    known values staged in the parent trace (as a :class:`Segment`'s, inputs ``("in", i)``: input
    i's known value), the equations of its unknown values, as the partial evaluation's recipes
    (inputs also ``("tin", i)``: input i, unknown; ``("t", j, k)``: output k of recipe j;
    ``("const", spec)``: a known value taken in, ``spec`` a known equation's output or input), and
    its outputs (``("arg", i)``: input i itself, ``("p", spec)``: a known value, ``("t", j, k)``)."""

    known: list[tuple[Any, ...]]
    unknown: list[tuple[Any, ...]]
    outputs: list[tuple[Any, ...]]


def partial_trace() -> Any | None:
    """The current trace when it is jax's partial evaluation (``pe.JaxprTrace``) over a staging
    trace (``make_jaxpr``'s, a scan body's), directly or through a gradient's linearization (whose
    operations on values with no tangent go to its staging trace as they are), else None."""
    try:
        from jax._src import core
        from jax._src import source_info_util as siu
        from jax._src.interpreters import partial_eval as pe

        trace = core.trace_ctx.trace
        if type(trace) is not pe.JaxprTrace or not isinstance(trace.name_stack, siu.NameStack):
            return None
        staging = _known_traces(trace)
        if staging is None or not isinstance(staging[0].frame.tracing_eqns, list):
            return None
        if not isinstance(trace.effect_handles, list):
            return None
        return trace
    except Exception:
        return None


def _known_traces(trace: Any) -> tuple[Any, Any] | None:
    """``(the staging trace a partial evaluation's known values live in, the linearization's tangent
    trace or None)``; None when its parent is neither a staging trace nor a linearization over two."""
    from jax._src.interpreters import ad
    from jax._src.interpreters import partial_eval as pe

    parent = trace.parent_trace
    if type(parent) is pe.DynamicJaxprTrace:
        return parent, None
    if (
        type(parent) is ad.LinearizeTrace
        and type(parent.parent_trace) is pe.DynamicJaxprTrace
        and type(parent.tangent_trace) is pe.DynamicJaxprTrace
    ):
        return parent.parent_trace, parent.tangent_trace
    return None


def partial_input(x: Any, trace: Any) -> tuple[Any, Any, Any, str] | None:
    """``(x, its known value or None, its variable, kind)`` under the partial evaluation
    ``trace``: kind ``"u"`` an unknown value of ``trace`` (its variable ``("u", id)``), ``"k"`` a
    known one whose value is a tracer of the parent trace, ``"p"`` a tracer of the parent trace
    itself; None for another value (a concrete constant, a value of another trace)."""
    try:
        from jax._src.interpreters import partial_eval as pe

        if type(x) is pe.JaxprTracer and x._trace is trace:
            known = x.pval.get_known()
            if known is None:
                if x.aval.has_qdd:
                    return None
                return x, None, ("u", id(x)), "u"
            kind = "k"
        elif type(x) is pe.DynamicJaxprTracer:
            known, kind = x, "p"
        else:
            return None  # a linearization's value with a tangent, a concrete constant, another trace's
        traces = _known_traces(trace)
        staged = None if traces is None else staged_input(known, traces[0])
        if staged is None or staged[0] is not known:
            return None
        return x, known, staged[1], kind
    except Exception:
        return None


def partial_mark(trace: Any) -> tuple[Any, ...]:
    """Where the partial evaluation ``trace`` stands: its known values' staging trace's frame, its
    effects, the id its next recipe gets (drawing one leaves a gap in ids, which only order the
    recipes) and, under a linearization, its tangent trace's frame (which a replay must leave as
    it is)."""
    traces = _known_traces(trace)
    assert traces is not None
    known, tangent = traces
    return (frame_mark(known), len(trace.effect_handles), next(trace.counter), tangent and frame_mark(tangent))


def partial_segment(
    trace: Any,
    mark: tuple[Any, ...],
    inputs: list[tuple[Any, Any, Any, str]],
    outputs: list[Any],
    prefix: tuple[Any, ...],
    own: str | None,
) -> PartialSegment | None:
    """What the partial evaluation ``trace`` did since ``mark`` for a call on ``inputs``
    (:func:`partial_input`'s) giving ``outputs``: the known equations its parent staged and the
    recipes of the unknown outputs, back to the inputs. None when it did anything a replay would
    not repeat (as :func:`segment` says; also an effect, or a recipe reading a value that is no
    input)."""
    try:
        import numpy as np
        from jax._src import core
        from jax._src.interpreters import partial_eval as pe

        traces = _known_traces(trace)
        if traces is None:
            return None
        parent, tangent = traces
        if frame_mark(parent)[1:] != mark[0][1:] or len(trace.effect_handles) != mark[1]:
            return None
        if tangent is not None and frame_mark(tangent) != mark[3]:
            return None  # a value with a tangent met a known one: the linearization staged its part
        named = _own(prefix, own)
        where: dict[Any, tuple[Any, ...]] = {}
        unknown_in: dict[int, tuple[Any, ...]] = {}
        leaves: dict[int, int] = {}
        for i, (leaf, known, var, _) in enumerate(inputs):
            leaves.setdefault(id(leaf), i)
            if known is None:
                unknown_in.setdefault(id(leaf), ("tin", i))
            else:
                where.setdefault(var, ("in", i))
        staged = _staged_since(parent.frame, mark[0][0], where, named)
        if staged is None:
            return None
        known_eqns, made = staged
        recipes: dict[int, Any] = {}
        pending = [out for out in outputs if type(out) is pe.JaxprTracer and id(out) not in leaves]
        while pending:
            tracer = pending.pop()
            if id(tracer) in unknown_in:
                continue
            recipe = tracer.recipe
            if type(recipe) is pe.JaxprEqnRecipe:
                if recipe.eqn_id < mark[2]:
                    return None  # computed before the call: a value it reached other than as input
                if recipe.eqn_id not in recipes:
                    recipes[recipe.eqn_id] = recipe
                    pending.extend(recipe.in_tracers)
            elif type(recipe) not in (pe.ConstVar, core.Literal):
                return None
        # a recipe's name stack is the part after the trace's own (jax's default rule) or the
        # whole stack (other rules: a jit's): each is matched and replayed as it was staged
        bases = [(False, [(type(item), item) for item in named[len(trace.name_stack) :]])]
        bases.append((True, [(type(item), item) for item in named]))
        spelled: dict[int, tuple[Any, ...]] = {}
        keep: list[Any] = []  # the outputs spelled, alive while their ids are keys
        unknown: list[tuple[Any, ...]] = []
        for eqn_id in sorted(recipes):
            recipe = recipes[eqn_id]
            if recipe.effects:
                return None
            source = recipe.source_info
            stack = source.name_stack.stack
            whole = None
            for full, typed in bases:
                if len(stack) >= len(typed) and all(
                    type(a) is t and a == b for a, (t, b) in zip(stack, typed, strict=False)
                ):
                    whole, cut = full, len(typed)
            if whole is None:
                return None
            ins: list[tuple[Any, ...]] = []
            for tracer in recipe.in_tracers:
                spec = unknown_in.get(id(tracer)) or spelled.get(id(tracer))
                if spec is not None:
                    ins.append(spec)
                    continue
                inner = tracer.recipe
                if type(inner) is core.Literal:
                    ins.append(("lit", inner))
                    continue
                value = getattr(inner, "val", None)
                if type(inner) is not pe.ConstVar:
                    return None
                if isinstance(value, np.ndarray | np.generic):  # a jit's residual constant (gelu's sqrt(2/pi))
                    ins.append(("array", value))
                    continue
                if type(value) is not pe.DynamicJaxprTracer or value._trace is not parent:
                    return None
                known_spec = _known(value, made, where)
                if known_spec is None:
                    return None
                ins.append(("const", known_spec))
            for k, ref in enumerate(recipe.out_tracer_refs):
                out = ref()
                if out is not None:
                    keep.append(out)
                    spelled[id(out)] = ("t", len(unknown), k)
            suffix = tuple(stack[cut:])
            unknown.append(
                (
                    recipe.primitive,
                    recipe.params,
                    recipe.effects,
                    recipe.ctx,
                    source.traceback,
                    whole,
                    suffix,
                    ins,
                    list(recipe.out_avals),
                )
            )
        outs: list[tuple[Any, ...]] = []
        for out in outputs:
            if id(out) in leaves:
                outs.append(("arg", leaves[id(out)]))
            elif type(out) is pe.DynamicJaxprTracer and out._trace is parent:
                known_spec = _known(out, made, where)
                if known_spec is None:
                    return None
                outs.append(("p", known_spec))
            elif id(out) in spelled:
                outs.append(spelled[id(out)])
            else:
                return None
        return PartialSegment(known_eqns, unknown, outs)
    except Exception:
        return None


def _known(tracer: Any, made: dict[Any, tuple[Any, ...]], where: dict[Any, tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """How a segment spells a tracer of the parent trace: a known equation's output, an input, or
    a literal (jax folds a constant into one); None for another value."""
    from jax._src import core

    atom = tracer.val
    if type(atom) is core.Literal:
        return ("plit", atom)
    if type(atom) is not core.Var:
        return None
    return made.get(atom) or where.get(atom)


def partial_replay(
    trace: Any, seg: PartialSegment, inputs: list[tuple[Any, Any, Any, str]], prefix: tuple[Any, ...], own: str | None
) -> list[Any]:
    """Stage ``seg`` again under the partial evaluation ``trace`` on ``inputs``: its known
    equations in the parent trace, then its recipes, each under the name stack the partial
    evaluation gives it (the part after the trace's own), with its recorded traceback."""
    from jax._src import core
    from jax._src import source_info_util as siu
    from jax._src.interpreters import partial_eval as pe

    named = _own(prefix, own)
    traces = _known_traces(trace)
    assert traces is not None
    parent = traces[0]
    known = _emit(parent, seg.known, lambda spec: inputs[spec[1]][1], named)

    literals: dict[int, Any] = {}  # one tracer per recorded literal, as the trace had one

    def value(spec: tuple[Any, ...]) -> Any:
        if spec[0] == "plit":
            tracer = literals.get(id(spec[1]))
            if tracer is None:
                tracer = literals[id(spec[1])] = pe.DynamicJaxprTracer(parent, spec[1].aval, spec[1])
            return tracer
        return inputs[spec[1]][1] if spec[0] == "in" else known[spec[1]][spec[2]]

    arrays: dict[int, Any] = {}  # a copy of each recorded constant: a trace of the call makes its own

    def array(recorded: Any) -> Any:
        copied = arrays.get(id(recorded))
        if copied is None:
            copied = arrays[id(recorded)] = copy.copy(recorded)
        return copied

    unknown = pe.PartialVal.unknown
    bases = (named[len(trace.name_stack) :], named)
    made: list[list[Any]] = []
    for primitive, params, effects, ctx, traceback, whole, suffix, ins, avals in seg.unknown:
        tracers = []
        for spec in ins:
            tag = spec[0]
            if tag == "t":
                tracers.append(made[spec[1]][spec[2]])
            elif tag == "tin":
                tracers.append(inputs[spec[1]][0])
            elif tag == "lit":
                tracers.append(pe.JaxprTracer(trace, unknown(spec[1].aval), spec[1]))
            elif tag == "array":
                const = array(spec[1])
                tracers.append(pe.JaxprTracer(trace, unknown(core.typeof(const)), pe.ConstVar(const)))
            else:
                const = value(spec[1])
                tracers.append(pe.JaxprTracer(trace, unknown(const.aval), pe.ConstVar(const)))
        outs = [pe.JaxprTracer(trace, unknown(aval), None) for aval in avals]
        source = siu.SourceInfo(traceback, siu.NameStack(bases[whole] + suffix))
        recipe = pe.new_eqn_recipe(trace, tracers, outs, primitive, params, effects, source, ctx)
        for out in outs:
            out.recipe = recipe
        made.append(outs)
    result: list[Any] = []
    for spec in seg.outputs:
        if spec[0] == "arg":
            result.append(inputs[spec[1]][0])
        elif spec[0] == "p":
            result.append(value(spec[1]))
        else:
            result.append(made[spec[1]][spec[2]])
    return result


# -- Transposition rules memoised: a gradient's backward pass over repeated layers -----------------


class _Transposed(NamedTuple):
    """What one transposition rule call staged: its equations (as a :class:`Segment`'s, under the
    name stack and traceback current when it ran, which a replay takes from its own call), the
    accumulations it made between them (``(equations before it, argument, cotangent spec)``), and
    its result (a rule's cotangents, or None)."""

    eqns: list[tuple[Any, ...]]
    accums: list[tuple[int, int, tuple[Any, ...]]]
    result: list[tuple[Any, ...]] | None


_SEEN_ONCE = object()


class TransposeMemo:
    """jax's transposition rules (``ad.fancy_transposes``, ``ad.primitive_transposes``), each call
    recorded the second time its key is seen and replayed from the third on.

    A gradient's backward pass runs a rule per linear equation: half of a gradient's trace. Under
    worker/replay.py the tangent equations of repeated layers share their params (one dict per
    kind of layer), and a rule given the same primitive, params, argument and cotangent types and
    contexts stages the same equations: those are staged again without running the rule, under
    the name stack and traceback jax's backward pass sets for the equation it transposes, with the
    accumulations into the arguments' cotangents made in their order by jax's own accumulators
    (which add the cotangents that meet there). The key holds every param by identity (kept alive
    here), so two programs' equations never share an entry; a rule call that stages a constant,
    an effect or anything a replay would not repeat is never replayed."""

    def __init__(self) -> None:
        self.entries: dict[Any, Any] = {}
        self.replayed = 0
        self._keep: list[Any] = []  # the params keyed by identity, alive as long as their keys
        self._types: tuple[Any, ...] = ()

    @contextlib.contextmanager
    def installed(self) -> Any:
        """Within the block, jax's transposition rules go through this memo."""
        try:
            from jax._src import config, core
            from jax._src.ad_util import Zero
            from jax._src.interpreters import ad
            from jax._src.interpreters import partial_eval as pe

            tables = [(ad.fancy_transposes, True), (ad.primitive_transposes, False)]
            self._types = (Zero, ad.UndefinedPrimal, ad.ValAccum, ad.NullAccum, pe.DynamicJaxprTracer, core.Var)
            self._contexts = (config.trace_context, core.current_jaxpr_eqn_context)
            proxy = _accum_proxy()
        except Exception:
            yield self
            return
        wrapped: list[tuple[dict[Any, Any], Any, Any, Any]] = []
        for table, fancy in tables:
            for primitive, rule in list(table.items()):
                if getattr(primitive, "call_primitive", False) and not fancy:
                    continue  # called with another signature (params, call_jaxpr, ...)
                wrapper = self._wrap(primitive, rule, fancy, proxy)
                table[primitive] = wrapper
                wrapped.append((table, primitive, rule, wrapper))
        try:
            yield self
        finally:
            for table, primitive, rule, wrapper in wrapped:
                if table.get(primitive) is wrapper:  # a rule registered meanwhile stays
                    table[primitive] = rule

    def _wrap(self, primitive: Any, rule: Callable[..., Any], fancy: bool, proxy: Any) -> Callable[..., Any]:
        def transpose(cts_in: Any, *args: Any, **params: Any) -> Any:
            trace = staging_trace()
            key, inputs = (None, []) if trace is None else self._key(primitive, fancy, trace, cts_in, args, params)
            entry = None if key is None else self.entries.get(key)
            if entry is None or key is None:  # never replayed, or seen the first time
                if key is not None and key not in self.entries:
                    self.entries[key] = _SEEN_ONCE
                    self._keep.append(params)
                return rule(cts_in, *args, **params)
            if entry is _SEEN_ONCE:
                return self._record(key, trace, inputs, rule, proxy, cts_in, args, params)
            self.replayed += 1
            return self._replay(entry, trace, inputs, args)

        return transpose

    @staticmethod
    def _values(primitive: Any, cts_in: Any, args: Any) -> list[Any]:
        return [*(cts_in if primitive.multiple_results else [cts_in]), *args]

    def _key(
        self, primitive: Any, fancy: bool, trace: Any, cts_in: Any, args: Any, params: Any
    ) -> tuple[Any, list[Any]]:
        """The call's key (None: never recorded) and its traced values, in order (None where
        another value stands)."""
        try:
            if primitive.multiple_results and not isinstance(cts_in, list | tuple):
                return None, []
            zero, undefined, val_accum, null_accum, tracer, var = self._types
            constants = trace.frame.constvar_to_val
            seen: dict[int, int] = {}
            parts: list[Any] = []
            inputs: list[Any] = []
            for i, x in enumerate(self._values(primitive, cts_in, args)):
                kind = type(x)
                inputs.append(None)
                if x is None:
                    parts.append(None)
                    continue
                alias = seen.setdefault(id(x), i)
                if kind is zero or kind is undefined:
                    parts.append((kind, x.aval))
                elif kind is val_accum or kind is null_accum:
                    parts.append((kind, x.aval, alias))
                elif kind is tracer:
                    # a value of this trace (no literal, no constant: jax folds operations on those)
                    atom = x.val
                    if x._trace is not trace or type(atom) is not var or atom in constants or atom.aval.has_qdd:
                        return None, []
                    inputs[i] = x
                    parts.append((x.aval, alias))
                elif kind is int or kind is float or kind is bool:
                    parts.append((kind, x))
                else:
                    return None, []  # a constant array, a reference accumulator, another trace's value
            named = tuple((name, id(value)) for name, value in params.items())
            context, eqn_context = self._contexts
            key = (primitive, fancy, tuple(parts), named, context(), eqn_context())
            hash(key)
            return key, inputs
        except Exception:
            return None, []

    def _record(
        self,
        key: Any,
        trace: Any,
        inputs: list[Any],
        rule: Callable[..., Any],
        proxy: Any,
        cts_in: Any,
        args: Any,
        params: Any,
    ) -> Any:
        from jax._src import source_info_util as siu

        frame = trace.frame
        mark = frame_mark(trace)
        current = siu.current()
        ranges: list[tuple[int, int]] = []  # the rule's own equations: between its accumulations
        events: list[tuple[int, int, Any]] = []  # (ranges before it, argument, cotangent)
        start = [len(frame.tracing_eqns)]

        def accumulated(position: int, real: Any, ct: Any) -> None:
            ranges.append((start[0], len(frame.tracing_eqns)))
            events.append((len(ranges), position, ct))
            real.accum(ct)
            start[0] = len(frame.tracing_eqns)

        val_accum = self._types[2]
        called = [proxy(a, i, accumulated) if type(a) is val_accum else a for i, a in enumerate(args)]
        out = rule(cts_in, *called, **params)
        ranges.append((start[0], len(frame.tracing_eqns)))
        spoiled = any(type(a) is proxy and a.spoiled for a in called)
        segment = None if spoiled else self._segment(trace, mark, current, inputs, ranges, events, out)
        self.entries[key] = segment
        return out

    def _segment(
        self,
        trace: Any,
        mark: tuple[Any, ...],
        current: Any,
        inputs: list[Any],
        ranges: list[tuple[int, int]],
        events: list[tuple[int, int, Any]],
        out: Any,
    ) -> _Transposed | None:
        try:
            zero, _, _, _, tracer, _ = self._types
            if frame_mark(trace)[1:] != mark[1:]:
                return None
            where: dict[Any, tuple[Any, ...]] = {}
            for i, x in enumerate(inputs):  # _key's: the call's values of this trace, None elsewhere
                if x is not None:
                    where.setdefault(x.val, ("in", i))
            prefix = tuple(current.name_stack.stack)
            eqns: list[tuple[Any, ...]] = []
            made: dict[Any, tuple[Any, ...]] = {}  # outputs of the ranges before, as ("out", j, k)
            counts: list[int] = []
            for first, last in ranges:
                staged_range = _staged_since(trace.frame, first, {**where, **made}, prefix, last)
                if staged_range is None:
                    return None
                part, part_made = staged_range
                base = len(eqns)
                for eqn in part:
                    if eqn[4] is not current.traceback:
                        return None  # staged under another traceback than the one a replay sets
                    ins = [_shifted(spec, base) for spec in eqn[6]]
                    eqns.append((*eqn[:6], ins, eqn[7]))
                made.update({var: ("out", spec[1] + base, spec[2]) for var, spec in part_made.items()})
                counts.append(len(eqns))

            def spell(value: Any) -> tuple[Any, ...] | None:
                if value is None:
                    return ("none",)
                if type(value) is zero:
                    return ("zero", value.aval)
                if type(value) is not tracer or value._trace is not trace:
                    return None
                found = made.get(value.val) or where.get(value.val)
                return None if found is None else _shifted(found, 0)

            accums: list[tuple[int, int, tuple[Any, ...]]] = []
            for before, position, ct in events:
                spec = spell(ct)
                if spec is None:
                    return None
                accums.append((counts[before - 1], position, spec))
            result: list[tuple[Any, ...]] | None = None
            if out is not None:
                result = []
                for value in out:
                    spec = spell(value)
                    if spec is None:
                        return None
                    result.append(spec)
            return _Transposed(eqns, accums, result)
        except Exception:
            return None

    def _replay(self, entry: _Transposed, trace: Any, inputs: list[Any], args: Any) -> Any:
        from jax._src import source_info_util as siu

        zero = self._types[0]
        current = siu.current()
        made: list[list[Any]] = []
        accums = entry.accums
        done = 0

        def resolve(spec: tuple[Any, ...]) -> Any:
            tag = spec[0]
            if tag == "eq":
                return made[spec[1]][spec[2]]
            if tag == "in":
                return inputs[spec[1]]
            if tag == "zero":
                return zero(spec[1])
            return None

        def accumulate(count: int | None = None) -> None:
            """The accumulations recorded before equation ``count`` (None: all that are left)."""
            nonlocal done
            while done < len(accums) and (count is None or accums[done][0] <= count):
                args[accums[done][1]].accum(resolve(accums[done][2]))
                done += 1

        prefix = tuple(current.name_stack.stack)
        _emit(
            trace,
            entry.eqns,
            resolve,
            prefix,
            traceback=current.traceback,
            stack=current.name_stack,
            made=made,
            before=lambda made: accumulate(len(made)),
        )
        accumulate()
        if entry.result is None:
            return None
        return [resolve(spec) for spec in entry.result]


def _shifted(spec: tuple[Any, ...], base: int) -> tuple[Any, ...]:
    """A range's input spec in the whole record: its own outputs shifted by the equations before
    it, an earlier range's (``"out"``) as they are."""
    if spec[0] == "eq":
        return ("eq", spec[1] + base, spec[2])
    if spec[0] == "out":
        return ("eq", spec[1], spec[2])
    return spec


_PROXY: list[Any] = []


def _accum_proxy() -> Any:
    """A ``ValAccum`` that tells its recorder of each accumulation, which then makes it in the
    real one (the rule sees the accumulator it expects: ``isinstance`` checks, its ``aval``); a
    rule that reads one's value spoils the record."""
    if _PROXY:
        return _PROXY[0]
    from jax._src.interpreters import ad

    class _Recorded(ad.ValAccum):
        def __init__(self, real: Any, position: int, told: Callable[[int, Any, Any], None]) -> None:
            self.aval = real.aval
            self.spoiled = False
            self._real, self._position, self._told = real, position, told

        def accum(self, x: Any) -> None:
            self._told(self._position, self._real, x)

        # a rule that reads or writes an accumulator's value itself is not recorded
        @property
        def val(self) -> Any:
            self.spoiled = True
            return self._real.val

        @val.setter
        def val(self, value: Any) -> None:
            self.spoiled = True
            self._real.val = value

        def freeze(self) -> Any:
            self.spoiled = True
            return self._real.freeze()

    _PROXY.append(_Recorded)
    return _Recorded
