"""``jaxlsp learn`` on a package its tests load through jaxtyping's import hook (issue 56.7).

jaxtyping-checked libraries (diffrax, lineax, optimistix, ...) load their package in their tests
through jaxtyping's hook, either with ``--jaxtyping-packages=pkg,beartype.beartype`` in pytest's
``addopts`` or with ``with install_import_hook("pkg", "beartype.beartype"): import pkg`` in
``conftest.py``. That hook gives the package's modules a loader of its own, which the signature
hooks passed by: a learn of diffrax's ``test/test_step_to.py`` recorded only the test file's two
helpers, none of the library's calls. Both forms are learned now, and the package keeps jaxtyping's
checks while it is (the fixture's second test fails without them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import expanded, run

OPS = """import jax.numpy as jnp
from jaxtyping import Array, Float


def scale(x: Float[Array, "n 2"], factor: float) -> Float[Array, "n 2"]:
    return jnp.tanh(x) * factor
"""

TESTS = """import jax.numpy as jnp
import jaxtyping
import pytest

import pkg


def test_scale():
    assert pkg.scale(jnp.ones((4, 2)), 2.0).shape == (4, 2)


def test_checked():
    with pytest.raises(jaxtyping.TypeCheckError):
        pkg.scale(jnp.ones((3,)), 2.0)
"""

CONFTEST = """from jaxtyping import install_import_hook

with install_import_hook("pkg", "beartype.beartype"):
    import pkg  # noqa: F401
"""

ADDOPTS = '[tool.pytest.ini_options]\naddopts = "--jaxtyping-packages=pkg,beartype.beartype"\n'


def _repository(tmp_path: Path, form: str) -> Path:
    """``pkg/ops.py`` with a jaxtyping-annotated ``scale``, and ``tests/test_ops.py`` that calls
    it, loaded through jaxtyping's hook in ``form``: ``conftest`` or ``addopts``."""
    root = tmp_path / "checked"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("from pkg.ops import scale as scale\n")
    (root / "pkg" / "ops.py").write_text(OPS)
    (root / "tests" / "test_ops.py").write_text(TESTS)
    project = "[project]\nname = 'pkg'\n"
    if form == "conftest":
        (root / "tests" / "conftest.py").write_text(CONFTEST)
    else:
        project += ADDOPTS
    (root / "pyproject.toml").write_text(project)
    return root


@pytest.mark.parametrize("form", ["conftest", "addopts"])
def test_learn_records_the_calls_of_a_package_loaded_through_jaxtypings_import_hook(
    tmp_path: Path, cache: Path, form: str
) -> None:
    root = _repository(tmp_path, form)
    learned = run(["learn", "--json", "tests/test_ops.py"], cwd=root)
    assert learned.returncode == 0, learned.stderr
    report = json.loads(learned.stdout)
    assert report["failures"] == [], report["failures"]
    [example] = report["examples"]
    # both tests passed: the package was still checked by jaxtyping (test_checked) while learned
    assert "2 passed" in example["message"], example["message"]
    assert report["targets"] == ["pkg/ops.py::scale"]
    traced = run(["trace", "pkg/ops.py::scale", "-o", "scale.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "(learned)" in traced.stdout
    assert _output_shapes(root / "scale.json") == [[4, 2]]


def _output_shapes(path: Path) -> list[list[int]]:
    data = expanded(path)
    shapes = {v["id"]: v["shape"] for v in data["values"]}
    return [shapes[o["value"]] for o in data["outputs"]]
