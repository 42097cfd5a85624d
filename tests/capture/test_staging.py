"""Staging copies only the worker's stdlib packages, reuses unchanged copies, checks interpreters."""

from __future__ import annotations

import importlib.util
import marshal
import os
import stat
import sys
from pathlib import Path

import pytest

from jaxlsp.capture.launch import staging
from jaxlsp.capture.launch.client import capture_sync
from jaxlsp.capture.launch.staging import RefusedError, Stage
from tests.capture.conftest import STAND_IN, make_request


def test_stage_holds_only_the_worker_packages(stand_in: Stage) -> None:
    files = sorted(p.relative_to(stand_in.path).as_posix() for p in stand_in.path.rglob("*") if p.is_file())
    assert "jaxlsp/__init__.py" in files
    assert "jaxlsp/capture/__init__.py" in files
    assert "jaxlsp/worker/process/forkserver.py" in files
    assert "jaxlsp/worker/protocol.py" in files
    assert "jaxlsp/graph/model.py" in files
    assert "jaxlsp/notebook/cells.py" in files  # the worker reads a notebook target's cells
    assert "stand_in_worker.py" in files
    allowed = ("jaxlsp/worker/", "jaxlsp/graph/", "jaxlsp/notebook/")
    others = {"jaxlsp/__init__.py", "jaxlsp/capture/__init__.py", "stand_in_worker.py"}
    # Staging copies no bytecode: what a __pycache__ holds, workers wrote (checked-hash pycs of staged files).
    copied = [f for f in files if "/__pycache__/" not in f]
    assert all(f in others or f.startswith(allowed) for f in copied), copied
    assert all(f.endswith((".py", ".json")) for f in copied)
    for pyc in (stand_in.path / f for f in files if "/__pycache__/" in f):
        assert _checked_hash_of_source(pyc), pyc
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


# -- the staged worker's bytecode ---------------------------------------------------------------------

PROBE = """\"\"\"A staged worker module whose result says which code ran, and where its user module was.\"\"\"
import json, os, sys
MARK = "%s"
def main():
    request = json.loads(sys.stdin.buffer.read())
    sys.path.insert(0, os.path.dirname(request["target"]["path"]))
    import usermod  # a user module, through the ordinary import system
    fd = int(request["resultFd"])
    os.write(fd, json.dumps({"ok": True, "graph": {"mark": MARK, "user": usermod.VALUE}}).encode())
    os.close(fd)
"""
PROBE_MODULE = "jaxlsp/worker/cache_probe.py"


def _checked_hash_of_source(pyc: Path) -> bool:
    """A checked-hash pyc (PEP 552) whose header is that of its source as it is now."""
    source = pyc.parent.parent / (pyc.name.split(".")[0] + ".py")
    head = importlib.util.MAGIC_NUMBER + bytes((3, 0, 0, 0)) + importlib.util.source_hash(source.read_bytes())
    return pyc.read_bytes()[:16] == head


def _probe(tmp_path: Path, mark: str) -> tuple[Stage, Path, Path]:
    """A stage whose worker module is the probe; (stage, the staged probe, the user module)."""
    source = tmp_path / "probe.py"
    source.write_text(PROBE % mark)
    user = tmp_path / "user" / "usermod.py"
    user.parent.mkdir(exist_ok=True)
    user.write_text("VALUE = 42\n")
    staged = staging.stage(
        extra={PROBE_MODULE: source}, worker_module="jaxlsp.worker.cache_probe", cache_dir=tmp_path / "cache"
    )
    return staged, staged.path / PROBE_MODULE, user


def _run_probe(staged: Stage, user: Path) -> str:
    outcome = capture_sync(make_request("probe", path=str(user)), python=sys.executable, stage=staged)
    assert outcome.result.get("ok"), outcome.result
    assert outcome.result["graph"]["user"] == 42
    return str(outcome.result["graph"]["mark"])


def test_the_staged_worker_is_compiled_once_and_its_bytecode_reused(tmp_path: Path) -> None:
    staged, probe, user = _probe(tmp_path, "from the source")
    pyc = Path(importlib.util.cache_from_source(str(probe)))
    assert not pyc.exists()
    assert _run_probe(staged, user) == "from the source"
    # Written by the worker's interpreter, for every staged module it imported (the bootstrap's too).
    assert _checked_hash_of_source(pyc)
    bootstrap_module = staged.path / "jaxlsp/worker/containment.py"
    assert _checked_hash_of_source(Path(importlib.util.cache_from_source(str(bootstrap_module))))
    # The user's modules are never written (-B holds for them).
    assert not (user.parent / "__pycache__").exists()
    # The next capture loads the cached code instead of compiling the source: a pyc whose header
    # matches the source but whose code says otherwise is what runs.
    other = compile(PROBE % "from the cache", str(probe), "exec")
    pyc.write_bytes(pyc.read_bytes()[:16] + marshal.dumps(other))
    assert _run_probe(staged, user) == "from the cache"


def test_a_changed_source_or_a_corrupt_pyc_is_compiled_afresh(tmp_path: Path) -> None:
    staged, probe, user = _probe(tmp_path, "aaaa")
    assert _run_probe(staged, user) == "aaaa"
    pyc = Path(importlib.util.cache_from_source(str(probe)))
    # An edit of equal size with the same mtime (what a timestamp pyc cannot see): the hash does.
    before = probe.stat()
    probe.write_text(probe.read_text().replace("aaaa", "bbbb"))
    os.utime(probe, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert probe.stat().st_size == before.st_size
    assert _run_probe(staged, user) == "bbbb"
    assert _checked_hash_of_source(pyc)
    # A corrupt cache is ignored (and rewritten): a valid header over garbage, a truncated file.
    for damaged in (pyc.read_bytes()[:16] + b"\xff garbage, not marshal data", b"\x00" * 5):
        pyc.write_bytes(damaged)
        assert _run_probe(staged, user) == "bbbb"
        assert _checked_hash_of_source(pyc) and pyc.read_bytes() != damaged
