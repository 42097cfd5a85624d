"""What discovery knows about the JAX ecosystem's own names, as fully qualified dotted paths.

Everything here is a rule over names, never an import: which library classes are modules, which
decorators are JAX transforms, which references are computation and which are only types,
configuration or I/O. The module-class rule is checked against the real exports of the installed
flax and equinox by ``tests/discovery/test_library_rule.py``.
"""

from __future__ import annotations

import re
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
    "flax.linen.Module": "linen",
    "flax.linen.module.Module": "linen",
    "flax.nnx.Module": "nnx",
    "flax.nnx.module.Module": "nnx",
    "equinox.Module": "equinox",
    "equinox._module.Module": "equinox",
    "equinox._module._module.Module": "equinox",
}
# Capitalised library classes that are not modules: variables, state, RNG, optimizer, metric,
# struct, metadata and filter types. CamelCase words first (future-proof), then exact names.
_NOT_MODULE_WORDS = frozenset({
    "Variable", "Variables", "State", "States", "Rng", "Rngs", "Optimizer", "Metric", "Metrics",
    "Param", "Params", "Pytree", "Object", "Partitioned", "Metadata", "Context", "Sharding",
    "Axes", "Error", "Exception", "Warning", "Struct", "Array", "Scope", "Meta",
})  # fmt: skip
_NOT_MODULE_NAMES = frozenset({
    "BatchApply", "DenyList", "All", "Any", "Not", "Nothing", "Everything", "OfType",
    "PathContains", "WithTag", "Carry", "EMA", "Cache", "Intermediate", "Perturbation",
    "BatchStat", "Collection", "Initializer", "Dtype", "PRNGKey", "FrozenDict", "GraphDef",
    "PyTreeNode",
})  # fmt: skip
# Submodules of the namespaces above that hold no module classes (their capitalised classes are
# variables, graph plumbing, metrics...). A class reached through one of them is not a module.
_NOT_MODULE_SUBMODULES = frozenset({
    "reprlib", "variablelib", "rnglib", "statelib", "graph", "graphlib", "pytreelib", "object",
    "training", "metrics", "filterlib", "tracers", "visualization", "spmd", "extract", "ids",
    "proxy_caller", "traversals", "summary", "transforms", "errors", "partitioning", "struct",
    "_state", "_filters", "_tree", "_ad", "_errors", "_misc",
})  # fmt: skip
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")
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
    "jax.sharding", "jax.experimental.mesh_utils", "jax.make_mesh", "jax.experimental.multihost_utils",
)  # fmt: skip
_NON_COMPUTE_NAMES = frozenset({
    "devices", "local_devices", "device_count", "local_device_count", "process_index",
    "process_count", "host_id", "host_count", "host_ids", "default_backend",
    "print_environment_info", "clear_caches",
    "Array", "ArrayLike", "DTypeLike", "ndarray", "dtype", "Shape", "PRNGKeyArray", "KeyArray",
    "float16", "float32", "float64", "bfloat16", "int4", "int8", "int16", "int32", "int64",
    "uint4", "uint8", "uint16", "uint32", "uint64", "bool_", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float_", "int_", "complex_", "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "finfo",
    "iinfo", "Module",
})  # fmt: skip

# References that use JAX but only as plumbing: a function whose JAX use is all of this kind and
# that loops or does I/O is a driver, not a model function.
# Tree utilities and device transfer work on any pytree: plumbing with other JAX use, no JAX use
# on their own (``jax.tree.map(np.asarray, batch)`` converts data).
_NEUTRAL = (
    "jax.tree", "jax.device_get", "jax.device_put", "jax.block_until_ready",
    "jax.make_array_from_process_local_data", "jax.make_array_from_callback",
    "jax.make_array_from_single_device_arrays",
)  # fmt: skip
_INCIDENTAL = (
    "jax.random.PRNGKey", "jax.random.key", "jax.random.split", "jax.random.fold_in",
    "jax.device_put", "jax.device_get", "jax.block_until_ready", "jax.tree", "jax.numpy.asarray",
    "jax.numpy.array", "jax.jit", "jax.pmap", "jax.local_devices", "flax.nnx.state",
    "flax.nnx.split", "flax.nnx.merge", "flax.nnx.update", "flax.nnx.Rngs", "optax.",
    "equinox.apply_updates", "equinox.filter", "equinox.partition", "equinox.combine",
    "equinox.is_array", "equinox.is_inexact_array", "equinox.tree_at", "equinox.nn.inference_mode",
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


# The driver rule's signals (docs/discovery.md, "Drivers"): references that show a function runs
# a program rather than being one.
_CHECKPOINT_PREFIXES = (
    "orbax.", "flax.serialization.", "flax.training.checkpoints.", "pickle.", "cloudpickle.", "dill.",
    "joblib.", "numpy.save", "numpy.load", "jax.numpy.save", "jax.numpy.load", "safetensors.",
    "msgpack.", "h5py.", "torch.load", "torch.save", "tensorflow.io.", "tensorflow.train.Checkpoint",
    "etils.epath.", "json.dump", "json.load", "flax.traverse_util.", "flax.nnx.to_flat_state",
    "flax.nnx.from_flat_state", "equinox.tree_serialise_leaves", "equinox.tree_deserialise_leaves",
    "PIL.", "imageio.", "cv2.imwrite", "cv2.imread", "matplotlib.pyplot.savefig",
)  # fmt: skip
# Module state read or written without computing (counting parameters, assigning loaded weights):
# with array conversion alone, weight handling rather than a program. ``nnx.merge`` and
# ``eqx.combine`` are not here: they make a module to run.
_STATE_PLUMBING = (
    "flax.nnx.state", "flax.nnx.split", "flax.nnx.update", "flax.nnx.graphdef", "flax.nnx.variables",
    "flax.nnx.to_pure_dict", "flax.nnx.replace_by_pure_dict", "flax.nnx.iter_graph", "equinox.filter",
    "equinox.partition", "equinox.tree_at", "equinox.is_array", "equinox.is_inexact_array",
)  # fmt: skip
_ARRAY_CONVERSION = ("jax.numpy.asarray", "jax.numpy.array")
# Another framework's tensors and modules (converting its checkpoints): its namespaces, and the
# methods of its objects that only it has (``torch_model.state_dict()``, ``tensor.detach()``).
_OTHER_FRAMEWORKS = ("torch.", "transformers.", "keras.")
_OTHER_FRAMEWORK_METHODS = frozenset({"state_dict", "load_state_dict", "named_parameters", "detach"})
_TESTING_PREFIXES = (
    "pytest.", "numpy.testing.", "chex.assert", "absl.testing.", "unittest.", "jax.test_util.",
    "jax._src.test_util.", "timeit.", "hypothesis.", "jax.numpy.testing.",
)  # fmt: skip
_TIMING = ("time.perf_counter", "time.time", "time.monotonic", "time.process_time")
_ENTRY_PREFIXES = (
    "argparse.", "absl.flags.", "absl.app.", "ml_collections.config_flags.", "sys.argv", "fire.",
    "hydra.", "tyro.", "click.", "gin.", "omegaconf.", "jax.distributed.initialize",
)  # fmt: skip
_GRADIENTS = frozenset({
    "jax.grad", "jax.value_and_grad", "jax.vjp", "jax.jvp", "jax.jacfwd", "jax.jacrev", "jax.jacobian",
    "jax.hessian", "jax.linearize", "flax.nnx.grad", "flax.nnx.value_and_grad", "flax.linen.grad",
    "flax.linen.value_and_grad", "flax.linen.vjp", "equinox.filter_grad", "equinox.filter_value_and_grad",
    "equinox.filter_vjp", "equinox.filter_jvp",
})  # fmt: skip
# Optimizer state is made with these (outside optax, whose constructors are below).
_OPTIMIZER_SETUP = (
    "flax.training.train_state.TrainState.create", "flax.nnx.Optimizer", "flax.nnx.ModelAndOptimizer",
    "flax.nnx.training.optimizer.Optimizer",
)  # fmt: skip
# optax names that are computation in a step (losses, updates), not optimizer construction.
_OPTAX_STEP_WORDS = ("loss", "entropy", "cosine_similarity", "cosine_distance", "log_cosh", "kl_divergence",
                     "hinge", "squared_error", "smooth_labels", "convex_", "poly_loss", "ctc")  # fmt: skip
_OPTAX_STEP_NAMES = frozenset({
    "apply_updates", "incremental_update", "periodic_update", "global_norm", "safe_norm", "safe_root_mean_squares",
    "tree_utils", "tree", "losses", "projections", "GradientTransformation", "OptState", "Params", "Updates",
    "EmptyState", "ScalarOrSchedule", "Schedule",
})  # fmt: skip


def driver_signal(qualname: str) -> str | None:
    """The driver signal a reference to ``qualname`` gives: ``checkpoint`` (serialise, load or
    convert checkpoints and parameter files), ``test`` (a testing library), ``entry`` (flags,
    command-line or config parsing), ``setup`` (making optimizer state: an optax optimizer or
    schedule, ``TrainState.create``, ``nnx.Optimizer``), ``timing``; else None."""
    if qualname.startswith(_CHECKPOINT_PREFIXES):
        return "checkpoint"
    if qualname.startswith(_TESTING_PREFIXES):
        return "test"
    if qualname.startswith(_ENTRY_PREFIXES):
        return "entry"
    if qualname.startswith(_TIMING):
        return "timing"
    if qualname.startswith(_OPTIMIZER_SETUP) or _optax_setup(qualname):
        return "setup"
    return None


def is_state_plumbing(qualname: str) -> bool:
    """Reads or writes module state without computing (``nnx.state``, ``eqx.partition``; not
    ``eqx.filter_vmap``, whose name only begins like ``eqx.filter``)."""
    return qualname in _STATE_PLUMBING


def is_array_conversion(qualname: str) -> bool:
    return qualname in _ARRAY_CONVERSION


def other_framework(qualname: str | None, ref: str) -> bool:
    """Whether a reference uses another framework: a name under its namespace, or a method only
    its objects have called on anything (``v.detach()``, ``torch_model.state_dict()``)."""
    if qualname is not None and (qualname + ".").startswith(_OTHER_FRAMEWORKS):
        return True
    return "." in ref and ref.rpartition(".")[2] in _OTHER_FRAMEWORK_METHODS


def _optax_setup(qualname: str) -> bool:
    """An optax optimizer or schedule constructor (``optax.adam``, ``optax.chain``,
    ``optax.linear_schedule``), not a loss or an update helper used inside a step."""
    if not qualname.startswith("optax.") or qualname.startswith(("optax.losses.", "optax.tree")):
        return False
    name = qualname.split(".")[1]
    return name not in _OPTAX_STEP_NAMES and not any(word in name for word in _OPTAX_STEP_WORDS)


def is_gradient(qualname: str) -> bool:
    """A transform that differentiates (a training step computes its own gradients)."""
    return qualname in _GRADIENTS


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def is_library_name(qualname: str) -> bool:
    """True for names under a package discovery judges by rule instead of by source."""
    head = qualname.split(".", 1)[0]
    return head in LIBRARY_PACKAGES


def is_private_library_name(qualname: str) -> bool:
    """A library name reached through a private part (``equinox.nn._misc.all_sequences``,
    ``flax.linen.linear._Conv``): the library's internals, not the API its rules describe."""
    head, *rest = qualname.split(".")
    return head in LIBRARY_PACKAGES and any(part.startswith("_") and not part.startswith("__") for part in rest)


def library_module_kind(qualname: str) -> ModuleKind | Literal[False] | None:
    """The module kind of a library class by its qualified name.

    False when the name is known not to be a module; None when the rule cannot tell (a private
    or lower-case name), in which case the library's source decides if the workspace has it.
    """
    if qualname in _ROOTS:
        return _ROOTS[qualname]
    for prefix, kind in _MODULE_NAMESPACES:
        if qualname.startswith(prefix):
            *middle, last = qualname[len(prefix) :].split(".")
            if not last[:1].isupper():
                return None
            if any(part in _NOT_MODULE_SUBMODULES for part in middle):
                return False
            if last in _NOT_MODULE_NAMES or _NOT_MODULE_WORDS.intersection(_CAMEL.findall(last)):
                return False
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


def is_neutral(qualname: str) -> bool:
    """True for tree utilities and device transfer: JAX names that alone make nothing a JAX function."""
    return qualname.startswith(_NEUTRAL)


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
