"""A chip's capacity in "fits" and "does not fit" alike (issue 55.3), without libtpu: the fit of
XLA's memory figures against what XLA lets a program allocate on a v5e chip (15.75 GiB, not its
published 16 GiB); tests/cli/test_topology.py compiles the same weights for a v5e pod."""

from __future__ import annotations

from jaxlsp.graph.model import Coverage, Graph
from jaxlsp.worker import topology
from jaxlsp.worker.program import fit

GIB = 1 << 30


def test_v5e_capacity_is_what_xla_allocates_and_is_named_alike_in_fits_and_does_not_fit() -> None:
    capacity = topology.capacity("v5e")
    assert capacity == (round(15.75 * GIB), "xla")
    assert topology.capacity_of_kind("TPU v5 lite") == capacity
    assert topology.capacity("v6e") == (32 * GIB, "generation")  # unmeasured: the published HBM
    hbm, source = capacity
    weight = round(15.7 * GIB)
    fitted = fit.fits({"argument": weight, "output": 4, "temp": 0}, hbm, source)
    assert fitted is not None and fitted["fits"] is True and fitted["hbm"] == hbm
    said = "of the 15.75 GiB a chip can allocate (XLA's limit on this generation)"
    assert fitted["message"] == f"fits a chip: needs 15.70 GiB {said}, headroom {topology.size(hbm - weight - 4)}"
    # over it, yet under the published 16 GiB: the same capacity, the same words
    over = fit.fits({"argument": round(15.85 * GIB)}, hbm, source)
    assert (
        over is not None and over["fits"] is False and over["message"] == f"does not fit a chip: needs 15.85 GiB {said}"
    )
    error = RuntimeError(
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
        "(15.85G) exceeds available HBM (15.75G)"
    )
    refused = fit.does_not_fit(_graph(), error, [], hbm, str, source)
    assert refused["hbm"] == hbm and refused["hbmSource"] == "xla"
    assert str(refused["message"]).startswith(f"does not fit a chip: needs 15.85 GiB {said}")


def test_a_real_chips_own_limit_is_named_as_the_devices() -> None:
    fitted = fit.fits({"argument": GIB}, 15 * GIB, "device")
    assert fitted is not None
    assert fitted["message"] == (
        "fits a chip: needs 1.00 GiB of the 15.00 GiB a chip can allocate (the device's own limit), headroom 14.00 GiB"
    )


def _graph() -> Graph:
    return Graph(
        target={"path": "m.py", "name": "f", "kind": "function"},
        profile={"name": None},
        versions={"jax": None, "jaxlib": None, "flax": None, "equinox": None, "python": None},
        coverage=Coverage(),
        sources={},
        inputs=[],
        outputs=[],
        nodes=[],
        values=[],
        groups=[],
    )
