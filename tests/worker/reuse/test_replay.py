"""Repeated Linen module calls replayed (worker/reuse/replay.py): the graph is the one a trace of every
call gives, byte for byte, and the calls that may depend on more than the key are traced.

Each model is captured twice in this process, with replay (the default) and without
(``replay: false``), and the two graphs compared whole: nodes, values, frames, scopes, groups.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flax")

from tests.worker.conftest import graph_of, request

Capture = Callable[[dict[str, Any]], dict[str, Any]]

HEADER = """\
import flax.linen as nn
import jax
import jax.numpy as jnp
"""

BLOCK = """
class Block(nn.Module):
    width: int
    scale: float = 1.0

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(self.width, name="up")(nn.LayerNorm()(x))
        h = jax.nn.gelu(h) * jnp.tanh(h) + jnp.sin(h) * self.scale
        h = nn.Dense(x.shape[-1], name="down")(h) / jnp.sqrt(jnp.float32(self.width))
        return x + jnp.cumsum(h, axis=-1) - jnp.mean(h, axis=-1, keepdims=True)
"""

STACK = """
class Stack(nn.Module):
    depth: int = 6

    @nn.compact
    def __call__(self, x):
        for _ in range(self.depth):
            x = Block(16)(x)
        return nn.Dense(3)(x)
"""


def _both(run: Capture, root: Path, name: str, source: str, target: str, **profile: Any) -> tuple[str, int, str, int]:
    """The graph (JSON text) and the replayed count with replay, then without."""
    file = f"{name}.py"
    (root / file).write_text(HEADER + source)
    base = request(
        file, target, {"kind": "array", "shape": [2, 8], "dtype": "float32"}, workspace=root, kind="linen", **profile
    )
    out = []
    for extra in ({}, {"replay": False}):
        result = run({**base, **extra})
        graph = graph_of(result)
        out += [json.dumps(graph, sort_keys=True), int(result.get("replayed") or 0)]
    return out[0], out[1], out[2], out[3]


def test_repeated_layers_replay_and_give_the_same_graph(run_capture: Capture, tmp_path: Path) -> None:
    on, replayed, off, none = _both(run_capture, tmp_path, "replay_stack", BLOCK + STACK, "Stack")
    assert on == off
    assert none == 0
    assert replayed == 5  # Block_1 ... Block_5 repeat Block_0


def test_a_gradient_replays_the_primal_and_tangent_equations(run_capture: Capture, tmp_path: Path) -> None:
    """Under ``jax.grad`` the layers run under jax's linearization: each replay stages the
    primal equations, the residuals the tangent trace takes in, in their order, and the tangent
    equations; the backward pass transposes them into the graph a trace of every call gives."""
    on, replayed, off, _ = _both(run_capture, tmp_path, "replay_grad", BLOCK + STACK, "Stack", transform="grad")
    assert on == off
    # The first layers differ in what the linearization knows of their inputs (the data has no
    # tangent; whether the tangent trace took a primal in before the call): more kinds recorded.
    assert replayed >= 3


@pytest.mark.parametrize("transform", [None, "grad"])
def test_a_hinted_trace_with_replay_holds_and_gives_the_same_graph(
    run_capture: Capture, tmp_path: Path, transform: str | None
) -> None:
    """The hint check counts a replayed call's variables as read: the hint holds (every hinted
    leaf read), and the graph is the unhinted one."""
    (tmp_path / "replay_hinted.py").write_text(HEADER + BLOCK + STACK)
    profile = {} if transform is None else {"transform": transform}
    array = {"kind": "array", "shape": [2, 8], "dtype": "float32"}
    base = request("replay_hinted.py", "Stack", array, workspace=tmp_path, kind="linen", **profile)
    first = run_capture(base)
    hinted = run_capture({**base, "structureHint": first["structure"]})
    assert hinted["hint"] == "held" and hinted["replayed"] >= 3
    assert json.dumps(graph_of(hinted), sort_keys=True) == json.dumps(graph_of(first), sort_keys=True)
    # the model edited (another file: this process keeps the module it imported)
    (tmp_path / "replay_widened.py").write_text((HEADER + BLOCK + STACK).replace("Block(16)", "Block(24)"))
    edited = request("replay_widened.py", "Stack", array, workspace=tmp_path, kind="linen", **profile)
    repaired = run_capture({**edited, "structureHint": first["structure"]})
    fresh = run_capture({**edited, "replay": False})
    assert repaired["hint"] == "repaired"
    assert json.dumps(graph_of(repaired), sort_keys=True) == json.dumps(graph_of(fresh), sort_keys=True)


def test_a_scanned_stack_replays_inside_the_scan_body(run_capture: Capture, tmp_path: Path) -> None:
    """Inside ``nn.scan`` the layers read a broadcast operand the body took in as a constant."""
    source = (
        BLOCK
        + """
class Stage(nn.Module):
    @nn.compact
    def __call__(self, x, bias):
        for _ in range(4):
            x = Block(16)(x + bias)
        return x, None


class Scanned(nn.Module):
    @nn.compact
    def __call__(self, x):
        bias = jnp.ones(x.shape[-1])
        stages = nn.scan(Stage, variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=nn.broadcast, length=3)
        x, _ = stages(name="stages")(x, bias)
        return x
"""
    )
    on, replayed, off, _ = _both(run_capture, tmp_path, "replay_scan", source, "Scanned")
    assert on == off
    assert replayed >= 2


def test_the_first_pass_over_a_scan_body_replays_under_partial_evaluation(run_capture: Capture, tmp_path: Path) -> None:
    """Flax's ``nn.scan`` runs its body once under jax's partial evaluation (to find the loop's
    invariant outputs) before the scan traces it: there a layer's operations on the broadcast
    operand are known and staged in the enclosing trace (they stay in the program), those on the
    carry are recipes. The layers replay in both passes: the 3 repeats of the first layer in the
    first, 2 in the scan's trace (whose first layer is where the body takes the operand in, so
    the second is the first one recorded). A layer returns the operand as it came, too."""
    source = """
class Rotary(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x, positions):
        freq = jnp.exp(-jnp.arange(self.width // 2, dtype=jnp.float32) / self.width)
        angle = positions[..., None] * freq * 2.0
        sin, cos = jnp.sin(angle), jnp.cos(angle)
        half = jnp.concatenate([sin, cos], axis=-1) + jnp.float32(0.5)
        h = nn.Dense(self.width, name="mix")(nn.LayerNorm()(x)) * half
        h = jax.nn.gelu(h) + jnp.tanh(h) * jnp.mean(half)
        return x + nn.Dense(x.shape[-1], name="out")(h), positions


class Stage(nn.Module):
    @nn.compact
    def __call__(self, x, positions):
        for _ in range(4):
            x, _ = Rotary(8)(x, positions)
        return x, None


class Scanned(nn.Module):
    @nn.compact
    def __call__(self, x):
        positions = jnp.arange(x.shape[0], dtype=jnp.float32)
        stages = nn.scan(Stage, variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=nn.broadcast, length=3)
        x, _ = stages(name="stages")(x, positions)
        return x
"""
    on, replayed, off, _ = _both(run_capture, tmp_path, "replay_scan_first_pass", source, "Scanned")
    assert on == off
    assert replayed == 5
    # Under a gradient the first pass's parent is the linearization, whose operations on values
    # with no tangent (the operand's) go to its staging trace as they are: replayed the same.
    on, replayed, off, _ = _both(run_capture, tmp_path, "replay_scan_first_pass", source, "Scanned", transform="grad")
    assert on == off
    assert replayed == 5


# Models whose repeated calls must not replay, or whose replay must tell calls apart. Each is
# compared with replay off; ``replays`` says whether any call may replay at all.
CASES: dict[str, tuple[str, bool]] = {
    "reads its own name": (
        """
class Named(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(x) * jnp.cos(x) + jnp.sin(x) * jnp.tanh(x) - jnp.exp(-x) + jnp.log1p(x * x)
        return x * 2.0 if self.name.endswith("1") else x + jnp.abs(x) * jnp.sqrt(jnp.abs(x) + 1.0)


class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(4):
            x = Named()(x)
        return x
""",
        False,
    ),
    "counts its calls in a global": (
        """
CALLS = 0


class Counted(nn.Module):
    @nn.compact
    def __call__(self, x):
        global CALLS
        CALLS += 1
        x = nn.Dense(8)(x) * jnp.cos(x) + jnp.sin(x) * jnp.tanh(x) - jnp.exp(-x) + jnp.log1p(x * x)
        return x * CALLS + jnp.abs(x) * jnp.sqrt(jnp.abs(x) + 1.0) - jnp.mean(x)


class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        global CALLS
        CALLS = 0  # each trace counts from 0 (this process traces the model twice)
        for _ in range(4):
            x = Counted()(x)
        return x
""",
        False,
    ),
    "two call sites": (
        BLOCK
        + """
class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(3):
            x = Block(16)(x)
        for _ in range(3):
            x = Block(16)(x)
        return x
""",
        True,
    ),
    "fields equal as numbers, of other types": (
        """
class Scaled(nn.Module):
    scale: object

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(x) * jnp.cos(x) + jnp.sin(x) * jnp.tanh(x) - jnp.exp(-x) + jnp.log1p(x * x)
        return x * jnp.full(x.shape[-1:], self.scale).astype(x.dtype) + jnp.abs(x)  # the fill's dtype: the field's type


class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        for scale in (1, 1.0, True, 1, 1.0, True):
            x = Scaled(scale)(x)
        return x
""",
        True,
    ),
    "an output dropped for some layers": (
        """
class Pair(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(8)(x)
        aux = jnp.sum(jnp.exp(h) * jnp.cos(h) + jnp.sin(h) * jnp.tanh(h) - jnp.log1p(h * h), axis=-1)
        return h * jnp.cos(h) + jnp.sin(h) - jnp.tanh(h) * jnp.exp(-h) + jnp.abs(h), aux


class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        total = 0.0
        for i in range(5):
            x, aux = Pair()(x)
            if i % 2:
                total = total + aux
        return x, total
""",
        True,
    ),
    "a dropout with an RNG stream": (
        """
class Noisy(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(x) * jnp.cos(x) + jnp.sin(x) * jnp.tanh(x) - jnp.exp(-x) + jnp.log1p(x * x)
        return nn.Dropout(0.5, deterministic=False)(x) + jnp.abs(x) * jnp.sqrt(jnp.abs(x) + 1.0)


class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(4):
            x = Noisy()(x)
        return x
""",
        False,
    ),
    "remat and a closed-over constant": (
        """
import numpy as np

TABLE = np.linspace(0.0, 1.0, 8, dtype=np.float32)


class Inner(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(x) * jnp.cos(x) + jnp.sin(x) * jnp.tanh(x) - jnp.exp(-x) + jnp.log1p(x * x)
        return x + TABLE * jnp.abs(x) * jnp.sqrt(jnp.abs(x) + 1.0)


class Top(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(3):
            x = nn.remat(Inner)()(x)
        for _ in range(3):
            x = Inner()(x)
        return x
""",
        True,
    ),
}


@pytest.mark.parametrize("transform", [None, "grad"])
@pytest.mark.parametrize("case", CASES)
def test_what_may_differ_between_calls_is_traced_or_told_apart(
    run_capture: Capture, tmp_path: Path, case: str, transform: str | None
) -> None:
    source, replays = CASES[case]
    profile: dict[str, Any] = {"rngs": ["dropout"]} if "RNG" in case else {}
    if transform is not None:
        profile["transform"] = transform
    name = "replay_" + "".join(c if c.isalnum() else "_" for c in case) + f"_{transform}"
    on, replayed, off, _ = _both(run_capture, tmp_path, name, source, "Top", **profile)
    assert on == off
    if not replays:
        assert replayed == 0
