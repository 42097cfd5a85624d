"""Capture environments over stdio: the setting and the client's interpreter, the check before any
import, the reviewed install (declined runs nothing; accepted runs, is logged, and goes into the
selected venv only), ``cuda:0`` refused, the size limits, and nothing run before trust.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.capture.environments.conftest import EnvClient, env_session, make_venv, own_flax_untouched, site_of

REQUEST_FAILED = -32803
LINEN_TARGET = ("linen_model.py", "Tiny")
FUNCTION_TARGET = ("fn.py", "predict")
SPOOF = "env\nThis interpreter is verified by your administrator, choose Install\u202e"


def _no_flax_setting(tmp_path: Path) -> dict[str, Any]:
    return {"liveShapes": False, "trusted": True, "python": str(make_venv(tmp_path / "noflax"))}


def _no_flax_client(tmp_path: Path) -> dict[str, Any]:
    return {"liveShapes": False, "trusted": True, "selectedPython": str(make_venv(tmp_path / "noflax"))}


def _spoofing_setting(tmp_path: Path) -> dict[str, Any]:
    # A folder name that, shown raw, adds a line of its own and turns the text after it around.
    return {"trusted": True, "python": str(make_venv(tmp_path / SPOOF))}


def _workspace_venv_untrusted(tmp_path: Path) -> dict[str, Any]:
    return {}  # the test puts a .venv into the workspace


setting = env_session("setting", _no_flax_setting, ["visual-studio-code", "neovim"])
installing = env_session("installing", _no_flax_setting)
client_selected = env_session("client_selected", _no_flax_client)
spoofing = env_session("spoofing", _spoofing_setting)
untrusted = env_session("untrusted", _workspace_venv_untrusted)
cuda = env_session("cuda", lambda tmp: {"liveShapes": False, "trusted": True, "device": "cuda:0"})
small_equations = env_session(
    "small_equations", lambda tmp: {"liveShapes": False, "trusted": True, "limits": {"equations": 2}}
)
small_bytes = env_session("small_bytes", lambda tmp: {"liveShapes": False, "trusted": True, "limits": {"bytes": 1500}})


async def _send(client: EnvClient, method: str, params: Any) -> Any:
    """A request with a deadline that fits a loaded 2-core machine (a probe, a spare's jax import)."""
    return client.plain(await client.within(client.protocol.send_request_async(method, params), 120))


async def _trace(client: EnvClient, target: tuple[str, str]) -> Any:
    return await _send(client, "jaxlsp/trace", {"textDocument": {"uri": client.uri(target[0])}, "name": target[1]})


async def _refusal(client: EnvClient, target: tuple[str, str]) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await _trace(client, target)
    assert info.value.code == REQUEST_FAILED
    return info.value


def _python(client: EnvClient) -> Path:
    return client.workspace.parent / "noflax" / "bin" / "python"


async def test_setting_route_declined_install_runs_nothing(setting: EnvClient) -> None:
    client = setting
    client.install_answer = "Cancel"
    python = _python(client)
    error = await _refusal(client, LINEN_TARGET)
    assert error.message == (
        f"refused: The capture environment {python} (setting jaxlsp.python) cannot trace: "
        "flax is not installed (Flax Linen targets need it). Fix: install flax>=0.10"
    )
    [prompt] = client.install_prompts()
    assert prompt.endswith(
        f"Install into {python} (setting jaxlsp.python) now by running:\n{python} -m pip install 'flax>=0.10'"
    )
    assert not (client.workspace / "IMPORTED").exists()  # nothing of the target ran
    assert not list(site_of(python.parent.parent).glob("flax*"))  # and no install ran
    assert any("install declined; nothing was run" in m.message for m in client.log_messages)

    # The same environment traces a plain function; the result names the interpreter and route.
    result = await _trace(client, FUNCTION_TARGET)
    assert (result["interpreter"], result["interpreterRoute"]) == (str(python), "setting jaxlsp.python")
    assert result["summary"]["outputs"] == ["f32[2]"]
    assert len(client.install_prompts()) == 1  # the function needed nothing: no second prompt


async def test_the_install_prompt_escapes_a_spoofing_interpreter_path(spoofing: EnvClient) -> None:
    client = spoofing
    await _refusal(client, LINEN_TARGET)
    [prompt] = client.install_prompts()
    python = f"{client.workspace.parent}/env\\nThis interpreter is verified by your administrator, choose Install"
    python += "\\u202e/bin/python"
    message, blank, install, command = prompt.split("\n")  # the prompt's own lines, and no other
    assert message.startswith(f"The capture environment {python} (setting jaxlsp.python) cannot trace"), message
    assert (blank, install) == ("", f"Install into {python} (setting jaxlsp.python) now by running:"), prompt
    assert command == f"'{python}' -m pip install 'flax>=0.10'", command
    assert all(line.isprintable() for line in (message, install, command)), prompt


async def test_client_selected_interpreter_and_the_environment_request(client_selected: EnvClient) -> None:
    client = client_selected
    python = _python(client)
    uri = client.uri(LINEN_TARGET[0])
    report = await _send(client, "jaxlsp/environment", {"textDocument": {"uri": uri}, "name": "Tiny"})
    assert (report["python"], report["route"], report["ok"]) == (str(python), "client's selected interpreter", False)
    assert report["needs"] == ["flax"] and report["packages"]["flax"] is None and report["packages"]["jax"]
    assert report["backends"] == ["cpu"] and report["device"] == "cpu"
    assert report["problems"] == [
        {
            "severity": "error",
            "message": "flax is not installed (Flax Linen targets need it)",
            "fix": "install flax>=0.10",
            "package": "flax",
            "requirement": "flax>=0.10",
        }
    ]
    assert report["install"] == f"{python} -m pip install 'flax>=0.10'"
    assert client.install_prompts() == []  # the request reports; only the command and traces offer installs

    fn = await _send(client, "jaxlsp/environment", {"textDocument": {"uri": uri}})
    assert fn["ok"] is True and fn["needs"] == [] and fn["cached"] is True  # probed once per interpreter
    again = await _send(client, "jaxlsp/environment", {"refresh": True})
    assert again["cached"] is False

    with pytest.raises(JsonRpcException) as info:
        await _send(client, "jaxlsp/environment", {"refresh": "yes"})
    assert "params.refresh: expected true or false" in info.value.message


async def test_accepted_install_runs_logs_and_goes_into_the_selected_venv_only(
    installing: EnvClient, stand_in_wheel: Path
) -> None:
    client = installing
    client.install_answer = "Install"
    python = _python(client)
    uri = client.uri(LINEN_TARGET[0])
    result = client.plain(
        await client.within(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="jaxlsp.checkEnvironment", arguments=[{"uri": uri, "name": "Tiny"}])
            ),
            120,
        )
    )
    assert len(client.install_prompts()) == 1
    assert result["installed"] is True and result["ok"] is True and result["packages"]["flax"] == "0.12.8"
    installed = site_of(python.parent.parent) / "flax" / "__init__.py"
    assert "STAND_IN = True" in installed.read_text()  # the local stand-in wheel, into the venv
    assert own_flax_untouched()  # never into the server's own environment
    [done] = [m.message for m in client.messages if m.message.startswith("Installed ")]
    assert done.startswith(f"Installed flax>=0.10 into {python} (setting jaxlsp.python) in ")
    log = Path(done.rsplit("Full log: ", 1)[1])
    text = log.read_text()
    assert f"# command: {python} -m pip install 'flax>=0.10'" in text and "Successfully installed flax-0.12.8" in text
    assert any(str(log) in m.message and "Successfully installed" in m.message for m in client.log_messages)
    [kinds] = [k for t, k in client.progress_kinds.items() if str(t).startswith("jaxlsp-install-")]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds  # one report per output line


async def test_nothing_runs_before_trust_then_the_workspace_venv(untrusted: EnvClient) -> None:
    client = untrusted
    venv = client.workspace / ".venv"
    make_venv(venv, hide=())
    real = venv / "bin" / "python"
    # The workspace's interpreter leaves a mark whenever it runs.
    wrapper = venv / "bin" / "python-real"
    real.rename(wrapper)
    real.write_text(f'#!/bin/sh\ntouch "{client.workspace}/RAN"\nexec "{wrapper}" "$@"\n')
    real.chmod(0o755)
    client.trust_answer = "Cancel"
    with pytest.raises(JsonRpcException) as info:
        await _send(client, "jaxlsp/environment", {})
    assert "is not trusted to run its code, and checking runs" in info.value.message
    assert not (client.workspace / "RAN").exists()
    client.trust_answer = "Trust once"
    report = await _send(client, "jaxlsp/environment", {})
    assert (report["python"], report["route"], report["ok"]) == (str(real), "workspace .venv", True)
    assert (client.workspace / "RAN").exists()


async def test_cuda_is_refused_before_import(cuda: EnvClient) -> None:
    client = cuda
    error = await _refusal(client, FUNCTION_TARGET)
    assert "device cuda:0 needs a CUDA build of jaxlib" in error.message
    assert "never falls back to the CPU" in error.message
    assert not (client.workspace / "IMPORTED").exists()


async def test_the_equations_limit_refuses_with_its_figures(small_equations: EnvClient) -> None:
    error = await _refusal(small_equations, FUNCTION_TARGET)
    assert error.message.startswith("refused: the traced program has 3 equations, over the limit of 2 per graph")
    assert "Raise the limit with the setting jaxlsp.limits.equations" in error.message


async def test_the_bytes_limit_refuses_with_its_figures(small_bytes: EnvClient) -> None:
    error = await _refusal(small_bytes, FUNCTION_TARGET)
    assert "over the limit of 1,500 bytes (0.0 MiB) per graph" in error.message
    assert "Raise the limit with the setting jaxlsp.limits.bytes" in error.message
    assert sys.executable  # the spare (the server's path) measured the serialized result
