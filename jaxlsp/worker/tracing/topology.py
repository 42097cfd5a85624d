"""A TPU topology as a compile target (``topology = "v5e:16x16"``): its devices, from libtpu's
compile-only client, with no TPU present (issue 49).

``jax.experimental.topologies.get_topology_desc(topology_name=..., platform="tpu")`` gives the
pod's devices as descriptions: a mesh over them, inputs as ``ShapeDtypeStruct`` sharded on it, and
``jax.jit(f).lower(...).compile()`` compiles for the pod, as XLA would on it. The devices hold no
memory, so nothing of a topology capture is ever allocated: the trace and the compile are abstract.
The capture's own backend stays the CPU (``configure_jax``): libtpu is asked only for the
topology, so it never probes for a chip (and never prints its warnings about the missing one).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, cast

from jaxlsp.worker.core.failures import CaptureError
from jaxlsp.worker.topology import parse

if TYPE_CHECKING:
    from jax import Device
    from jax.experimental.topologies import TopologyDescription


def fix(jax_version: str) -> str:
    """The install that gives this interpreter the libtpu its jax was released with."""
    return f'pip install "jax[tpu]=={jax_version}"'


def devices(name: str) -> list[Device]:
    """The topology's devices, in libtpu's order; ``refused`` with the install that fixes it
    when libtpu is missing or does not match this jax, and with libtpu's words for a name it
    does not know."""
    import jax

    if parse(name) is None:
        raise CaptureError("refused", f"topology {name!r}: expected GENERATION:AxB or AxBxC, such as v5e:4x4")
    if importlib.util.find_spec("libtpu") is None:
        raise CaptureError(
            "refused",
            f"compiling for the TPU topology {name} needs libtpu in the capture interpreter ({sys.executable}), "
            f"which has none; install it with: {fix(jax.__version__)}",
        )
    from jax.experimental import topologies

    try:
        described = describe(topologies, name)
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "topology" in text.lower() or "INVALID_ARGUMENT" in text:
            raise CaptureError("refused", f"libtpu does not know the topology {name}: {text}") from None
        raise CaptureError(
            "refused",
            f"libtpu in {sys.executable} could not describe the topology {name} ({type(exc).__name__}: {text}); "
            f"it may not match jax {jax.__version__}: {fix(jax.__version__)}",
        ) from None
    return list(described.devices)


def describe(topologies: ModuleType, name: str) -> TopologyDescription:
    """``get_topology_desc`` of ``name``; a pod smaller than one host's chips (``v5e:1x1``: libtpu's
    default host is 2x2x1) is described as a host of its own size, as a one-chip machine is."""
    try:
        return cast("TopologyDescription", topologies.get_topology_desc(topology_name=name, platform="tpu"))
    except Exception as exc:
        pod = parse(name)
        if pod is None or "chips_per_host_bounds" not in str(exc):
            raise
        bounds = (*pod.dims, 1, 1, 1)[:3]
        described = topologies.get_topology_desc(topology_name=name, platform="tpu", chips_per_host_bounds=bounds)
        return cast("TopologyDescription", described)


def device_kind(found: list[Device]) -> str:
    return str(getattr(found[0], "device_kind", "")) if found else ""
