"""JAX's caches filled in the warm spare (jaxlsp/worker/reuse/priming.py): a forked capture
notes the calls of JAX's jitted functions that missed them; the spare makes those calls; the
next fork misses none of them and makes the same graph, byte for byte.

The forks run in a fresh interpreter that stands for the spare (this test process may have
started an XLA backend, which a fork must not inherit)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.worker.conftest import array, in_fresh_python, request

pytest.importorskip("jax")

SPARE = """
import hashlib, json, os, sys
import jax, jax.numpy, flax.linen, flax.nnx
from jaxlsp.worker.process import main as worker

worker.warm()

def child(req):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        result = worker.capture(req, jax_ready=True)
        graph = json.dumps(result.get("graph"), sort_keys=True).encode()
        out = {"ok": result["ok"], "error": result.get("error"), "primes": result.get("primes", []),
               "graph": hashlib.sha256(graph).hexdigest()}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)

req = json.loads(sys.argv[1])
cold = child(req)
made = worker.prime(cold["primes"])
primed = child(req)
print(json.dumps({"cold": cold, "made": made, "primed": primed}))
"""


@pytest.mark.parametrize(
    ("file", "name", "transform"),
    [("models_linen.py", "MLP", "grad"), ("models_nnx.py", "Tower", None)],
    ids=["linen-grad", "nnx-init"],
)
def test_a_primed_spare_forks_captures_that_miss_no_cache_and_make_the_same_graph(
    file: str, name: str, transform: str | None
) -> None:
    pytest.importorskip("flax")
    extra = {"transform": transform} if transform else {}
    found = in_fresh_python(SPARE, request(file, name, array(2, 8), **extra))
    cold, primed = found["cold"], found["primed"]
    assert cold["ok"] and primed["ok"], (cold["error"], primed["error"])
    # jax.numpy's functions (and, for NNX, the initialisers its abstract init traces) missed
    assert len(cold["primes"]) >= 5, cold["primes"]
    assert {entry[0].split(":")[0] for entry in cold["primes"]} <= {m for m in sys.modules if m.startswith("jax.")}
    assert found["made"] == len(cold["primes"])  # every noted call made again in the spare
    assert primed["primes"] == []  # and the next fork found every one in JAX's caches
    assert primed["graph"] == cold["graph"]


def test_values_spell_back_as_the_same_values() -> None:
    import jax.numpy as jnp
    import numpy as np

    from jaxlsp.worker.reuse import priming

    values: list[Any] = [
        None,
        True,
        3,
        -0.5,
        float("inf"),
        "axis",
        (1, (2, [3, None])),
        {"keepdims": False, "axis": (0, -1)},
        np.dtype("bfloat16") if hasattr(jnp, "bfloat16") else np.dtype("float16"),
        jnp.float32,
        np.int8,
        np.float32(-3.4028235e38),
        np.int32(7),
    ]
    for value in values:
        spelled = priming.spell(value)
        back = priming.rebuild(json.loads(json.dumps(spelled)), [])
        assert type(back) is type(value) and (back == value), (value, spelled, back)
    nan = priming.rebuild(json.loads(json.dumps(priming.spell(float("nan")))), [])
    assert nan != nan  # a NaN comes back a NaN


def _deep() -> Any:
    value: Any = 1
    for _ in range(10):
        value = (value,)
    return value


UNSPELLABLE = {
    "object": object,
    "function": lambda: lambda x: x,
    "int-keys": lambda: {1: 2},
    "too-deep": _deep,
    "array": lambda: __import__("numpy").zeros(3),  # data, never a static argument spelled by value
}


@pytest.mark.parametrize("kind", sorted(UNSPELLABLE))
def test_values_without_a_spelling_are_refused(kind: str) -> None:
    from jaxlsp.worker.reuse import priming

    with pytest.raises(priming.Unspellable):
        priming.spell(UNSPELLABLE[kind]())


@pytest.mark.parametrize(
    "name",
    [
        "os:system",  # not JAX
        "jax._src.numpy.lax_numpy:<lambda>",  # no name that finds it again
        "jax._src.util:safe_map",  # JAX's, but not jitted
        "jax.not_a_module_of_jax:f",  # never imported, so never found
    ],
)
def test_priming_finds_only_jitted_functions_of_jax_modules_already_loaded(name: str) -> None:
    from jaxlsp.worker.reuse import priming

    with pytest.raises(priming.Unspellable):
        priming.resolve(name)
    assert "jax.not_a_module_of_jax" not in sys.modules
    # an entry naming one is skipped, never run; the good one beside it is made
    good = ["jax._src.numpy.ufuncs:sin", ["t", [["a", [3], "float32", False]]], ["d", []], None]
    assert priming.prime([[name, ["t", [["v", "echo"]]], ["d", []], None], good, "garbage"]) == 1
