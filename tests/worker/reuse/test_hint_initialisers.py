"""Library initialisers' outputs carried from one hinted capture to the next (worker/reuse/hints.py
``stable_key``): a capture's check leaves them in its result, the next capture's check takes them
instead of running the initialisers again, and the graph is the one a fresh init gives.

Captures run in this process (``run_capture``); the server keeps the table with the target's
structure hint (capture/service.py), tests/capture/test_speculate.py drives that path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flax")

import flax.linen as nn
import jax.numpy as jnp

from jaxlsp.worker.reuse import hints
from tests.worker.conftest import graph_of, request

MODEL = """
import flax.linen as nn
import jax.numpy as jnp


def own_init(key, shape, dtype=jnp.float32):
    return jnp.zeros(shape, dtype)


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(nn.LayerNorm()(x))
        x = nn.Dense(8, kernel_init=own_init)(x)
        return nn.Dense(2)(nn.relu(x))
"""


def _request(root: Path, **extra: Any) -> dict[str, Any]:
    (root / "net.py").write_text(MODEL)
    base = request(
        "net.py", "Net", {"kind": "array", "shape": [4, 3], "dtype": "float32"}, workspace=root, kind="linen"
    )
    return {**base, **extra}


def test_a_hinted_capture_leaves_the_outputs_and_the_next_takes_them(
    run_capture: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jax

    runs: list[str] = []  # the hint check's abstract runs of initialisers
    eval_shape = jax.eval_shape

    def counted(fun: Any, *args: Any, **kwargs: Any) -> Any:
        if "_initialised" in getattr(fun, "__qualname__", ""):
            runs.append(fun.__qualname__)
        return eval_shape(fun, *args, **kwargs)

    monkeypatch.setattr(jax, "eval_shape", counted)

    def captured(**extra: Any) -> tuple[dict[str, Any], int]:
        runs.clear()
        result = run_capture(_request(tmp_path, **extra))
        return result, len(runs)

    cold, _ = captured()
    hint = cold["structure"]
    first, ran = captured(structureHint=hint)
    # LayerNorm: ones (3), zeros (3); Dense_0: lecun (3x8), zeros (8); own_init (8x8), its zeros (8)
    # are Dense_0's; Dense_2: lecun (8x2), zeros (2)
    assert first["hint"] == "held" and ran == 7
    carried = first["initialisers"]
    # jax's own initialisers (lecun_normal, zeros, ones) are carried; the workspace's own_init,
    # which may read globals an edit changes, never is
    assert carried and all("jax" in key for key in carried)
    assert not any("own_init" in key for key in carried)
    again, ran = captured(structureHint=hint, initialisers=carried)
    assert again["hint"] == "held" and ran == 1  # own_init alone
    assert json.dumps(graph_of(again), sort_keys=True) == json.dumps(graph_of(cold), sort_keys=True)

    # a carried output only confirms a match: one that says another shape is no mismatch until
    # the initialiser itself says so (it does not: the hint holds, and the graph is the init's)
    kernel = next(key for key, (shape, _, _) in carried.items() if shape == [3, 8])
    tampered, ran = captured(structureHint=hint, initialisers={**carried, kernel: [[3, 9], "float32", False]})
    assert tampered["hint"] == "held" and ran == 2
    assert json.dumps(graph_of(tampered), sort_keys=True) == json.dumps(graph_of(cold), sort_keys=True)

    # a garbled entry is no entry
    garbled, ran = captured(structureHint=hint, initialisers={**carried, kernel: "nonsense"})
    assert garbled["hint"] == "held" and ran == 2


def test_only_library_functions_over_plain_closures_have_a_stable_spelling() -> None:
    assert hints.library_function(nn.initializers.lecun_normal()) is not None
    assert hints.library_function(nn.initializers.zeros_init()) is not None
    assert hints.library_function(lambda key, shape, dtype: jnp.zeros(shape, dtype)) is None
    lecun = hints.library_function(nn.initializers.lecun_normal())
    assert lecun is not None
    assert hints.stable_key(lecun, ((3, 8), jnp.float32), {}, True) == hints.stable_key(
        lecun, ((3, 8), jnp.dtype("float32")), {}, True
    )
    assert hints.stable_key(lecun, ((3, 8), jnp.float32), {}, True) != hints.stable_key(
        lecun, ((3, 9), jnp.float32), {}, True
    )
    assert hints.stable_key(lecun, ((3, 8), object()), {}, True) is None
