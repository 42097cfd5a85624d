"""Viewer fixtures: a headless Chromium (Debian's, driven by playwright-core through
``editors/web/test/driver.mjs``) and a real server that has traced ``workspace/model.py``.

Outside CI a missing browser or ``npm ci`` skips these tests; under ``CI=true`` it fails them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp

from tests.deadlines import scaled
from tests.server.conftest import CONFIG, JaxClient, initialize_params, within

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "editors" / "web"
DRIVER = WEB / "test" / "driver.mjs"
CHROMIUM = os.environ.get("JAXLSP_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "build" / "test-artifacts" / "viewer"
WORKSPACE = Path(__file__).resolve().parents[1] / "workspaces" / "viewer"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (make system-deps installs Debian's chromium)"
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        return "editors/web/node_modules is missing (make viewer runs npm ci)"
    return None


def require_browser() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the viewer tests need a browser under CI: {reason}")
    pytest.skip(reason)


class Browser:
    """One page in headless Chromium (``editors/web/test/driver.mjs``); each call sends one
    command and waits for its answer. ``frame="viewer"`` acts inside the frame running the viewer
    (a VS Code webview). Screenshots go to ``shots``."""

    def __init__(self, process: asyncio.subprocess.Process, shots: Path = ARTIFACTS) -> None:
        self.process = process
        self.shots = shots

    async def send(self, cmd: str, timeout: float | None = None, **args: Any) -> Any:
        """Send ``cmd`` and wait for its answer (``timeout``: seconds here, ``scaled(60)`` unless given)."""
        timeout = scaled(60) if timeout is None else timeout  # scaled as it waits, not at import
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
        await self.process.stdin.drain()
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not line:
            raise AssertionError(f"the browser driver exited during {cmd}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise AssertionError(
                f"{cmd} {args}: {answer['error']}\npage log: {answer.get('logs')}{await self.failed(cmd)}"
            )
        return answer.get("value")

    async def failed(self, cmd: str) -> str:
        """What to add to a failed command's message (a subclass takes a screenshot)."""
        return ""

    async def eval(self, expr: str, frame: str | None = None) -> Any:
        return await self.send("eval", expr=expr, frame=frame)

    # scaled inside: seconds on the reference machine, scaled() below
    async def wait(self, expr: str, timeout: float = 30, frame: str | None = None) -> Any:
        """Poll ``expr`` in the page until it is truthy (a deadline, not a pace, ``timeout`` seconds
        on the reference machine: :func:`scaled` here); its value."""
        timeout = scaled(timeout)
        return await self.send("wait", timeout=timeout + 15, expr=expr, frame=frame, ms=int(timeout * 1000))

    async def screenshot(self, name: str) -> Path:
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / name
        await self.send("screenshot", path=str(path))
        return path


async def start_browser(viewport: tuple[int, int] | None = None) -> asyncio.subprocess.Process:
    """The driver process, once it said it is ready (its Chromium is up)."""
    node = shutil.which("node")
    assert node is not None
    env = {**os.environ, "JAXLSP_CHROMIUM": CHROMIUM}
    if viewport is not None:
        env |= {"JAXLSP_VIEWPORT_WIDTH": str(viewport[0]), "JAXLSP_VIEWPORT_HEIGHT": str(viewport[1])}
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=WEB,
        limit=64 * 1024 * 1024,  # answers carry exported images
    )
    assert process.stdout is not None
    ready = await asyncio.wait_for(process.stdout.readline(), scaled(60))
    assert ready and json.loads(ready)["ok"], ready
    return process


async def close_browser(process: asyncio.subprocess.Process) -> None:
    try:
        await Browser(process).send("close", timeout=scaled(20))
    except Exception:
        process.kill()
    await process.wait()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    require_browser()
    process = await start_browser()
    try:
        yield Browser(process)
    finally:
        await close_browser(process)


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def traced(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    """A VS Code-like client on a trusted copy of ``workspace/`` (no trace yet)."""
    root = tmp_path / "workspace"
    shutil.copytree(WORKSPACE, root)
    lsp.client_name = request.param
    lsp.workspace = root.resolve()
    params = initialize_params(request.param, lsp.workspace)
    params.initialization_options = {"jaxlsp": {"liveShapes": False, "trusted": True}}
    lsp.initialize_result = await within(lsp.initialize_session(params))
    yield
    await lsp.finish()


async def trace_stack(client: JaxClient) -> str:
    """Trace ``Stack`` through the real capture worker; its trace id."""
    uri = client.uri("model.py")
    params = {"textDocument": {"uri": uri}, "name": "Stack", "profile": "stack"}
    # A cold capture on a busy machine can take longer than client.request's deadline.
    result = client.plain(await within(client.protocol.send_request_async("jaxlsp/trace", params), 180))
    assert "traceId" in result, result
    return str(result["traceId"])
