"""Staging copies only the worker's stdlib packages, reuses unchanged copies, checks interpreters."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from jaxlsp.capture import staging
from jaxlsp.capture.client import capture_sync
from jaxlsp.capture.staging import RefusedError, Stage
from tests.capture.conftest import STAND_IN, make_request


def test_stage_holds_only_the_worker_packages(stand_in: Stage) -> None:
    files = sorted(p.relative_to(stand_in.path).as_posix() for p in stand_in.path.rglob("*") if p.is_file())
    assert "jaxlsp/__init__.py" in files
    assert "jaxlsp/capture/__init__.py" in files
    assert "jaxlsp/capture/worker/forkserver.py" in files
    assert "jaxlsp/capture/worker/protocol.py" in files
    assert "jaxlsp/graph/model.py" in files
    assert "stand_in_worker.py" in files
    allowed = ("jaxlsp/capture/worker/", "jaxlsp/graph/")
    others = {"jaxlsp/__init__.py", "jaxlsp/capture/__init__.py", "stand_in_worker.py"}
    assert all(f in others or f.startswith(allowed) for f in files), files
    assert all(f.endswith((".py", ".json")) for f in files)
    assert not any("__pycache__" in f for f in files)
    assert stat.S_IMODE(stand_in.path.parent.stat().st_mode) == 0o700


def test_unchanged_tree_reuses_its_folder_and_a_change_makes_a_new_one(tmp_path: Path) -> None:
    extra = tmp_path / "extra.py"
    extra.write_text("A = 1\n")
    first = staging.stage(extra={"extra.py": extra}, cache_dir=tmp_path / "cache")
    again = staging.stage(extra={"extra.py": extra}, cache_dir=tmp_path / "cache")
    assert again.path == first.path and first.path.name == first.digest
    extra.write_text("A = 2\n")
    changed = staging.stage(extra={"extra.py": extra}, cache_dir=tmp_path / "cache")
    assert changed.digest != first.digest and (changed.path / "extra.py").read_text() == "A = 2\n"
    # A damaged copy is rebuilt rather than trusted.
    (changed.path / "extra.py").write_text("tampered\n")
    staging._memo.clear()
    rebuilt = staging.stage(extra={"extra.py": extra}, cache_dir=tmp_path / "cache")
    assert (rebuilt.path / "extra.py").read_text() == "A = 2\n"


def test_a_cache_folder_others_can_write_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    staged = staging.stage(extra={"stand_in_worker.py": STAND_IN}, cache_dir=shared)
    assert shared not in staged.path.parents


def test_old_or_missing_interpreters_are_refused(tmp_path: Path) -> None:
    old = tmp_path / "python2"
    old.write_text("#!/bin/sh\nprintf '2 7 linux2'\n")
    old.chmod(0o755)
    with pytest.raises(RefusedError, match=r"Python 2\.7; tracing needs Python 3\.10"):
        staging.check_interpreter(str(old))
    outcome = capture_sync(make_request("echo"), python=str(old))
    assert outcome.result["error"]["kind"] == "refused"
    missing = capture_sync(make_request("echo"), python=str(tmp_path / "nope"))
    assert missing.result["error"]["kind"] == "refused" and "not found" in missing.result["error"]["message"]
    assert staging.check_interpreter(sys.executable) >= (3, 10)


def test_windows_is_refused_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    outcome = capture_sync(make_request("echo"), python=sys.executable)
    assert outcome.result["error"]["kind"] == "refused"
    assert "Windows" in outcome.result["error"]["message"]


def test_interpreter_path_keeps_the_venv_symlink() -> None:
    # A venv's python is a symlink to the base interpreter: resolving it would leave the venv.
    here = os.path.abspath(sys.executable)
    assert staging.resolve_interpreter(sys.executable) == here
