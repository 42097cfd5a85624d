"""Building resolved input specs into values: abstract arrays and keys, static Python values, pytrees."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar, cast

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.loading.loading import Loader

if TYPE_CHECKING:
    import jax
    import numpy as np
    from jax.export import SymbolicScope
    from jax.sharding import Mesh, NamedSharding
    from jax.tree_util import PyTreeDef

    from jaxlsp.worker.protocol import CallSpec, Generator, MeshSpec

_Tree = TypeVar("_Tree")

WIDE_DTYPES = frozenset({"float64", "int64", "uint64", "complex128"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def iter_array_specs(spec: object) -> Iterator[Mapping[str, object]]:
    """Every array spec inside a spec (through lists, dicts and ref arguments)."""
    if isinstance(spec, dict):
        kind = spec.get("kind")
        if kind == "array":
            yield spec
        elif kind in ("list", "dict"):
            items = spec.get("items")
            yield from iter_array_specs(list(items.values()) if isinstance(items, dict) else items)
        elif kind == "ref":
            yield from iter_array_specs(spec.get("args", []))
            yield from iter_array_specs(list(spec.get("kwargs", {}).values()))
        elif kind is None:
            for value in spec.values():
                yield from iter_array_specs(value)
    elif isinstance(spec, list):
        for item in spec:
            yield from iter_array_specs(item)


def wide_dtypes(*call_specs: object) -> list[str]:
    """64-bit dtypes requested by the specs (refused unless the profile enables x64)."""
    found: list[str] = []
    for spec in call_specs:
        for arr in iter_array_specs(spec):
            dtype = str(arr.get("dtype", "float32"))
            if dtype in WIDE_DTYPES and dtype not in found:
                found.append(dtype)
    return found


class InputBuilder:
    """Turns specs into values; all symbolic dimension names share one scope.

    ``concrete``: arrays are made by their generators and keys are real keys (a values run);
    otherwise both are abstract (shapes and dtypes only, no device work)."""

    def __init__(
        self, loader: Loader, symbolic: list[str], seed: int, concrete: bool = False, mesh: Mesh | None = None
    ) -> None:
        self.loader = loader
        self.seed = seed
        self.concrete = concrete
        self.mesh = mesh  # the profile's jax Mesh (:func:`make_mesh`), which array shardings name
        self.symbolic_names = list(symbolic)
        self._dims: dict[str, object] = {}  # name -> its symbolic dimension (jax.export's DimSize)
        self._scope: SymbolicScope | None = None
        self.generators: list[Generator] = []
        # id -> (the abstract key, its seed, impl, legacy): what :meth:`concrete_keys` makes real
        self.keys: dict[int, tuple[jax.ShapeDtypeStruct, int, str | None, bool]] = {}

    def concrete_keys(self, tree: _Tree) -> _Tree:
        """``tree`` with the abstract keys this builder made replaced by real ones (same seed and
        implementation), for values that are closed over instead of traced (Linen module fields)."""
        import jax

        def real(leaf: object) -> object:
            found = self.keys.get(id(leaf))
            if found is None or found[0] is not leaf:
                return leaf
            _, seed, impl, legacy = found
            return real_key(seed, impl, legacy)

        return cast("_Tree", jax.tree_util.tree_map(real, tree))  # the same structure, keys made real

    def _symbolic_dims(self) -> dict[str, object]:
        if self.symbolic_names and not self._dims:
            # imported by name: before JAX 0.8 (GPJax's lock has 0.7.1) ``import jax`` does not
            # load it, and ``jax.export`` was an AttributeError on every symbolic trace
            from jax import export

            names = [n for n in self.symbolic_names if _NAME.match(n)]
            if names:
                self._scope = export.SymbolicScope()
                dims = export.symbolic_shape(", ".join(names), scope=self._scope)
                self._dims = dict(zip(names, dims, strict=True))
        return self._dims

    def dim(self, d: int | str) -> object:
        """A dimension's size: an int, or a symbolic dimension of the builder's scope."""
        if isinstance(d, int):
            return d
        dims = self._symbolic_dims()
        if d in dims:
            return dims[d]
        from jax import export

        if not dims and not self.symbolic_names:
            raise CaptureError("needs_input", f"dimension {d!r} has no size and is not declared symbolic")
        try:
            dim: object = export.symbolic_shape(d, scope=self._scope)[0]
            return dim
        except Exception as exc:
            raise CaptureError("needs_input", f"dimension {d!r}: {exc}") from None

    def build(self, spec: object) -> object:
        """The value of an input spec (protocol.py's InputSpec), of a list of them, of a plain
        mapping of them, or a plain JSON scalar (static)."""
        if not isinstance(spec, dict):
            if isinstance(spec, list):
                return [self.build(s) for s in spec]
            return spec  # a plain JSON scalar or string: static
        kind = spec.get("kind")
        if kind == "array":
            import jax
            import jax.numpy as jnp

            sds = _shape_dtype_struct()
            shape = tuple(self.dim(d) for d in spec.get("shape", []))
            dtype = jnp.dtype(spec.get("dtype", "float32"))
            generator = cast("Generator", dict(spec.get("generator", {})))
            self.generators.append(generator)
            sharding = self._sharding(spec.get("sharding"))
            if self.concrete:
                made = generate(generator, cast("tuple[int, ...]", shape), dtype, self.seed)
                return made if sharding is None else jax.device_put(made, sharding)
            return sds(shape, dtype) if sharding is None else sds(shape, dtype, sharding=sharding)
        if kind == "key":
            seed = int(spec.get("seed", self.seed))
            impl = spec.get("impl")
            legacy = bool(spec.get("legacy", False))
            if self.concrete:
                return real_key(seed, str(impl) if impl else None, legacy)
            key = abstract_key(seed, impl=str(impl) if impl else None, legacy=legacy)
            self.keys[id(key)] = (key, seed, str(impl) if impl else None, legacy)
            return key
        if kind == "none":
            return None
        if kind == "static":
            return spec.get("value")
        if kind == "list":
            return [self.build(s) for s in spec.get("items", [])]
        if kind == "dict":
            return {str(k): self.build(v) for k, v in spec.get("items", {}).items()}
        if kind == "ref":
            obj = self.loader.resolve(str(spec.get("ref", "")))
            if "args" in spec or "kwargs" in spec:
                args = [self.build(s) for s in spec.get("args", [])]
                kwargs = {str(k): self.build(v) for k, v in spec.get("kwargs", {}).items()}
                called = cast("Callable[..., object]", obj)  # a ref given arguments names a callable
                obj = called(*args, **kwargs) if self.concrete else call_on_abstract(called, args, kwargs)
            return obj
        if kind is None:
            return {str(k): self.build(v) for k, v in spec.items()}
        raise CaptureError("needs_input", f"unknown input spec kind {kind!r}")

    def _sharding(self, spec: list[list[str] | None] | None) -> NamedSharding | None:
        """``NamedSharding(mesh, P(...))`` of an array spec's ``sharding`` (None: not sharded)."""
        if not spec:
            return None
        if self.mesh is None:
            raise CaptureError("needs_input", "an array has a sharding, and the profile has no mesh")
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        axes = [None if not names else names[0] if len(names) == 1 else tuple(names) for names in spec]
        partition = cast("Callable[..., P]", P)  # jax leaves PartitionSpec's constructor unannotated
        return NamedSharding(self.mesh, partition(*axes))

    def call_args(self, call: CallSpec | None) -> tuple[list[object], dict[str, object]]:
        """``(args, kwargs)`` of a CallSpec; a factory is called with no arguments."""
        if not call:
            return [], {}
        if "factory" in call:
            factory = cast("Callable[[], object]", self.loader.resolve(str(call["factory"])))
            result = factory() if self.concrete else call_abstractly(factory)
            if isinstance(result, dict) and set(result) <= {"args", "kwargs"} and result:
                return list(result.get("args", [])), dict(result.get("kwargs", {}))
            if isinstance(result, dict):
                return [], dict(result)
            if isinstance(result, list | tuple):
                return list(result), {}
            raise CaptureError(
                "needs_input", f"input factory {call['factory']} returned {type(result).__name__}, not a mapping"
            )
        args = [self.build(s) for s in call.get("args", [])]
        kwargs = {str(k): self.build(v) for k, v in call.get("kwargs", {}).items()}
        return args, kwargs


def make_mesh(spec: MeshSpec, device: jax.Device | None, where: str, pod: list[jax.Device] | None = None) -> Mesh:
    """The profile's mesh (``jax.make_mesh`` with its axis types) on the first devices of its
    platform, the profile's own device first; fewer devices than the mesh's size is ``refused``
    with ``where`` (the mesh's key path) and both counts. ``pod``: a TPU topology's devices
    (worker/tracing/topology.py), which the mesh must cover exactly: a mesh over part of a pod
    would compile for another program than the one the pod runs."""
    import math

    import jax

    names = [str(n) for n in spec["axisNames"]]
    sizes = [int(s) for s in spec["axisSizes"]]
    axis_type = getattr(jax.sharding, "AxisType", None)
    if axis_type is None or not hasattr(jax, "set_mesh"):
        raise CaptureError(
            "refused",
            f"{where}: a mesh in the profile needs explicit sharding (jax.sharding.AxisType, jax.set_mesh: "
            f"jax >= 0.7); this interpreter has jax {jax.__version__}",
        )
    size = math.prod(sizes)
    if pod is not None:
        if size != len(pod):
            spelled = ", ".join(f"{n}: {s}" for n, s in zip(names, sizes, strict=True))
            raise CaptureError(
                "refused",
                f"{where}: a mesh of {size} devices ({spelled}) on a topology of {len(pod)} devices; "
                f"the mesh's axes must multiply to {len(pod)}",
            )
        kinds = tuple(getattr(axis_type, str(t)) for t in spec["axisTypes"])
        return jax.make_mesh(tuple(sizes), tuple(names), axis_types=kinds, devices=pod)
    platform = device.platform if device is not None else "cpu"
    found = list(jax.devices(platform))
    if device is not None:  # cuda:N: that device first, then the others of its platform
        found = [device, *[d for d in found if d != device]]
    if len(found) < size:
        spelled = ", ".join(f"{n}: {s}" for n, s in zip(names, sizes, strict=True))
        hint = "" if device is not None else f" (set devices = {size} or more)"
        raise CaptureError(
            "refused",
            f"{where}: a mesh of {size} devices ({spelled}) needs at least {size} devices, and this capture has "
            f"{len(found)} {platform} device(s){hint}",
        )
    types = tuple(getattr(axis_type, str(t)) for t in spec["axisTypes"])
    return jax.make_mesh(tuple(sizes), tuple(names), axis_types=types, devices=found[:size])


def generate(generator: Generator, shape: tuple[int, ...], dtype: np.dtype[np.generic], seed: int) -> jax.Array:
    """The array a generator spec describes (docs/recipes.md), made on the default device.

    Seeded generators draw from ``jax.random.key(seed)``: ``normal`` is
    ``jax.random.normal(key, shape, dtype) * std + mean``, ``uniform``
    ``jax.random.uniform(key, shape, dtype, low, high)``, ``randint``
    ``jax.random.randint(key, shape, low, high, dtype)``; ``arange`` fills in row-major order."""
    import jax
    import jax.numpy as jnp

    for d in shape:
        if not isinstance(d, int):
            raise CaptureError("needs_input", f"a values run needs every dimension's size; {d!r} is symbolic")
    kind = generator.get("kind", "normal" if jnp.issubdtype(dtype, jnp.inexact) else "zeros")
    key = jax.random.key(int(generator.get("seed", seed)))
    if kind == "normal":
        x = jax.random.normal(key, shape, dtype)
        std, mean = generator.get("std", 1.0), generator.get("mean", 0.0)
        if std != 1.0 or mean != 0.0:
            x = (x * std + mean).astype(dtype)
        return x
    if kind == "uniform":
        return jax.random.uniform(key, shape, dtype, generator.get("low", 0.0), generator.get("high", 1.0))
    if kind == "randint":
        return jax.random.randint(key, shape, generator["low"], generator["high"], dtype)
    if kind == "full":
        return jnp.full(shape, generator["value"], dtype)
    if kind == "zeros":
        return jnp.zeros(shape, dtype)
    if kind == "ones":
        return jnp.ones(shape, dtype)
    if kind == "arange":
        size = 1
        for d in shape:
            size *= d
        start, step = generator.get("start", 0), generator.get("step", 1)
        return (start + step * jnp.arange(size)).astype(dtype).reshape(shape)
    raise CaptureError("needs_input", f"unknown generator kind {kind!r}")


def _plain_static(leaf: object) -> bool:
    """A leaf that cannot hold a tracer: a plain value, a function, a type, jax's own callables
    (``jax.nn.relu`` is a ``custom_jvp``). Anything else might keep a traced array inside."""
    if leaf is None or isinstance(leaf, str | bytes | bool | int | float | complex | type):
        return True
    if inspect.isfunction(leaf) or inspect.isbuiltin(leaf) or inspect.ismethod(leaf):
        return True
    return isinstance(leaf, functools.partial) or type(leaf).__module__.split(".")[0] in ("jax", "jaxlib", "numpy")


def call_abstractly(fn: Callable[[], object]) -> object:
    """``fn()`` (an input factory) without computing its arrays: run under ``jax.eval_shape``, its
    array leaves come back as ShapeDtypeStructs and its static leaves (an Equinox model's activation
    functions) as they are. A factory that builds a model and an optimizer state thus costs a trace,
    not an XLA backend and real initialisers (1.7 s -> 0.2 s for a small Equinox CNN with AdamW; a
    model too large for memory still traces). A factory that needs concrete values (data loading
    that branches on them) or returns objects that could hide traced arrays runs again, eagerly."""
    import jax

    seen: dict[str, list[object] | list[bool] | PyTreeDef] = {}

    def arrays() -> list[object]:
        leaves, treedef = jax.tree_util.tree_flatten(fn())
        mask = [isinstance(leaf, jax.Array | np.ndarray | np.generic) for leaf in leaves]
        seen.update(treedef=treedef, leaves=leaves, mask=mask)
        return [leaf for leaf, m in zip(leaves, mask, strict=True) if m]

    import numpy as np

    try:
        shapes = jax.eval_shape(arrays)
    except jax.errors.JAXTypeError:
        return fn()  # concretization and friends: the factory needs real values
    statics = [leaf for leaf, m in zip(seen["leaves"], seen["mask"], strict=True) if not m]
    if not all(_plain_static(leaf) for leaf in statics):
        return fn()
    it = iter(shapes)
    return jax.tree_util.tree_unflatten(
        seen["treedef"], [next(it) if m else leaf for leaf, m in zip(seen["leaves"], seen["mask"], strict=True)]
    )


def call_on_abstract(fn: Callable[..., object], args: list[object], kwargs: dict[str, object]) -> object:
    """``fn(*args, **kwargs)`` for a ref spec whose arguments hold abstract arrays (``{ ref =
    "jax.numpy:abs", args = [array spec] }`` from a test's ``jnp.abs(jax.random.normal(...))``):
    under ``jax.eval_shape``, so a JAX function sees tracers, not ShapeDtypeStructs (which it
    refuses: "not a valid JAX type"), and its array results come back as ShapeDtypeStructs of
    the exact shape and dtype. A callee that returns something other than arrays (a workspace
    config holding an array field) or needs concrete values is called as it is."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    mask = [isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves]
    if not any(mask):
        return fn(*args, **kwargs)

    def run(*dynamic: object) -> object:
        it = iter(dynamic)
        filled = [next(it) if m else leaf for leaf, m in zip(leaves, mask, strict=True)]
        a, k = jax.tree_util.tree_unflatten(treedef, filled)
        return fn(*a, **k)

    try:
        return jax.eval_shape(run, *[leaf for leaf, m in zip(leaves, mask, strict=True) if m])
    except TypeError:  # a result that is no pytree of arrays, or a concretization error
        return fn(*args, **kwargs)


def real_key(seed: int, impl: str | None = None, legacy: bool = False) -> jax.Array:
    """The key a key spec describes (a values run): typed, another implementation, or legacy."""
    import jax

    if legacy:
        return jax.random.PRNGKey(seed)
    return jax.random.key(seed, impl=impl) if impl else jax.random.key(seed)


def abstract_key(seed: int, *, impl: str | None = None, legacy: bool = False) -> jax.ShapeDtypeStruct:
    """A PRNG key as a ShapeDtypeStruct (no device work): a typed key (``key<fry>``, or another
    implementation such as ``rbg``), or with ``legacy`` a raw ``uint32[2]`` key (``PRNGKey``)."""
    import jax

    key: jax.ShapeDtypeStruct  # eval_shape's result of one array
    if legacy:
        key = jax.eval_shape(lambda: jax.random.PRNGKey(seed))
    elif impl:
        key = jax.eval_shape(lambda: jax.random.key(seed, impl=impl))
    else:
        key = jax.eval_shape(lambda: jax.random.key(seed))
    return key


def abstractify(tree: _Tree) -> _Tree:
    """Concrete arrays (numpy, jax) in a pytree become ShapeDtypeStructs; other leaves stay. A
    sharding that is part of an array's type (an explicit mesh's, see
    :func:`.jaxcompat.typed_sharding`) stays with it: the trace sees the caller's types."""
    import jax
    import numpy as np

    from jaxlsp.worker.tracing.jaxcompat import typed_sharding

    sds = _shape_dtype_struct()

    def leaf(x: object) -> object:
        if isinstance(x, jax.Array):
            weak = bool(getattr(x, "weak_type", False))
            sharding = typed_sharding(x) or _spanning(x)
            if sharding is not None:
                return sds(x.shape, x.dtype, weak_type=weak, sharding=sharding)
            return sds(x.shape, x.dtype, weak_type=weak)
        if isinstance(x, np.ndarray):
            return sds(x.shape, x.dtype, weak_type=bool(getattr(x, "weak_type", False)))
        return x

    # the same structure, arrays in it abstract (ShapeDtypeStructs stand in for them to the trace)
    return cast("_Tree", jax.tree_util.tree_map(leaf, tree))


def _spanning(x: jax.Array) -> jax.sharding.Sharding | None:
    """The sharding of an array placed on several devices (a factory's FSDP-sharded model), kept on
    its abstract copy so that a compiled program (worker/program/compiled.py) is partitioned as the user's
    would be; None for an array on one device. Not part of the type: the trace is unchanged."""
    sharding = getattr(x, "sharding", None)
    try:
        return sharding if sharding is not None and len(sharding.device_set) > 1 else None
    except Exception:
        return None


def is_dynamic(x: object) -> bool:
    """Whether a leaf is traced (an array or an abstract array) rather than closed over."""
    import jax
    import numpy as np

    return isinstance(x, jax.ShapeDtypeStruct | jax.Array | np.ndarray)


def _shape_dtype_struct() -> Callable[..., jax.ShapeDtypeStruct]:
    """``jax.ShapeDtypeStruct``, whose constructor jax leaves unannotated."""
    import jax

    return cast("Callable[..., jax.ShapeDtypeStruct]", jax.ShapeDtypeStruct)
