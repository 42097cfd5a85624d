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
    """One page in headless Chromium; each call sends one command and waits for its answer."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, cmd: str, timeout: float = 60, **args: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
        await self.process.stdin.drain()
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not line:
            raise AssertionError(f"the browser driver exited during {cmd}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise AssertionError(f"{cmd} {args}: {answer['error']}\npage log: {answer.get('logs')}")
        return answer.get("value")

    async def eval(self, expr: str) -> Any:
        return await self.send("eval", expr=expr)

    async def wait(self, expr: str, timeout: float = 30) -> Any:
        """Poll ``expr`` in the page until it is truthy (a deadline, not a pace); its value."""
        return await self.send("wait", timeout=timeout + 10, expr=expr, ms=int(timeout * 1000))

    async def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        await self.send("screenshot", path=str(path))
        return path


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    require_browser()
    node = shutil.which("node")
    assert node is not None
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "JAXLSP_CHROMIUM": CHROMIUM},
        cwd=WEB,
        limit=64 * 1024 * 1024,  # answers carry exported images
    )
    assert process.stdout is not None
    ready = await asyncio.wait_for(process.stdout.readline(), 60)
    assert json.loads(ready)["ok"], ready
    page = Browser(process)
    try:
        yield page
    finally:
        try:
            await page.send("close", timeout=20)
        except Exception:
            process.kill()
        await process.wait()


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def traced(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    """A VS Code-like client on a trusted copy of ``workspace/`` (no trace yet)."""
    root = tmp_path / "workspace"
    shutil.copytree(WORKSPACE, root)
    lsp.client_name = request.param
    lsp.workspace = root.resolve()
    params = initialize_params(request.param, lsp.workspace)
    params.initialization_options = {"jaxlsp": {"trusted": True}}
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
