"""The repairing hint check (worker/targets.py ``HintCheck.repair``), in this process: which
changed parameters it carries on past, and which it stops at as the strict check does. Through
the warm spare, tests/capture/test_speculate.py compares the graphs."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("flax")

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlsp.capture.worker import targets


class Cell(nn.Module):
    width: int

    @nn.compact
    def __call__(self, carry: jax.Array, _: None) -> tuple[jax.Array, None]:
        return nn.tanh(nn.Dense(self.width)(carry)), None


class Net(nn.Module):
    inner: int = 5
    head: int = 2
    tail: int = 4

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.inner)(nn.Dense(4)(x))
        scan = nn.scan(Cell, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)
        h, _ = scan(self.inner)(h, None)
        h = nn.remat(Tail)(self.tail)(h)  # remat passes variables through as they are
        return nn.Dense(self.head)(h)


class Tail(nn.Module):
    width: int

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return nn.relu(nn.Dense(self.width)(h))


X = jax.ShapeDtypeStruct((4, 3), jnp.float32)


def structure(model: nn.Module) -> Any:
    return targets.variables_structure(jax.eval_shape(lambda x: model.init(jax.random.key(0), x), X))


def repairing_trace(model: nn.Module, hint: Any) -> targets.HintCheck:
    check = targets.HintCheck(hint, repair=True)
    with check.checking():
        jax.make_jaxpr(lambda v, x: model.apply(v, x))(targets.from_structure(hint), X)
    return check


@pytest.mark.parametrize(
    ("edit", "repaired"),
    [
        ({"head": 3}, [("params", "Dense_2", "kernel"), ("params", "Dense_2", "bias")]),
        (
            {"tail": 6, "head": 3},  # inside nn.remat, then the layer it feeds
            [
                ("params", "CheckpointTail_0", "Dense_0", "kernel"),
                ("params", "CheckpointTail_0", "Dense_0", "bias"),
                ("params", "Dense_2", "kernel"),
                ("params", "Dense_2", "bias"),
            ],
        ),
    ],
)
def test_a_changed_parameter_is_repaired_to_what_the_init_makes(
    edit: dict[str, int], repaired: list[tuple[str, ...]]
) -> None:
    hint = structure(Net())
    check = repairing_trace(Net(**edit), hint)
    assert not check.held()
    assert list(check.repairs) == repaired
    assert check.repaired_structure() == structure(Net(**edit)) != hint


def test_a_changed_parameter_inside_a_scan_stops_the_trace() -> None:
    """The hint holds the stacked kernel ([3, 6, 6] after the edit), its initialiser one slice: a
    repair there would write a slice where the stack goes."""
    hint = structure(Net())
    assert hint["params"]["ScanCell_0"]["Dense_0"]["kernel"][0] == [3, 5, 5]
    edited = Net(inner=6)
    with pytest.raises(targets.HintStale, match="ScanCell_0"):
        check = targets.HintCheck(structure(edited), repair=True)  # this one holds
        with check.checking():
            jax.make_jaxpr(lambda v, x: edited.apply(v, x))(targets.from_structure(check.structure), X)
        assert check.held()
        repairing_trace(edited, hint)


def test_a_layer_removed_leaves_no_repaired_structure() -> None:
    class Shorter(Net):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            return nn.Dense(self.head)(nn.Dense(self.inner)(nn.Dense(4)(x)))

    check = repairing_trace(Shorter(head=3), structure(Net()))
    assert check.repairs and check.repaired_structure() is None  # the scan's parameters went unread
