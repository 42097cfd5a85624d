"""Re-traces that skip the abstract init (capture/launch/speculate.py), through the real warm spare.

The hinted capture must give exactly the graph an unhinted one gives; a hint that no longer holds
(the model changed: a width, a layer more or fewer) or is garbage must be caught by the hinted
trace itself (worker/reuse/hints.py HintCheck). Parameters of other shapes or new ones are repaired
(traced again on the hint with their shapes, no init); anything else is captured the usual way,
with the new shapes, in the same worker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.launch.spare import SparePool
from jaxlsp.capture.launch.speculate import capture_speculatively, structure_of
from jaxlsp.graph import io
from tests.deadlines import scaled
from tests.worker.conftest import request

pytest.importorskip("flax")

MODEL = """\
import flax.linen as nn


class Net(nn.Module):
    features: int = {features}

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.features)(x)
        x = nn.BatchNorm(use_running_average=True)(x)
        return nn.Dense(2)(nn.relu(x))
"""


def _request(root: Path, features: int, source: str | None = None) -> dict[str, Any]:
    (root / "model.py").write_text(MODEL.format(features=features) if source is None else source)
    array = {"kind": "array", "shape": [4, 3], "dtype": "float32"}
    return {**request("model.py", "Net", array, workspace=root, kind="linen", transform="grad"), "transport": "packed"}


def _essence(outcome: Any) -> str:
    graph = io.to_json(io.from_json(outcome.result["graph"]))  # the worker sends the compact form
    return json.dumps({k: graph[k] for k in ("nodes", "values", "inputs", "outputs", "groups")})


async def test_a_hinted_capture_is_the_same_graph_and_a_changed_model_is_caught(
    tmp_path: Path, jax_python: str
) -> None:
    pool = SparePool()
    try:
        assert await pool.start(jax_python)
        request = _request(tmp_path, 8)

        first, used = await capture_speculatively(
            pool, request, hint=None, python=jax_python, options=CaptureOptions(timeout=scaled(120))
        )
        assert first.ok and not used, first.result
        hint = structure_of(first)
        assert hint["params"]["Dense_0"]["kernel"] == [[3, 8], "float32", False]
        assert hint["batch_stats"]["BatchNorm_0"]["mean"] == [[8], "float32", False]

        again, used = await capture_speculatively(
            pool, request, hint=hint, python=jax_python, options=CaptureOptions(timeout=scaled(120))
        )
        assert again.ok and used, again.result
        assert _essence(again) == _essence(first)  # the very same graph

        assert again.result["hint"] == "held" and "stale" not in again.result["timings"]

        # The model changed since: the hinted trace sees it (the first kernel and BatchNorm's
        # statistics changed with the width) and is traced again with the shapes their
        # initialisers give, without an init.
        changed = _request(tmp_path, 16)
        fresh, used = await capture_speculatively(
            pool, changed, hint=hint, python=jax_python, options=CaptureOptions(timeout=scaled(120))
        )
        assert fresh.ok and used, fresh.result
        assert fresh.result["hint"] == "repaired" and fresh.result["timings"]["stale"] > 0
        graph = io.to_json(io.from_json(fresh.result["graph"]))  # the worker sends the compact form
        kernels = [p for p in graph["inputs"] if p["label"] == "params/Dense_0/kernel"]
        shapes = {v["id"]: v["shape"] for v in graph["values"]}
        assert [shapes[p["value"]] for p in kernels] == [[3, 16]]
        assert structure_of(fresh)["params"]["Dense_0"]["kernel"] == [[3, 16], "float32", False]
        assert structure_of(fresh)["batch_stats"]["BatchNorm_0"]["mean"] == [[16], "float32", False]

        garbage, used = await capture_speculatively(
            pool, changed, hint={"params": "nonsense"}, python=jax_python, options=CaptureOptions(timeout=scaled(120))
        )
        assert garbage.ok and not used and _essence(garbage) == _essence(fresh)
    finally:
        await pool.close()


# edit -> how the hint fares: parameters of other shapes or new ones, and statistics of another
# width, are repaired; a layer removed (hinted variables left unread) and new statistics (not
# known to be an init's) are not
EDITS = {
    "a layer fewer": ("        x = nn.BatchNorm(use_running_average=True)(x)\n", "", "stale"),
    "a layer more": (
        "        return nn.Dense(2)(nn.relu(x))",
        "        return nn.Dense(2)(nn.Dense(8)(nn.relu(x)))",
        "repaired",
    ),
    "a width": ("nn.Dense(2)", "nn.Dense(3)", "repaired"),
    "a dtype": ("nn.Dense(2)", "nn.Dense(2, param_dtype=jnp.bfloat16)", "repaired"),
    "a width before statistics": ("nn.Dense(self.features)", "nn.Dense(self.features + 1)", "repaired"),
    "new statistics": (
        "        return nn.Dense(2)(nn.relu(x))",
        "        return nn.Dense(2)(nn.BatchNorm(use_running_average=True)(nn.relu(x)))",
        "stale",
    ),
}


@pytest.mark.parametrize("edit", EDITS)
async def test_an_edit_that_changes_the_variables_is_traced_with_a_fresh_init(
    tmp_path: Path, jax_python: str, edit: str
) -> None:
    """Each edit but the last keeps the first layer (its check passes) and changes what comes after
    it: only the trace's own check of the variables it reads, and of the ones it never read, can
    tell. A repaired hint gives the graph and the structure a fresh init gives."""
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    try:
        assert await pool.start(jax_python)
        first, _ = await capture_speculatively(pool, _request(tmp_path, 8), jax_python, options, hint=None)
        hint = structure_of(first)
        old, new, fares = EDITS[edit]
        source = "import jax.numpy as jnp\n" + MODEL.format(features=8)
        assert old in source
        edited = _request(tmp_path, 8, source.replace(old, new))
        fresh, used = await capture_speculatively(pool, edited, jax_python, options, hint=None)
        hinted, used = await capture_speculatively(pool, edited, jax_python, options, hint=hint)
        assert fresh.ok and hinted.ok, hinted.result
        assert hinted.result["hint"] == fares and used == (fares == "repaired")
        assert hinted.result["timings"]["stale"] > 0  # the trace that found the change is no graph
        assert structure_of(hinted) == structure_of(fresh) != hint
        assert _essence(hinted) == _essence(fresh)
    finally:
        await pool.close()


async def test_an_edit_of_the_forward_pass_alone_reuses_the_init(tmp_path: Path, jax_python: str) -> None:
    """The everyday edit (another activation, a line moved) keeps every variable: the re-trace
    skips the init and its graph is the one a fresh trace of the edited file gives."""
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    try:
        assert await pool.start(jax_python)
        first, _ = await capture_speculatively(pool, _request(tmp_path, 8), jax_python, options, hint=None)
        source = "# an edit above the model moves every line\n" + MODEL.format(features=8).replace("nn.relu", "nn.gelu")
        edited = _request(tmp_path, 8, source)
        hinted, used = await capture_speculatively(pool, edited, jax_python, options, hint=structure_of(first))
        fresh, _ = await capture_speculatively(pool, edited, jax_python, options, hint=None)
        assert hinted.ok and used and hinted.result["hint"] == "held", hinted.result
        assert _essence(hinted) == _essence(fresh) != _essence(first)
        assert structure_of(hinted) == structure_of(fresh) == structure_of(first)
    finally:
        await pool.close()


SCANNED = """\
import flax.linen as nn


class Cell(nn.Module):
    @nn.compact
    def __call__(self, carry, _):
        return nn.tanh(nn.Dense({inner})(carry)), None


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(4)(x)
        h = nn.Dense({inner})(h)
        Scan = nn.scan(Cell, variable_broadcast=False, variable_axes={{"params": 0}}, split_rngs={{"params": True}}, length=3)
        h, _ = Scan()(h, None)
        return nn.Dense({head})(h)
"""


@pytest.mark.parametrize(("edit", "fares"), [({"inner": 6, "head": 2}, "stale"), ({"inner": 5, "head": 3}, "repaired")])
async def test_a_width_inside_a_scan_initialises_for_real_and_one_outside_is_repaired(
    tmp_path: Path, jax_python: str, edit: dict[str, int], fares: str
) -> None:
    """``nn.scan`` stacks its body's parameters: the hint holds the stack, an initialiser one slice,
    so a change inside is not repaired (the real init runs, as before repairs); one after the scan
    is. Both give the graph a fresh trace gives."""
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    try:
        assert await pool.start(jax_python)
        first, _ = await capture_speculatively(
            pool, _request(tmp_path, 0, SCANNED.format(inner=5, head=2)), jax_python, options, hint=None
        )
        assert first.ok, first.result
        hint = structure_of(first)
        assert hint["params"]["ScanCell_0"]["Dense_0"]["kernel"][0] == [3, 5, 5]  # stacked
        edited = _request(tmp_path, 0, SCANNED.format(**edit))
        hinted, used = await capture_speculatively(pool, edited, jax_python, options, hint=hint)
        fresh, _ = await capture_speculatively(pool, edited, jax_python, options, hint=None)
        assert hinted.ok and fresh.ok, hinted.result
        assert hinted.result["hint"] == fares and used == (fares == "repaired")
        assert _essence(hinted) == _essence(fresh)
        assert structure_of(hinted) == structure_of(fresh) != hint
    finally:
        await pool.close()


BOXED = """\
import flax.linen as nn

RULES = (("embed", None), ("mlp", "model"), ("heads", "model"))


def logical(*names):
    return nn.with_logical_partitioning(nn.initializers.lecun_normal(), names)


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        with nn.logical_axis_rules(RULES):
            h = nn.Dense(8, kernel_init=logical("embed", "mlp"))(x)
            h = nn.LayerNorm(scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("mlp",)))(h)
            return nn.Dense({head}, kernel_init=logical({names}))(nn.relu(h))
"""


@pytest.mark.parametrize(
    ("edit", "fares"), [({}, "held"), ({"head": 3}, "repaired"), ({"names": "'mlp', 'heads'"}, "repaired")]
)
async def test_a_model_with_logically_partitioned_parameters_reuses_its_init(
    tmp_path: Path, jax_python: str, edit: dict[str, Any], fares: str
) -> None:
    """Boxed parameters (``nn.with_logical_partitioning``, as Flax's LLMs declare shardings) are
    hinted with their boxes; under the profile's mesh each read of one is a sharding constraint,
    and the hinted graph is the fresh one, constraints and all. An edit of a width or of a
    parameter's axis names is repaired."""
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    mesh = {"axisNames": ["model"], "axisSizes": [1], "axisTypes": ["Auto"]}

    def boxed(head: int = 2, names: str = "'mlp', None") -> dict[str, Any]:
        req = _request(tmp_path, 0, BOXED.format(head=head, names=names))
        req["profile"]["mesh"] = mesh
        return req

    try:
        assert await pool.start(jax_python)
        first, _ = await capture_speculatively(pool, boxed(), jax_python, options, hint=None)
        assert first.ok, first.result
        hint = structure_of(first)
        assert hint["params"]["Dense_0"]["kernel"][3] == {
            "box": "LogicallyPartitioned",
            "names": ["embed", "mlp"],
            "rules": None,
        }
        edited = boxed(**edit)
        hinted, used = await capture_speculatively(pool, edited, jax_python, options, hint=hint)
        fresh, _ = await capture_speculatively(pool, edited, jax_python, options, hint=None)
        assert hinted.ok and fresh.ok, hinted.result
        assert hinted.result["hint"] == fares and used
        assert "sharding_constraint" in _essence(hinted)  # the boxes' reads, under the mesh
        assert _essence(hinted) == _essence(fresh)
        assert structure_of(hinted) == structure_of(fresh)
        assert (structure_of(hinted) == hint) == (fares == "held")
    finally:
        await pool.close()


STACK = """\
import flax.linen as nn
import jax.numpy as jnp


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(16)(nn.LayerNorm()(x))
        return x + nn.Dense(x.shape[-1])(jnp.tanh(h) * jnp.sin(h) + jnp.cos(h))


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(5):
            x = Block()(x)
        return x
"""


async def test_a_forked_capture_replays_repeated_layers_and_gives_the_same_graph(
    tmp_path: Path, jax_python: str
) -> None:
    """A capture forked from the warm spare (which sets the replay hook before it forks,
    worker/reuse/replay.py ``install``) replays the four repeated layers, with and without a structure
    hint, and the graph is the one ``replay: false`` gives."""
    (tmp_path / "stack.py").write_text(STACK)
    array = {"kind": "array", "shape": [4, 8], "dtype": "float32"}
    base = {**request("stack.py", "Stack", array, workspace=tmp_path, kind="linen"), "transport": "packed"}
    pool = SparePool()
    options = CaptureOptions(timeout=scaled(120))
    try:
        assert await pool.start(jax_python)
        replayed = await pool.capture(base, jax_python, options)
        exact = await pool.capture({**base, "replay": False}, jax_python, options)
        assert replayed.ok and exact.ok, (replayed.result, exact.result)
        assert replayed.via == "spare" and replayed.result["replayed"] == 4
        assert "replayed" not in exact.result
        assert _essence(replayed) == _essence(exact)
        hinted, used = await capture_speculatively(pool, base, jax_python, options, hint=structure_of(replayed))
        assert used and hinted.result["hint"] == "held" and hinted.result["replayed"] == 4
        assert _essence(hinted) == _essence(exact)
    finally:
        await pool.close()
