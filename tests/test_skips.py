"""The suite fails on a skip whose reason is not on its allow-list, and passes on one that is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[1]
INI = """\
[pytest]
allowed_skips =
    no TPU on this machine | the chip's tests run on the TPU machine
"""


def _run(tmp_path: Path, reason: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_one.py").write_text(
        f"import pytest\n\ndef test_ran():\n    pass\n\ndef test_skipped():\n    pytest.skip({reason!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.skips", "-c", str(tmp_path / "pytest.ini")]
    return subprocess.run(
        [*command, "--rootdir", str(tmp_path), *extra, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(120),
    )  # fmt: skip


def test_a_skip_for_a_missing_file_fails_the_run_and_names_the_test(tmp_path: Path) -> None:
    run = _run(tmp_path, "no worker yet")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_one.py::test_skipped: no worker yet" in run.stdout


def test_a_skip_on_the_allow_list_passes(tmp_path: Path) -> None:
    run = _run(tmp_path, "no TPU on this machine (jax.devices('tpu') found none)")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 1 skipped" in run.stdout


def test_an_unlisted_skip_in_a_parallel_run_fails_it_too(tmp_path: Path) -> None:
    run = _run(tmp_path, "chromium is not installed", "-n", "2")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "chromium is not installed" in run.stdout


def test_a_module_skipped_whole_at_collection_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        "import pytest\n\npytest.importorskip('no_such_module_here')\n\ndef test_x():\n    pass\n"
    )
    for extra in ((), ("-n", "2")):
        run = _run(tmp_path, "no TPU on this machine", *extra)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "test_two.py: could not import 'no_such_module_here'" in run.stdout, run.stdout
