"""Call signatures at every boundary (worker/examples/signatures.py): one trace of a model teaches
its nested modules and helpers, each as a profile that traces that target alone; and the graph
of the capture that recorded them is the one a capture without the hooks gives."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, request, static

SIGNATURES = Path(__file__).resolve().parents[2] / "workspaces" / "signatures"

Capture = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture
def fresh_modules() -> Callable[[], None]:
    """Forget the fixture workspace's modules, so that the next capture loads them anew."""

    def forget() -> None:
        for name in [
            n for n, m in sys.modules.items() if str(getattr(m, "__file__", "") or "").startswith(str(SIGNATURES))
        ]:
            del sys.modules[name]

    return forget


def _config() -> dict[str, Any]:
    sizes = {"width": 16, "heads": 2, "hidden": 32, "layers": 2}
    return {"kind": "ref", "ref": "tinylm.layers:Config", "kwargs": {k: static(v) for k, v in sizes.items()}}


def _transformer(signatures: bool) -> dict[str, Any]:
    req = request(
        "tinylm/model.py",
        "Transformer",
        array(2, 8, dtype="int32"),
        workspace=SIGNATURES,
        init={"kwargs": {"config": _config()}},
    )
    if signatures:
        req["signatures"] = True
    return req


def _comparable(graph: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in graph.items() if k not in ("timings",)}


def _learned_outputs(run_capture: Capture, root: Path, file: str, name: str, table: dict[str, Any]) -> list[Any]:
    """The output shapes of ``file::name`` traced on its recorded call ``table``, as a profile."""
    from jaxlsp.recipes import Resolved, resolve_table

    resolved = resolve_table("learned", {"target": f"{file}::{name}", **table}, root)
    assert isinstance(resolved, Resolved), resolved
    req = {
        "target": {"path": str(root / file), "name": name},
        "profile": resolved.profile,
        "workspaceRoot": str(root),
        "resultFd": -1,
    }
    graph = graph_of(run_capture(req))
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    return [shapes[o["value"]] for o in graph["outputs"]]


def test_one_trace_of_a_linen_model_teaches_its_blocks_layers_and_helpers(
    run_capture: Capture, fresh_modules: Callable[[], None]
) -> None:
    fresh_modules()
    plain = run_capture(_transformer(False))
    fresh_modules()
    taught = run_capture(_transformer(True))
    assert _comparable(graph_of(taught)) == _comparable(graph_of(plain))  # the hooks change nothing
    assert "signatures" not in plain
    found = {(Path(s["path"]).name, s["name"]): s for s in taught["signatures"]}
    assert set(found) >= {
        ("layers.py", "Block"),
        ("layers.py", "Attention"),
        ("layers.py", "FeedForward"),
        ("layers.py", "rms_norm"),
        ("layers.py", "split_heads"),
    }
    assert ("model.py", "Transformer") not in found  # the capture's own target has its profile
    attention = found[("layers.py", "Attention")]
    assert attention["kind"] == "linen"
    assert attention["table"]["inputs"] == {"args": [{"kind": "array", "shape": [2, 8, 16]}]}
    assert attention["table"]["init"]["kwargs"]["config"]["ref"] == "tinylm.layers:Config"
    feed = found[("layers.py", "FeedForward")]
    assert feed["table"]["init"] == {"kwargs": {"hidden": 32}}
    heads = found[("layers.py", "split_heads")]["table"]
    assert heads["inputs"]["args"] == [{"kind": "array", "shape": [2, 8, 16]}, 2]  # a static Python value
    block = found[("layers.py", "Block")]
    # the call was made in model.py (the caller), whose hash the signature keeps; layers.py is not a source
    assert [Path(p).name for p in block["sources"]] == ["model.py"]
    assert block["callsite"]["line"] == 16  # x = Block(self.config)(x)


def test_nnx_and_equinox_submodules_keep_their_constructor_arguments(
    run_capture: Capture, fresh_modules: Callable[[], None]
) -> None:
    fresh_modules()
    req = request("tinylm/nnx_mlp.py", "MLP", array(5, 4), workspace=SIGNATURES, init={"args": [static(4), static(8)]})
    nnx = run_capture({**req, "signatures": True})
    assert nnx["ok"], nnx.get("error")
    layer = next(s for s in nnx.get("signatures", []) if s["name"] == "Layer")
    assert layer["kind"] == "nnx"
    assert layer["table"]["init"] == {"kwargs": {"din": 4, "dout": 8}}
    assert layer["table"]["inputs"] == {"args": [{"kind": "array", "shape": [5, 4]}]}
    assert layer["callsite"]["line"] == 21  # self.second(self.first(x)), in the same file
    assert layer["sources"] == {}  # the caller is the target's own file: an edit there re-traces it
    fresh_modules()
    req = request("tinylm/eqx_cell.py", "Recurrent", array(3, 6), workspace=SIGNATURES, init={"args": [static(6)]})
    eqx = run_capture({**req, "signatures": True})
    assert eqx["ok"], eqx.get("error")
    cell = next(s for s in eqx.get("signatures", []) if s["name"] == "Cell")
    assert cell["kind"] == "equinox"
    assert cell["table"]["init"] == {"kwargs": {"width": 6}}
    assert cell["table"]["inputs"] == {"args": [{"kind": "array", "shape": [6]}, {"kind": "array", "shape": [6]}]}


def test_a_learned_signature_traces_its_target_as_the_parent_called_it(
    run_capture: Capture, fresh_modules: Callable[[], None]
) -> None:
    """The recorded call, used as the nested target's profile, gives the shapes the parent's trace saw."""
    fresh_modules()
    taught = run_capture(_transformer(True))
    attention = next(s for s in taught["signatures"] if s["name"] == "Attention")
    fresh_modules()
    outputs = _learned_outputs(run_capture, SIGNATURES, "tinylm/layers.py", "Attention", attention["table"])
    assert outputs == [[2, 8, 16]]


def test_the_hooks_keep_docstrings_positions_and_leave_generators_alone(tmp_path: Path) -> None:
    """What the instrumented file does is what the file does: docstrings stay ``__doc__`` (a
    function that is only a docstring too), line numbers stay, generators get no hook."""
    import builtins

    from jaxlsp.worker.core.failures import Workspace
    from jaxlsp.worker.examples.signatures import HOOK_NAME, Recorder

    source = (
        'def only():\n    """doc only"""\n\n'
        "def where():\n"
        '    """doc"""\n'
        "    import sys\n"
        "    return sys._getframe().f_lineno\n\n"
        "def counting(n):\n    yield from range(n)\n"
    )
    path = tmp_path / "m.py"
    path.write_text(source)
    recorder = Recorder(Workspace(str(tmp_path)))
    code = recorder.compile(path.read_bytes(), str(path))
    assert code is not None
    assert [site.name for site in recorder.sites] == ["only", "where"]  # no hook in the generator
    calls: list[tuple[int, int, str]] = []
    setattr(builtins, HOOK_NAME, lambda *args: calls.append(args))
    try:
        namespace: dict[str, Any] = {}
        exec(code, namespace)
        assert namespace["only"].__doc__ == "doc only" and namespace["where"].__doc__ == "doc"
        assert namespace["where"]() == 7  # the line it is on in the file
        assert list(namespace["counting"](3)) == [0, 1, 2]
    finally:
        delattr(builtins, HOOK_NAME)
    assert [(index, what) for _, index, what in calls] == [(1, "call")]


def test_a_plain_class_built_per_batch_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace class that is not a module (a dataset, a batch) is built many times in a run:
    its ``__init__`` hook reads the call's frame the first time only, for it and its subclass."""
    import builtins

    from jaxlsp.worker.core.failures import Workspace
    from jaxlsp.worker.examples import signatures

    path = tmp_path / "data.py"
    path.write_text(
        "class Batch:\n"
        "    def __init__(self, rows, *, scale=1.0):\n"
        "        self.rows = [r * scale for r in rows]\n\n"
        "class Shuffled(Batch):\n"
        "    pass\n"
    )
    reads: list[int] = []
    real = signatures.frame_arguments

    def counted(frame: Any) -> Any:
        reads.append(1)
        return real(frame)

    monkeypatch.setattr(signatures, "frame_arguments", counted)
    recorder = signatures.Recorder(Workspace(str(tmp_path)))
    code = recorder.compile(path.read_bytes(), str(path))
    assert code is not None
    monkeypatch.setattr(builtins, signatures.HOOK_NAME, recorder, raising=False)
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    for i in range(1000):
        assert namespace["Batch"]([i], scale=2.0).rows == [2.0 * i]
        assert namespace["Shuffled"]([i]).rows == [float(i)]
    assert len(reads) == 2, "one frame read per class, not per construction"
    assert recorder.inits == {} and recorder.records == []


def test_an_inherited_call_is_recorded_for_the_class_of_the_instance(run_capture: Capture, tmp_path: Path) -> None:
    """tinygp's kernels: ``Kernel.__call__`` is defined once in a base class and each kernel
    (``Exp``, ``Matern32``, a kernel a test file defines) only overrides ``evaluate``. The hook
    sits in the base class's ``__call__``; the call is each subclass's own, with its own fields,
    and is recorded under that subclass (before, all were recorded as the abstract base, with a
    subclass's fields: a profile that could not build it)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'kern'\n")
    (tmp_path / "kern.py").write_text(
        "import equinox as eqx\n"
        "import jax.numpy as jnp\n\n"
        "class Kernel(eqx.Module):\n"
        "    def __call__(self, x, y):\n"
        "        return self.evaluate(x, y)\n\n"
        "class Exp(Kernel):\n"
        "    scale: float = 1.0\n\n"
        "    def evaluate(self, x, y):\n"
        "        return jnp.exp(-jnp.abs(x - y).sum(-1) / self.scale)\n\n"
        "class Dot(Kernel):\n"
        "    def evaluate(self, x, y):\n"
        "        return x @ y\n\n"
        "def gram(x):\n"
        "    return Exp(2.0)(x[:, None], x[None]) + Dot()(x[0], x[1])\n"
    )
    req = request("kern.py", "gram", array(5, 3), workspace=tmp_path)
    taught = run_capture({**req, "signatures": True})
    assert taught["ok"], taught.get("error")
    found = {s["name"]: s for s in taught.get("signatures", [])}
    assert "Kernel" not in found  # never called as itself
    assert found["Exp"]["kind"] == "equinox"
    assert found["Exp"]["table"]["init"] == {"kwargs": {"scale": 2.0}}
    assert [a["shape"] for a in found["Exp"]["table"]["inputs"]["args"]] == [[5, 1, 3], [1, 5, 3]]
    assert [a["shape"] for a in found["Dot"]["table"]["inputs"]["args"]] == [[3], [3]]
    assert Path(found["Dot"]["path"]).name == "kern.py"


def test_a_config_dataclass_left_at_its_callable_defaults_is_recorded(run_capture: Capture, tmp_path: Path) -> None:
    """nanodo's ``DoConfig``: sizes given, and initialisers (``nn.initializers.xavier_uniform()``,
    closures no recipe can name) left at their defaults. The submodules that take the config
    are recorded with the fields that were given; before, no module of the model was recorded
    because a default initialiser could not be written."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'cfgmod'\n")
    (tmp_path / "cfgmod.py").write_text(
        "import dataclasses\n"
        "import flax.linen as nn\n\n"
        "@dataclasses.dataclass\n"
        "class Cfg:\n"
        "    width: int\n"
        "    kernel_init: object = nn.initializers.xavier_uniform()\n\n"
        "class Mlp(nn.Module):\n"
        "    cfg: Cfg\n\n"
        "    @nn.compact\n"
        "    def __call__(self, x):\n"
        "        return nn.Dense(self.cfg.width, kernel_init=self.cfg.kernel_init)(x)\n\n"
        "class Model(nn.Module):\n"
        "    cfg: Cfg\n\n"
        "    @nn.compact\n"
        "    def __call__(self, x):\n"
        "        return Mlp(self.cfg)(x)\n"
    )
    config = {"kind": "ref", "ref": "cfgmod:Cfg", "kwargs": {"width": static(8)}}
    req = request("cfgmod.py", "Model", array(2, 4), workspace=tmp_path, init={"kwargs": {"cfg": config}})
    taught = run_capture({**req, "signatures": True})
    assert taught["ok"], taught.get("error")
    mlp = next(s for s in taught.get("signatures", []) if s["name"] == "Mlp")
    assert mlp["table"]["init"] == {"kwargs": {"cfg": {"ref": "cfgmod:Cfg", "kwargs": {"width": 8}}}}
    assert mlp["table"]["inputs"] == {"args": [{"kind": "array", "shape": [2, 4]}]}


KERNELS = """\
import equinox as eqx
import jax
import jax.numpy as jnp


class L1(eqx.Module):
    def distance(self, x, y):
        return jnp.abs(x - y).sum(-1)


class Kernel(eqx.Module):
    def __call__(self, x, y):
        return self.evaluate(x, y)


class Exp(Kernel):
    scale: jax.Array | float = eqx.field(default_factory=lambda: jnp.ones(()))
    distance: L1 = eqx.field(default_factory=L1)

    def evaluate(self, x, y):
        return jnp.exp(-self.distance.distance(x, y) / self.scale)


class Projected(Kernel):
    weight: jax.Array

    def __init__(self, width, key):
        self.weight = jax.random.normal(key, (width, 2))

    def evaluate(self, x, y):
        return (x @ self.weight) @ (y @ self.weight).T


class Sum(Kernel):
    first: Kernel
    second: Kernel

    def evaluate(self, x, y):
        return self.first.evaluate(x, y) + self.second.evaluate(x, y)


def gram(x):
    both = Sum(Exp(), Projected(3, jax.random.key(0)))
    return both(x, x) + Exp()(x, x)
"""


def test_equinox_modules_given_as_values_are_written_as_their_constructor_calls(
    run_capture: Capture, tmp_path: Path
) -> None:
    """tinygp's kernels: a field made by a ``default_factory`` (``distance = L1()``) and kernels
    given to a combinator (``Sum(Exp(), Projected(...))``) are Equinox modules passed as values.
    Each is written as its class called with what made it (a dataclass ``__init__``'s fields, or
    what a hooked ``__init__`` was seen to take); before, no such target was recorded, and the
    profile traces the target as the parent's call did."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'eqkern'\n")
    (tmp_path / "eqkern.py").write_text(KERNELS)
    try:
        taught = run_capture({**request("eqkern.py", "gram", array(5, 3), workspace=tmp_path), "signatures": True})
        assert taught["ok"], taught.get("error")
        found = {s["name"]: s for s in taught.get("signatures", [])}
        exp = found["Exp"]["table"]
        assert exp["init"] == {
            "kwargs": {"scale": {"kind": "array", "shape": []}, "distance": {"ref": "eqkern:L1", "args": []}}
        }
        first, second = (found["Sum"]["table"]["init"]["kwargs"][k] for k in ("first", "second"))
        assert first["ref"] == "eqkern:Exp" and first["kwargs"] == exp["init"]["kwargs"]
        assert second == {"ref": "eqkern:Projected", "kwargs": {"width": 3, "key": {"kind": "key"}}}
        for name, shape in (("Exp", [5]), ("Sum", [5, 5])):
            assert _learned_outputs(run_capture, tmp_path, "eqkern.py", name, found[name]["table"]) == [shape]
    finally:
        sys.modules.pop("eqkern", None)


def test_an_nnx_model_given_to_a_helper_is_written_as_its_constructor_call(
    run_capture: Capture, tmp_path: Path
) -> None:
    """jaxKAN's ``model_eval(model, x)``: an NNX model passed to a helper is written as its class
    called with the arguments its ``__init__`` took, its ``nnx.Rngs`` as a fresh one with the same
    streams; before, the helper was never recorded ("a model passed as an argument")."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'nnxeval'\n")
    (tmp_path / "nnxeval.py").write_text(
        "import jax\nfrom flax import nnx\n\n\n"
        "class Layer(nnx.Module):\n"
        "    def __init__(self, din, dout, *, rngs):\n"
        "        self.linear = nnx.Linear(din, dout, rngs=rngs)\n"
        "        self.drop = nnx.Dropout(0.1, rngs=rngs)\n\n"
        "    def __call__(self, x):\n"
        "        return self.drop(jax.nn.relu(self.linear(x)))\n\n\n"
        "def evaluate(model, x):\n"
        "    return model(x).sum(-1)\n\n\n"
        "def run(x):\n"
        "    return evaluate(Layer(4, 8, rngs=nnx.Rngs(params=0, dropout=1)), x)\n"
    )
    try:
        taught = run_capture({**request("nnxeval.py", "run", array(5, 4), workspace=tmp_path), "signatures": True})
        assert taught["ok"], taught.get("error")
        found = {s["name"]: s for s in taught.get("signatures", [])}
        model = found["evaluate"]["table"]["inputs"]["args"][0]
        rngs = {"ref": "flax.nnx:Rngs", "kwargs": {"dropout": 0, "params": 1}}  # the streams, not the seeds
        assert model == {"ref": "nnxeval:Layer", "kwargs": {"din": 4, "dout": 8, "rngs": rngs}}
        outputs = _learned_outputs(run_capture, tmp_path, "nnxeval.py", "evaluate", found["evaluate"]["table"])
        # the sum, then the dropout stream's count the call advanced (NNX state it updates)
        assert outputs == [[5], []]
    finally:
        sys.modules.pop("nnxeval", None)


def test_a_namedtuple_config_is_written_as_its_class(run_capture: Capture, tmp_path: Path) -> None:
    """recurrentgemma's ``GriffinConfig`` is a NamedTuple: written as a list, the learned call
    built a list that has no ``vocab_size`` and ``Griffin``'s trace failed where a static call
    site had traced it; it is its class called with its fields."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'ntcfg'\n")
    (tmp_path / "ntcfg.py").write_text(
        "from typing import NamedTuple\n\n"
        "import flax.linen as nn\n\n\n"
        "class Cfg(NamedTuple):\n"
        "    width: int\n"
        "    depth: int = 2\n\n\n"
        "class Mlp(nn.Module):\n"
        "    cfg: Cfg\n\n"
        "    @nn.compact\n"
        "    def __call__(self, x):\n"
        "        for _ in range(self.cfg.depth):\n"
        "            x = nn.Dense(self.cfg.width)(x)\n"
        "        return x\n\n\n"
        "class Model(nn.Module):\n"
        "    @nn.compact\n"
        "    def __call__(self, x):\n"
        "        return Mlp(Cfg(width=8))(x)\n"
    )
    try:
        taught = run_capture({**request("ntcfg.py", "Model", array(2, 4), workspace=tmp_path), "signatures": True})
        assert taught["ok"], taught.get("error")
        mlp = next(s for s in taught.get("signatures", []) if s["name"] == "Mlp")
        assert mlp["table"]["init"] == {"kwargs": {"cfg": {"ref": "ntcfg:Cfg", "kwargs": {"width": 8, "depth": 2}}}}
        assert _learned_outputs(run_capture, tmp_path, "ntcfg.py", "Mlp", mlp["table"]) == [[2, 8]]
    finally:
        sys.modules.pop("ntcfg", None)
