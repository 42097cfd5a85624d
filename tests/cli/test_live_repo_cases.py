"""Capture cases from the live-shapes measurement on real repositories (issue 27,
/work/repos/LIVE_NOTE.md), through the console script on ``tests/workspaces/lsp_live_repos``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.helpers import run

WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "lsp_live_repos"


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "lsp_live_repos"
    shutil.copytree(WORKSPACE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_module_its_package_imported_already_is_not_loaded_again(tmp_path: Path) -> None:
    """equimo's tabular/layers/blocks.py: ``equimo/__init__`` imports it, so loading the target
    by path again ran its ``@register`` decorators a second time ("Cannot register
    'crossattentionblock'. It is already registered"); ``lookup`` reads the registry it filled."""
    root = workspace(tmp_path)
    for target, output in (("reg/blocks.py::scale", "f32[3]"), ("reg/blocks.py::lookup", "f32[5]")):
        traced = run(["trace", target, "-o", "out.json"], cwd=root)
        assert traced.returncode == 0, traced.stderr
        assert json.loads((root / "out.json").read_text())["outputs"][0]["value"], traced.stdout
        assert output in traced.stdout, traced.stdout


def test_a_call_site_in_a_test_file_loads_its_names_and_its_neighbours(tmp_path: Path) -> None:
    """equimo's tests/test_generic.py: the site hands the target ``test_generic:_SimpleBlock``;
    the test file's folder is on sys.path (pytest's rootdir rules), so ``test_chunk`` and the
    ``helpers`` it imports load."""
    root = workspace(tmp_path)
    traced = run(["trace", "chunked.py::apply", "-o", "out.json"], cwd=root)
    assert traced.returncode == 0, traced.stderr
    assert "inputs from tests/test_chunk.py:12 (test)" in traced.stdout.splitlines(), traced.stdout
    assert "f32[10]" in traced.stdout


def test_a_call_in_a_helper_defined_inside_pytest_raises_is_not_a_complete_site(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    found = run(["examples", "raising.py::clip", "--json"], cwd=root)
    assert found.returncode == 0, found.stderr
    static = [s for s in json.loads(found.stdout) if s["static"]]
    assert static and not any(s["complete"] for s in static), static
    assert [m["where"] for m in static[0]["missing"]] == ["raises"], static[0]
    assert "pytest.raises(ValueError)" in static[0]["missing"][0]["why"]
