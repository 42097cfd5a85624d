"""Targets: functions and Linen / NNX / Equinox modules, initialised abstractly, made traceable.

Every target becomes a :class:`Plan`: abstract model leaves split into ``params`` (differentiated
by ``transform``) and ``state``, PRNG ``keys``, and ``apply(params, state, keys, args, kwargs)``
returning ``(outputs, updated_state_or_None)``. :func:`traceable` turns a plan and the call's
arguments into one function of four pytrees, and says how to label and role every leaf.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar, cast

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.loading.inputs import InputBuilder, abstract_key, abstractify, is_dynamic
from jaxlsp.worker.reuse import initsnap
from jaxlsp.worker.reuse import replay as replay_mod
from jaxlsp.worker.reuse.hints import HintCheck, from_structure, variables_structure
from jaxlsp.worker.reuse.replay import CallReplay
from jaxlsp.worker.tracing.scopes import Walker, equinox_module_paths, module_scopes, nnx_module_paths

if TYPE_CHECKING:
    import jax
    from flax import nnx
    from jax.tree_util import SequenceKey

    from jaxlsp.worker.protocol import CallSpec

_Tree = TypeVar("_Tree")
#: A leaf's key path in a pytree (jax.tree_util's KeyPath: SequenceKey, DictKey, GetAttrKey entries).
KeyPath: TypeAlias = tuple[object, ...]
Args: TypeAlias = tuple[list[object], dict[str, object]]  # a call's positional and keyword arguments

Apply = Callable[[object, object, object, list[object], dict[str, object]], tuple[object, object]]


@dataclass
class Plan:
    kind: str  # function | linen | nnx | equinox
    apply: Apply
    params: object = None
    state: object = None
    keys: dict[str, object] = field(default_factory=dict)
    params_prefix: str = ""  # label prefix of parameter leaves ("params" for Linen)
    params_role: str = "parameter"
    strip_value: bool = False  # drop the trailing ``.value`` of NNX Variables and Linen boxes
    scope_mode: str = "stack"  # stack: every Scope item; marked: only the worker's own scopes
    arg_names: tuple[str, ...] = ()  # a function's positional parameter names (roles by name)
    # Linen: the variables' structure (variables_structure); NNX, Equinox: the abstract init's
    # snapshot (worker/reuse/initsnap.py); either is the next capture's hint
    structure: object = None
    init_reused: bool = False  # NNX, Equinox: the init was the last capture's snapshot
    init_wanted: bool = False  # NNX, Equinox: the constructor ran, a snapshot would save that next time
    # Linen with a structure hint: the check of the hinted variables the trace makes (HintCheck)
    hint_check: HintCheck | None = None
    # Linen: the last trace's replay of repeated module calls (worker/reuse/replay.py), None when off
    replay: CallReplay | None = None


def infer_kind(obj: object) -> str:
    """``linen`` / ``nnx`` / ``equinox`` by the class's MRO (a class or an instance), else ``function``."""
    obj = _unpartial(obj)
    if not isinstance(obj, type) and type(obj).__module__.startswith("equinox.") and hasattr(obj, "__wrapped__"):
        return "function"  # eqx.filter_jit / filter_grad / filter_vmap wrap a function in a Module
    cls = obj if isinstance(obj, type) else type(obj)
    for base in getattr(cls, "__mro__", ()):
        module = getattr(base, "__module__", "") or ""
        name = base.__name__
        if module.startswith("flax.linen") and name == "Module":
            return "linen"
        if module.startswith("flax.nnx") and name in ("Module", "Object", "Pytree"):
            return "nnx"
        if module.startswith("equinox") and name == "Module":
            return "equinox"
    return "function"


def _unpartial(obj: object) -> object:
    """The callable under ``functools.partial`` layers (``ResNet18 = partial(ResNet, ...)``)."""
    depth = 0
    while isinstance(obj, functools.partial) and depth < 32:
        obj, depth = obj.func, depth + 1
    return obj


def is_constructor(obj: object) -> bool:
    """A class, or a ``functools.partial`` of one: called with the init arguments to build the model."""
    return isinstance(_unpartial(obj), type)


def _needs(cls: object, name: str, init_kwargs: dict[str, object]) -> bool:
    """Whether the worker fills the constructor parameter ``name`` (accepted, and given by nobody)."""
    bound = getattr(cls, "keywords", None) if isinstance(cls, functools.partial) else None
    return accepts(cls, name) and name not in init_kwargs and not (bound and name in bound)


def accepts(cls: object, name: str) -> bool:
    """Whether calling ``cls`` (a class, a partial of one, a function) accepts a parameter named ``name``."""
    cls = _unpartial(cls)  # a metaclass __call__ hides the class's own signature from inspect
    init = getattr(cls, "__init__", None) if isinstance(cls, type) else cls
    try:
        sig = inspect.signature(init)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return name in sig.parameters


def resolve_target(module: object, name: str, method: str | None) -> tuple[object, str | None]:
    """The target object and the module method to call (``Class.method`` on a module class)."""
    parts = name.split(".")
    obj = module
    owner: object = None
    for part in parts:
        owner = obj
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CaptureError("import", f"{name!r} not found in {getattr(module, '__file__', module)}") from None
    if len(parts) > 1 and isinstance(owner, type) and infer_kind(owner) != "function":
        raw = inspect.getattr_static(owner, parts[-1], None)
        if inspect.isfunction(raw) or (raw is not None and not isinstance(raw, staticmethod | classmethod | type)):
            if method is not None:
                raise CaptureError(
                    "needs_input", f"target {name!r} names a method and the profile sets method={method!r}"
                )
            return owner, parts[-1]
    return obj, method


@dataclass
class Construction:
    """What builds the model: a class with its init arguments, or a ready (factory-made) object."""

    model: object
    factory: bool
    args: list[object] = field(default_factory=list)
    kwargs: dict[str, object] = field(default_factory=dict)


def construction(obj: object, kind: str, profile: Mapping[str, object], builder: InputBuilder) -> Construction:
    """Runs the init factory or builds the init arguments (before the call inputs are built).

    A function target's ``init.factory`` supplies the callable to trace (a configured
    ``functools.partial``, a closure over a config, a module instance). Init arguments are abstract
    (keys and arrays as ShapeDtypeStructs) and traced inside the abstract init of NNX and Equinox
    modules; Linen fields are closed over, so the keys among them are made real."""
    init = cast("CallSpec", profile.get("init") or {})
    if "factory" in init:
        factory = builder.loader.resolve(str(init["factory"]))
        if not callable(factory):
            what = type(factory).__name__
            raise CaptureError("needs_input", f"init.factory {init['factory']} is a {what}, not a function")
        return Construction(factory(), True)
    if kind == "function":
        if init.get("args") or init.get("kwargs"):
            raise CaptureError(
                "refused",
                f"the profile gives init arguments, but the target is a function ({type(obj).__name__}), not a "
                'module class; give the function its values in inputs, or use init = { factory = "module:function" } '
                "returning the callable to trace",
            )
        return Construction(obj, False)
    if not is_constructor(obj):
        return Construction(obj, True)
    args, kwargs = builder.call_args(init)
    if kind == "linen":
        args, kwargs = builder.concrete_keys((args, kwargs))
    return Construction(obj, False, args, kwargs)


def _build_abstractly(
    evaluate: Callable[..., object],
    build: Callable[..., object],
    args: list[object],
    kwargs: dict[str, object],
    init: _Init | None = None,
) -> object:
    """``build(*args, **kwargs)`` under an abstract evaluation (``nnx.eval_shape``,
    ``eqx.filter_eval_shape``), with the abstract arrays and keys among the arguments passed in as
    traced values rather than closed over (``jax.random.split(key)`` needs a traced key). With
    ``init``: the last capture's model when its snapshot still holds, and a snapshot of this one
    (worker/reuse/initsnap.py)."""
    if init is not None and init.mode == "use":
        kept = initsnap.reuse(init.hint, init.kind, init.key)
        if kept is not None:
            init.snapshot, init.reused = init.hint, True
            return kept
    dyn, rebuild = split_dynamic((args, kwargs))

    def run(*leaves: object) -> object:
        a, kw = rebuild(list(leaves))
        return build(*a, **kw)

    if init is not None:
        init.ran = True
    if init is None or init.mode != "record":
        return evaluate(run, *dyn)
    model = evaluate(run, *dyn)  # recorded since the capture began (worker/process/main.py)
    init.snapshot = initsnap.make(model, init.kind, init.key)
    return model


@dataclass
class _Init:
    """An NNX or Equinox abstract init: the last capture's snapshot (``hint``), whether one is used
    or recorded (``mode``: ``use``, ``record``, None), what it is of (``key``: the target and its
    profile), and what this one did (ran the constructor; reused or made a snapshot)."""

    kind: str
    hint: object
    mode: str | None
    key: str
    snapshot: object = None
    reused: bool = False
    ran: bool = False


def make_plan(
    kind: str,
    made: Construction,
    profile: Mapping[str, object],
    method: str | None,
    call_args: tuple[list[object], dict[str, object]],
    structure_hint: object = None,
    concrete: bool = False,
    replay: bool = True,
    snapshots: str | None = None,
) -> Plan:
    """The target's plan; ``concrete`` (a values run): the model's variables are made for real
    (initialised with the seed, or the factory's own), never abstractly. ``replay``: a Linen
    model's repeated module calls replay the first one's equations (worker/reuse/replay.py).
    ``snapshots``: an NNX or Equinox model's abstract init is the last capture's snapshot when it
    still holds (``use``; ``structure_hint`` is that snapshot), or is recorded into a new one
    (``record``: the server's background request, worker/reuse/initsnap.py); None: neither."""
    seed = int(cast(int, profile.get("seed", 0)))
    model, factory, init_args, init_kwargs = made.model, made.factory, made.args, made.kwargs
    if kind == "function":
        return _function_plan(model, profile, call_args)
    if kind == "linen":
        plan = _linen_plan(
            model, factory, init_args, init_kwargs, profile, seed, method, call_args, structure_hint, concrete, replay
        )
    elif kind in ("nnx", "equinox"):
        key = json.dumps([str(getattr(model, "__qualname__", "")), profile], sort_keys=True, default=str)
        init = _Init(kind, structure_hint, None if concrete else snapshots, key)
        make = _nnx_plan if kind == "nnx" else _equinox_plan
        plan = make(model, factory, init_args, init_kwargs, seed, method, concrete, init)
        plan.structure, plan.init_reused = init.snapshot, init.reused
        plan.init_wanted = init.ran and init.mode == "use"  # a snapshot would have saved this init
    else:
        raise CaptureError("needs_input", f"unknown target kind {kind!r}")
    if concrete:
        _refuse_abstract(plan)
    return plan


def _refuse_abstract(plan: Plan) -> None:
    """A values run needs real weights: a factory that returned shapes only cannot give them."""
    import jax

    for part in (plan.params, plan.state):
        for leaf in jax.tree_util.tree_leaves(part):
            if isinstance(leaf, jax.ShapeDtypeStruct):
                raise CaptureError(
                    "needs_input",
                    "the model's variables are abstract (shapes only, e.g. a factory that builds it under "
                    "eval_shape): a values run needs concrete weights; return them from the init factory",
                )


def _function_plan(fn: object, profile: Mapping[str, object], call_args: Args) -> Plan:
    if not callable(fn):
        raise CaptureError("needs_input", f"target is a {type(fn).__name__}, not a callable")

    def apply(
        params: object, state: object, keys: object, args: list[object], kwargs: dict[str, object]
    ) -> tuple[object, object]:
        modules = _module_args(args, kwargs)
        # NNX objects among the arguments (models, and optimizers holding them, such as an
        # nnx.ModelAndOptimizer passed alone) are updated in place: what changed is an output.
        before = _nnx_arg_leaves(args, kwargs)
        if modules:
            # A function of models (``train_step(model, batch)``): their calls get module scopes too.
            root = _ModuleArgs()
            with module_scopes(root, functools.partial(_module_arg_paths, root, modules)):
                out = fn(*args, **kwargs)
        else:
            out = fn(*args, **kwargs)
        if not before:
            return out, None
        return out, _changed(before, _nnx_arg_leaves(args, kwargs))

    return Plan(kind="function", apply=apply, params_role="input", arg_names=_positional_names(fn))


def _nnx_arg_leaves(args: list[object], kwargs: dict[str, object]) -> list[tuple[str, object]]:
    """``(label, array)`` of every Variable of the NNX objects (models, optimizers) among the
    arguments, labelled as the graph's inputs are (``args/1/opt_state/mu/l1/kernel``)."""
    nnx = sys.modules.get("flax.nnx")
    if nnx is None:
        return []
    graph_nodes = tuple(
        c for c in (getattr(nnx, n, None) for n in ("Module", "Pytree", "Object")) if isinstance(c, type)
    )
    out: list[tuple[str, object]] = []
    for label, value in _named_args(args, kwargs):
        if isinstance(value, graph_nodes):
            out += _labelled_leaves(nnx.state(value), label)
    return out


def _named_args(args: list[object], kwargs: dict[str, object]) -> list[tuple[str, object]]:
    """The call's arguments with the label prefixes the graph's inputs use (``args/0``, ``kwargs/x``)."""
    return [(f"args/{i}", a) for i, a in enumerate(args)] + [(f"kwargs/{k}", v) for k, v in kwargs.items()]


def _positional_names(fn: Callable[..., object]) -> tuple[str, ...]:
    try:
        signature = inspect.signature(fn)  # follows __wrapped__ through jax.jit and functools.wraps
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in signature.parameters.values() if p.kind in kinds)


class _ModuleArgs:
    """The stand-in root of the module arguments of a function target."""


def _module_walker(value: object) -> Walker | None:
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(value, nnx.Module):
        return nnx_module_paths
    pytree = getattr(nnx, "Pytree", None) if nnx is not None else None
    if isinstance(pytree, type) and isinstance(value, pytree) and nnx_module_paths(value):
        return nnx_module_paths  # an optimizer holding the model (nnx.ModelAndOptimizer): ``model/...``
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(value, eqx.Module) and not isinstance(value, eqx.nn.State):
        return equinox_module_paths
    return None


def _module_args(args: list[object], kwargs: dict[str, object]) -> list[tuple[str, object, Walker]]:
    named = _named_args(args, kwargs)
    return [(label, value, walker) for label, value in named if (walker := _module_walker(value)) is not None]


def _module_arg_paths(
    root: _ModuleArgs, modules: list[tuple[str, object, Walker]], obj: object
) -> dict[int, tuple[object, str]]:
    """Module paths under the function's module arguments (under ``args/1/...`` when several)."""
    if obj is not root:
        walker = _module_walker(obj)
        return walker(obj) if walker is not None else {id(obj): (obj, "")}
    out: dict[int, tuple[object, str]] = {}
    for label, value, walker in modules:
        prefix = label if len(modules) > 1 else ""
        for key, (sub, rel) in walker(value).items():
            out.setdefault(key, (sub, "/".join(p for p in (prefix, rel) if p)))
    return out


class _Linen(Protocol):
    """What the worker calls of a Linen module (``flax.linen.Module``)."""

    def unbind(self) -> tuple[_Linen, Mapping[str, object]]: ...

    def init(
        self, rngs: Mapping[str, object], *args: object, method: str | None, **kwargs: object
    ) -> Mapping[str, object]: ...

    def apply(
        self,
        variables: Mapping[str, object],
        *args: object,
        rngs: Mapping[str, object] | None,
        mutable: list[str] | bool,
        method: str | None,
        **kwargs: object,
    ) -> object: ...


def _linen_plan(
    model: object,
    factory: bool,
    init_args: list[object],
    init_kwargs: dict[str, object],
    profile: Mapping[str, object],
    seed: int,
    method: str | None,
    call_args: tuple[list[object], dict[str, object]],
    structure_hint: object = None,
    concrete: bool = False,
    replay: bool = True,
) -> Plan:
    import jax

    streams = [str(s) for s in cast("list[str]", profile.get("rngs", []))]
    given = cast("list[str] | bool", profile.get("mutable", []))
    mutable: list[str] | bool = True if given is True else [str(s) for s in given or []]
    if is_constructor(model):
        model = cast("Callable[..., object]", model)(*init_args, **init_kwargs)
    linen = cast("_Linen", model)  # infer_kind: a Linen module's class or instance
    variables: Mapping[str, object] | None = None
    ours = True  # the variables come from our own init of this model with these arguments
    check: HintCheck | None = None
    if getattr(linen, "scope", None) is not None:
        linen, bound = linen.unbind()
        variables = bound if concrete else abstractify(bound)
        ours = False
    args, kwargs = call_args
    if variables is None:
        dyn, rebuild = split_dynamic((args, kwargs))

        def init_fn(*leaves: object) -> Mapping[str, object]:
            a, kw = rebuild(list(leaves))
            rngs = {"params": jax.random.key(seed)}
            for i, s in enumerate(streams):
                rngs[s] = jax.random.key(seed + 1 + i)
            return linen.init(rngs, *a, method=method, **kw)

        # A hint (the structure the last capture's init gave) skips the abstract init here; the
        # trace itself checks every variable it reads against its initialiser (HintCheck), and
        # the caller traces again with a real init when the hint did not hold.
        hinted = from_structure(structure_hint) if structure_hint is not None and not concrete else None
        if concrete:  # a values run: the real variables, initialised with the seed
            variables = init_fn(*dyn)
        elif hinted is not None:
            variables = cast("Mapping[str, object]", hinted)  # a structure's top is a mapping of collections
            check = HintCheck(structure_hint)
        else:
            variables = jax.eval_shape(init_fn, *dyn)
    structure = variables_structure(variables)
    collections = dict(variables)
    params = collections.pop("params", {})
    keys: dict[str, object] = {
        s: jax.random.key(seed + 1 + i) if concrete else abstract_key(seed + 1 + i) for i, s in enumerate(streams)
    }

    def apply(
        params: object, state: object, keys: object, args: list[object], kwargs: dict[str, object]
    ) -> tuple[object, object]:
        if check is not None:  # hinted variables: each checked as the call reads it
            reading: contextlib.AbstractContextManager[None] = check.checking()
        else:  # our own init's need no check; a bound module's keep Flax's
            reading = _linen_params_as_initialised() if ours else contextlib.nullcontext()
        # Repeated calls replay the first one's equations: never with RNG streams or mutable
        # collections (replay.py refuses them per call too), nor in a values run.
        replaying = replay and not concrete and not keys and not mutable
        with (
            reading,
            _linen_initializing() if mutable is True else contextlib.nullcontext(),
            replay_mod.replaying(check) if replaying else contextlib.nullcontext() as replayer,
        ):
            plan.replay = replayer
            out = linen.apply(
                {"params": params, **cast("Mapping[str, object]", state)},
                *args,
                rngs=cast("dict[str, object] | None", keys or None),
                mutable=mutable or False,
                method=method,
                **kwargs,
            )
        if mutable:
            pair = cast("tuple[object, object]", out)  # Flax's (outputs, mutated collections)
            return pair[0], pair[1]
        return out, None

    plan = Plan(
        kind="linen",
        apply=apply,
        params=params,
        state=collections,
        keys=keys,
        params_prefix="params",
        # boxed variables (nn.Partitioned, nn.with_logical_partitioning) flatten to ``.value``: label
        # them by the variable's path; plain Linen collections are dicts, whose keys have no ``name``
        strip_value=True,
        scope_mode="stack",
        structure=structure,
        hint_check=check,
    )
    return plan


def missing_rng_stream(exc: BaseException) -> str | None:
    """The stream Flax's ``InvalidRngError`` says a module needs (``Dropout_0 needs PRNG for "dropout"``)."""
    if type(exc).__name__ != "InvalidRngError":
        return None
    import re

    found = re.search(r'needs PRNG for "([A-Za-z_][A-Za-z0-9_]*)"', str(exc))
    return found.group(1) if found else None


def params_stream_serves(kind: str, profile: Mapping[str, object], exc: BaseException) -> str | None:
    """The stream a Linen call traced as ``init`` runs it (``mutable = true``) drew without its
    profile naming it, which Flax took from the caller's ``params`` stream (``make_rng`` falls
    back to it: an ``init`` with one key, a Dropout in the model). The trace has no params
    stream, so the caller gives it a key of its own and traces again; None otherwise."""
    stream = missing_rng_stream(exc) if kind == "linen" and profile.get("mutable") is True else None
    return stream if stream is not None and stream not in cast("list[str]", profile.get("rngs", [])) else None


@contextlib.contextmanager
def _linen_params_as_initialised() -> Iterator[None]:
    """Skip Linen's re-check of every existing parameter while tracing ``apply``.

    ``Scope.param`` re-runs each initialiser under ``jax.eval_shape`` to compare its shape with the
    parameter's: a third of a transformer gradient's trace. Here the parameters come from an
    init of the same module, method and argument shapes (or from a hint that a concurrent real
    init confirms, capture/launch/speculate.py), so the check cannot fail; it adds no equation either,
    so the graph is the same. Parameters that do not exist yet take Flax's own path.
    """
    try:
        from flax.core import meta
        from flax.core.scope import Scope
    except ImportError:
        yield
        return
    original = Scope.__dict__.get("param")
    if original is None or not all(hasattr(Scope, n) for n in ("has_variable", "reserve", "get_variable")):
        yield  # another Flax: keep its own path
        return

    def param(
        self: Scope,
        name: str,
        init_fn: Callable[..., object],
        *init_args: object,
        unbox: bool = True,
        **init_kwargs: object,
    ) -> object:
        if not self.has_variable("params", name):
            return original(self, name, init_fn, *init_args, unbox=unbox, **init_kwargs)
        self.reserve(name, "params")
        value = self.get_variable("params", name)
        return meta.unbox(value) if unbox else value

    Scope.param = param  # type: ignore[method-assign,assignment]  # replaced for the block only
    try:
        yield
    finally:
        Scope.param = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _linen_initializing() -> Iterator[None]:
    """``mutable = true``: apply the module as ``init`` runs it, every collection mutable and
    ``is_initializing()`` true, with the parameters as inputs. A call site that is an ``init``
    call traces what it ran: Flax's BatchNorm, for one, skips its cross-device mean while
    initializing, so ``axis_name="batch"`` needs no mapped axis there (flax/examples/imagenet)."""
    try:
        from flax.core.scope import Scope
    except ImportError:
        yield
        return
    original = Scope.__dict__.get("get_flag")
    if original is None:
        yield
        return

    def get_flag(self: Scope, key: str, default: object = None) -> object:
        return True if key == "initializing" else original(self, key, default)

    Scope.get_flag = get_flag  # type: ignore[method-assign]  # replaced for the block only
    try:
        yield
    finally:
        Scope.get_flag = original  # type: ignore[method-assign]


def _constructed(
    model: object,
    param: str,
    default: Callable[[], object],
    adapt: Callable[[object], object] | None,
    eval_shape: Callable[..., object],
    init_args: list[object],
    init_kwargs: dict[str, object],
    concrete: bool,
    init: _Init | None,
) -> object:
    """The NNX or Equinox module that ``model`` (a module class) builds from the init arguments, or
    ``model`` itself when it is already a module. Its ``param`` (NNX's ``rngs``, Equinox's ``key``)
    is ``default()`` when the init arguments leave it out, else what ``adapt`` makes of the given
    one; built abstractly under ``eval_shape``, or for real when ``concrete`` (a values run: the real
    module, initialised with the seed)."""
    if not is_constructor(model):
        return model
    cls = cast("Callable[..., object]", model)
    fill = _needs(cls, param, init_kwargs)

    def build(*args: object, **kwargs: object) -> object:
        if fill:
            kwargs[param] = default()
        elif adapt is not None and param in kwargs:
            kwargs[param] = adapt(kwargs[param])
        return cls(*args, **kwargs)

    if concrete:
        return build(*init_args, **init_kwargs)
    return _build_abstractly(eval_shape, build, init_args, init_kwargs, init)


def _nnx_plan(
    model: object,
    factory: bool,
    init_args: list[object],
    init_kwargs: dict[str, object],
    seed: int,
    method: str | None,
    concrete: bool = False,
    init: _Init | None = None,
) -> Plan:
    from flax import nnx

    def rngs(given: object) -> object:  # a key given for rngs (a recipe's { kind = "key" })
        return nnx.Rngs(cast("jax.Array", given)) if _is_key(given) else given

    model = _constructed(
        model, "rngs", lambda: nnx.Rngs(seed), rngs, nnx.eval_shape, init_args, init_kwargs, concrete, init
    )
    if not concrete:
        _loose_arrays_as_data(model)
    # nnx.split's overloads cannot say what a filter and ``...`` split into: a graph and two states
    split = cast(
        "Callable[..., tuple[nnx.GraphDef[object], nnx.State[object, object], nnx.State[object, object]]]", nnx.split
    )
    graphdef, params, state = split(model, nnx.Param, ...)
    if not concrete:
        params, state = abstractify(params), abstractify(state)

    def apply(
        params: object, state: object, keys: object, args: list[object], kwargs: dict[str, object]
    ) -> tuple[object, object]:
        m = nnx.merge(graphdef, params, state)
        before = _labelled_leaves(split(m, nnx.Param, ...)[2])  # merge may share the Variables of state
        with module_scopes(m, nnx_module_paths):
            fn = cast("Callable[..., object]", getattr(m, method) if method else m)
            out = fn(*args, **kwargs)
        return out, _nnx_updates(split(m, nnx.Param, ...)[2], before)

    return Plan(kind="nnx", apply=apply, params=params, state=state, strip_value=True, scope_mode="marked")


def _loose_arrays_as_data(model: object) -> None:
    """An array a module keeps as a plain attribute, not in a Variable (GPJax's ``Constant`` mean:
    ``self.constant = jnp.array(constant)``), made a state leaf of the abstract ``model`` as it is
    of a concrete one. Built under ``nnx.eval_shape`` it comes back a ShapeDtypeStruct (flax
    0.12.0) or the build's own tracer (0.12.8), which ``nnx.split`` keeps as a static attribute:
    the trace then met it in arithmetic (``unsupported operand type(s) for *: 'DynamicJaxprTracer'
    and 'ShapeDtypeStruct'``). A zero-stride NumPy array of its shape stands in for it (no memory),
    which the split takes as data and the abstract state turns into an input."""
    import jax
    import numpy as np
    from flax import nnx

    loose = [(p, v) for p, v in nnx.iter_graph(model) if p and isinstance(v, jax.ShapeDtypeStruct | jax.core.Tracer)]
    for path, value in loose:
        aval = getattr(value, "aval", value)
        parent: object = model
        try:
            for key in path[:-1]:
                parent = getattr(parent, key) if isinstance(key, str) else parent[key]  # type: ignore[index]
            name = path[-1]
            if not isinstance(name, str) or vars(parent).get(name) is not value:
                continue  # an item of a list, or not an attribute of its own: left as it was
            data = np.broadcast_to(np.zeros((), aval.dtype), tuple(aval.shape))
        except Exception:
            continue  # a key's dtype, a path this cannot follow: left as it was
        object.__setattr__(parent, name, data)  # past the Pytree's checks, as its own __init__ would set it
        nodes = vars(parent).get("_pytree__nodes")
        if nodes is not None and hasattr(nodes, "update"):
            object.__setattr__(parent, "_pytree__nodes", nodes.update({name: True}))


def _labelled_leaves(tree: object, prefix: str = "") -> list[tuple[str, object]]:
    import jax

    labels = leaf_labels(tree, prefix, "state", True)
    return [(label, leaf) for (label, _), leaf in zip(labels, jax.tree_util.tree_leaves(tree), strict=True)]


def _changed(before: list[tuple[str, object]], after: list[tuple[str, object]]) -> dict[str, object] | None:
    """The leaves of ``after`` that are new or not the same object as before, by label: what an
    in-place NNX update wrote, an output of the program."""
    old = dict(before)
    changed = {label: leaf for label, leaf in after if old.get(label) is not leaf}
    return changed or None


def _nnx_updates(new_state: object, before: list[tuple[str, object]]) -> dict[str, object] | None:
    """The non-parameter NNX variables the call changed or created (counters, batch statistics, RNG
    counts, sown values)."""
    return _changed(before, _labelled_leaves(new_state))


def _equinox_plan(
    model: object,
    factory: bool,
    init_args: list[object],
    init_kwargs: dict[str, object],
    seed: int,
    method: str | None,
    concrete: bool = False,
    init: _Init | None = None,
) -> Plan:
    import equinox as eqx
    import jax

    model = _constructed(
        model, "key", lambda: jax.random.key(seed), None, eqx.filter_eval_shape, init_args, init_kwargs, concrete, init
    )
    params, static = eqx.partition(model, lambda x: eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct))
    if not concrete:
        params = abstractify(params)

    def apply(
        params: object, state: object, keys: object, args: list[object], kwargs: dict[str, object]
    ) -> tuple[object, object]:
        m = eqx.combine(params, static)
        with module_scopes(m, equinox_module_paths):
            fn = cast("Callable[..., object]", getattr(m, method) if method else m)
            return fn(*args, **kwargs), None

    return Plan(kind="equinox", apply=apply, params=params, scope_mode="marked")


# --- splitting arguments into traced leaves and closed-over statics ------------------------------


def split_dynamic(tree: _Tree) -> tuple[list[object], Callable[[list[object]], _Tree]]:
    """The traced leaves of ``tree`` and a function rebuilding the tree from new traced leaves."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    mask = [is_dynamic(x) for x in leaves]
    dyn = [x for x, m in zip(leaves, mask, strict=True) if m]

    def rebuild(new: list[object]) -> _Tree:
        it = iter(new)
        rebuilt = jax.tree_util.tree_unflatten(
            treedef, [next(it) if m else x for x, m in zip(leaves, mask, strict=True)]
        )
        return cast("_Tree", rebuilt)  # ``tree``'s structure: the same containers, new traced leaves

    return dyn, rebuild


def dynamic_paths(tree: object) -> list[KeyPath]:
    """Key paths of the traced leaves of ``tree``, in the order :func:`split_dynamic` returns them."""
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [tuple(path) for path, x in flat if is_dynamic(x)]


def _container_role(x: object) -> str | None:
    """The role of the arrays inside ``x`` when ``x`` is a module or a state holder passed as a
    call argument (a function target ``loss(model, state, x)``): ``parameter`` or ``state``."""
    eqx = sys.modules.get("equinox")
    if eqx is not None:
        if isinstance(x, eqx.nn.State):
            return "state"
        if isinstance(x, eqx.Module):
            return "parameter"
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(x, nnx.Variable):
        return "parameter" if isinstance(x, nnx.Param) else "state"
    return None


def _variable_path(path: KeyPath) -> KeyPath:
    """An NNX Variable's leaf path without its trailing ``.value`` (``head/kernel``, as for NNX targets)."""
    if path and "flax.nnx" in sys.modules and getattr(path[-1], "name", None) in ("value", "raw_value"):
        return path[:-1]
    return path


PARAMETER_NAMES = frozenset({"params", "variables", "weights"})  # by Flax's and common convention
STATE_NAMES = frozenset({"opt_state", "batch_stats"})


def _train_state(x: object) -> bool:
    module = sys.modules.get("flax.training.train_state")
    return module is not None and isinstance(x, module.TrainState)


def _index(entry: object) -> int:
    """The index of a key path's entry into a sequence (jax.tree_util.SequenceKey)."""
    index: int = cast("SequenceKey", entry).idx
    return index


def _named_role(path: KeyPath, arg_names: tuple[str, ...]) -> str | None:
    """``parameter`` / ``state`` when an argument's name or a key on the way to the leaf says so
    (``loss(params, x)``, ``variables["params"]``, ``opt_state``); else None."""
    names: list[str] = []
    if len(path) > 1 and getattr(path[0], "idx", None) == 0 and isinstance(getattr(path[1], "idx", None), int):
        index: int = cast("SequenceKey", path[1]).idx
        names.append(arg_names[index] if index < len(arg_names) else "")
        path = path[2:]
    else:
        path = path[1:]  # kwargs: the next key is the argument's name
    names += [str(getattr(k, "name", getattr(k, "key", ""))) for k in path]
    for name in names:
        if name in PARAMETER_NAMES:
            return "parameter"
        if name in STATE_NAMES:
            return "state"
    return None


def call_roles(tree: object, arg_names: tuple[str, ...] = (), key_ids: frozenset[int] = frozenset()) -> list[str]:
    """The role of each traced leaf of ``(args, kwargs)``, in :func:`split_dynamic`'s order: ``key``
    for keys; inside modules and state holders, theirs; in a Flax ``TrainState``, ``parameter`` for
    its ``params`` and ``state`` for the rest (step, optimizer state); else what the argument's
    name or a key on the path says (:func:`_named_role`); else ``input``."""
    import jax

    def container(x: object) -> bool:
        return _container_role(x) is not None or _train_state(x)

    roles: list[str] = []
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=container)
    for path, sub in flat:
        inside = _container_role(sub)
        # Flattening is compositional: a container's own leaves come in the full flattening's order.
        for rest, leaf in jax.tree_util.tree_flatten_with_path(sub)[0] if container(sub) else [((), sub)]:
            if not is_dynamic(leaf):
                continue
            if _is_key(leaf) or id(leaf) in key_ids:  # key_ids: raw uint32[2] keys a recipe made
                role = "key"
            elif inside is not None:
                role = inside
            elif _train_state(sub):
                role = "parameter" if rest and getattr(rest[0], "name", None) == "params" else "state"
            else:
                role = _named_role(tuple(path) + tuple(rest), arg_names) or "input"
            roles.append(role)
    return roles


@dataclass
class Traceable:
    fn: Callable[..., object]
    operands: tuple[object, object, object, list[object]]  # params, state, keys, dynamic call leaves
    input_labels: list[tuple[str, str]] = field(default_factory=list)  # (label, role) per flat leaf
    grad_labels: list[str] = field(default_factory=list)  # labels of the differentiated leaves


def traceable(
    plan: Plan,
    args: list[object],
    kwargs: dict[str, object],
    transform: str | None,
    key_ids: frozenset[int] = frozenset(),
    concrete: bool = False,
) -> Traceable:
    """One function of ``(params, state, keys, dyn)`` returning ``(out, grads, new_state)``;
    ``key_ids`` are the ids of leaves that are keys whatever their dtype (legacy ``uint32[2]``);
    ``concrete`` keeps the call's arrays as they are (a values run) instead of their shapes."""
    import jax
    import jax.numpy as jnp

    if not concrete:
        args, kwargs = abstractify(args), abstractify(kwargs)
    dyn, rebuild = split_dynamic((args, kwargs))
    paths = dynamic_paths((args, kwargs))
    # each path starts at (args, kwargs)'s SequenceKey: 0 for args, 1 for kwargs
    call_labels = [label_of(("args" if _index(p[0]) == 0 else "kwargs", *_variable_path(p[1:]))) for p in paths]
    roles = call_roles((args, kwargs), plan.arg_names, key_ids)
    params = plan.params
    wrt_count = 0
    if plan.kind == "function" and transform:
        wrt_count = sum(1 for p in paths if _index(p[0]) == 0 and len(p) > 1 and getattr(p[1], "idx", None) == 0)
        if wrt_count == 0:
            raise CaptureError("needs_input", "a gradient needs an array first argument")
        params, dyn = dyn[:wrt_count], dyn[wrt_count:]

    def forward(params: object, state: object, keys: object, dyn: list[object]) -> tuple[object, object]:
        if plan.kind == "function" and transform:
            a, kw = rebuild(list(cast("list[object]", params)) + list(dyn))  # the leaves split off above
        else:
            a, kw = rebuild(list(dyn))
        out, new_state = plan.apply(params, state, keys, list(a), dict(kw))
        return _array_outputs(out, plan.kind), new_state

    def total(out: object) -> object:
        floats = [x for x in jax.tree_util.tree_leaves(out) if jnp.issubdtype(x.dtype, jnp.inexact)]
        if not floats:
            raise CaptureError("trace", "the target has no floating-point outputs to differentiate")
        return functools.reduce(lambda a, b: a + b, [jnp.sum(jnp.real(x)) for x in floats])

    fn: Callable[..., object]
    if transform is None:

        def fn(params: object, state: object, keys: object, dyn: list[object]) -> object:
            out, new_state = forward(params, state, keys, dyn)
            return out, None, new_state
    else:
        # Written as ``nnx.value_and_grad`` users write a train step: differentiate with respect
        # to the parameters only, the state updates (batch statistics, RNG counts) an auxiliary
        # output. ``state`` is rebuilt inside the differentiated function: ``jax.grad`` passes the
        # arguments it does not differentiate as they are, and an NNX Variable made at the
        # outer trace level refuses an update at the gradient's ("Cannot mutate BatchStat from
        # a different trace level").
        def loss(params: object, state: object, keys: object, dyn: list[object]) -> object:
            out, new_state = forward(params, jax.tree_util.tree_map(lambda x: x, state), keys, dyn)
            return total(out), new_state

        if transform == "grad":

            def fn(params: object, state: object, keys: object, dyn: list[object]) -> object:
                grads, new_state = jax.grad(loss, has_aux=True)(params, state, keys, dyn)
                return None, grads, new_state
        elif transform == "value_and_grad":

            def fn(params: object, state: object, keys: object, dyn: list[object]) -> object:
                (value, new_state), grads = jax.value_and_grad(loss, has_aux=True)(params, state, keys, dyn)
                return value, grads, new_state
        else:
            raise CaptureError("needs_input", f"unknown transform {transform!r}")

    labels: list[tuple[str, str]] = []
    if plan.kind == "function" and transform:
        labels += list(zip(call_labels[:wrt_count], roles[:wrt_count], strict=True))
    else:
        labels += leaf_labels(params, plan.params_prefix, plan.params_role, plan.strip_value)
    labels += leaf_labels(plan.state, "", "state", plan.strip_value)
    labels += leaf_labels(plan.keys, "rngs", "key", False)
    skip = wrt_count if plan.kind == "function" and transform else 0
    labels += list(zip(call_labels[skip:], roles[skip:], strict=True))
    n_params = len(jax.tree_util.tree_leaves(params))
    return Traceable(
        fn=fn,
        operands=(params, plan.state, plan.keys, dyn),
        input_labels=labels,
        grad_labels=["grad/" + label for label, _ in labels[:n_params]],
    )


def _array_outputs(out: object, kind: str) -> object:
    """``out`` with its static leaves (an Equinox model's activation functions, a config string)
    dropped, as ``eqx.filter_jit`` does, so ``make_step(model, ...) -> (model, opt_state, loss)``
    traces: the graph's outputs are the arrays. A module or a function returned whole, or an
    output with no array at all, is a clear error instead of ``make_jaxpr``'s."""
    import jax
    import numpy as np

    flat, treedef = jax.tree_util.tree_flatten_with_path(out)
    arrays = [isinstance(leaf, jax.Array | np.ndarray | np.generic | bool | int | float | complex) for _, leaf in flat]
    for (path, leaf), is_array in zip(flat, arrays, strict=True):
        if is_array or (any(arrays) and infer_kind(leaf) == "function" and path):
            continue
        where = label_of(tuple(path))
        where = f"out/{where}" if where else "out"
        hint = ""
        # a factory (it returns a module or a function to trace) is a target chosen wrongly, not a
        # program that failed: "refused", which a live trace shows as not live, never as an error
        factory = infer_kind(leaf) != "function" or callable(leaf)
        if infer_kind(leaf) != "function":
            hint = (
                f"; it returned a {infer_kind(leaf)} module: trace that module instead, with this function "
                'as the profile\'s init.factory (init = { factory = "module:function" })'
            )
        elif callable(leaf):
            hint = "; it returned a function: trace that function instead"
        raise CaptureError(
            "refused" if factory else "trace",
            f"the {kind} target returned a {type(leaf).__module__}.{type(leaf).__qualname__} at {where}, "
            f"not an array: every output leaf must be an array or a number{hint}",
        )
    if all(arrays):
        return out
    return jax.tree_util.tree_unflatten(
        treedef, [leaf if a else None for (_, leaf), a in zip(flat, arrays, strict=True)]
    )


def output_labels(plan: Plan, traced: Traceable, out_shape: tuple[object, object, object]) -> list[tuple[str, str]]:
    """``(label, role)`` per output leaf of ``(out, grads, new_state)``."""
    import jax

    out, grads, new_state = out_shape
    # Outputs have the roles output and state only: a key a step returns (``return key, y``) is an
    # output like any other, its value's dtype (``key<fry>``) says that it is a key.
    labels = leaf_labels(out, "out", "output", False, keys=False)
    n_grads = len(jax.tree_util.tree_leaves(grads))
    if n_grads == len(traced.grad_labels):
        labels += [(label, "output") for label in traced.grad_labels]
    else:
        labels += leaf_labels(grads, "grad", "output", plan.strip_value, keys=False)
    labels += leaf_labels(new_state, "", "state", plan.strip_value, keys=False)
    return labels


def leaf_labels(tree: object, prefix: str, role: str, strip_value: bool, *, keys: bool = True) -> list[tuple[str, str]]:
    """``(label, role)`` per leaf of ``tree``; with ``keys`` (inputs) a PRNG key's role is ``key``."""
    import jax

    if tree is None:
        return []
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    out: list[tuple[str, str]] = []
    for path, leaf in flat:
        parts = list(path)
        if strip_value and parts and getattr(parts[-1], "name", None) in ("value", "raw_value"):
            parts = parts[:-1]
        label = label_of(tuple(parts))
        label = f"{prefix}/{label}" if prefix and label else (prefix or label or "out")
        out.append((label, "key" if keys and _is_key(leaf) else role))
    return out


def label_of(path: KeyPath) -> str:
    """A key path as a ``/``-joined label (``params/Dense_0/kernel``, ``args/0``, ``layers/1/weight``)."""
    parts: list[str] = []
    for k in path:
        if isinstance(k, str | int):
            parts.append(str(k))
            continue
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    return "/".join(parts)


def _is_key(x: object) -> bool:
    import jax

    dtype = getattr(x, "dtype", None)
    try:
        return dtype is not None and bool(jax.numpy.issubdtype(dtype, jax.dtypes.prng_key))
    except Exception:
        return False
