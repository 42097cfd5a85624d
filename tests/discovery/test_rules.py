"""Discovery rules, one case each: what gets a lens and what never does (docs/discovery.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.discovery.helpers import discover, found

MODULE_CLASSES = {
    "linen alias": ("from flax import linen as nn\nclass A(nn.Module): pass\n", "linen"),
    "import flax.linen as nn": ("import flax.linen as nn\nclass A(nn.Module): pass\n", "linen"),
    "from flax.linen import Module": ("from flax.linen import Module\nclass A(Module): pass\n", "linen"),
    "from flax.linen.module import Module": ("from flax.linen.module import Module\nclass A(Module): pass\n", "linen"),
    "import flax": ("import flax\nclass A(flax.linen.Module): pass\n", "linen"),
    "import flax.linen": ("import flax.linen\nclass A(flax.linen.Module): pass\n", "linen"),
    "from flax import linen": ("from flax import linen\nclass A(linen.Module): pass\n", "linen"),
    "from flax import nnx": ("from flax import nnx\nclass A(nnx.Module): pass\n", "nnx"),
    "from flax.nnx import Module": ("from flax.nnx import Module\nclass A(Module): pass\n", "nnx"),
    "from flax.nnx.module import Module": ("from flax.nnx.module import Module\nclass A(Module): pass\n", "nnx"),
    "import equinox as eqx": ("import equinox as eqx\nclass A(eqx.Module): pass\n", "equinox"),
    "import equinox": ("import equinox\nclass A(equinox.Module): pass\n", "equinox"),
    "from equinox import Module as M": ("from equinox import Module as M\nclass A(M): pass\n", "equinox"),
    "equinox._module": ("from equinox._module import Module\nclass A(Module): pass\n", "equinox"),
    "linen library subclass": ("import flax.linen as nn\nclass A(nn.RNNCellBase): pass\n", "linen"),
    "nnx library subclass": ("from flax import nnx\nclass A(nnx.Embed): pass\n", "nnx"),
    "nnx container": ("from flax import nnx\nclass A(nnx.Sequential): pass\n", "nnx"),
    "equinox library subclass": ("import equinox as eqx\nclass A(eqx.nn.Linear): pass\n", "equinox"),
    "equinox nn import": ("from equinox.nn import MLP\nclass A(MLP): pass\n", "equinox"),
    "alias assignment": ("import flax.linen as nn\nModule = nn.Module\nclass A(Module): pass\n", "linen"),
    "mixin first": ("import flax.linen as nn\nclass Mixin: pass\nclass A(Mixin, nn.Module): pass\n", "linen"),
    "generic base": (
        "from typing import Generic, TypeVar\nimport equinox as eqx\nT = TypeVar('T')\n"
        "class A(eqx.Module, Generic[T]): pass\n",
        "equinox",
    ),
    "import in try": (
        "try:\n    import flax.linen as nn\nexcept ImportError:\n    nn = None\nclass A(nn.Module): pass\n",
        "linen",
    ),
    "decorated module": (
        "import functools\nimport flax.linen as nn\n@functools.total_ordering\nclass A(nn.Module): pass\n",
        "linen",
    ),
}


@pytest.mark.parametrize("case", list(MODULE_CLASSES))
def test_module_class_through_every_import_form(tmp_path: Path, case: str) -> None:
    source, kind = MODULE_CLASSES[case]
    assert found(tmp_path, source).get("A") == kind


NOT_MODULES = {
    "flax struct dataclass": "from flax import struct\n@struct.dataclass\nclass A:\n    x: int = 3\n",
    "flax struct PyTreeNode": "from flax import struct\nclass A(struct.PyTreeNode):\n    x: int = 3\n",
    "nnx Variable": "from flax import nnx\nclass A(nnx.Variable): pass\n",
    "nnx Param": "from flax import nnx\nclass A(nnx.Param): pass\n",
    "nnx Optimizer": "from flax import nnx\nclass A(nnx.Optimizer): pass\n",
    "nnx Rngs": "from flax import nnx\nclass A(nnx.Rngs): pass\n",
    "nnx Pytree": "from flax import nnx\nclass A(nnx.Pytree): pass\n",
    "nnx Metric": "from flax import nnx\nclass A(nnx.Metric): pass\n",
    "linen Variable": "import flax.linen as nn\nclass A(nn.Variable): pass\n",
    "linen Partitioned": "import flax.linen as nn\nclass A(nn.Partitioned): pass\n",
    "equinox State": "import equinox as eqx\nclass A(eqx.nn.State): pass\n",
    "equinox StateIndex": "import equinox as eqx\nclass A(eqx.nn.StateIndex): pass\n",
    "train state": "from flax.training import train_state\nclass A(train_state.TrainState): pass\n",
    "plain dataclass": "import jax\nfrom dataclasses import dataclass\n@dataclass\nclass A:\n    x: jax.Array\n",
    "enum": "import enum\nimport flax.linen as nn\nclass A(enum.Enum):\n    X = 1\n",
    "protocol": "from typing import Protocol\nimport jax\nclass A(Protocol):\n    def __call__(self, x: jax.Array): ...\n",
    "pytree registered": (
        "import jax\n@jax.tree_util.register_pytree_node_class\nclass A:\n    def tree_flatten(self):\n"
        "        return (), None\n"
    ),
    "stdlib struct": "import struct\nclass A(struct.Struct): pass\n",
    "torch module named nn": "import torch.nn as nn\nclass A(nn.Module): pass\n",
    "unknown base named Module": "from mylib import Module\nclass A(Module): pass\n",
    "named like a module": "class Module: pass\nclass A(Module): pass\n",
}


@pytest.mark.parametrize("case", list(NOT_MODULES))
def test_never_a_module(tmp_path: Path, case: str) -> None:
    assert "A" not in found(tmp_path, NOT_MODULES[case])


def test_base_defined_earlier_in_the_same_file(tmp_path: Path) -> None:
    source = """
        import flax.linen as nn
        class Base(nn.Module):
            pass
        class Child(Base):
            pass
        class Grandchild(Child):
            pass
        class NotModule:
            pass
        class AlsoNot(NotModule):
            pass
    """
    assert found(tmp_path, source) == {"Base": "linen", "Child": "linen", "Grandchild": "linen"}


def test_nested_module_classes_are_qualified(tmp_path: Path) -> None:
    source = """
        import flax.linen as nn
        class Outer(nn.Module):
            class Inner(nn.Module):
                pass
            class Sibling(Inner):
                pass
        class Namespace:
            class Block(nn.Module):
                pass
    """
    assert found(tmp_path, source) == {
        "Outer": "linen",
        "Outer.Inner": "linen",
        "Outer.Sibling": "linen",
        "Namespace.Block": "linen",
    }


FUNCTIONS = {
    "jax.jit": "import jax\n@jax.jit\ndef f(x):\n    return x\n",
    "bare jit": "from jax import jit\n@jit\ndef f(x):\n    return x\n",
    "jit with arguments": "import jax\n@jax.jit(static_argnums=0)\ndef f(n, x):\n    return x\n",
    "functools.partial": "import functools, jax\n@functools.partial(jax.jit, static_argnums=0)\ndef f(n, x):\n    return x\n",
    "partial": "from functools import partial\nimport jax\n@partial(jax.jit, static_argnums=(0,))\ndef f(n, x):\n    return x\n",
    "aliased functools": "import functools as ft\nimport jax\n@ft.partial(jax.vmap, in_axes=0)\ndef f(x):\n    return x\n",
    "vmap": "import jax\n@jax.vmap\ndef f(x):\n    return x\n",
    "grad": "import jax\n@jax.grad\ndef f(x):\n    return x\n",
    "value_and_grad": "from jax import value_and_grad\n@value_and_grad\ndef f(x):\n    return x\n",
    "checkpoint": "import jax\n@jax.checkpoint\ndef f(x):\n    return x\n",
    "custom_vjp": "import jax\n@jax.custom_vjp\ndef f(x):\n    return x\n",
    "nnx.jit": "from flax import nnx\n@nnx.jit\ndef f(model, x):\n    return model(x)\n",
    "nnx.value_and_grad": "from flax import nnx\n@nnx.value_and_grad\ndef f(model, x):\n    return model(x)\n",
    "eqx.filter_jit": "import equinox as eqx\n@eqx.filter_jit\ndef f(model, x):\n    return model(x)\n",
    "eqx.filter_value_and_grad": "import equinox as eqx\n@eqx.filter_value_and_grad\ndef f(model, x):\n    return model(x)\n",
    "jnp body": "import jax.numpy as jnp\ndef f(x):\n    return jnp.sum(x ** 2)\n",
    "jax.random body": "import jax\ndef f(key):\n    return jax.random.normal(key, (3,))\n",
    "jax.nn body": "import jax\ndef f(x):\n    return jax.nn.relu(x)\n",
    "lax body": "from jax import lax\ndef f(x):\n    return lax.cumsum(x)\n",
    "from jax import numpy": "from jax import numpy as np\ndef f(x):\n    return np.tanh(x)\n",
    "linen functional op": "import flax.linen as nn\ndef f(x):\n    return nn.gelu(x)\n",
    "nnx op": "from flax import nnx\ndef f(x):\n    return nnx.relu(x)\n",
    "eqx op": "import equinox as eqx\ndef f(model, x):\n    return eqx.filter_vmap(model)(x)\n",
    "optax loss in a step": (
        "import jax, optax\ndef f(params, x, y):\n    grads = jax.grad(lambda p: optax.l2_loss(p * x, y).sum())(params)\n"
        "    return grads\n"
    ),
    "optax update in a step that computes gradients": (
        "import jax, optax\ntx = optax.adam(1e-3)\ndef f(params, opt_state, x):\n"
        "    grads = jax.grad(lambda p: (p * x).sum())(params)\n"
        "    updates, opt_state = tx.update(grads, opt_state)\n    return optax.apply_updates(params, updates), opt_state\n"
    ),
    "assert on a shape": (
        "import jax.numpy as jnp\ndef f(x, w):\n    assert x.shape[-1] == w.shape[0]\n    return jnp.tanh(x @ w)\n"
    ),
    "loop over layers calling an undecorated helper": (
        "import jax.numpy as jnp\ndef relu(x):\n    return jnp.maximum(x, 0)\n"
        "def f(params, x):\n    for w, b in params:\n        x = relu(jnp.dot(x, w) + b)\n    return x\n"
    ),
    "TYPE_CHECKING helper that computes": (
        "from typing import TYPE_CHECKING\nimport jax.numpy as jnp\nif TYPE_CHECKING:\n"
        "    def clip(x, lo, hi): ...\nelse:\n    def clip(x, lo, hi):\n        return jnp.clip(x, lo, hi)\n"
        "def f(x):\n    return clip(x, 0, 1)\n"
    ),
    "train_step computing a loss": "import jax.numpy as jnp\ndef train_step(p, x):\n    return jnp.mean((p - x) ** 2)\n",
    "module instance global": (
        "import flax.linen as nn\nclass M(nn.Module):\n    pass\nmodel = M()\n"
        "def f(params, x):\n    return model.apply(params, x)\n"
    ),
    "import inside the body": "def f(x):\n    import jax.numpy as jnp\n    return jnp.sum(x)\n",
    "nested helper uses jax": "import jax.numpy as jnp\ndef f(x):\n    def g(y):\n        return jnp.sin(y)\n    return g(x)\n",
    "python loop model": (
        "import jax.numpy as jnp\ndef f(params, x):\n    for w in params:\n        x = jnp.tanh(x @ w)\n    return x\n"
    ),
    "jitted loop with print": ("import jax\n@jax.jit\ndef f(xs):\n    for x in xs:\n        print(x)\n    return xs\n"),
    "calls a local JAX function": "import jax.numpy as jnp\ndef g(x):\n    return jnp.sin(x)\ndef f(x):\n    return g(x) * 2\n",
    "calls a local jitted function": "import jax\n@jax.vmap\ndef g(x):\n    return x\ndef f(x):\n    return g(x).mean()\n",
    "recursion through local functions": (
        "import jax.numpy as jnp\ndef g(x, n):\n    return f(x, n - 1) if n else jnp.sin(x)\n"
        "def f(x, n):\n    return g(x, n)\n"
    ),
    "key handling alone": "import jax\ndef f(key):\n    return jax.random.split(key)\n",
}


@pytest.mark.parametrize("case", list(FUNCTIONS))
def test_jax_function(tmp_path: Path, case: str) -> None:
    assert found(tmp_path, FUNCTIONS[case]).get("f", found(tmp_path, FUNCTIONS[case]).get("train_step")) == "function"


NOT_FUNCTIONS = {
    "no jax": "import jax\ndef f(x):\n    return x + 1\n",
    "docstring mentions jax": 'import jax\ndef f(x):\n    """Uses jax.numpy.sum and jax.jit."""\n    return x\n',
    "comment mentions jax": "import jax.numpy as jnp\ndef f(x):\n    # jnp.sum(x) would be faster\n    return x\n",
    "string mentions jax": "import jax.numpy as jnp\ndef f(x):\n    return 'jnp.sum(x)'\n",
    "only annotations": "import jax\ndef f(x: jax.Array) -> jax.Array:\n    y: jax.Array = x\n    return y\n",
    "only configuration": "import jax\ndef f():\n    jax.config.update('jax_enable_x64', True)\n",
    "only a dtype": "import jax.numpy as jnp\ndef f():\n    return jnp.float32\n",
    "generator": "import jax.numpy as jnp\ndef f(n):\n    for i in range(n):\n        yield jnp.zeros(i)\n",
    "jitted generator": "import jax\n@jax.jit\ndef f(n):\n    yield n\n",
    "async": "import jax.numpy as jnp\nasync def f(x):\n    return jnp.sum(x)\n",
    "stdlib struct": "import struct\ndef f(x):\n    return struct.pack('i', x)\n",
    "named like a step": "def train_step(state, batch):\n    return state\n",
    "torch": "import torch\ndef f(x):\n    return torch.relu(x)\n",
    "non-transform decorator": "import functools\n@functools.lru_cache\ndef f(x):\n    return x\n",
    "jax only in a default's annotation": "import jax\ndef f(x: 'jax.Array' = None):\n    return x\n",
    "only tree utilities": "import jax\nimport numpy as np\ndef f(batch):\n    return jax.tree.map(np.asarray, batch)\n",
    "only device transfer": "import jax\ndef f(state):\n    return jax.device_get(state)\n",
    "only sharding configuration": (
        "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n"
        "def f(mesh, *names):\n    return NamedSharding(mesh, P(*names))\n"
    ),
    "only host queries": "import jax\ndef f():\n    return jax.host_id() == 0 and jax.process_count() > 1\n",
    "calls a JAX-free local function": "def g(x):\n    return x\ndef f(x):\n    return g(x)\n",
}


@pytest.mark.parametrize("case", list(NOT_FUNCTIONS))
def test_not_a_jax_function(tmp_path: Path, case: str) -> None:
    result = found(tmp_path, NOT_FUNCTIONS[case])
    assert "f" not in result and "train_step" not in result


def test_methods_and_nested_functions_are_never_entrypoints(tmp_path: Path) -> None:
    source = """
        import jax.numpy as jnp
        class Helper:
            def method(self, x):
                return jnp.sum(x)
        def outer(x):
            def inner(y):
                return jnp.sin(y)
            return inner(x)
    """
    assert found(tmp_path, source) == {"outer": "function"}


DRIVERS = {
    "epoch loop with prints": """
        import jax
        def f(state, batches, key):
            for epoch in range(10):
                key, sub = jax.random.split(key)
                for batch in batches:
                    state = train_step(state, batch, sub)
                print(epoch)
            return state
    """,
    "checkpoint io": """
        import pickle
        import jax
        import jax.numpy as jnp
        def f(params, path):
            params = jnp.asarray(params)
            with open(path, "wb") as fh:
                pickle.dump(jax.device_get(params), fh)
    """,
    "loop calling a jitted step": """
        import jax
        @jax.jit
        def step(state, batch):
            return state
        def f(state, batches, epochs):
            for epoch in range(epochs):
                for batch in batches:
                    state = step(state, batch)
                print(epoch)
            return state
    """,
    "main with a nested jitted loss": """
        import equinox as eqx
        import jax.numpy as jnp
        def f(model, data, steps=100):
            @eqx.filter_jit
            def loss(model, x, y):
                return jnp.mean((model(x) - y) ** 2)
            for step, (x, y) in zip(range(steps), data):
                value = loss(model, x, y)
                print(step, value)
            return model
    """,
    "download": """
        import jax.numpy as jnp
        import tensorflow_datasets as tfds
        def f():
            ds = tfds.load("mnist", batch_size=-1)
            for split in ds:
                ds[split] = jnp.asarray(ds[split])
            return ds
    """,
    "logging loop": """
        import logging
        import jax.numpy as jnp
        def f(state, steps):
            for step in range(steps):
                state, loss = update(state)
                logging.info("loss %s", jnp.mean(loss))
            return state
    """,
    # -- issue 14: JAX in the body does not make a driver a program --------------------------------
    "epoch loop around a jitted step, metrics with jnp": """
        import jax
        import jax.numpy as jnp
        @jax.jit
        def train_step(state, batch):
            return state, jnp.mean(batch)
        def f(state, batches, epochs):
            history = []
            for epoch in range(epochs):
                for batch in batches:
                    state, loss = train_step(state, batch)
                history.append(jnp.mean(jnp.stack([loss])))
            return state, history
    """,
    "loop around a step made in the function": """
        import jax
        import jax.numpy as jnp
        def step(params, x):
            return params - 0.1 * jnp.mean(x)
        def f(params, data):
            p_step = jax.pmap(step)
            for x in data:
                params = p_step(params, jnp.asarray(x) * 2.0)
            return params
    """,
    "loop around a nested jitted step": """
        import equinox as eqx
        import jax.numpy as jnp
        def f(model, loader, steps):
            @eqx.filter_jit
            def make_step(model, x):
                return model, jnp.mean(model(x))
            for step, x in zip(range(steps), loader):
                model, loss = make_step(model, x)
            return model
    """,
    "data iterator": """
        import jax.numpy as jnp
        def f(state, it, steps):
            while steps:
                batch = next(it)
                state = state + jnp.sum(batch)
                steps -= 1
            return state
    """,
    "optax optimizer and train state": """
        import jax
        import jax.numpy as jnp
        import optax
        from flax.training import train_state
        def f(model, key, lr):
            params = model.init(key, jnp.ones((1, 28, 28, 1)))["params"]
            tx = optax.adam(lr)
            return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    """,
    "optax schedule": """
        import optax
        def f(base, steps):
            warmup = optax.linear_schedule(0.0, base, steps)
            decay = optax.cosine_decay_schedule(base, steps)
            return optax.join_schedules([warmup, decay], [steps])
    """,
    "checkpoint restore with compute": """
        import jax.numpy as jnp
        import orbax.checkpoint as ocp
        def f(path):
            params = ocp.PyTreeCheckpointer().restore(path)
            return {k: jnp.asarray(v) * 1.0 for k, v in params.items()}
    """,
    "parameter conversion": """
        import jax.numpy as jnp
        from flax import traverse_util
        def f(variables):
            flat = traverse_util.flatten_dict(variables)
            return {k: jnp.swapaxes(v, 0, 1) for k, v in flat.items()}
    """,
    "pytest-style test": """
        import jax.numpy as jnp
        import numpy as np
        def f():
            x = jnp.ones(3)
            np.testing.assert_allclose(jnp.sin(x), np.sin(np.ones(3)))
    """,
    "plain assert test": """
        import jax.numpy as jnp
        def f():
            x = jnp.arange(3.0)
            assert jnp.allclose(jnp.cumsum(x), jnp.array([0.0, 1.0, 3.0]))
    """,
    "benchmark": """
        import time
        import jax.numpy as jnp
        def f(x, repeats=10):
            start = time.perf_counter()
            for _ in range(repeats):
                jnp.dot(x, x).block_until_ready()
            return (time.perf_counter() - start) / repeats
    """,
    "main parsing flags": """
        import jax.numpy as jnp
        from absl import flags
        FLAGS = flags.FLAGS
        def f(argv):
            x = jnp.ones(FLAGS.size)
            return jnp.sum(x)
    """,
    "main parsing argv with argparse": """
        import argparse
        import jax.numpy as jnp
        def f():
            args = argparse.ArgumentParser().parse_args()
            return jnp.zeros(args.n)
    """,
}


@pytest.mark.parametrize("case", list(DRIVERS))
def test_drivers_are_reported_separately(tmp_path: Path, case: str) -> None:
    result = discover(tmp_path, {"main.py": DRIVERS[case]})
    assert "f" not in [e.name for e in result.entrypoints]
    assert [e.name for e in result.drivers] == ["f"]
    assert result.drivers[0].driver


def test_a_function_calling_a_driver_is_a_driver(tmp_path: Path) -> None:
    source = """
        import jax.numpy as jnp
        import optax
        def make_tx(lr):
            return optax.adam(lr)
        def f(params, lr):
            tx = make_tx(lr)
            return tx.init(jnp.asarray(params))
    """
    result = discover(tmp_path, {"main.py": source})
    assert [(e.name, e.reason) for e in result.drivers] == [
        ("make_tx", "driver: makes optimizer state without computing gradients (optax.adam)"),
        ("f", "driver: calls the driver make_tx"),
    ]
    assert not result.entrypoints


FACTORIES = {
    "nested def": (
        "def f(n):\n    def init(key, shape):\n        return jnp.ones(shape) * n\n    return init\n",
        "init",
    ),
    "lambda": ("def f(n):\n    return lambda x: jnp.tanh(x) * n\n", "a lambda"),
    "partial": ("import functools\ndef f(n):\n    return functools.partial(jnp.roll, shift=n)\n", "a partial"),
    "jit of a nested def": (
        "import jax\ndef f(model):\n    def step(x):\n        return jnp.sum(model(x))\n    return jax.jit(step)\n",
        "jit(step)",
    ),
    "stax pair": (
        "def f(n):\n    def init_fun(key, shape):\n        return jnp.zeros(shape)\n"
        "    def apply_fun(params, x):\n        return x @ params\n    return init_fun, apply_fun\n",
        "init_fun, apply_fun",
    ),
    "bound name": ("def f(n):\n    fn = lambda x: jnp.exp(x)\n    return fn\n", "fn"),
    "transform of a parameter": (
        "import jax\ndef f(module, axes):\n    return jax.vmap(module, in_axes=axes)\n",
        "vmap(module)",
    ),
}


@pytest.mark.parametrize("case", list(FACTORIES))
def test_a_factory_of_a_jax_function_gets_no_lens(tmp_path: Path, case: str) -> None:
    """flax's ``sinusoidal_init`` and ``create_learning_rate_scheduler``, Equinox's
    ``make_with_state``: calling them only makes a function, so there is nothing to trace (a
    lens answered "returned a function"); they are reported with the drivers, and calling one
    does not make the caller a driver."""
    body, made = FACTORIES[case]
    source = "import jax.numpy as jnp\n" + body + "def user(x):\n    return f(2)(x) + jnp.sin(x)\n"
    result = discover(tmp_path, {"main.py": source})
    assert [(e.name, e.reason, e.factory) for e in result.drivers] == [
        ("f", f"factory: returns a function it makes ({made})", True)
    ]
    assert [e.name for e in result.entrypoints] == ["user"]


def test_a_function_returning_a_function_only_sometimes_keeps_its_lens(tmp_path: Path) -> None:
    source = """
        import jax.numpy as jnp
        def f(x, fused):
            if fused:
                return lambda y: y
            return jnp.tanh(x)
    """
    result = discover(tmp_path, {"main.py": source})
    assert [e.name for e in result.entrypoints] == ["f"] and not result.drivers


def test_a_type_checking_stub_binds_nothing(tmp_path: Path) -> None:
    """A helper whose TYPE_CHECKING branch imports a JAX name and whose else branch defines it in
    plain Python is the plain function at run time: its callers compute nothing with JAX."""
    helper = """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from jax.numpy import clip
        else:
            def clip(values, low, high):
                return [min(max(v, low), high) for v in values]
        def local_user(rows):
            return clip(rows, 0, 1)
    """
    user = "from utils import clip\nimport utils\ndef normalise(rows):\n    return clip(rows, 0.0, 1.0)\n"
    result = discover(tmp_path, {"utils.py": helper, "main.py": user}, target="utils.py")
    assert not result.entrypoints and not result.drivers
    assert not discover(tmp_path, {"utils.py": helper, "main.py": user}, target="main.py").entrypoints


# equinox's own nn/_misc.py and nn/_conv.py, reduced (issue 45, point 8): the workspace is the
# library, so every name it defines is ``equinox.*``, a namespace the rules count as JAX.
EQUINOX_MISC = """
    from collections.abc import Callable, Sequence
    from typing import Any, TYPE_CHECKING, TypeVar

    import jax
    import jax.numpy as jnp
    import jax.random as jrandom

    _T = TypeVar("_T", bound=Sequence)

    if TYPE_CHECKING:
        def all_sequences(
            x: Sequence[Any] | Sequence[_T],
        ) -> "te.TypeIs[Sequence[_T]]": ...

        _S = TypeVar("_S")

        def named_scope(name: str) -> Callable[[_S], _S]: ...

    else:
        # beartype doesn't like StrictTypeGuard
        def all_sequences(x: Sequence[Any] | Sequence[_T]) -> bool:
            return all(isinstance(xi, Sequence) for xi in x)

        named_scope = jax.named_scope


    def default_init(key, shape, dtype, lim):
        if jnp.issubdtype(dtype, jnp.complexfloating):
            real_dtype = jnp.finfo(dtype).dtype
            rkey, ikey = jrandom.split(key, 2)
            real = jrandom.uniform(rkey, shape, real_dtype, minval=-lim, maxval=lim)
            imag = jrandom.uniform(ikey, shape, real_dtype, minval=-lim, maxval=lim)
            return real.astype(dtype) + 1j * imag.astype(dtype)
        else:
            return jrandom.uniform(key, shape, dtype, minval=-lim, maxval=lim)
"""
EQUINOX_CONV = """
    from collections.abc import Sequence

    import jax.numpy as jnp

    from .._module import Module
    from ._misc import all_sequences, default_init, named_scope


    def _padding_init(padding, num_spatial_dims):
        if isinstance(padding, str):
            padding = padding.upper()
        elif isinstance(padding, int):
            padding = tuple((padding, padding) for _ in range(num_spatial_dims))
        elif isinstance(padding, Sequence) and len(padding) == num_spatial_dims:
            if all_sequences(padding):
                padding = tuple(padding)
            else:
                padding = tuple((p, p) for p in padding)
        else:
            raise ValueError("bad padding")
        return padding


    def _kernel(key, shape, lim):
        return default_init(key, shape, None, lim)


    @named_scope("eqx.nn.pad")
    def _scoped(x):
        return x


    def _pad(x, padding):
        return jnp.pad(x, padding)


    class Conv(Module):
        def __call__(self, x):
            return _pad(x, _padding_init(0, 1))
"""


def test_a_librarys_pure_python_helper_is_judged_by_its_source(tmp_path: Path) -> None:
    """In a workspace that holds equinox itself, a function that only calls a pure-Python private
    helper of the library (``all_sequences``, defined in the ``else`` of ``if TYPE_CHECKING`` next
    to ``named_scope = jax.named_scope``) computes nothing: its ``equinox.nn._misc`` name is no
    reason. The helpers that compute, the alias of a transform and the module keep their lenses."""
    files = {
        "equinox/__init__.py": "from ._module import Module\nfrom . import nn\n",
        "equinox/_module.py": "class Module:\n    pass\n",
        "equinox/nn/__init__.py": "from ._conv import Conv\n",
        "equinox/nn/_misc.py": EQUINOX_MISC,
        "equinox/nn/_conv.py": EQUINOX_CONV,
    }
    conv = discover(tmp_path, files, target="equinox/nn/_conv.py")
    reasons = {e.name: e.reason for e in conv.entrypoints}
    assert "_padding_init" not in reasons and not conv.drivers, reasons
    assert reasons["_kernel"] == "computes with default_init"
    assert reasons["_scoped"].startswith("decorated with") and reasons["_scoped"].endswith("named_scope")
    assert reasons["_pad"] == "computes with jnp.pad"
    assert reasons["Conv"] == "derives equinox.Module"
    misc = discover(tmp_path, files, target="equinox/nn/_misc.py")
    assert [e.name for e in misc.entrypoints] == ["default_init"] and not misc.drivers


def test_a_transform_always_gets_a_lens_even_in_a_driver(tmp_path: Path) -> None:
    source = """
        import jax
        @jax.jit
        def f(state, batches):
            for batch in batches:
                print(batch)
            return state
    """
    result = discover(tmp_path, {"main.py": source})
    assert [e.name for e in result.entrypoints] == ["f"] and not result.drivers


def test_positions_and_decorators(tmp_path: Path) -> None:
    source = '''
        """Module docstring."""
        from functools import partial
        import jax
        import flax.linen as nn


        @partial(
            jax.jit,
            static_argnums=0,
        )
        def f(n, x):
            return x * n
            # a trailing comment is not part of the body


        class Model(nn.Module):
            width: int = 3

            def __call__(self, x):
                return x
    '''
    entries = {e.name: e for e in discover(tmp_path, {"main.py": source}).entrypoints}
    f, model = entries["f"], entries["Model"]
    assert (f.line, f.end_line, f.body.line + 1) == (12, 13, 8)
    assert f.decorators == ("partial(\n    jax.jit,\n    static_argnums=0,\n)",)
    assert f.header.column == 0 and f.header.end_column == len("def f(n, x):")
    assert (model.line, model.end_line) == (17, 21)


def test_setup_fields(tmp_path: Path) -> None:
    source = """
        from typing import ClassVar
        import equinox as eqx
        import flax.linen as nn
        from flax import nnx
        from jaxtyping import Array, Float
        import jax

        class Linen(nn.Module):
            features: int
            rate: float = 0.1
            registry: ClassVar[dict] = {}

        class Nnx(nnx.Module):
            def __init__(self, din: int, dout: int = 4, *, rngs: nnx.Rngs):
                pass

        class EqxInit(eqx.Module):
            w: jax.Array
            def __init__(self, size: int, *, key):
                self.w = jax.random.normal(key, (size,))

        class EqxFields(eqx.Module):
            w: jax.Array
            scale: float = 1.0

        @jax.jit
        def f(x: Float[Array, "b 3"], /, y, *args, flag: bool = False, **kw) -> Float[Array, "b"]:
            return x
    """
    entries = {e.name: e for e in discover(tmp_path, {"main.py": source}).entrypoints}

    def fields(name: str) -> list[tuple[str, str | None, str | None, str]]:
        return [(f.name, f.annotation, f.default, f.kind) for f in entries[name].fields]

    assert fields("Linen") == [("features", "int", None, "field"), ("rate", "float", "0.1", "field")]
    assert fields("Nnx") == [
        ("din", "int", None, "positional"),
        ("dout", "int", "4", "positional"),
        ("rngs", "nnx.Rngs", None, "keyword_only"),
    ]
    assert fields("EqxInit") == [("size", "int", None, "positional"), ("key", None, None, "keyword_only")]
    assert fields("EqxFields") == [("w", "jax.Array", None, "field"), ("scale", "float", "1.0", "field")]
    assert fields("f") == [
        ("x", 'Float[Array, "b 3"]', None, "positional_only"),
        ("y", None, None, "positional"),
        ("args", None, None, "var_positional"),
        ("flag", "bool", "False", "keyword_only"),
        ("kw", None, None, "var_keyword"),
    ]


def test_a_file_is_never_classified_for_importing_jax(tmp_path: Path) -> None:
    source = """
        import jax
        import jax.numpy as jnp
        import flax.linen as nn
        CONFIG = {"lr": 1e-3}
        class Config:
            lr: float = 1e-3
        def helper(x):
            return x + 1
    """
    assert found(tmp_path, source) == {}


# -- issue 26: lenses on functions with nothing to trace, as model zoos write them ------------------
NOTHING_TO_TRACE = {
    "parametrized test": (
        "test_layers.py",
        """
        import jax.numpy as jnp
        import pytest
        from layers import causal_mask
        @pytest.mark.parametrize("seq", [4, 8])
        def f(seq):
            mask = causal_mask(seq)
            assert mask.shape == (seq, seq)
        """,
        "driver: is a test or a benchmark (assertions, a testing library, timing)",
    ),
    "absl parameterized test": (
        "layers_test.py",
        """
        import jax.numpy as jnp
        from absl.testing import parameterized
        @parameterized.parameters(1, 2)
        def f(n):
            return jnp.ones(n).sum()
        """,
        "driver: is a test or a benchmark (assertions, a testing library, timing)",
    ),
    "parameter count": (
        "utils.py",
        """
        import jax
        import numpy as np
        from flax import nnx
        def f(model):
            params = nnx.state(model, nnx.Param)
            return sum(np.prod(x.shape) for x in jax.tree.leaves(params))
        """,
        "driver: handles weights: reads or writes module state only (nnx.state)",
    ),
    "loaded weights assigned into a model": (
        "weights.py",
        """
        import jax.numpy as jnp
        from flax import nnx
        def f(model, loaded):
            state = nnx.state(model)
            state.replace_by_pure_dict({k: jnp.asarray(v) for k, v in loaded.items()})
            nnx.update(model, state)
            return model
        """,
        "driver: handles weights: reads or writes module state only (nnx.state)",
    ),
    "model built from another framework's checkpoint": (
        "convert.py",
        """
        import jax.numpy as jnp
        def f(torch_model):
            weights = torch_model.state_dict()
            return {k: jnp.transpose(jnp.asarray(v.detach().numpy())) for k, v in weights.items()}
        """,
        "driver: converts another framework's weights or tensors (torch_model.state_dict)",
    ),
    "activation by name": (
        "activations.py",
        """
        import flax.linen as nn
        import jax
        def f(name):
            if name == "gelu":
                return nn.gelu
            if name == "swish":
                return jax.nn.silu
            return jax.nn.relu
        """,
        "factory: returns a library function (jax.nn.relu, jax.nn.silu, nn.gelu)",
    ),
    "a test script's input maker": (
        "test_model.py",
        """
        import jax
        import jax.numpy as jnp
        def f(batch=2, seq=8, seed=0):
            tokens = jax.random.randint(jax.random.key(seed), (batch, seq), 0, 100)
            return tokens, jnp.ones((batch, seq), bool)
        """,
        "driver: makes a test's inputs (a test file's function callable without arguments)",
    ),
}


@pytest.mark.parametrize("case", list(NOTHING_TO_TRACE))
def test_no_lens_where_there_is_nothing_to_trace(tmp_path: Path, case: str) -> None:
    name, source, reason = NOTHING_TO_TRACE[case]
    layers = (
        "import jax.numpy as jnp\ndef causal_mask(n):\n    i = jnp.arange(n)\n    return i[:, None] >= i[None, :]\n"
    )
    result = discover(tmp_path, {name: source, "layers.py": layers}, target=name)
    assert not result.entrypoints
    assert [(e.name, e.reason) for e in result.drivers] == [("f", reason)]


STILL_TRACED = {
    "a merged module called": (
        "from flax import nnx\ndef f(graphdef, state, x):\n    return nnx.merge(graphdef, state)(x)\n"
    ),
    "an activation applied by name": (
        "import jax\ndef f(x, name):\n    return jax.nn.gelu(x) if name == 'gelu' else jax.nn.relu(x)\n"
    ),
    "a library function called and returned": "import jax\ndef f(x):\n    y = jax.nn.relu(x)\n    return y\n",
    "a test file's function of arrays": ("import jax.numpy as jnp\ndef f(x, w):\n    return jnp.tanh(x @ w)\n"),
}


@pytest.mark.parametrize("case", list(STILL_TRACED))
def test_the_same_library_names_in_a_program_keep_the_lens(tmp_path: Path, case: str) -> None:
    name = "test_ops.py" if "test file" in case else "main.py"
    result = discover(tmp_path, {name: STILL_TRACED[case]}, target=name)
    assert [e.name for e in result.entrypoints] == ["f"] and not result.drivers


MODEL_ZOO = """
    from typing import TYPE_CHECKING, Any, Sequence
    if TYPE_CHECKING:
        def is_sequence(x: Any) -> bool: ...
    else:
        def is_sequence(x):
            return isinstance(x, (list, tuple))
    def all_sequences(xs: Sequence[Any]) -> bool:
        return all(is_sequence(x) for x in xs)
    def sliding_window_mask(q_pos, k_pos, window):
        return (q_pos[:, None] - k_pos[None, :] >= 0) & (q_pos[:, None] - k_pos[None, :] < window)
    def forward(model, x):
        return model(x)
    def forward_apply(model, params, x):
        return model.apply({"params": params}, x)
    def scale(x, factor):
        return x * factor
"""
ZOO_TEST = """
    import jax.numpy as jnp
    from modeling import all_sequences, forward, forward_apply, sliding_window_mask
    def test_mask():
        pos = jnp.arange(6)
        assert sliding_window_mask(pos, pos, 2).shape == (6, 6)
    def test_forward():
        assert forward(lambda x: x * 2, jnp.ones(3)).shape == (3,)
        assert all_sequences([[1], (2,)])
"""


def test_operators_on_arrays_that_a_jax_test_calls_get_a_lens(tmp_path: Path) -> None:
    # a mask builder of operators only and undecorated forward(model, x) wrappers name nothing of
    # JAX: their test calls them on arrays. A pure helper the same test imports (it calls a
    # builtin), and a function no test imports (scale), stay without a lens.
    files = {"modeling.py": MODEL_ZOO, "tests/test_modeling.py": ZOO_TEST}
    result = discover(tmp_path, files, target="modeling.py")
    assert [(e.name, e.reason) for e in result.entrypoints] == [
        (name, "applies operators to its arguments; test_modeling.py, which computes with JAX, imports it")
        for name in ("sliding_window_mask", "forward", "forward_apply")
    ]
    assert not result.drivers
    # the same test without JAX proves nothing about arrays
    plain = {"modeling.py": MODEL_ZOO, "tests/test_modeling.py": ZOO_TEST.replace("jax.numpy", "numpy")}
    assert not discover(tmp_path / "plain", plain, target="modeling.py").entrypoints
