"""``jaxlsp trace FILE::NAME`` with no profile (``--from auto``) on small workspaces laid out as
the example runs that still missed on public repositories were (issue 46, point 6): each test
builds the folder, runs the console script, and checks the inputs a run of an example taught."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import expanded, run


def _input_shapes(graph_file: Path) -> list[list[int]]:
    graph = expanded(graph_file)
    shapes = {v["id"]: v["shape"] for v in graph["values"]}
    return [shapes[p["value"]] for p in graph["inputs"]]


def test_a_target_defined_inside_a_test_file_is_captured(tmp_path: Path) -> None:
    """diffrax's tests define their vector fields (and small modules) in the test file itself;
    pytest imports a test file through its assertion-rewriting loader, which the first-call
    hook's finder gave up on: the test ran uninstrumented and never stopped at the call."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'fields'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_field.py").write_text(
        "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n\n\n"
        "def vector_field(t, y):\n    return -jnp.tanh(y) * t\n\n\n"
        "class Tiny(eqx.Module):\n    layer: eqx.nn.Linear\n\n"
        "    def __init__(self, key):\n        self.layer = eqx.nn.Linear(4, 2, key=key)\n\n"
        "    def __call__(self, x):\n        return jax.nn.relu(self.layer(x))\n\n\n"
        "def integrate(y, steps):\n    for t in range(steps):\n"
        "        y = y + 0.1 * vector_field(float(t), y)\n    return y\n\n\n"
        "def test_solve():\n    y = integrate(jnp.ones(3), 5)\n    assert y.shape == (3,)\n\n\n"
        "def test_tiny():\n    model = Tiny(jax.random.key(0))\n"
        "    assert model(jnp.ones(4) * jnp.arange(4.0)).shape == (2,)\n"
    )
    field = run(["trace", "tests/test_field.py::vector_field", "-o", "f.json"], cwd=tmp_path)
    assert field.returncode == 0, field.stderr
    assert "inputs from tests/test_field.py:22 (test)" in field.stdout.splitlines()
    assert _input_shapes(tmp_path / "f.json") == [[3]]  # t is a Python float: static
    tiny = run(["trace", "tests/test_field.py::Tiny", "-o", "t.json"], cwd=tmp_path)
    assert tiny.returncode == 0, tiny.stderr
    assert "inputs from tests/test_field.py:33 (test)" in tiny.stdout.splitlines()
    assert [4] in _input_shapes(tmp_path / "t.json")


def test_the_tests_run_when_a_notebook_ranked_first_fails_at_import(tmp_path: Path) -> None:
    """A notebook calls the target on a complete literal too large for a profile (a real image
    batch: refused, so it ranks first as a run), and needs a module this machine lacks; the tests
    after it were never tried. They run next, under the same deadline."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'nbfirst'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(
        "import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_model.py").write_text(
        "import numpy as np\n\nfrom pkg.model import double\n\n\ndef make():\n"
        "    return np.ones((4, 5), np.float32)\n\n\ndef test_double():\n"
        "    assert double(make()).shape == (4, 5)\n"
    )
    cells = [
        "import jax.numpy as jnp\nimport not_installed_anywhere\nfrom pkg.model import double",
        "double(jnp.ones((8, 3, 512, 512)))",
    ]
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c} for c in cells
        ],
    }
    (tmp_path / "demo.ipynb").write_text(json.dumps(notebook))
    result = run(["trace", "pkg/model.py::double", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "running demo.ipynb to learn the inputs",
        "running tests/test_model.py::test_double to learn the inputs",
    ]
    assert "inputs from tests/test_model.py:11 (test)" in lines
    assert _input_shapes(tmp_path / "g.json") == [[4, 5]]


def test_a_script_that_is_the_only_user_runs_not_an_unrelated_test(tmp_path: Path) -> None:
    """``import pkg.model`` then ``pkg.model.double(x)``: the package's ``__init__.py`` does not
    name ``model`` (the import makes it an attribute), so the use was not resolved, and the test
    file that imports the module for another function ran instead of the script."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'onlyuser'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(
        "import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n\n\n"
        "def other(x):\n    return jnp.sin(x)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_other.py").write_text(
        "import jax.numpy as jnp\n\nfrom pkg import model\n\n\ndef test_other():\n"
        "    assert model.other(jnp.ones(3)).shape == (3,)\n"
    )
    (tmp_path / "train.py").write_text(
        "import numpy as np\n\nimport pkg.model\n\n\ndef load():\n    return np.ones((6, 2), np.float32)\n\n\n"
        "def main():\n    for _ in range(3):\n        print(pkg.model.double(load()))\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    listed = run(["examples", "pkg/model.py::double", "--json"], cwd=tmp_path)
    assert {i["example"] for i in json.loads(listed.stdout)} == {"train.py"}  # its call, and its run
    result = run(["trace", "pkg/model.py::double", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "running train.py to learn the inputs"
    assert "inputs from train.py:12 (script)" in lines
    assert _input_shapes(tmp_path / "g.json") == [[6, 2]]


def test_a_script_inside_a_package_runs_as_the_package_module(tmp_path: Path) -> None:
    """``pkg/train.py`` beside a local ``pkg/optax.py`` (its own schedules) imports the installed
    optax: run as a plain file, the script's folder came first on ``sys.path`` and the local file
    shadowed it. Run as ``python -m pkg.train`` it imports the installed one, and a relative
    import works too. A script that imports a sibling by its bare name still runs as a file."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'inpackage'\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text("import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n")
    (pkg / "optax.py").write_text("def schedule(step):\n    return 0.1 / (1 + step)\n")
    (pkg / "train.py").write_text(
        "import numpy as np\nimport optax\n\nfrom .model import double\nfrom pkg import optax as ours\n\n\n"
        "def load():\n    return np.ones((3, 7), np.float32)\n\n\n"
        "if __name__ == '__main__':\n    opt = optax.sgd(ours.schedule(0))\n    print(double(load()))\n"
    )
    result = run(["trace", "pkg/model.py::double", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "inputs from pkg/train.py:14 (script)" in result.stdout.splitlines()
    assert _input_shapes(tmp_path / "g.json") == [[3, 7]]
    (pkg / "helpers.py").write_text("import numpy as np\n\n\ndef load():\n    return np.ones((5, 7), np.float32)\n")
    (pkg / "train.py").write_text(
        "import helpers\n\nfrom model import double\n\n\nif __name__ == '__main__':\n"
        "    print(double(helpers.load()))\n"
    )
    plain = run(["trace", "pkg/model.py::double", "-o", "g.json"], cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert _input_shapes(tmp_path / "g.json") == [[5, 7]]


def test_a_guarded_script_imports_the_repository_package(tmp_path: Path) -> None:
    """``tools/run.py`` with an ``if __name__ == "__main__":`` guard imports the repository's
    package from the root (as its editable install gives it): it failed with "No module named
    'mylib'", where the same script without the guard (run as a module) imported it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'guarded'\n")
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "mylib" / "model.py").write_text(
        "import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n"
    )
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "run.py").write_text(
        "import numpy as np\n\nfrom mylib.model import double\n\n\ndef load():\n"
        "    return np.ones((2, 9), np.float32)\n\n\nif __name__ == '__main__':\n    print(double(load()))\n"
    )
    result = run(["trace", "mylib/model.py::double", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "running tools/run.py to learn the inputs"
    assert "inputs from tools/run.py:11 (script)" in result.stdout.splitlines()
    assert _input_shapes(tmp_path / "g.json") == [[2, 9]]


def test_a_workspace_without_markers_searches_from_the_current_folder(tmp_path: Path) -> None:
    """A repository unpacked without ``.git`` or ``pyproject.toml``: the root was the target's own
    folder (``models/``, no ``__init__.py``), and its tests beside it were never searched ("no
    call site"). The current folder holding the target is the workspace."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "layers.py").write_text(
        "import jax.numpy as jnp\n\n\ndef double(x):\n    return jnp.tanh(x) * 2\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_layers.py").write_text(
        "import numpy as np\n\nfrom models.layers import double\n\n\ndef make():\n"
        "    return np.ones((4, 3), np.float32)\n\n\ndef test_double():\n    assert double(make()).shape == (4, 3)\n"
    )
    listed = run(["examples", "models/layers.py::double"], cwd=tmp_path)
    assert listed.stdout.splitlines()[0].startswith("1. tests/test_layers.py:11 (test)"), listed.stdout
    result = run(["trace", "models/layers.py::double", "-o", "g.json"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "inputs from tests/test_layers.py:11 (test)" in result.stdout.splitlines()
    assert _input_shapes(tmp_path / "g.json") == [[4, 3]]


def test_methods_are_targets_and_a_class_without_call_is_answered_at_once(tmp_path: Path) -> None:
    """diffrax's ``Term.vf`` and a solver's ``step`` were refused as "not a JAX function or module
    class"; an Equinox term without ``__call__`` ran every test to its end before saying nothing
    calls it. Methods are targets (``Class.method``), reached by a run of the test; the class is
    answered as soon as it is made, before any test runs, naming its methods."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'methods'\n")
    (tmp_path / "terms.py").write_text(
        "import equinox as eqx\nimport jax.numpy as jnp\n\n\nclass Term(eqx.Module):\n    scale: float\n\n"
        "    def vf(self, t, y):\n        return -jnp.tanh(y) * self.scale * t\n\n\n"
        "class Solver:\n    def __init__(self, term):\n        self.term = term\n\n"
        "    def step(self, t, y):\n        return y + 0.1 * self.term.vf(t, y)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_terms.py").write_text(
        "import pathlib\n\nimport numpy as np\n\nfrom terms import Solver, Term\n\n\n"
        "def start():\n    return np.ones((5,), np.float32)\n\n\n"
        "def test_solve():\n    pathlib.Path('ran').write_text('the test ran')\n"
        "    solver = Solver(Term(2.0))\n    y = start()\n    for i in range(3):\n"
        "        y = solver.step(float(i), y)\n    assert y.shape == (5,)\n"
    )
    listed = run(["examples", "terms.py::Solver.step"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].startswith("1. tests/test_terms.py:17 (test)"), listed.stdout
    step = run(["trace", "terms.py::Solver.step", "-o", "s.json"], cwd=tmp_path)
    assert step.returncode == 0, step.stderr
    assert "inputs from tests/test_terms.py:17 (test)" in step.stdout.splitlines()
    assert _input_shapes(tmp_path / "s.json") == [[5]]  # t is a Python float: static
    vf = run(["trace", "terms.py::Term.vf", "-o", "v.json"], cwd=tmp_path)
    assert vf.returncode == 0, vf.stderr
    assert "inputs from terms.py:17 (test)" in vf.stdout.splitlines()  # Solver.step calls it
    assert [5] in _input_shapes(tmp_path / "v.json")
    (tmp_path / "ran").unlink()
    term = run(["trace", "terms.py::Term"], cwd=tmp_path)
    assert term.returncode == 2, term.stderr
    assert (
        "Term has no __call__ of its own or from a base: nothing calls it; trace one of its methods: terms.py::Term.vf"
        in term.stderr
    )
    assert not (tmp_path / "ran").exists()  # no test ran


def test_a_dropout_inside_init_draws_from_the_params_stream_as_under_pytest(tmp_path: Path) -> None:
    """A test that only initialises a model with one key passes under pytest: inside ``init``
    Flax takes a stream the caller did not give (Dropout's ``dropout``) from the ``params`` one.
    The trace, which has no params stream, failed with ``Dropout_0 needs PRNG for "dropout"``,
    on a call the test ran (the first-call run) and on one read from the test's text (the plain
    trace). Each such stream gets a key of its own, as the caller's run had one."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'drop'\n")
    (tmp_path / "model.py").write_text(
        "import flax.linen as nn\n\n\nclass Block(nn.Module):\n    @nn.compact\n"
        "    def __call__(self, x, train: bool = True):\n        x = nn.Dense(4)(x)\n"
        "        x = nn.Dropout(0.5, deterministic=not train)(x)\n        return nn.relu(x)\n\n\n"
        "class Model(nn.Module):\n    @nn.compact\n    def __call__(self, x, train: bool = True):\n"
        "        return Block()(x, train)\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_model.py").write_text(
        "import jax\nimport jax.numpy as jnp\nimport numpy as np\n\nfrom model import Block, Model\n\n\n"
        "def batch():\n    return np.ones((2, 3), np.float32)\n\n\n"
        "def test_init():\n    assert Model().init(jax.random.key(0), batch())\n\n\n"
        "def test_block():\n    assert Block().init(jax.random.key(0), jnp.ones((2, 3)))\n"
    )
    model = run(["trace", "model.py::Model", "-o", "m.json"], cwd=tmp_path)
    assert model.returncode == 0, model.stderr
    assert "inputs from tests/test_model.py:13 (test)" in model.stdout.splitlines()  # run: batch() is no literal
    ports = {p["label"]: p["role"] for p in expanded(tmp_path / "m.json")["inputs"]}
    assert ports["rngs/dropout"] == "key" and "rngs/params" not in ports
    block = run(["trace", "model.py::Block", "-o", "b.json"], cwd=tmp_path)
    assert block.returncode == 0, block.stderr
    # read from the test's text, not run: the plain trace's path
    assert "inputs from tests/test_model.py:17 (test)" in block.stdout.splitlines()
    assert "to learn the inputs" not in block.stdout
    assert "rngs/dropout" in {p["label"] for p in expanded(tmp_path / "b.json")["inputs"]}
