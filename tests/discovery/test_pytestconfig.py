"""pytest's ``pythonpath`` setting, read from its configuration files (discovery/pytestconfig.py)."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.discovery.pytestconfig import pythonpath


def test_each_configuration_file_and_pytests_order(tmp_path: Path) -> None:
    assert pythonpath(tmp_path) == []
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\npythonpath = src lib\n")
    assert pythonpath(tmp_path) == [tmp_path / "src", tmp_path / "lib"]
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py311\n")  # no [pytest] section: not pytest's
    assert pythonpath(tmp_path) == [tmp_path / "src", tmp_path / "lib"]
    (tmp_path / "tox.ini").write_text("[pytest]\npythonpath = tox_lib\n")
    assert pythonpath(tmp_path) == [tmp_path / "tox_lib"]
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    assert pythonpath(tmp_path) == [tmp_path]
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -q\n")  # pytest.ini wins, even without pythonpath
    assert pythonpath(tmp_path) == []


def test_a_file_that_does_not_parse_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\npythonpath = lib\n")
    assert pythonpath(tmp_path) == [tmp_path / "lib"]
