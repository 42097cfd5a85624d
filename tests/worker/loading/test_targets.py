"""Each target kind traced in-process on CPU: labels, roles, scopes, groups and sources."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.worker.conftest import array, graph_of, request, static

pytest.importorskip("jax")

Run = Callable[[dict[str, Any]], dict[str, Any]]


def _check(graph: dict[str, Any]) -> None:
    """The graph passes the structural checks and the schema, and round-trips through graph.io."""
    from jaxlsp.graph import io, validate

    loaded = io.from_json(graph)
    assert validate.check(loaded) == []
    assert io.to_json(loaded) == graph
    try:
        from jsonschema import Draft202012Validator
    except ImportError:
        return
    errors = list(Draft202012Validator(validate.load_schema()).iter_errors(graph))
    assert not errors, errors[0].message


def _groups(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["id"]: g for g in graph["groups"]}


def _group_path(graph: dict[str, Any], gid: str | None) -> list[str]:
    groups = _groups(graph)
    out: list[str] = []
    while gid is not None:
        out.insert(0, groups[gid]["label"])
        gid = groups[gid]["parent"]
    return out


def test_linen_mlp_labels_scopes_and_groups(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("models_linen.py", "MLP", array(2, 5))))
    _check(graph)
    assert graph["target"] == {"path": "models_linen.py", "name": "MLP", "kind": "linen"}  # relative to the root
    assert [(p["label"], p["role"]) for p in graph["inputs"]] == [
        ("params/Dense_0/bias", "parameter"),
        ("params/Dense_0/kernel", "parameter"),
        ("params/Dense_1/bias", "parameter"),
        ("params/Dense_1/kernel", "parameter"),
        ("args/0", "input"),
    ]
    assert [(p["label"], p["role"]) for p in graph["outputs"]] == [("out", "output")]
    dots = [n for n in graph["nodes"] if n["primitive"] == "dot_general"]
    assert [n["scope"] for n in dots] == ["MLP/Dense_0", "MLP/Dense_1"]
    assert [_group_path(graph, n["group"]) for n in dots] == [["MLP", "Dense_0"], ["MLP", "Dense_1"]]
    # the innermost workspace frame is the user's line, not flax's
    assert all(n["source"]["path"] == "models_linen.py" for n in dots)
    assert [n["source"]["line"] for n in dots] == [13, 15]
    # library frames: relative to their sys.path entry, with the package named
    assert any(f["path"] == "flax/linen/linear.py" and f.get("package") == "flax" for f in dots[0]["frames"])
    relu = _groups(graph)[next(n["group"] for n in graph["nodes"] if n["primitive"] == "max")]
    assert relu["kind"] == "jit" and relu["label"] == "jit(relu)"
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    assert shapes[graph["inputs"][1]["value"]] == [5, 16]
    assert set(graph["sources"]) == {"models_linen.py"}
    assert graph["versions"]["jax"] and graph["versions"]["flax"] and graph["versions"]["python"]


def test_linen_dropout_batch_stats_and_train_kwarg(run_capture: Run) -> None:
    req = request(
        "models_linen.py", "Net", array(2, 5), kwargs={"train": static(True)}, rngs=["dropout"], mutable=["batch_stats"]
    )
    graph = graph_of(run_capture(req))
    _check(graph)
    roles = {p["label"]: p["role"] for p in graph["inputs"]}
    assert roles["batch_stats/BatchNorm_0/mean"] == "state"
    assert roles["rngs/dropout"] == "key"
    assert roles["params/Dense_1/kernel"] == "parameter"
    assert [(p["label"], p["role"]) for p in graph["outputs"]] == [
        ("out", "output"),
        ("batch_stats/BatchNorm_0/mean", "state"),
        ("batch_stats/BatchNorm_0/var", "state"),
    ]
    key = next(p["value"] for p in graph["inputs"] if p["label"] == "rngs/dropout")
    assert next(v["dtype"] for v in graph["values"] if v["id"] == key) == "key<fry>"
    assert {n["scope"] for n in graph["nodes"]} >= {"Net/Dropout_0", "Net/BatchNorm_0"}

    # train=False is static: no dropout equations, no batch statistics computed
    graph = graph_of(
        run_capture(request("models_linen.py", "Net", array(2, 5), kwargs={"train": static(False)}, rngs=["dropout"]))
    )
    assert not any(n["primitive"].startswith("random") for n in graph["nodes"])


def test_linen_bound_factory_and_method(run_capture: Run) -> None:
    graph = graph_of(
        run_capture(request("models_linen.py", "MLP", array(1, 5), init={"factory": "models_linen:make_bound"}))
    )
    _check(graph)
    kernel = next(p["value"] for p in graph["inputs"] if p["label"] == "params/Dense_0/kernel")
    assert next(v["shape"] for v in graph["values"] if v["id"] == kernel) == [5, 8]

    graph = graph_of(run_capture(request("models_linen.py", "Encoder.encode", array(2, 5))))
    assert [p["label"] for p in graph["inputs"]] == ["params/embed/bias", "params/embed/kernel", "args/0"]
    assert {n["scope"] for n in graph["nodes"]} == {"Encoder.encode/embed"}  # Flax names a method scope Class.method


@pytest.mark.parametrize("transform", [None, "grad"])
def test_linen_apply_skips_the_param_recheck_and_keeps_the_graph(
    run_capture: Run, monkeypatch: pytest.MonkeyPatch, transform: str | None
) -> None:
    import contextlib
    import sys

    from flax.core.scope import Scope

    from jaxlsp.worker.loading import targets

    param = Scope.__dict__["param"]
    extra = {"transform": transform} if transform else {}
    fast = run_capture(request("models_linen.py", "Counted", array(2, 5), **extra))
    module = sys.modules["models_linen"]
    # The initialiser ran once, in the abstract init; apply reused its parameter (Flax alone runs
    # it again to re-check the shape), and Flax's own method is back afterwards.
    assert module.INIT_CALLS == [(5, 6)]
    assert Scope.__dict__["param"] is param

    monkeypatch.setattr(targets, "_linen_params_as_initialised", contextlib.nullcontext)
    del sys.modules["models_linen"]
    flax_path = run_capture(request("models_linen.py", "Counted", array(2, 5), **extra))
    assert sys.modules["models_linen"].INIT_CALLS == [(5, 6), (5, 6)]
    fast_graph, flax_graph = graph_of(fast), graph_of(flax_path)
    _check(fast_graph)
    assert fast_graph == flax_graph
    assert {g["kind"] for g in fast_graph["groups"]} >= {"remat", "scan"}


def test_linen_bound_variables_keep_flaxs_shape_check(run_capture: Run) -> None:
    result = run_capture(
        request("models_linen.py", "MLP", array(1, 5), init={"factory": "models_linen:make_mismatched"})
    )
    assert not result["ok"]
    assert result["error"]["kind"] == "trace"
    assert "ScopeParamShapeError" in result["error"]["message"]
    assert (
        "expected to generate shape (5, 16), but the existing parameter it received has shape (5, 8)"
        in (result["error"]["message"])
    )
    assert result["error"]["frame"]["line"] == 13


def test_nnx_paths_as_labels_and_scopes(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("models_nnx.py", "Tower", array(2, 8))))
    _check(graph)
    assert graph["target"]["kind"] == "nnx"
    labels = [p["label"] for p in graph["inputs"]]
    assert labels[:4] == ["blocks/0/attn/bias", "blocks/0/attn/kernel", "blocks/0/norm/bias", "blocks/0/norm/scale"]
    assert labels[-1] == "args/0"
    assert {p["role"] for p in graph["inputs"][:-1]} == {"parameter"}
    dots = [n for n in graph["nodes"] if n["primitive"] == "dot_general"]
    assert [n["scope"] for n in dots] == ["blocks/0/attn", "blocks/1/attn", "head"]
    assert [_group_path(graph, n["group"]) for n in dots] == [["blocks/0", "attn"], ["blocks/1", "attn"], ["head"]]
    assert dots[0]["source"]["line"] == 12


@pytest.mark.parametrize("transform", ["grad", "value_and_grad"])
def test_nnx_gradient_of_a_call_that_updates_state(run_capture: Run, transform: str) -> None:
    # BatchNorm in training mode and Dropout's RngCount update state inside the differentiated
    # call: traced as nnx.value_and_grad users write a train step (parameters differentiated, the
    # updated state an output), not "Cannot mutate BatchStat from a different trace level"
    graph = graph_of(run_capture(request("models_nnx.py", "Stateful", array(2, 3), transform=transform)))
    _check(graph)
    value = [("out", "output")] if transform == "value_and_grad" else []
    grads = [(f"grad/{p}", "output") for p in ("bn/bias", "bn/scale", "lin/bias", "lin/kernel")]
    state = [("bn/mean", "state"), ("bn/var", "state"), ("drop/rngs/count", "state")]
    assert [(p["label"], p["role"]) for p in graph["outputs"]] == value + grads + state
    produced = {o for n in graph["nodes"] for o in n["outputs"]}
    assert all(p["value"] in produced for p in graph["outputs"]), "each output is computed, none passed through"


def test_nnx_classes_are_restored(run_capture: Run) -> None:
    import sys

    graph_of(run_capture(request("models_nnx.py", "Tower", array(2, 8))))
    module = next(m for name, m in sys.modules.items() if name == "models_nnx")
    assert "jaxlsp" not in str(module.Block.__call__.__code__.co_filename)


def test_equinox_scan(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("models_eqx.py", "Scanned", array(4))))
    _check(graph)
    assert graph["target"]["kind"] == "equinox"
    assert [p["label"] for p in graph["inputs"]][:2] == ["layers/0/weight", "layers/0/bias"]
    scan = next(g for g in graph["groups"] if g["kind"] == "scan")
    assert scan["label"] == "scan (length 5)"
    inner = [n for n in graph["nodes"] if n["group"] is not None and _group_path(graph, n["group"])[0] == scan["label"]]
    assert {n["primitive"] for n in inner} >= {"dot_general", "tanh"}
    assert {n["scope"] for n in inner} == {"layers/0", ""}
    assert {n["scope"] for n in graph["nodes"]} >= {"layers/1", "out"}
    assert "control-flow bodies (cond, while, scan) are traced, not executed" in graph["coverage"]["notes"]


def test_functions_jitted_method_and_package(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "double", array(3))))
    assert graph["target"]["kind"] == "function"
    assert [n["primitive"] for n in graph["nodes"]] == ["jit", "mul"]
    graph = graph_of(run_capture(request("funcs.py", "Ops.scale", array(3), kwargs={"factor": static(3.0)})))
    (node,) = graph["nodes"]
    lit = next(v for v in graph["values"] if v["id"] == node["inputs"][1])
    assert lit["kind"] == "literal" and lit["literal"] == 3.0
    graph = graph_of(run_capture(request("pkg/model.py", "forward", array(4))))
    assert [n["primitive"] for n in graph["nodes"]] == ["tanh", "add"]
    assert graph["nodes"][0]["source"]["path"] == "pkg/helpers.py"  # relative to the workspace root
    assert "pkg/helpers.py" in graph["sources"]


def test_definitions_only_load(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("script.py", "step", array(4), load="definitions")))
    assert [n["primitive"] for n in graph["nodes"]] == ["tanh", "mul"]
    result = run_capture(request("script.py", "step", array(4)))
    assert not result["ok"] and result["error"]["kind"] == "import"


def test_symbolic_batch(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "symbolic", array("batch", 3), symbolic=["batch"])))
    _check(graph)
    shapes = [v["shape"] for v in graph["values"]]
    assert ["batch", 3] in shapes and ["batch"] in shapes


def test_grad_transform(run_capture: Run) -> None:
    graph = graph_of(run_capture(request("funcs.py", "loss", array(3, 2), array(5, 3), transform="grad")))
    _check(graph)
    assert [p["label"] for p in graph["outputs"]] == ["grad/args/0"]
    assert any("transpose" in n["transforms"] for n in graph["nodes"])
    graph = graph_of(run_capture(request("models_linen.py", "MLP", array(2, 5), transform="value_and_grad")))
    _check(graph)
    assert [p["label"] for p in graph["outputs"]] == [
        "out",
        "grad/params/Dense_0/bias",
        "grad/params/Dense_0/kernel",
        "grad/params/Dense_1/bias",
        "grad/params/Dense_1/kernel",
    ]
    assert {n["scope"] for n in graph["nodes"]} >= {"MLP/Dense_0", "MLP/Dense_1"}


def test_sources_hold_every_workspace_module_and_file_the_capture_read(run_capture: Run, tmp_path: Any) -> None:
    # cfg.py, the package's __init__ and scale.json give no frame, yet they decide the program:
    # editing one must make the graph stale (and re-trace it live), so each is hashed in ``sources``.
    (tmp_path / "cfg.py").write_text("WIDTH = 3\n")
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "__init__.py").write_text("from layers.act import act\n")
    (tmp_path / "layers" / "act.py").write_text("import jax.numpy as jnp\n\n\ndef act(x):\n    return jnp.tanh(x)\n")
    # a data file read at import counts too; a file the program writes does not
    (tmp_path / "scale.json").write_text('{"scale": 2.0}')
    (tmp_path / "model.py").write_text(
        "import json\nimport pathlib\n\nimport jax.numpy as jnp\nfrom cfg import WIDTH\nfrom layers import act\n\n"
        "HERE = pathlib.Path(__file__).parent\n"
        "SCALE = json.loads((HERE / 'scale.json').read_text())['scale']\n"
        "(HERE / 'log.txt').write_text('imported')\n\n\n"
        "def f(x):\n    return act(x) * WIDTH * SCALE\n"
    )
    graph = graph_of(run_capture(request("model.py", "f", array(4), workspace=tmp_path)))
    assert set(graph["sources"]) == {"model.py", "cfg.py", "layers/__init__.py", "layers/act.py", "scale.json"}
    import hashlib

    assert graph["sources"]["cfg.py"] == hashlib.sha256(b"WIDTH = 3\n").hexdigest()
    for name in ("cfg", "layers", "layers.act", "model"):
        sys.modules.pop(name, None)


def test_a_test_files_target_imports_the_src_layouts_package(run_capture: Run, tmp_path: Any) -> None:
    """A target defined in a test file of a src-layout repository (tinygp's tests import
    ``tinygp`` from ``src/tinygp``) imports its package as pytest and an editable install find it:
    ``src`` is searched after the workspace root, and an installed package still wins."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'srcpkg'\n")
    (tmp_path / "src" / "srcpkg").mkdir(parents=True)
    (tmp_path / "src" / "srcpkg" / "__init__.py").write_text("WIDTH = 3\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_helper.py").write_text(
        "import jax.numpy as jnp\nfrom srcpkg import WIDTH\n\n\ndef widened(x):\n    return jnp.tile(x, WIDTH)\n"
    )
    try:
        graph = graph_of(run_capture(request("tests/test_helper.py", "widened", array(4), workspace=tmp_path)))
    finally:
        for name in ("srcpkg", "test_helper"):
            sys.modules.pop(name, None)
    assert graph["outputs"]
    assert "src/srcpkg/__init__.py" in graph["sources"]
