"""Interpreter selection, the compatibility check and the install command, without a server.

Real interpreters and real probes: a fresh venv without flax (see conftest), the runner's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jaxlsp.capture.environment import interpreters
from jaxlsp.capture.environment.compatibility import EnvironmentCache, Probe, evaluate
from jaxlsp.capture.environment.install import plan_install
from jaxlsp.capture.environment.interpreters import InterpreterError, Selection, select_interpreter
from tests.capture.environments.conftest import site_of


def _python_in(prefix: Path) -> Path:
    """An executable ``PREFIX/bin/python`` (a link to the runner's: never run here)."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    return prefix / "bin" / "python"


def test_routes_in_the_documented_order(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    explicit = {k: str(_python_in(tmp_path / k)) for k in ("request", "recipe", "setting", "client")}
    dot_venv = _python_in(root / ".venv")
    plain_venv = _python_in(root / "venv")
    conda = _python_in(tmp_path / "conda")
    venv = _python_in(tmp_path / "active")
    env = {"CONDA_PREFIX": str(conda.parent.parent), "VIRTUAL_ENV": str(venv.parent.parent), "PATH": ""}
    given: dict[str, str | None] = dict(explicit)
    expected = [
        ("request", interpreters.REQUEST),
        ("recipe", interpreters.RECIPE),
        ("setting", interpreters.SETTING),
        ("client", interpreters.CLIENT),
    ]
    for key, route in expected:
        chosen = select_interpreter(workspace_root=root, environ=env, own="/own/python", **given)  # type: ignore[arg-type]
        assert chosen == Selection(explicit[key], route)
        given[key] = None  # the next route takes over
    implicit = [
        (dot_venv, interpreters.WORKSPACE_VENV, root / ".venv"),
        (plain_venv, interpreters.WORKSPACE_VENV_PLAIN, root / "venv"),
    ]
    for python, route, folder in implicit:
        assert select_interpreter(workspace_root=root, environ=env, own="/own/python") == Selection(str(python), route)
        os.unlink(python)  # a folder without its interpreter is skipped, not an error
        assert folder.is_dir()
    assert select_interpreter(workspace_root=root, environ=env) == Selection(str(conda), interpreters.CONDA)
    del env["CONDA_PREFIX"]
    assert select_interpreter(workspace_root=root, environ=env) == Selection(str(venv), interpreters.VIRTUAL_ENV)
    del env["VIRTUAL_ENV"]
    assert select_interpreter(workspace_root=root, environ=env, own="/own/python") == Selection(
        "/own/python", interpreters.OWN
    )
    assert select_interpreter(workspace_root=root, environ=env).python == sys.executable


def test_an_explicit_interpreter_that_is_missing_is_an_error_not_skipped(tmp_path: Path) -> None:
    with pytest.raises(InterpreterError) as info:
        select_interpreter(workspace_root=tmp_path, setting=str(tmp_path / "nope" / "python"))
    assert str(info.value) == f"the interpreter {tmp_path / 'nope' / 'python'} (setting jaxlsp.python) does not exist"
    with pytest.raises(InterpreterError, match=r"'python9.99' \(recipe python\) is not a command found on PATH"):
        select_interpreter(workspace_root=tmp_path, recipe="python9.99")
    script = tmp_path / "python"
    script.write_text("")
    with pytest.raises(InterpreterError, match=r"\(client's selected interpreter\) is not executable"):
        select_interpreter(workspace_root=tmp_path, client=str(script))


def test_the_check_names_the_missing_package_and_its_fix(no_flax: Path) -> None:
    cache = EnvironmentCache()
    selection = Selection(str(no_flax), interpreters.SETTING)
    report = cache.check(selection, "linen", "cpu")
    assert not report.ok and report.probe.packages["flax"] is None
    assert report.probe.packages["jax"] and report.probe.packages["jaxlib"]  # the rest is there
    [problem] = report.errors
    assert (problem.package, problem.requirement) == ("flax", "flax>=0.10")
    assert problem.message == "flax is not installed (Flax Linen targets need it)"
    assert report.message() == (
        f"The capture environment {no_flax} (setting jaxlsp.python) cannot trace: "
        "flax is not installed (Flax Linen targets need it). Fix: install flax>=0.10"
    )
    plan = plan_install(selection, report.requirements)
    assert plan.text == f"{no_flax} -m pip install 'flax>=0.10'"
    assert plan.commands == [[str(no_flax), "-m", "pip", "install", "flax>=0.10"]]
    # A plain function or an Equinox module needs no flax: the same environment is fine.
    assert cache.check(selection, "function", "cpu").ok
    assert cache.check(selection, "equinox", "cpu").ok
    assert not cache.check(selection, "nnx", "cpu").ok


def test_the_probe_is_cached_by_interpreter_until_its_site_packages_change(no_flax: Path) -> None:
    cache = EnvironmentCache()
    selection = Selection(str(no_flax), interpreters.CLIENT)
    first = cache.check(selection, "linen", "cpu")
    second = cache.check(selection, None, "cpu")
    assert (first.cached, second.cached, cache.runs) == (False, True, 1)
    assert cache.check(selection, None, "cpu", refresh=True).cached is False and cache.runs == 2
    (site_of(no_flax.parent.parent) / "something_new").mkdir()  # what an install does to the folder
    assert cache.check(selection, None, "cpu").cached is False and cache.runs == 3
    assert cache.check(selection, None, "cpu").cached is True and cache.runs == 3


def test_a_broken_interpreter_is_reported_not_raised(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'no python here' >&2\nexit 3\n")
    fake.chmod(0o755)
    report = EnvironmentCache().check(Selection(str(fake), interpreters.RECIPE), None, "cpu")
    assert not report.ok
    assert report.errors[0].message == f"{fake} could not be checked (exit status 3: no python here)"


def _probe(**packages: str | None) -> Probe:
    base: dict[str, str | None] = {"jax": "0.10.2", "jaxlib": "0.10.2", "flax": None, "equinox": None, "pip": "24"}
    base.update(packages)
    return Probe("/p/python", "3.11.7", (3, 11, 7), "/p", base, [], [], [])


def test_versions_against_the_supported_range() -> None:
    sel = Selection("/p/python", interpreters.OWN)
    [old] = evaluate(sel, _probe(jax="0.4.26", jaxlib="0.4.30"), [], "cpu")
    assert (old.package, old.requirement) == ("jax", "jax[cpu]>=0.4.30")
    assert old.message == "jax 0.4.26 is older than the supported 0.4.30"
    [missing] = evaluate(sel, _probe(jaxlib=None), [], "cpu")
    assert missing.message == "jaxlib is not installed" and missing.requirement == "jax[cpu]>=0.4.30"
    [newer] = evaluate(sel, _probe(jax="0.11.0"), [], "cpu")
    assert newer.severity == "warning" and "newer than the tested 0.10.2" in newer.message
    [equinox] = evaluate(sel, _probe(equinox="0.10.1"), ["equinox"], "cpu")
    assert equinox.requirement == "equinox>=0.11"
    old_python = Probe("/p/python", "3.9.18", (3, 9, 18), "/p", _probe().packages, [], [], [])
    assert evaluate(sel, old_python, [], "cpu")[0].message == "Python 3.9.18 is older than the supported 3.10"


def test_cuda_needs_a_cuda_jaxlib_and_a_driver() -> None:
    sel = Selection("/p/python", interpreters.OWN)
    [no_gpu] = evaluate(sel, _probe(), [], "cuda:0", driver=None)
    assert no_gpu.message.startswith(
        "device cuda:0 needs a CUDA build of jaxlib, but /p/python has only the backends [cpu]"
    )
    assert "never falls back to the CPU" in no_gpu.message and no_gpu.requirement is None
    [installable] = evaluate(sel, _probe(), [], "cuda:1", driver="/dev/nvidia0")
    assert installable.requirement == "jax[cuda12]>=0.4.30"
    with_plugin = Probe(
        "/p/python", "3.11.7", (3, 11, 7), "/p", _probe().packages, ["jax-cuda12-plugin==0.10.2"], [], []
    )
    assert with_plugin.backends == ["cpu", "cuda"]
    assert evaluate(sel, with_plugin, [], "cuda:0", driver="/dev/nvidia0") == []
    [no_driver] = evaluate(sel, with_plugin, [], "cuda:0", driver=None)
    assert "shows no NVIDIA driver" in no_driver.message


def test_a_conda_environment_gets_the_conda_command(tmp_path: Path) -> None:
    prefix = tmp_path / "envs" / "ml"
    python = _python_in(prefix)
    (prefix / "conda-meta").mkdir()
    conda = tmp_path / "conda"
    conda.write_text("#!/bin/sh\n")
    conda.chmod(0o755)
    sel = Selection(str(python), interpreters.CONDA)
    plan = plan_install(sel, ["jax[cpu]>=0.4.30", "flax>=0.10"], environ={"CONDA_EXE": str(conda)})
    assert plan.tool == "conda"
    assert (
        plan.text
        == f"{conda} install --yes --prefix {prefix} -c conda-forge 'jax>=0.4.30' 'jaxlib>=0.4.30' 'flax>=0.10'"
    )
    # No conda executable known: pip, in that environment's own interpreter.
    assert plan_install(sel, ["flax>=0.10"], environ={"PATH": ""}).commands == [
        [str(python), "-m", "pip", "install", "flax>=0.10"]
    ]
    # No pip in it: ensurepip first.
    assert plan_install(sel, ["flax>=0.10"], has_pip=False, environ={"PATH": ""}).text == (
        f"{python} -m ensurepip --upgrade && {python} -m pip install 'flax>=0.10'"
    )


def test_limits_settings_take_positive_integers_only() -> None:
    from jaxlsp.worker.protocol import DEFAULT_LIMITS, resolve_limits
    from jaxlsp.worker.tracing.limits import check_bytes

    assert resolve_limits({"equations": 5, "values": -1, "bytes": True}) == {**DEFAULT_LIMITS, "equations": 5}
    assert resolve_limits(None) == DEFAULT_LIMITS
    data = b'{"ok": true, "graph": {}}'
    assert check_bytes(data, None) is data and check_bytes(data, {"bytes": len(data)}) is data
    assert b'"kind": "refused"' in check_bytes(data, {"bytes": len(data) - 1})


def test_the_probe_outlives_the_process_on_disk(no_flax: Path) -> None:
    from jaxlsp.capture.environment.compatibility import disk_cache_path

    selection = Selection(str(no_flax), interpreters.CLIENT)
    first = EnvironmentCache()
    assert first.check(selection, "linen", "cpu").cached is False and first.runs == 1
    assert disk_cache_path().is_file() and str(disk_cache_path()).startswith(os.environ["XDG_CACHE_HOME"])
    second = EnvironmentCache()  # another process, as the next `jaxlsp trace` is
    report = second.check(selection, "linen", "cpu")
    assert report.cached is True and second.runs == 0 and report.probe.packages["flax"] is None
    (site_of(no_flax.parent.parent) / "installed_since").mkdir()  # the environment changed
    third = EnvironmentCache()
    assert third.check(selection, "linen", "cpu").cached is False and third.runs == 1
    third.forget(str(no_flax))
    assert EnvironmentCache().check(selection, None, "cpu").cached is False
    disk_cache_path().write_text("{not json")  # a damaged cache is only a miss
    assert EnvironmentCache().check(selection, None, "cpu").cached is False
