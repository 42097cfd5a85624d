"""Will it fit: a program compiled for a TPU topology against the HBM of one of its chips (issue 49).

Measured by XLA: the per-chip need when the program compiles (``memory_analysis()``: arguments,
outputs and temporaries, less what the outputs alias), and, when it does not, XLA's own figures
from its ``RESOURCE_EXHAUSTED`` error (``the total memory required for HLO temporaries (16.02G)
exceeds available HBM (15.75G)``). Estimated here: the chip's HBM when the program fits (the
allocatable capacity: XLA's own limit where measured, 15.75 of v5e's 16 GiB, else the published
figure per generation, worker/topology.py; on a real chip, the device's own ``bytes_limit``), and
what holds the memory when it does not (XLA's error names no buffer): each input's
per-chip size from its sharding (exact), and the largest values of the traced program at their
lines (their whole size: the compile that would say how XLA splits them failed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import cast

from jaxlsp.graph.model import Graph
from jaxlsp.worker.topology import capacity_text, size

# XLA's figures: "... required for HLO temporaries (16.02G) exceeds available HBM (15.75G)"
_FIGURES = re.compile(r"\(([\d.]+)([KMGT]?)\)?\s*exceeds available HBM \(([\d.]+)([KMGT]?)\)")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
HELD = 5  # values listed as holding the memory


def out_of_memory(error: BaseException) -> bool:
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text and ("HBM" in text or "memory" in text.lower())


def xla_figures(text: str) -> tuple[int, int] | None:
    """(required, available) bytes from XLA's out-of-memory message, or None."""
    m = _FIGURES.search(text)
    if m is None:
        return None
    return round(float(m.group(1)) * _SCALE[m.group(2)]), round(float(m.group(3)) * _SCALE[m.group(4)])


def fits(memory: dict[str, int] | None, hbm: int | None, source: str = "generation") -> dict[str, object] | None:
    """``{fits, need, hbm, headroom, hbmSource, message}`` of a program that compiled, per chip;
    ``hbm`` is the chip's allocatable capacity and ``source`` where it comes from
    (worker/topology.py's ``CAPACITY_SOURCES``)."""
    if memory is None or hbm is None:
        return None
    need = memory.get("argument", 0) + memory.get("output", 0) - memory.get("alias", 0) + memory.get("temp", 0)
    verdict = "fits a chip" if need <= hbm else "does not fit a chip"
    message = f"{verdict}: needs {size(need)} of {capacity_text(hbm, source)}"
    if need <= hbm:
        message += f", headroom {size(hbm - need)}"
    return {
        "fits": need <= hbm,
        "need": need,
        "hbm": hbm,
        "headroom": hbm - need,
        "hbmSource": source,
        "message": message,
    }


def does_not_fit(
    graph: Graph,
    error: BaseException,
    operands: Sequence[object],
    hbm: int | None,
    spell: Callable[[str], str],
    hbm_source: str = "generation",
) -> dict[str, object]:
    """``{fits: false, need, hbm, held, message}`` of a program XLA refused for want of HBM."""
    text = str(error)
    figures = xla_figures(text)
    need, available = figures if figures is not None else (None, hbm)
    held = _held(graph, operands)
    out: dict[str, object] = {"fits": False, "need": need, "hbm": available, "held": held}
    out["hbmSource"] = source = "xla" if figures is not None else hbm_source
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    if need is not None and available is not None:
        head = f"does not fit a chip: needs {size(need)} of {capacity_text(available, source)}"
    else:
        head = f"does not fit a chip: {first[:300]}"
    where = [
        f"{h['label']} {size(cast(int, h['bytes']))}"
        + (" per chip" if h["kind"] == "input" else " (whole)")
        + (f" at {h['path']}:{h['line']}" if h.get("line") else "")
        for h in held[:3]
    ]
    out["message"] = head + ("; held by " + ", ".join(where) if where else "") + f" (XLA: {first[:200]})"
    return out


def _held(graph: Graph, operands: Sequence[object]) -> list[dict[str, object]]:
    """The inputs by their per-chip size (from their shardings) and the largest traced values
    (whole), each at the first line that reads (or makes) it; largest first."""
    nodes = {n.id: n for n in graph.nodes}
    readers: dict[str, str] = {}
    for n in graph.nodes:
        for v in n.inputs:
            readers.setdefault(v, n.id)
    values = {v.id: v for v in graph.values}
    ports = [p for p in graph.inputs if p.role != "constant"]
    rows: list[dict[str, object]] = []
    for port, operand in zip(ports, operands, strict=False):
        value = values.get(port.value)
        if value is None:
            continue
        per_chip = _per_chip_bytes(operand, value.shape, value.dtype)
        if per_chip is None:
            continue
        row: dict[str, object] = {"label": port.label, "value": port.value, "bytes": per_chip, "kind": "input"}
        node = nodes.get(readers.get(port.value, ""))
        if node is not None and node.source is not None:
            row.update(path=node.source.path, line=node.source.line)
        rows.append(row)
    inputs = {p.value for p in graph.inputs}
    made = sorted(
        ((v, _bytes(v.shape, v.dtype)) for v in graph.values if v.producer and v.id not in inputs),
        key=lambda pair: -(pair[1] or 0),
    )
    for value, whole in made[:HELD]:
        if not whole:
            continue
        node = nodes.get(value.producer or "")
        row = {"label": value.id, "value": value.id, "bytes": whole, "kind": "value (whole, not per chip)"}
        if node is not None and node.source is not None:
            row.update(path=node.source.path, line=node.source.line)
        rows.append(row)
    rows.sort(key=lambda r: -cast(int, r["bytes"]))  # each row's bytes: an int (above)
    return rows[:HELD]


def _per_chip_bytes(operand: object, shape: list[int | str], dtype: str) -> int | None:
    whole = _bytes(shape, dtype)
    if whole is None:
        return None
    sharding = getattr(operand, "sharding", None)
    try:
        local = sharding.shard_shape(tuple(shape)) if sharding is not None else None
    except Exception:
        local = None
    if local is None:
        return whole
    return _bytes(list(local), dtype)


def _bytes(shape: list[int | str] | tuple[int, ...], dtype: str) -> int | None:
    import numpy as np

    if not all(isinstance(d, int) for d in shape):
        return None
    try:
        itemsize = int(np.dtype(dtype).itemsize)
    except TypeError:
        itemsize = 2 if dtype == "bfloat16" else 4 if dtype.startswith("key") else 0
    if not itemsize:
        return None
    count = 1
    for d in shape:
        count *= int(d)
    return count * itemsize
