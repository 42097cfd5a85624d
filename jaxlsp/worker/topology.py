"""TPU topology names (``v5e:16x16``) and what each generation's chip holds, shared by the recipe
check (which runs without jax) and the worker (which asks libtpu for the topology itself).

A name is ``GENERATION:AxBxC`` as ``jax.experimental.topologies.get_topology_desc`` takes it.
libtpu is the authority on which names exist; this table only lets a recipe be checked before
anything runs (the mesh's size against the topology's device count) and gives the HBM a device
has, which XLA's compile-only client does not report (``memory_stats()`` is refused for devices
that are not addressable). Figures are the published per-chip HBM; on generations where libtpu's
compile-only topology lists each TensorCore as a device (v2, v3, v4: measured with libtpu 0.0.42.1,
``v4:2x2x2`` gave 16 devices) the chip's HBM is split between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

GIB: Final = 1 << 30

# generation -> (devices per chip in a compile-only topology, HBM per chip in bytes, device kind)
GENERATIONS: Final[dict[str, tuple[int, int, str]]] = {
    "v2": (2, 16 * GIB, "TPU v2"),
    "v3": (2, 32 * GIB, "TPU v3"),
    "v4": (2, 32 * GIB, "TPU v4"),
    "v5e": (1, 16 * GIB, "TPU v5 lite"),
    "v5p": (1, 95 * GIB, "TPU v5"),
    "v6e": (1, 32 * GIB, "TPU v6 lite"),
}

# What XLA lets one program allocate on a chip, where it was measured: its RESOURCE_EXHAUSTED on
# v5e names "available HBM (15.75G)" of the 16 GiB (shared/notes/tpu.md). A generation not listed
# here is held to its published HBM (a little more than XLA allows).
ALLOCATABLE: Final[dict[str, int]] = {"v5e": round(15.75 * GIB)}

NAME: Final = re.compile(r"([A-Za-z0-9_ ]+):([1-9][0-9]*(?:x[1-9][0-9]*){1,2})")
EXAMPLE: Final = 'topology = "v5e:4x4"'


@dataclass(frozen=True)
class Topology:
    """A parsed topology name: its generation, chip grid, and (for a known generation) its device
    count and each device's HBM."""

    name: str
    generation: str
    dims: tuple[int, ...]

    @property
    def chips(self) -> int:
        count = 1
        for d in self.dims:
            count *= d
        return count

    @property
    def devices(self) -> int | None:
        """The devices libtpu lists for it (None: a generation this table does not know)."""
        known = GENERATIONS.get(self.generation)
        return self.chips * known[0] if known else None

    @property
    def hbm(self) -> int | None:
        """Bytes of HBM per device (None: unknown generation)."""
        known = GENERATIONS.get(self.generation)
        return known[1] // known[0] if known else None


def parse(name: str) -> Topology | None:
    """The topology a name spells, or None when it is not ``GENERATION:AxB[xC]``."""
    m = NAME.fullmatch(name.strip())
    if m is None:
        return None
    return Topology(name.strip(), m.group(1), tuple(int(d) for d in m.group(2).split("x")))


def hbm_of_kind(device_kind: str) -> int | None:
    """HBM bytes per device for a device kind libtpu reports (``TPU v5 lite``), else None."""
    for per_chip, hbm, kind in GENERATIONS.values():
        if kind == device_kind:
            return hbm // per_chip
    return None


def capacity(generation: str) -> tuple[int, str] | None:
    """``(bytes, source)`` a program may allocate on one device of ``generation``: XLA's own limit
    where measured (source ``xla``), else the published HBM (``generation``); None when unknown."""
    known = GENERATIONS.get(generation)
    if known is None:
        return None
    if generation in ALLOCATABLE:
        return ALLOCATABLE[generation] // known[0], "xla"
    return known[1] // known[0], "generation"


def capacity_of_kind(device_kind: str) -> tuple[int, str] | None:
    """:func:`capacity` of the generation whose device kind libtpu reports as ``device_kind``."""
    return next((capacity(g) for g, (_, _, kind) in GENERATIONS.items() if kind == device_kind), None)


#: How each source of a chip's capacity is said (fit messages, hovers, diagnostics).
CAPACITY_SOURCES: Final[dict[str, str]] = {
    "xla": "XLA's limit on this generation",
    "device": "the device's own limit",
    "generation": "the generation's published HBM",
}


def capacity_text(capacity_bytes: int, source: str | None) -> str:
    """``the 15.75 GiB a chip can allocate (XLA's limit on this generation)``: one wording for
    "fits" and "does not fit" alike."""
    said = CAPACITY_SOURCES.get(source or "", "")
    return f"the {size(capacity_bytes)} a chip can allocate" + (f" ({said})" if said else "")


def size(n: float) -> str:
    """``15.75 GiB``, ``512 MiB``: bytes as the fit messages spell them."""
    for unit, scale in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"
