"""``load`` for notebook targets: ``definitions`` by default, ``cells`` only for notebooks."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.recipes import Resolved, select_profile
from tests.notebook.helpers import write_notebook
from tests.recipes.test_helpers import HEADER, load, problems

NOTEBOOK = 'version = 1\n\n[profiles.p]\ntarget = "nb.ipynb::f"\n'


def test_a_notebook_target_loads_definitions_by_default_and_may_run_its_cells(tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb", [("code", "import jax\ndef f(x):\n    return x")])
    for body, expected in (
        ("", "definitions"),
        ('load = "cells"\n', "cells"),
        ('load = "definitions"\n', "definitions"),
    ):
        result = select_profile(load(tmp_path, NOTEBOOK + body), tmp_path / "nb.ipynb", "f")
        assert isinstance(result, Resolved) and result.profile["load"] == expected


def test_load_must_fit_the_target_file(tmp_path: Path) -> None:
    write_notebook(tmp_path / "nb.ipynb", [("code", "def f(x):\n    return x")])
    assert problems(tmp_path, NOTEBOOK + 'load = "module"\n') == [
        '5: profiles.p.load: a notebook is not imported as a module: use "definitions" (the default: imports and '
        'definitions only) or "cells" (runs the cells above the target first)'
    ]
    assert problems(tmp_path, HEADER + 'load = "cells"\n') == [
        '5: profiles.p.load: load = "cells" is for notebook targets (.ipynb): use "module" or "definitions" here'
    ]
