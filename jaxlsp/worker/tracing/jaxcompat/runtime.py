"""JAX's runtime state and small accessors: backends, meshes and shardings, caches, equation params,
cost and HLO text, cheap tracer probes, and the linear input check's fast form.
"""

from __future__ import annotations

import contextlib
import importlib
import types
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, NoReturn, cast

if TYPE_CHECKING:
    from jax._src import core
    from jax.extend.core import ClosedJaxpr, JaxprEqn
    from jax.sharding import Sharding
    from jax.stages import Lowered


def backends_initialized(unknown: bool = True) -> bool:
    """Whether an XLA backend exists in this process (forking after that is unsafe); ``unknown``
    when this JAX cannot say (an older or newer one without the helper)."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:
        return unknown


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


def bound_axes() -> list[tuple[Hashable, int]]:
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


def surrounding_mesh() -> Callable[[], contextlib.AbstractContextManager[object]] | None:
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


def typed_sharding(x: object) -> Sharding | None:
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
        return cast("Sharding", sharding) if mesh == mesh_lib.get_abstract_mesh() else None
    except Exception:
        return None


#: ``jax.make_user_context``'s: called with a value, a context that adds it to every cache key.
_OWN_CACHES: Callable[[str], contextlib.AbstractContextManager[object]] | None = None


def own_caches() -> Callable[[], contextlib.AbstractContextManager[object]]:
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


def bind_params(eqn: JaxprEqn) -> dict[str, object]:
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


def cost_dict(analysis: object) -> dict[str, float]:
    """``Lowered.cost_analysis()`` as one dict (older JAX returned a list with one per device)."""
    if isinstance(analysis, list | tuple):
        analysis = analysis[0] if analysis else {}
    return dict(cast("dict[str, float] | None", analysis) or {})


def jaxpr_as_fun(closed: ClosedJaxpr) -> Callable[..., list[object]]:
    """The traced program as a function of its inputs (``jax.extend.core.jaxpr_as_fun``)."""
    try:
        from jax.extend.core import jaxpr_as_fun as as_fun
    except ImportError:  # jax < 0.4.36
        from jax.core import jaxpr_as_fun as as_fun  # type: ignore[attr-defined,no-redef]
    return cast("Callable[..., list[object]]", as_fun(closed))


def hlo_text(lowered: Lowered) -> str:
    """The HLO text of a ``jax.jit(...).lower(...)`` result (its computations, ENTRY last)."""
    hlo = importlib.import_module("jaxlib._hlo")  # the HLO printer and parser jaxlib ships

    options = hlo.HloPrintOptions()
    options.print_metadata = False  # source positions refer to tables the parser would then lack
    options.print_large_constants = True  # "{...}" would not parse back
    return str(lowered._lowering.hlo().as_hlo_module().to_string(options))


def hlo_cost_analysis(text: str) -> dict[str, float]:
    """XLA's cost analysis of an HLO module given as text, as ``Lowered.cost_analysis()`` runs it.
    A backend with no analysis of its own (a PJRT plugin: CUDA) leaves it to the CPU backend's,
    which counts the same HLO; when neither works the error goes up (the equation is then
    lowered alone, and compiled if it must be)."""
    from jax._src import xla_bridge
    from jax._src.lib import _jax  # type: ignore[attr-defined]

    hlo = importlib.import_module("jaxlib._hlo")
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

    def __init__(self, tracer: core.Tracer[core.Trace], attribute: str) -> None:
        super().__init__(attribute)
        self._tracer = tracer
        self._attribute = attribute
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            tracer, origin = self._tracer, ""
            with contextlib.suppress(Exception):
                origin = tracer._origin_msg()
            shown = cast("Callable[[], str]", tracer._error_repr)()  # unannotated in jax
            self._text = f"The '{self._attribute}' attribute is not available on {shown}.{origin}"
        return self._text


@contextlib.contextmanager
def cheap_tracer_probes() -> Iterator[None]:
    """Within the block, ``getattr(tracer, "sharding", None)`` (and ``device``) costs O(1): see
    :class:`_TracerAttributeError`. Nothing changes when this jax defines them otherwise."""
    try:
        from jax._src import core
    except ImportError:
        yield
        return
    tracer_type: object = getattr(core, "Tracer", None)
    saved: dict[str, property] = {}
    for name in _PROBED_ATTRIBUTES:
        attr = tracer_type.__dict__.get(name) if isinstance(tracer_type, type) else None
        if isinstance(attr, property) and hasattr(tracer_type, "_origin_msg") and hasattr(tracer_type, "_error_repr"):
            saved[name] = attr
    for name in saved:

        def probe(self: core.Tracer[core.Trace], _name: str = name) -> NoReturn:
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
_LINEAR_CHECK: list[Callable[..., object]] = []  # [jax's own function, ours] once installed


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
        made: dict[str, object] = {}
        code = compile("\n" * (first - 1) + source, inspect.getsourcefile(original) or "<jax>", "exec")
        exec(code, pe.__dict__, made)
        fast = cast("types.FunctionType", made[original.__name__])  # the def just executed
        fast.__doc__ = original.__doc__
        fast.__dict__["__wrapped__"] = original  # as functools.update_wrapper sets it
        pe.tracers_to_jaxpr = fast
        _LINEAR_CHECK.extend([original, fast])
        return True
    except Exception:
        return False
