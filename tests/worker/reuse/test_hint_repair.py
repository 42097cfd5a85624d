"""The repairing hint check (worker/reuse/hints.py ``HintCheck.repair``), in this process: which
changed parameters it carries on past, and which it stops at as the strict check does. Through
the warm spare, tests/capture/test_speculate.py compares the graphs."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("flax")

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxlsp.worker.loading import targets
from jaxlsp.worker.reuse import hints


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
    return hints.variables_structure(jax.eval_shape(lambda x: model.init(jax.random.key(0), x), X))


def repairing_trace(model: nn.Module, hint: Any) -> hints.HintCheck:
    check = hints.HintCheck(hint, repair=True)
    with check.checking():
        jax.make_jaxpr(lambda v, x: model.apply(v, x))(hints.from_structure(hint), X)
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
    with pytest.raises(hints.HintStale, match="ScanCell_0"):
        check = hints.HintCheck(structure(edited), repair=True)  # this one holds
        with check.checking():
            jax.make_jaxpr(lambda v, x: edited.apply(v, x))(hints.from_structure(check.structure), X)
        assert check.held()
        repairing_trace(edited, hint)


def test_a_layer_removed_leaves_no_repaired_structure() -> None:
    class Shorter(Net):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            return nn.Dense(self.head)(nn.Dense(self.inner)(nn.Dense(4)(x)))

    check = repairing_trace(Shorter(head=3), structure(Net()))
    assert check.repairs and check.repaired_structure() is None  # the scan's parameters went unread


# Boxed parameters: how Flax's LLMs (lm1b, T5X, MaxText) declare their shardings.
def logical(init: Any, *names: Any) -> Any:
    return nn.with_logical_partitioning(init, names)


class Boxed(nn.Module):
    width: int = 6
    names: tuple[str, ...] = ("embed", "mlp")
    depth: int = 1
    heads: int = 2

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.width, kernel_init=logical(nn.initializers.lecun_normal(), *self.names))(x)
        for _ in range(self.depth):
            h = nn.Dense(self.width, kernel_init=logical(nn.initializers.lecun_normal(), "mlp", "mlp"))(h)
            h = nn.LayerNorm(scale_init=logical(nn.initializers.ones, "mlp"))(h)  # its shape comes as a list
        kernel = nn.with_partitioning(nn.initializers.lecun_normal(), (None, ("data", "model")))
        stack = nn.scan(  # partitioned parameters gain the scan's axis name ("layers")
            BoxedCell,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=2,
            metadata_params={nn.PARTITION_NAME: "layers"},
        )
        h, _ = stack(self.width, kernel)(h, None)
        return nn.DenseGeneral(
            (self.heads, 2), kernel_init=logical(nn.initializers.lecun_normal(), "mlp", "heads", None)
        )(h)


class BoxedCell(nn.Module):  # the scan cell of Boxed, with a kernel initialiser
    width: int
    kernel_init: Any = nn.linear.default_kernel_init

    @nn.compact
    def __call__(self, carry: jax.Array, _: None) -> tuple[jax.Array, None]:
        return nn.tanh(nn.Dense(self.width, kernel_init=self.kernel_init)(carry)), None


def test_a_boxed_structure_spells_its_boxes_and_comes_back_equal() -> None:
    variables = jax.eval_shape(lambda x: Boxed().init(jax.random.key(0), x), X)
    hint = hints.variables_structure(variables)
    assert hint["params"]["Dense_0"]["kernel"] == [
        [3, 6],
        "float32",
        False,
        {"box": "LogicallyPartitioned", "names": ["embed", "mlp"], "rules": None},
    ]
    assert hint["params"]["ScanBoxedCell_0"]["Dense_0"]["kernel"][3] == {
        "box": "Partitioned",
        "names": ["layers", None, ["data", "model"]],
    }
    back = hints.from_structure(json.loads(json.dumps(hint)))
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(variables)  # names and all
    assert [hints._aval(v) for v in jax.tree_util.tree_leaves(back)] == [
        hints._aval(v) for v in jax.tree_util.tree_leaves(variables)
    ]


def test_a_box_that_holds_a_mesh_or_another_box_gives_no_structure() -> None:
    leaf = jax.ShapeDtypeStruct((2,), jnp.float32)
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
    assert hints.variables_structure({"w": nn.Partitioned(leaf, ("data",), mesh=mesh)}) is None

    class Tagged(nn.Partitioned):  # a subclass may carry more than its fields say
        pass

    assert hints.variables_structure({"w": Tagged(leaf, ("data",))}) is None
    assert hints.variables_structure({"w": nn.Partitioned(leaf, ("data", 1.5))}) is None  # type: ignore[arg-type]
    assert hints.from_structure({"w": [[2], "float32", False, {"box": "Boxed", "names": []}]}) is None
    listed = hints.variables_structure({"w": nn.Partitioned(leaf, ["data"])})  # type: ignore[arg-type]
    assert listed["w"][3]["names"] == {"list": ["data"]}
    assert hints.from_structure(listed)["w"].names == ["data"]


def test_a_boxed_hint_holds_and_a_boxed_edit_is_repaired_to_what_the_init_makes() -> None:
    hint = structure(Boxed())
    check = hints.HintCheck(hint)
    with check.checking():
        held = jax.make_jaxpr(lambda v, x: Boxed().apply(v, x))(hints.from_structure(hint), X)
    assert check.held()
    with targets._linen_params_as_initialised():
        fresh = jax.make_jaxpr(lambda v, x: Boxed().apply(v, x))(hints.from_structure(hint), X)
    assert str(held) == str(fresh)

    # each initialiser's abstract output is made once per distinct initialiser and arguments, though
    # Flax wraps the boxed ones, DenseGeneral's and LayerNorm's in new closures at every call
    def made(depth: int) -> int:
        check = hints.HintCheck(structure(Boxed(depth=depth)))
        with check.checking():
            jax.make_jaxpr(lambda v, x: Boxed(depth=depth).apply(v, x))(hints.from_structure(check.structure), X)
        assert check.held()
        return check.initialisers_run

    assert made(4) == made(1)

    for edit, where in (({"heads": 3}, "DenseGeneral_0"), ({"names": ("embed", "heads")}, "Dense_0")):
        check = repairing_trace(Boxed(**edit), hint)  # type: ignore[arg-type]
        assert ("params", where, "kernel") in check.repairs
        assert check.repaired_structure() == structure(Boxed(**edit)) != hint  # type: ignore[arg-type]


def test_an_initialiser_is_cached_by_what_it_computes() -> None:
    def make(n: int) -> Any:
        return lambda key, shape: jnp.zeros((*shape, n))

    token = hints.token
    assert token(make(2)) == token(make(2)) != token(make(3))
    assert token(logical(make(2), "a")) == token(logical(make(2), "a")) != token(logical(make(2), "b"))
    assert token([1, 2]) != token((1, 2)) and token(1) != token(1.0) != token(True)
    assert token(jnp.float32) != token(jnp.bfloat16)
    assert token(nn.Dense(3)) == token(nn.Dense(3)) != token(nn.Dense(4))
    with pytest.raises(TypeError):
        token(jnp.zeros(2))
    with pytest.raises(TypeError):
        token({"a": 1})


class Normed(nn.Module):
    width: int = 5

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        h = nn.BatchNorm(use_running_average=not train)(nn.Dense(self.width)(x))
        return nn.Dense(2)(nn.relu(h))


@pytest.mark.parametrize("train", [False, True])
def test_statistics_of_another_width_are_repaired_read_and_written(train: bool) -> None:
    """A BatchNorm after a width edit: its hinted statistics no longer match; in training they are
    also written (a mutable collection), which the stand-in takes."""

    def structure_of(model: nn.Module) -> Any:
        return hints.variables_structure(jax.eval_shape(lambda x: model.init(jax.random.key(0), x, train), X))

    hint, edited = structure_of(Normed()), Normed(width=7)
    check = hints.HintCheck(hint, repair=True)
    with check.checking():
        jax.make_jaxpr(lambda v, x: edited.apply(v, x, train, mutable=["batch_stats"] if train else False))(
            hints.from_structure(hint), X
        )
    assert ("batch_stats", "BatchNorm_0", "mean") in check.repairs
    assert check.repaired_structure() == structure_of(edited) != hint


def test_statistics_the_hint_lacks_are_not_repaired() -> None:
    """A variable of another collection that only ``apply`` makes is an output, never an input:
    one the hint lacks is not known to be an init's."""

    class Counted(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> jax.Array:
            if not self.is_initializing():
                calls = self.variable("counts", "calls", lambda: jnp.zeros((), jnp.int32))
                calls.value += 1
            return nn.Dense(2)(x)

    hint = structure(Counted())
    assert "counts" not in hint
    check = hints.HintCheck(hint, repair=True)
    with check.checking():
        jax.make_jaxpr(lambda v, x: Counted().apply(v, x, mutable=["counts"]))(hints.from_structure(hint), X)
    assert check.created and not check.repairs and check.repaired_structure() is None and not check.held()
