"""What discovery knows about the JAX ecosystem's own names, as fully qualified dotted paths.

Everything here is a rule over names, never an import: which library classes are modules, which
decorators are JAX transforms, which references are computation and which are only types,
configuration or I/O. The module-class rule is checked against the real exports of the installed
flax and equinox by ``tests/unit/test_library_rule.py``.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["function", "linen", "nnx", "equinox"]
ModuleKind = Literal["linen", "nnx", "equinox"]

# Namespaces whose capitalised classes are modules of a given kind.
_MODULE_NAMESPACES: tuple[tuple[str, ModuleKind], ...] = (
    ("flax.linen.", "linen"),
    ("flax.nnx.", "nnx"),
    ("equinox.nn.", "equinox"),
)
# The canonical roots and their public spellings outside those namespaces.
_ROOTS: dict[str, ModuleKind] = {
    "equinox.Module": "equinox",
    "equinox._module.Module": "equinox",
    "equinox._module._module.Module": "equinox",
}
# Capitalised library classes that are not modules: variables, state, RNG, optimizer, metric,
# struct, metadata and filter types. Substrings first (future-proof), then exact names.
_NOT_MODULE_PARTS = (
    "Variable", "State", "Rng", "Optim", "Metric", "Param", "Pytree", "Object", "GraphDef",
    "Partitioned", "Metadata", "FrozenDict", "Context", "Sharding", "Axes", "Error",
    "Exception", "Warning", "Struct", "PyTreeNode",
)  # fmt: skip
_NOT_MODULE_NAMES = frozenset({
    "BatchApply", "DenyList", "All", "Any", "Not", "Nothing", "Everything", "OfType",
    "PathContains", "WithTag", "Carry", "EMA", "Cache", "Intermediate", "Perturbation",
    "BatchStat", "OptArray", "Scope", "Collection", "Array", "Initializer", "Dtype", "PRNGKey",
})  # fmt: skip
# Packages discovery treats as libraries: a name under them is judged by rule, never by reading
# the package's files even when they sit inside the workspace.
LIBRARY_PACKAGES = ("jax", "jaxlib", "flax", "equinox", "optax", "numpy", "functools", "typing")

# Top-level packages whose use in a body counts as computing with JAX.
_COMPUTE_ROOTS = ("jax.", "flax.linen.", "flax.nnx.", "equinox.", "optax.")
_COMPUTE_EXACT = frozenset({"jax", "flax.linen", "flax.nnx", "equinox", "optax"})

# References that are JAX names but not computation: types, dtypes, constants, configuration,
# devices and profiling. A function whose only JAX use is one of these gets no lens.
_NON_COMPUTE_PREFIXES = (
    "jax.config", "jax.typing", "jax.profiler", "jax.distributed", "jax.monitoring",
    "jax.experimental.compilation_cache", "jax.debug.visualize", "jax.__version__",
    "jax.numpy.save", "jax.numpy.load", "jax.tree_util.register", "jax.export.deserialize",
)  # fmt: skip
_NON_COMPUTE_NAMES = frozenset({
    "devices", "local_devices", "device_count", "local_device_count", "process_index",
    "process_count", "default_backend", "print_environment_info", "clear_caches",
    "Array", "ArrayLike", "DTypeLike", "ndarray", "dtype", "Shape", "PRNGKeyArray", "KeyArray",
    "float16", "float32", "float64", "bfloat16", "int4", "int8", "int16", "int32", "int64",
    "uint4", "uint8", "uint16", "uint32", "uint64", "bool_", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float_", "int_", "complex_", "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "finfo",
    "iinfo", "Module",
})  # fmt: skip

# References that use JAX but only as plumbing: a function whose JAX use is all of this kind and
# that loops or does I/O is a driver, not a model function.
_INCIDENTAL = (
    "jax.random.PRNGKey", "jax.random.key", "jax.random.split", "jax.random.fold_in",
    "jax.device_put", "jax.device_get", "jax.block_until_ready", "jax.tree", "jax.numpy.asarray",
    "jax.numpy.array", "jax.jit", "jax.pmap", "jax.local_devices", "flax.nnx.state",
    "flax.nnx.split", "flax.nnx.merge", "flax.nnx.update", "flax.nnx.Rngs", "optax.",
)  # fmt: skip

# Decorators that transform a function (the last component of a name under a JAX namespace).
_TRANSFORMS = frozenset({
    "jit", "pjit", "vmap", "pmap", "xmap", "grad", "value_and_grad", "jacfwd", "jacrev",
    "jacobian", "hessian", "checkpoint", "remat", "custom_jvp", "custom_vjp", "custom_vmap",
    "custom_transpose", "named_call", "named_scope", "shard_map", "checkify", "scan",
    "split_rngs", "eval_shape", "jvp", "vjp", "linearize", "custom_gradient",
})  # fmt: skip
_TRANSFORM_NAMESPACES = ("jax.", "flax.nnx.", "flax.linen.", "equinox.")

# Names (qualified) whose use marks a function as a driver: I/O, logging, download, progress.
_DRIVER_PREFIXES = (
    "print", "open", "input", "logging.", "absl.logging.", "tqdm", "pickle.", "json.dump",
    "json.load", "os.", "shutil.", "pathlib.", "glob.", "urllib.", "requests.", "wget.",
    "tensorflow_datasets.", "tensorflow.", "datasets.", "torch.utils.data", "orbax.",
    "flax.training.checkpoints.", "flax.serialization.", "wandb.", "tensorboard", "clu.",
    "numpy.save", "numpy.load", "matplotlib.", "time.time", "time.perf_counter", "sys.exit",
    "csv.", "zipfile.", "tarfile.", "gzip.",
)  # fmt: skip


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def is_library_name(qualname: str) -> bool:
    """True for names under a package discovery judges by rule instead of by source."""
    head = qualname.split(".", 1)[0]
    return head in LIBRARY_PACKAGES


def library_module_kind(qualname: str) -> ModuleKind | None:
    """The module kind of a library class by its qualified name, or None for anything else."""
    if qualname in _ROOTS:
        return _ROOTS[qualname]
    for prefix, kind in _MODULE_NAMESPACES:
        if qualname.startswith(prefix):
            last = _last(qualname)
            if not last[:1].isupper() or last in _NOT_MODULE_NAMES:
                return None
            if any(part in last for part in _NOT_MODULE_PARTS):
                return None
            return kind
    return None


def is_compute(qualname: str) -> bool:
    """True when a reference to ``qualname`` in a body means the body computes with JAX."""
    if not (qualname in _COMPUTE_EXACT or qualname.startswith(_COMPUTE_ROOTS)):
        return False
    if qualname.startswith(_NON_COMPUTE_PREFIXES):
        return False
    return _last(qualname) not in _NON_COMPUTE_NAMES


def is_incidental(qualname: str) -> bool:
    """True for JAX names that are plumbing (keys, device transfer, tree utilities)."""
    return qualname.startswith(_INCIDENTAL)


def is_transform(qualname: str) -> bool:
    """True for a decorator name that is a JAX transform (``jax.jit``, ``eqx.filter_jit``...)."""
    if not qualname.startswith(_TRANSFORM_NAMESPACES):
        return False
    last = _last(qualname)
    if qualname.startswith("equinox.") and last.startswith("filter_"):
        return True
    return last in _TRANSFORMS


def is_driver_signal(qualname: str) -> bool:
    """True for names of I/O, logging, download or progress reporting."""
    return qualname.startswith(_DRIVER_PREFIXES)


def is_partial(qualname: str) -> bool:
    return qualname in ("functools.partial", "jax.tree_util.Partial")


def ecosystem_root(qualname: str) -> bool:
    """True when a name is bound into the JAX ecosystem (worth a text trigger)."""
    return qualname in _COMPUTE_EXACT or qualname.startswith(_COMPUTE_ROOTS) or qualname == "flax"
