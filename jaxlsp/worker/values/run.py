"""A values run from start to end: interpret, attach statistics, validate, and report.

:func:`run` evaluates the recorded walk on the concrete operands, writes each value's ``stats``
into the graph, and the graph's ``execution``: the replay validation against a direct call of
the target (``verified`` / ``partial`` / ``mismatch``, with the first diverging output), the
first non-finite origin with its one-line message, the regions that ran (a taken ``cond``
branch, a loop body's iterations), and for gradient profiles the gradient norms per parameter
and per module. It also writes the requested payloads: an ``.npz`` file and small arrays inline.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypedDict, cast

from jaxlsp.graph.model import Graph, Node, Value
from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.protocol import InlineArray, Json, SavedValues, ValuesRequest
from jaxlsp.worker.tracing.build import CONTROL_FLOW_NOTE, GraphBuilder, Walked
from jaxlsp.worker.values.interpret import Budget, Interpreter, Origin, Stopped
from jaxlsp.worker.values.stats import SCRATCH, Summary, numeric

if TYPE_CHECKING:
    import jax
    import numpy as np
    import numpy.typing as npt
    from jax.typing import ArrayLike

    from jaxlsp.worker.protocol import WorkerRequest


class _Traced(Protocol):
    """What a values run takes of the traced target (``loading/targets.py`` Traceable): the
    function and its concrete operands (a pytree)."""

    @property
    def fn(self) -> Callable[..., object]: ...

    @property
    def operands(self) -> object: ...


class _Compared(TypedDict):
    mismatched: int
    size: int
    maxAbsError: float
    maxRelError: float


class _Payloads(TypedDict, total=False):
    """The values run's keys of the result (``WorkerResult.arrays``, ``saved``)."""

    arrays: dict[str, InlineArray]
    saved: SavedValues


RAN_NOTE = "control-flow bodies (cond, while, scan) ran on these inputs: execution.executed counts each region's runs"
INLINE_LIMIT = 4096  # elements of an array returned inline (jaxlsp/values)
PARTIAL_SHOWN = 100  # partial nodes listed in the validation
# Relative tolerance of the replay comparison per dtype: |a - b| <= rtol * (|b| + max |b|).
RTOL = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-4, "complex64": 1e-4, "float64": 1e-9, "complex128": 1e-9}
FLOAT8_RTOL = 1.5e-1
# Primitives whose non-finite result comes from an operand out of their domain (the lower end),
# from an overflow (the largest magnitude), or from a zero divisor.
DOMAIN = frozenset({"log", "log1p", "sqrt", "rsqrt", "cbrt", "lgamma", "digamma", "acos", "asin", "acosh", "atanh"})
OVERFLOW = frozenset(
    {"exp", "exp2", "expm1", "sinh", "cosh", "integer_pow", "square", "mul", "pow", "dot_general", "add", "sub"}
    | {"reduce_sum", "cumsum", "conv_general_dilated", "reduce_prod", "cumprod", "tan"}
)
DIVISION = frozenset({"div", "rem"})


def run(
    graph: Graph,
    builder: GraphBuilder,
    traced: _Traced,
    request: WorkerRequest,
    device: jax.Device | None,
    started: float,
    result: dict[str, object],
    budget: Budget | None = None,
) -> None:
    """Evaluate ``graph`` on ``traced.operands`` (concrete); fills ``stats``, ``execution`` and
    the payload keys of ``result`` (``arrays``, ``saved``). Raises CaptureError when stopped.
    ``budget``: when to stop (default: 90% of the request's time limit, the memory cap)."""
    import contextlib

    import jax

    options = cast("ValuesRequest", dict(request.get("values") or {}))
    walked = builder.walked
    if walked is None:
        raise CaptureError("internal", "the graph's walk was not recorded for the values run")
    nodes = {n.id: n for n in graph.nodes}
    values = {v.id: v for v in graph.values}
    keep, saved_keys = _selection(graph, nodes, values, options)
    t0 = time.monotonic()
    budget = budget or Budget(deadline=_deadline(options, started), memory=_memory_check(device))
    interp = Interpreter(on_host=device is None or device.platform == "cpu", budget=budget, keep=keep)
    operands = jax.tree_util.tree_leaves(traced.operands)
    scope = jax.default_device(device) if device is not None else contextlib.nullcontext()
    with scope:
        try:
            outputs = interp.run(walked, operands)
            SCRATCH.clear()
            # The graph's output ports by value id: a state output that only passes its input
            # through has no port, so ports and the program's results need not line up.
            produced = output_ids(walked)
        except Stopped as stop:
            raise _stopped(stop, graph, request, time.monotonic() - t0) from None
        except CaptureError:
            raise
        except Exception as exc:
            raise CaptureError("trace", f"the values run failed: {type(exc).__name__}: {exc}") from None
        for vid, stats in interp.stats().items():
            if vid in values:
                values[vid].stats = stats
        execution: dict[str, object] = {
            "device": "cpu" if device is None else f"{device.platform}:{device.id}",
            "seconds": 0.0,
            "validation": validate(graph, nodes, interp, outputs, produced, traced),
            "executed": dict(
                sorted(interp.executed.items(), key=lambda kv: int(kv[0][1:]) if kv[0][1:].isdigit() else 0)
            ),
        }
        if interp.origin is not None:
            execution["firstNonFinite"] = describe_origin(interp.origin, str(request.get("workspaceRoot", "")))
        if request.get("profile", {}).get("transform"):
            execution["gradients"] = gradients(graph, dict(zip(produced, outputs, strict=True)))
        by_id = dict(zip(produced, outputs, strict=True))
        result.update(_payloads(graph, nodes, values, interp.kept, by_id, options, keep, saved_keys))
    execution["seconds"] = round(time.monotonic() - t0, 4)
    graph.execution = execution
    # The shapes-only note would now be wrong: the taken branch and every iteration ran.
    graph.coverage.notes = [RAN_NOTE if n == CONTROL_FLOW_NOTE else n for n in graph.coverage.notes]


# --- limits ----------------------------------------------------------------------------------------


def _deadline(options: ValuesRequest, started: float) -> float | None:
    """The run stops before the supervisor's kill: 10% (at least a second) of the capture's time
    limit is left for writing the result."""
    timeout = options.get("timeout")
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        return None
    return started + float(timeout) - max(1.0, 0.1 * float(timeout))


def _memory_check(device: jax.Device | None) -> Callable[[int], str | None] | None:
    """Whether ``nbytes`` more fit: under the address-space cap on the CPU (Linux), in the
    accelerator's memory otherwise; None when nothing can be measured."""
    if device is not None and device.platform != "cpu":

        def on_device(nbytes: int) -> str | None:
            try:
                stats = device.memory_stats() or {}
            except Exception:
                return None
            used, limit = stats.get("bytes_in_use"), stats.get("bytes_limit")
            if isinstance(used, int) and isinstance(limit, int) and limit > 0 and used + nbytes > 0.97 * limit:
                return f"{_mib(nbytes)} more would pass the device's {_mib(limit)} ({_mib(used)} in use)"
            return None

        return on_device
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0 or not os.path.exists("/proc/self/statm"):
        return None
    page = os.sysconf("SC_PAGE_SIZE")

    def on_host(nbytes: int) -> str | None:
        try:
            with open("/proc/self/statm", "rb") as f:
                size = int(f.read().split()[0]) * page
        except (OSError, ValueError, IndexError):
            return None
        if size + nbytes > 0.97 * soft:
            return f"{_mib(nbytes)} more would pass the worker's memory cap of {_mib(soft)} ({_mib(size)} in use)"
        return None

    return on_host


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):,.0f} MiB"


def _stopped(stop: Stopped, graph: Graph, request: WorkerRequest, seconds: float) -> CaptureError:
    node = stop.step.node if stop.step is not None else None
    where = describe_node(node, str(request.get("workspaceRoot", ""))) if node is not None else "its start"
    if stop.kind == "timeout":
        limit = (request.get("values") or {}).get("timeout")
        within = f"the {limit:g} s time limit" if isinstance(limit, (int, float)) else "its time limit"
        message = (
            f"the values run stopped at {where} after {seconds:.1f} s: it would not finish within "
            f"{within} (raise it with --timeout or the setting jaxlsp.timeout)"
        )
    else:
        message = f"the values run stopped at {where}: {stop.reason} (raise the memory cap, or trace smaller inputs)"
    frame = None
    if node is not None and node.source is not None:
        frame = node.source.range_json()
        # Graph paths are relative (to the recipe's folder or the workspace root); an error's frame
        # is absolute, as for every other failure.
        base = str(request.get("pathBase") or request.get("workspaceRoot") or "")
        path = str(frame["path"])  # range_json's: a str
        if base and not os.path.isabs(path):
            frame["path"] = os.path.normpath(os.path.join(base, path))
    return CaptureError("timeout" if stop.kind == "timeout" else "memory", message, frame)


# --- describing nodes ----------------------------------------------------------------------------


def relative(path: str, root: str) -> str:
    """``path`` relative to the workspace root when inside it (as the CLI's summary line shows it)."""
    if root and os.path.isabs(path):
        try:
            rel = os.path.relpath(path, root)
        except ValueError:
            return path
        if not rel.startswith(".."):
            return rel
    return path


def describe_node(node: Node, root: str) -> str:
    """``node n12 (log in Encoder_0/Dense_1, model.py:8)``."""
    where = [node.primitive]
    if node.scope:
        where.append(f"in {node.scope}")
    frame = node.source or (node.frames[0] if node.frames else None)
    text = " ".join(where)
    if frame is not None:
        text += f", {relative(frame.path, root)}:{frame.line}"
    return f"node {node.id} ({text})"


def number(x: float | None) -> str:
    """A figure as the summary line writes it: six significant digits, ``0.0`` not ``0``."""
    if x is None:
        return "none"
    if not math.isfinite(x):
        return str(x)
    return repr(float(f"{x:.6g}"))


def explain(primitive: str, inputs: list[tuple[str, Summary | None, bool]]) -> str:
    """The input statistic that explains a non-finite result (``input min 0.0``)."""
    named = [(i, s) for i, (_, s, _literal) in enumerate(inputs) if s is not None and s.finite]
    operands = [i for i, (_, _, literal) in enumerate(inputs) if not literal]

    def label(i: int) -> str:
        return "input" if len(operands) <= 1 and len(inputs) <= 1 else f"input {i + 1}"

    if not named:
        return "no finite input"
    if primitive in DIVISION and len(inputs) >= 2 and inputs[1][1] is not None:
        divisor = inputs[1][1]
        assert divisor is not None
        return f"{label(1)} zeros {divisor.zeros}"
    if primitive in DOMAIN:
        i, s = named[0]
        return f"{label(i)} min {number(s.lo)}"
    if primitive in OVERFLOW:
        i, s = max(named, key=lambda item: max(abs(item[1].lo or 0.0), abs(item[1].hi or 0.0)))
        if abs(s.lo or 0.0) > abs(s.hi or 0.0):
            return f"{label(i)} min {number(s.lo)}"
        return f"{label(i)} max {number(s.hi)}"
    i, s = named[0]
    return f"{label(i)} min {number(s.lo)}, max {number(s.hi)}"


def describe_origin(origin: Origin, root: str) -> dict[str, Json]:
    """The ``firstNonFinite`` object, with its summary line:
    ``first non-finite (-inf): log at nan.py:8, scan iteration 4, input min 0.0``."""
    node = origin.step.node
    frame = node.source or (node.frames[0] if node.frames else None)
    where = f"{relative(frame.path, root)}:{frame.line}" if frame is not None else "an unknown line"
    loops = "".join(f", {kind} iteration {index}" for kind, _, index in origin.iteration)
    explanation = explain(node.primitive, origin.inputs)
    kind = origin.summary.kind()
    out: dict[str, Json] = {
        "node": node.id,
        "value": origin.value,
        "primitive": node.primitive,
        "kind": kind,
        "source": frame.range_json() if frame is not None else None,
        "explanation": explanation,
        "message": f"first non-finite ({kind}): {node.primitive} at {where}{loops}, {explanation}",
        "inputs": [_input_json(vid, s, literal) for vid, s, literal in origin.inputs],
    }
    if origin.iteration:
        out["iteration"] = [{"kind": kind, "group": group, "index": index} for kind, group, index in origin.iteration]
    return out


def _input_json(vid: str, s: Summary | None, literal: bool) -> dict[str, Json]:
    out: dict[str, Json] = {"value": vid, "literal": literal}
    if s is not None:
        out.update(min=s.lo, max=s.hi, mean=s.mean, zeros=s.zeros, count=s.size)
    return out


# --- replay validation -----------------------------------------------------------------------------


def output_ids(walked: Walked) -> list[str]:
    """The value id of each result of the program (``""`` for a literal result)."""
    from jaxlsp.worker.tracing.build import is_literal

    return ["" if is_literal(v) else walked.env.get(v, "") for v in walked.jaxpr.outvars]


def validate(
    graph: Graph,
    nodes: dict[str, Node],
    interp: Interpreter,
    outputs: list[object],
    produced: list[str],
    traced: _Traced,
) -> dict[str, object]:
    """The interpreter's outputs against a direct call of the target on the same inputs.

    The call runs eagerly (``jax.disable_jit``), as the target's own Python code dispatching one
    operation at a time: the operations the interpreter compiled serve it again, so a values run
    never compiles a whole jitted program (which can take longer than the run itself)."""
    import jax

    try:
        with jax.disable_jit():
            direct = jax.tree_util.tree_leaves(traced.fn(*cast("tuple[object, ...]", traced.operands)))
    except Exception as exc:
        return {
            "status": "mismatch",
            "outputs": len(outputs),
            "error": f"the direct call failed: {type(exc).__name__}: {exc}",
        }
    out: dict[str, object] = {"status": "verified", "outputs": len(outputs), "maxAbsError": 0.0, "maxRelError": 0.0}
    max_abs, max_rel = 0.0, 0.0  # out's maxAbsError and maxRelError
    if len(direct) != len(outputs):
        out.update(status="mismatch", message=f"a direct call gave {len(direct)} outputs, the graph {len(outputs)}")
        return out
    values = {v.id: v for v in graph.values}
    ports = {p.value: p.label for p in graph.outputs}
    for i, (mine, theirs) in enumerate(zip(outputs, direct, strict=True)):
        found = compare(mine, theirs)
        max_abs, max_rel = max(max_abs, found["maxAbsError"]), max(max_rel, found["maxRelError"])
        out["maxAbsError"], out["maxRelError"] = max_abs, max_rel
        if found["mismatched"] and out["status"] != "mismatch":
            vid = produced[i] if i < len(produced) else ""
            value = values.get(vid)
            producer = value.producer if value is not None else None
            node = nodes.get(producer) if producer else None
            where = f" (value {vid}, made by {describe_node(node, '')})" if node is not None else ""
            label = ports.get(vid) or f"out/{i}"
            out["status"] = "mismatch"
            out["mismatch"] = {
                "output": label,
                "value": vid or None,
                "node": producer,
                "elements": found["mismatched"],
                "of": found["size"],
                "maxAbsError": found["maxAbsError"],
                "maxRelError": found["maxRelError"],
                "message": (
                    f"output {label}{where} differs from a direct call of the target: "
                    f"{found['mismatched']:,} of {found['size']:,} elements, max abs error "
                    f"{number(found['maxAbsError'])}, max rel error {number(found['maxRelError'])}"
                ),
            }
    partial = dict(interp.partial)
    for item in graph.coverage.opaque:
        partial.setdefault(str(item.get("node")), f"opaque: {item.get('reason')}")
    if partial:
        if out["status"] == "verified":
            out["status"] = "partial"
        out["partial"] = [{"node": n, "reason": r} for n, r in list(partial.items())[:PARTIAL_SHOWN]]
        out["partialCount"] = len(partial)
    return out


def compare(mine: object, theirs: object) -> _Compared:
    """Elementwise comparison: NaN equals NaN, an infinity the same infinity, finite numbers
    within the dtype's tolerance of the output's scale; integers and booleans exactly."""
    import numpy as np

    if not numeric(getattr(theirs, "dtype", None)):  # keys: compare their data
        import jax

        mine, theirs = jax.random.key_data(cast("ArrayLike", mine)), jax.random.key_data(cast("ArrayLike", theirs))
    a, b = np.asarray(mine), np.asarray(theirs)
    size = int(b.size)
    if a.shape != b.shape:
        return {"mismatched": max(size, 1), "size": size, "maxAbsError": math.inf, "maxRelError": math.inf}
    if a.dtype == b.dtype and np.array_equal(a, b, equal_nan=b.dtype.kind in "fc"):
        return {"mismatched": 0, "size": size, "maxAbsError": 0.0, "maxRelError": 0.0}
    dtype = str(b.dtype)
    if b.dtype.kind in "biu" or (b.dtype.kind == "V" and dtype.startswith("int")):
        bad = int(np.count_nonzero(a != b))
        err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if bad else 0.0
        return {"mismatched": bad, "size": size, "maxAbsError": err, "maxRelError": err}
    if b.dtype.kind == "V" or dtype in ("float16", "bfloat16"):
        a, b = a.astype(np.float64 if "complex" in dtype else np.float32), b.astype(np.float32)
    rtol = RTOL.get(dtype, FLOAT8_RTOL if "float8" in dtype else 1e-4)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    fin = np.isfinite(a) & np.isfinite(b)
    diff = np.abs(a.astype(np.complex128 if "complex" in dtype else np.float64) - b)
    scale = float(np.max(np.abs(b[np.isfinite(b)]))) if np.any(np.isfinite(b)) else 0.0
    ok = same | (fin & (diff <= rtol * (np.abs(b) + scale)))
    bad = int(size - np.count_nonzero(ok))
    finite_diff = diff[fin] if np.any(fin) else np.zeros(1)
    max_abs = float(np.max(finite_diff)) if finite_diff.size else 0.0
    rel = finite_diff / np.maximum(np.abs(b[fin]), np.finfo(np.float64).tiny) if np.any(fin) else np.zeros(1)
    max_rel = float(np.max(rel)) if rel.size else 0.0
    return {"mismatched": bad, "size": size, "maxAbsError": max_abs, "maxRelError": max_rel}


# --- gradients -------------------------------------------------------------------------------------


def module_of(label: str) -> list[str]:
    """The module path of a parameter label: ``params/Encoder_0/Dense_0/kernel`` -> Encoder_0,
    Dense_0 (Linen), ``layers/0/weight`` -> layers, 0 (Equinox, NNX), ``args/0/w1/w`` -> w1."""
    parts = [p for p in label.split("/") if p]
    if parts[:1] == ["params"]:
        parts = parts[1:]
    elif parts[:2] == ["args", "0"]:
        parts = parts[2:]
    return parts[:-1]


def gradients(graph: Graph, outputs: dict[str, object]) -> dict[str, object]:
    """Norms of the gradient outputs (``grad/...``) per parameter and per module (each level of
    the path, and ``""`` for all), and the parameters whose gradient is zero everywhere."""
    import numpy as np

    params: list[dict[str, str | float | bool | int]] = []
    sums: dict[str, list[float]] = {}
    for port in graph.outputs:
        array = outputs.get(port.value)
        if not port.label.startswith("grad/") or array is None or not numeric(getattr(array, "dtype", None)):
            continue
        label = port.label[len("grad/") :]
        a = np.asarray(array)
        if a.dtype.kind not in "fc" or a.dtype.itemsize < 4:
            a = a.astype(np.float32)
        flat = np.abs(a).reshape(-1) if a.dtype.kind == "c" else a.reshape(-1)
        wide = flat.astype(np.float64)
        squares = float(np.einsum("i,i->", wide, wide)) if flat.size else 0.0
        zero = bool(flat.size == 0 or not np.any(flat))
        params.append(
            {"label": label, "value": port.value, "norm": math.sqrt(squares), "zero": zero, "size": int(flat.size)}
        )
        module = module_of(label)
        for depth in range(len(module) + 1):
            key = "/".join(module[:depth])
            entry = sums.setdefault(key, [0.0, 0, 0])
            entry[0] += squares
            entry[1] += 1
            entry[2] += int(zero)
    modules = [
        {"module": key, "norm": math.sqrt(s), "parameters": int(n), "zero": int(z)}
        for key, (s, n, z) in sorted(sums.items())
    ]
    return {"parameters": params, "modules": modules, "zero": [p["label"] for p in params if p["zero"]]}


# --- payloads ------------------------------------------------------------------------------------


def _port_keys(graph: Graph) -> list[tuple[str, str]]:
    """``(key, value id)`` per port: ``input:LABEL`` and ``output:LABEL``. A state input and its
    updated output share a label (``batch_stats/BatchNorm_0/mean``, a counter's ``calls``), so the
    label alone would keep one of the two arrays under both."""
    return [
        *((f"input:{p.label}", p.value) for p in graph.inputs),
        *((f"output:{p.label}", p.value) for p in graph.outputs),
    ]


def _selection(
    graph: Graph, nodes: dict[str, Node], values: dict[str, Value], options: ValuesRequest
) -> tuple[set[str], dict[str, str]]:
    """The value ids whose arrays the run keeps (inline ones, and what ``save`` writes) and the
    value id under each ``.npz`` key: ``input:LABEL`` / ``output:LABEL`` for a port (a value that
    is both, passed through, under both keys), ``n12:log:0`` for another node's output."""
    keep = {str(v) for v in options.get("inline") or [] if str(v) in values}
    saved: dict[str, str] = {}  # key -> value id
    if not options.get("save"):
        return keep, saved
    ports = _port_keys(graph)
    chosen = options.get("nodes")
    if not chosen:
        saved.update(ports)
    else:
        by_value: dict[str, list[str]] = {}
        by_label: dict[str, list[tuple[str, str]]] = {}
        for key, vid in ports:
            by_value.setdefault(vid, []).append(key)
            by_label.setdefault(key.partition(":")[2], []).append((key, vid))
        named = dict(ports)
        unknown = []
        for item in chosen:
            item = str(item)
            if item in nodes:
                node = nodes[item]
                for k, vid in enumerate(node.outputs):
                    for key in by_value.get(vid) or [f"{node.id}:{node.primitive}:{k}"]:
                        saved.setdefault(key, vid)
            elif item in values:
                producer = values[item].producer
                for key in by_value.get(item) or [f"{producer}:{item}" if producer else item]:
                    saved.setdefault(key, item)
            elif item in named:  # input:LABEL, output:LABEL
                saved.setdefault(item, named[item])
            elif item in by_label:  # a bare label: the input and the output that have it
                for key, vid in by_label[item]:
                    saved.setdefault(key, vid)
            else:
                unknown.append(item)
        if unknown:
            raise CaptureError(
                "needs_input",
                f"--nodes: no node, value or port label {', '.join(repr(u) for u in unknown[:5])} in the graph "
                "(nodes are n0, n1, ...; values v0, v1, ...; ports by label such as out/0, or input:LABEL / "
                "output:LABEL)",
            )
    return keep | set(saved.values()), saved


def _payloads(
    graph: Graph,
    nodes: dict[str, Node],
    values: dict[str, Value],
    kept: dict[str, object],
    outputs: dict[str, object],
    options: ValuesRequest,
    keep: set[str],
    saved_keys: dict[str, str],
) -> _Payloads:
    import numpy as np

    out: _Payloads = {}
    for vid, array in outputs.items():
        if vid:
            kept.setdefault(vid, array)
    inline = [str(v) for v in options.get("inline") or []]
    if inline:
        arrays: dict[str, InlineArray] = {}
        for vid in inline:
            value = values.get(vid)
            if value is None:
                arrays[vid] = {"error": "no such value in the graph"}
                continue
            array = kept.get(vid)
            if array is None:
                arrays[vid] = {"error": "not computed (a branch not taken, or inside a region that ran whole)"}
                continue
            arrays[vid] = inline_array(array)
        out["arrays"] = arrays
    path = options.get("save")
    if path:
        payload: dict[str, npt.NDArray[np.generic]] = {}
        missing = []
        widened: dict[str, list[str]] = {}  # key -> [its dtype, the dtype stored]
        for key, vid in saved_keys.items():
            array = kept.get(vid)
            if array is None or not numeric(getattr(array, "dtype", None)):
                missing.append(key)
                continue
            payload[key], was = _loadable(array)
            if was is not None:
                widened[key] = [was, str(payload[key].dtype)]
        directory = os.path.dirname(os.path.abspath(str(path)))
        if not os.path.isdir(directory):
            raise CaptureError("refused", f"--save-values: the folder {directory} does not exist")
        save = cast("Callable[..., None]", np.savez)  # numpy's stubs type **kwds as its allow_pickle flag
        with open(str(path), "wb") as f:
            save(f, **payload)
        out["saved"] = {"path": str(path), "keys": sorted(payload), "missing": missing}
        if widened:
            out["saved"]["widened"] = widened
    return out


def _loadable(array: object) -> tuple[npt.NDArray[np.generic], str | None]:
    """``array`` as NumPy itself can load it, and the dtype it had when it had to be widened.
    ``bfloat16``, the ``float8`` types and ``int4`` are ``ml_dtypes`` extensions: ``np.savez``
    writes them as opaque bytes (``|V2``) that ``np.load`` cannot compute with. They are stored
    as ``float32`` (exact for every one of them) and the narrow integers as ``int8``/``uint8``."""
    import numpy as np

    a = np.asarray(array)
    if a.dtype.kind in "biufc":
        return a, None
    name = str(a.dtype)
    if name.startswith(("int", "uint")):
        return a.astype(np.int8 if name.startswith("int") else np.uint8), name
    return a.astype(np.float32), name


def inline_array(array: object) -> InlineArray:
    """``{shape, dtype, data}`` with the elements as nested lists (non-finite numbers spelled as in
    the graph file), or ``{shape, dtype, omitted}`` above :data:`INLINE_LIMIT` elements."""
    import numpy as np

    shape = [int(d) for d in getattr(array, "shape", ())]
    dtype = str(getattr(array, "dtype", ""))
    size = math.prod(shape)
    if not numeric(getattr(array, "dtype", None)):
        return {"shape": shape, "dtype": dtype, "omitted": "not a numeric array"}
    if size > INLINE_LIMIT:
        return {"shape": shape, "dtype": dtype, "omitted": f"{size:,} elements, over the {INLINE_LIMIT:,} sent inline"}
    a = np.asarray(array)
    if a.dtype.kind not in "biufc":
        a = a.astype(np.float32)
    return {"shape": shape, "dtype": dtype, "data": _spelled(a.tolist())}


def _spelled(x: object) -> Json:
    if isinstance(x, list):
        return [_spelled(i) for i in x]
    if isinstance(x, complex):
        return [_spelled(x.real), _spelled(x.imag)]
    if isinstance(x, float) and not math.isfinite(x):
        return {"float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
    return cast("Json", x)  # an element of ``tolist()``: a bool, int or float
