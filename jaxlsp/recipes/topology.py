"""``topology``: a TPU pod the profile is compiled for from this machine (issue 49).

``topology = "v5e:16x16"`` with ``mesh = { axes = { data = 16, model = 16 } }``: the trace runs
on the CPU as always, and ``--compiled`` compiles for the pod (libtpu's compile-only client, in the
capture interpreter). The mesh is laid over the pod's devices, so its axes must multiply to their
count (checked here for the generations core/topology.py knows, and in the worker for any name
libtpu takes). Nothing is allocated: inputs and parameters stay abstract, so the profile's element
limit, meant for arrays a capture builds, does not apply; the compile itself is bounded by the
worker's memory cap and deadline, and the program by a chip's HBM (the fit XLA reports).
"""

from __future__ import annotations

from jaxlsp.recipes.mesh import size_of, spelled
from jaxlsp.recipes.problems import KeyPath
from jaxlsp.recipes.schema import show
from jaxlsp.recipes.specs import Context
from jaxlsp.worker.protocol import MeshSpec
from jaxlsp.worker.topology import EXAMPLE, GENERATIONS, Topology, parse


def check_topology(ctx: Context, path: KeyPath, value: object) -> str | None:
    """The topology's name, or None (with the error at ``path``) when it is no name libtpu's form takes."""
    if value is None:
        return None
    if not isinstance(value, str) or parse(value) is None:
        known = ", ".join(GENERATIONS)
        ctx.error(
            path, f"expected a TPU topology such as {EXAMPLE} (GENERATION:AxB or AxBxC; {known}), got {show(value)}"
        )
        return None
    return value.strip()


def check_pod(
    ctx: Context, path: KeyPath, name: str, mesh: MeshSpec | None, has_mesh: bool, device: object, devices: object
) -> None:
    """The profile around a topology: a mesh over all of the pod's devices, traced on the CPU."""
    topology = parse(name)
    if device not in (None, "cpu"):
        ctx.error(
            (*path, "device"),
            f'a topology profile traces on the CPU and compiles for {name}; device = "{device}" runs on '
            "a device here: drop device or topology",
        )
    if devices is not None:
        ctx.error((*path, "devices"), f"devices makes virtual CPU devices; the topology {name} gives the devices")
    if not has_mesh:
        count = topology.devices if topology is not None else None
        ctx.error(
            (*path, "topology"),
            f"a topology needs a mesh over its devices (mesh = {{ axes = {{ data = {count or 'N'} }} }})",
        )
        return
    if mesh is not None and topology is not None:
        problem = mismatch(topology, mesh)
        if problem is not None:
            ctx.error((*path, "mesh"), problem)


def mismatch(topology: Topology, mesh: MeshSpec) -> str | None:
    """Why a mesh cannot be laid over the topology's devices (None: it can, or the generation is unknown)."""
    count = topology.devices
    size = size_of(mesh)
    if count is None or size == count:
        return None
    chips = f"{topology.chips} chips" + (f", {count} devices" if count != topology.chips else "")
    return (
        f"a mesh of {size} devices ({spelled(mesh)}) over the topology {topology.name} ({chips}): "
        f"its axes must multiply to {count}"
    )
