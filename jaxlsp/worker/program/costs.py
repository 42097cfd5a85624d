"""XLA's cost analysis of every equation, lowered alone on its abstract inputs (runs in the user's
interpreter, after the graph is built; ``jaxlsp.graph.costs`` rolls the figures up).

Equations are measured once per distinct ``(primitive, params, input avals)``: a 12-layer
transformer's gradient has 3,258 equations but 132 distinct ones, and each costs 15-20 ms to
lower and analyse on the CPU. Figures are kept on disk in the user's cache (``cacheDir`` in the
request, one file per jax version, platform and x64 setting) under a hash of the equation, so a
re-trace after an edit lowers only the equations the edit made new; an XLA backend is started
only when something must be lowered.

``xlaCompare`` also lowers the whole program (XLA's whole-program ``cost_analysis()``, which counts
loop bodies once) and compiles it for the compiled program's ``cost_analysis()`` and
``memory_analysis()``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeGuard, cast

from jaxlsp.graph import costs as graph_costs
from jaxlsp.graph.model import Graph
from jaxlsp.worker.protocol import CostOptions

if TYPE_CHECKING:
    import jax
    from jax.core import ShapedArray
    from jax.extend.core import ClosedJaxpr, JaxprEqn, Literal

CACHE_FORMAT = 1
BATCH = 256  # distinct equations lowered together (a failure lowers that batch one by one)
PREFIX = "jaxlsp_eq"  # the name of each equation's function in a batch
MAX_ENTRIES = 200_000  # a cache file past this starts afresh rather than grow without end
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # function reprs: the same function in every process


def measure(
    graph: Graph, eqns: list[JaxprEqn], closed: ClosedJaxpr, options: CostOptions, device: str, x64: bool
) -> None:
    """Fill ``graph``'s per-node costs and its ``costs`` summary (``options``: ``cacheDir``,
    ``xlaCompare``)."""
    import jax

    started = time.perf_counter()
    where = graph_costs.regions(graph)
    platform = device.split(":", 1)[0] or "cpu"
    cache = DiskCache(options.get("cacheDir"), f"{jax.__version__}-{platform}{'-x64' if x64 else ''}")
    leaf: dict[int, graph_costs.Figures | str] = {}
    by_key: dict[str, list[int]] = {}
    names: dict[object, str] = {}
    for i in graph_costs.measured(graph, where):
        eqn = eqns[i]
        reason = unmeasurable(eqn)
        if reason is not None:
            leaf[i] = reason
            continue
        by_key.setdefault(key_of(eqn, names), []).append(i)
    missing = [key for key in by_key if cache.get(key) is None]
    for start in range(0, len(missing), BATCH):
        chunk = missing[start : start + BATCH]
        for key, got in zip(chunk, lower_batch([eqns[by_key[key][0]] for key in chunk]), strict=True):
            cache.put(key, got)
    for key, indices in by_key.items():
        found = cache.get(key)
        for i in indices:
            leaf[i] = found if found is not None else "not measured"
    cache.save()
    lowered, cached = len(missing), len(by_key) - len(missing)
    trips = {i: n for i, e in enumerate(eqns) if e.primitive.name == "while" and (n := while_trips(e)) is not None}
    summary: dict[str, object] = {
        "platform": platform,
        "equations": len(graph.nodes),
        "measured": sum(len(v) for v in by_key.values()),
        "unique": len(by_key),
        "cached": cached,
        "lowered": lowered,
        "unknown": sum(1 for v in leaf.values() if isinstance(v, str)),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if options.get("xlaCompare"):
        summary["xla"] = whole_program(closed)
    graph_costs.annotate(graph, leaf, summary, trips)
    summary["seconds"] = round(time.perf_counter() - started, 3)  # graph.costs is this dict


def unmeasurable(eqn: JaxprEqn) -> str | None:
    """Why an equation cannot be lowered alone, or None."""
    if getattr(eqn, "effects", None):
        return "it has side effects (" + ", ".join(sorted(str(e) for e in eqn.effects))[:200] + ")"
    for var in eqn.invars:
        for d in getattr(var.aval, "shape", ()):
            if not isinstance(d, int):
                return f"symbolic shape ({d})"
    return None


def key_of(eqn: JaxprEqn, names: dict[object, str] | None = None) -> str:
    """A hash of what decides an equation's figures: primitive, params and input types.
    ``names`` caches dtype names (numpy's ``str(dtype)`` is slow, and every equation asks)."""
    names = {} if names is None else names
    avals = []
    for v in eqn.invars:
        aval = v.aval
        dtype = getattr(aval, "dtype", None)
        name = names.get(dtype)
        if name is None:
            name = names[dtype] = str(dtype)
        avals.append((getattr(aval, "shape", ()), name, bool(getattr(aval, "weak_type", False))))
    # params in the equation's own order: the same code binds them in the same order
    params = _ADDRESS.sub("", repr(eqn.params))
    text = f"{eqn.primitive.name}\n{params}\n{avals}"
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def lower_batch(eqns: list[JaxprEqn]) -> list[graph_costs.Figures | str]:
    """XLA's figures for each equation as if lowered alone, from one lowering of them all.

    Lowering one equation costs 15-20 ms, most of it fixed (an MLIR context, the conversion to
    HLO); the transformer gradient's 132 distinct equations took 2.5 s one by one and 0.3 s
    together. Each equation is a function of its own (``jaxlsp_eqN``) called from one program, so
    it is one HLO computation; each computation (with what it calls) is analysed as a module of
    its own, which gives exactly the figures of lowering it alone. Whatever fails here is lowered
    alone instead."""
    import jax

    from jaxlsp.worker.tracing import jaxcompat

    out: list[graph_costs.Figures | str | None] = [None] * len(eqns)
    try:
        fns: list[Callable[..., object]] = []
        specs: list[list[jax.ShapeDtypeStruct]] = []
        for n, eqn in enumerate(eqns):
            fns.append(jax.jit(_equation_function(eqn, f"{PREFIX}{n}")))
            specs.append([_spec(v.aval) for v in eqn.invars])

        def together(*operands: list[jax.Array]) -> list[object]:
            return [f(*ops) for f, ops in zip(fns, operands, strict=True)]

        modules = split_modules(jaxcompat.hlo_text(jax.jit(together).lower(*specs)))
        for n, text in modules.items():
            if 0 <= n < len(out):
                with contextlib.suppress(Exception):
                    out[n] = figures(jaxcompat.hlo_cost_analysis(text))
    except Exception:
        pass
    return [got if got is not None else lower_one(eqn) for got, eqn in zip(out, eqns, strict=True)]


def _equation_function(eqn: JaxprEqn, name: str) -> Callable[..., object]:
    from jaxlsp.worker.tracing import jaxcompat

    params = jaxcompat.bind_params(eqn)
    bind: Callable[..., object] = eqn.primitive.bind  # untyped in jax

    def one(*args: jax.Array) -> object:
        return bind(*args, **params)

    one.__name__ = one.__qualname__ = name
    return one


_COMPUTATION = re.compile(r"^(ENTRY )?%?([\w.\-]+) .*\{$")
_CALLED = re.compile(
    r"(?:to_apply|calls|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
    r"|branch_computations=\{([^}]*)\}"
)
_EQUATION = re.compile(PREFIX + r"(\d+)")


def split_modules(text: str) -> dict[int, str]:
    """Equation number -> an HLO module of its own: the ``jaxlsp_eqN`` computation as ENTRY, with
    every computation it calls (a reduction's combiner, a lowering's helper) before it."""
    comps: dict[str, str] = {}
    order: list[str] = []
    current: list[str] | None = None
    name = ""
    for line in text.split("\n"):
        if current is None:
            found = _COMPUTATION.match(line)
            if found:
                name, current = found.group(2), [line[len("ENTRY ") :] if found.group(1) else line]
        else:
            current.append(line)
            if line == "}":
                comps[name] = "\n".join(current)
                order.append(name)
                current = None
    out: dict[int, str] = {}
    for comp in order:
        number = _EQUATION.match(comp)
        if number is None:
            continue
        needed = _callees(comp, comps)
        parts = [comps[c] for c in order if c in needed and c != comp]
        out[int(number.group(1))] = f"HloModule {comp}\n\n" + "\n\n".join([*parts, "ENTRY " + comps[comp]]) + "\n"
    return out


def _callees(name: str, comps: dict[str, str]) -> set[str]:
    seen = {name}
    todo = [name]
    while todo:
        body = comps[todo.pop()].split("\n", 1)[-1]
        for found in _CALLED.finditer(body):
            names = [found.group(1)] if found.group(1) else [n.strip().lstrip("%") for n in found.group(2).split(",")]
            for n in names:
                if n in comps and n not in seen:
                    seen.add(n)
                    todo.append(n)
    return seen


def lower_one(eqn: JaxprEqn) -> graph_costs.Figures | str:
    """XLA's figures for one equation on its abstract inputs, or why there are none."""
    import jax

    from jaxlsp.worker.tracing import jaxcompat

    try:
        specs = [_spec(v.aval) for v in eqn.invars]
        lowered = jax.jit(_equation_function(eqn, PREFIX)).lower(*specs)
        try:
            analysis = jaxcompat.cost_dict(lowered.cost_analysis())
        except NotImplementedError:  # no analysis before compiling on this platform
            analysis = jaxcompat.cost_dict(lowered.compile().cost_analysis())
    except Exception as exc:
        return f"XLA could not analyse it alone: {type(exc).__name__}: {str(exc)[:200]}"
    return figures(analysis)


def _spec(aval: object) -> jax.ShapeDtypeStruct:
    import jax

    shaped = cast("ShapedArray", aval)  # an equation's inputs are arrays: ``unmeasurable`` kept the others out
    make: Callable[..., jax.ShapeDtypeStruct] = jax.ShapeDtypeStruct  # untyped in jax
    return make(shaped.shape, shaped.dtype)


def figures(analysis: Mapping[str, object]) -> graph_costs.Figures:
    def get(name: str) -> int:
        value = analysis.get(name, 0)
        try:
            return max(0, round(float(cast("float | str", value))))  # float() is the check
        except (TypeError, ValueError, OverflowError):
            return 0

    return graph_costs.Figures(get("flops"), get("bytes accessed"), get("transcendentals"))


def while_trips(eqn: JaxprEqn) -> int | None:
    """The trip count of a counted ``while``: its condition is ``carry[k] < N`` with a literal
    ``N``, ``carry[k]`` starts at a literal and the body adds the literal 1 to it. None otherwise."""
    try:
        params = eqn.params
        cond = params["cond_jaxpr"].jaxpr
        body = params["body_jaxpr"].jaxpr
        cn, bn = int(params.get("cond_nconsts", 0)), int(params.get("body_nconsts", 0))
        if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt" or cond.outvars[0] is not cond.eqns[0].outvars[0]:
            return None
        counter, bound = cond.eqns[0].invars
        if is_literal(counter) or not is_literal(bound) or counter not in cond.invars:
            return None
        k = cond.invars.index(counter) - cn
        start = eqn.invars[cn + bn + k]
        if k < 0 or not is_literal(start):
            return None
        carry_in, carry_out = body.invars[bn + k], body.outvars[k]
        step = next((e for e in body.eqns if carry_out in e.outvars), None)
        if step is None or step.primitive.name != "add":
            return None
        a, b = step.invars
        one = b if a is carry_in else a if b is carry_in else None
        if one is None or not is_literal(one) or int(one.val) != 1:
            return None
        return max(0, int(bound.val) - int(start.val))
    except Exception:
        return None


def is_literal(atom: object) -> TypeGuard[Literal]:
    """A jaxpr ``Literal`` (unhashable, with ``val``), not a ``Var``."""
    return type(atom).__name__ == "Literal" and hasattr(atom, "val")


def whole_program(closed: ClosedJaxpr) -> dict[str, object]:
    """XLA's own analysis of the whole traced program: ``cost_analysis()`` of its lowering (the
    program as written, loop bodies counted once: what the per-equation figures, each lowered
    alone, add up to), ``cost_analysis()`` of its compilation (``compiled``: after fusion, whose
    bytes are a fraction of the lowering's: 16,512 against 65,676 for
    ``sum(tanh(x @ x.T) * 2 + 1, -1)`` on ``f32[32,64]``) and ``memory_analysis()`` (bytes)."""
    import jax

    from jaxlsp.worker.tracing import jaxcompat

    out: dict[str, object] = {}
    try:
        fn = jaxcompat.jaxpr_as_fun(closed)
        specs = [_spec(v.aval) for v in closed.jaxpr.invars]
        lowered = jax.jit(fn).lower(*specs)
        compiled = lowered.compile()
        optimised: dict[str, int] | None = None
        with contextlib.suppress(Exception):  # the lowering's figures are the ones compared
            optimised = figures(jaxcompat.cost_dict(compiled.cost_analysis())).json()
        try:
            out.update(figures(jaxcompat.cost_dict(lowered.cost_analysis())).json(), analysed="lowered")
        except NotImplementedError:  # no analysis before compiling on this platform
            if optimised is None:
                raise
            out.update(optimised, analysed="compiled")
        if optimised is not None:
            out["compiled"] = optimised
        stats = compiled.memory_analysis()
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return out
    if stats is not None:
        out["memory"] = {
            "argument": int(getattr(stats, "argument_size_in_bytes", 0)),
            "output": int(getattr(stats, "output_size_in_bytes", 0)),
            "alias": int(getattr(stats, "alias_size_in_bytes", 0)),
            "temp": int(getattr(stats, "temp_size_in_bytes", 0)),
            "generatedCode": int(getattr(stats, "generated_code_size_in_bytes", 0)),
        }
    return out


class DiskCache:
    """Figures by equation hash, in ``folder/xla-NAME.json``; a missing folder or an unreadable file
    is an empty cache, and a failed write is only a slower next time."""

    def __init__(self, folder: str | None, name: str) -> None:
        self.path = os.path.join(folder, f"xla-{re.sub(r'[^A-Za-z0-9.+-]', '_', name)}.json") if folder else None
        self.entries: dict[str, object] = self._read()
        self.new: dict[str, object] = {}

    def _read(self) -> dict[str, object]:
        if self.path is None:
            return {}
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        entries = data.get("entries") if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else None
        return entries if isinstance(entries, dict) else {}

    def get(self, key: str) -> graph_costs.Figures | str | None:
        got = self.entries.get(key)
        if isinstance(got, list) and len(got) == 3 and all(isinstance(x, int) for x in got):
            return graph_costs.Figures(*got)
        if isinstance(got, str):
            return got
        return None

    def put(self, key: str, value: graph_costs.Figures | str) -> None:
        entry = value if isinstance(value, str) else [value.flops, value.bytes, value.transcendentals]
        self.entries[key] = self.new[key] = entry

    def save(self) -> None:
        """Merge what was measured into the file as it is now (another capture may have written)."""
        if self.path is None or not self.new:
            return
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            entries = self._read()
            if len(entries) + len(self.new) > MAX_ENTRIES:
                entries = {}
            entries.update(self.new)
            fd, tmp = tempfile.mkstemp(prefix=".xla-", suffix=".tmp", dir=os.path.dirname(self.path))
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"format": CACHE_FORMAT, "entries": entries}, f, separators=(",", ":"))
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
