"""Real VS Code for the extension's tests: code-server (installed by ``make code-server`` from the
npm registry into ``build/code-server/VERSION``) with the built ``build/jaxlsp.vsix``, on
127.0.0.1 with a password and a fresh user-data folder, driven in Debian's headless Chromium by
the viewer tests' driver (``editors/web/test/driver.mjs``, playwright-core).

Outside CI a missing piece skips these tests; under ``CI=true`` it fails them. Screenshots of
every step land in ``build/test-artifacts/vscode/<test>/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import missing_tool
from tests.deadlines import scaled
from tests.viewer.conftest import CHROMIUM, WEB, Browser, close_browser, start_browser

ROOT = Path(__file__).resolve().parents[3]
VERSION = re.search(r"^CODE_SERVER_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)  # type: ignore[union-attr]
CODE_SERVER = ROOT / "build" / "code-server" / VERSION
ENTRY = CODE_SERVER / "node_modules" / "code-server" / "out" / "node" / "entry.js"
VSIX = ROOT / "build" / "jaxlsp.vsix"
ARTIFACTS = ROOT / "build" / "test-artifacts" / "vscode"
VENV_BIN = Path(sys.executable).parent
SYSTEM_PATH = os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin"))

# What a user who just installed VS Code would change least: no welcome page, no telemetry or
# update checks, and an untrusted folder opens in restricted mode without a modal question.
USER_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    # These tests drive explicit traces; live shapes (on by default) would trace on open beside them.
    "jaxlsp.liveShapes": False,
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "security.workspace.trust.startupPrompt": "never",
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "extensions.ignoreRecommendations": True,
    "chat.disableAIFeatures": True,
    "editor.minimap.enabled": False,
}


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (make system-deps installs Debian's chromium)"
    if not ENTRY.is_file():
        return f"code-server {VERSION} is not installed in {CODE_SERVER} (make code-server)"
    if not VSIX.is_file():
        return f"{VSIX} is missing (make vscode builds it)"
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        return "editors/web/node_modules is missing (make viewer runs npm ci)"
    return None


def require_code_server() -> None:
    reason = _missing()
    if reason is not None:
        missing_tool(f"the VS Code tests need code-server: {reason}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Workbench(Browser):
    """The browser page on code-server: numbered screenshots of each step (one on any failed
    command too), and the workbench as a user drives it."""

    def __init__(self, process: asyncio.subprocess.Process, shots: Path, log: Callable[[], str] | None = None) -> None:
        super().__init__(process, shots)
        self.count = 0
        self.log = log  # the extension's output channel (the server's log with it)

    async def failed(self, cmd: str) -> str:
        """What a failed command's report carries: its screenshot, and the end of the extension's
        log, which is all a CI run's output keeps of a failure (the artifacts stay on its machine)."""
        if cmd == "screenshot":
            return ""
        said = f"\nscreenshot: {await self.screenshot(f'failed-{cmd}')}"
        if self.log is not None:
            said += "\nthe extension's log, its end:\n" + self.log()[-4000:]
        return said

    # scaled inside: seconds on the reference machine, scaled() below
    async def wait(self, expr: str, timeout: float = 60, frame: str | None = None) -> Any:
        return await super().wait(expr, timeout, frame)

    # scaled inside: seconds on the reference machine, scaled() below
    async def wait_for(self, selector: str, has_text: str | None = None, timeout: float = 60, **args: Any) -> None:
        timeout = scaled(timeout)  # every wait here is a deadline in seconds on the reference machine
        await self.send(
            "waitFor", timeout=timeout + 15, selector=selector, hasText=has_text, ms=int(timeout * 1000), **args
        )

    # scaled inside: seconds on the reference machine, scaled() below
    async def click(self, selector: str, has_text: str | None = None, timeout: float = 30, **args: Any) -> None:
        timeout = scaled(timeout)
        await self.send(
            "click", timeout=timeout + 15, selector=selector, hasText=has_text, ms=int(timeout * 1000), **args
        )

    async def texts(self, selector: str, frame: str | None = None) -> list[str]:
        return list(await self.send("texts", selector=selector, frame=frame))

    async def screenshot(self, name: str) -> Path:
        self.count += 1
        return await super().screenshot(f"{self.count:02d}-{name}.png")

    # -- the workbench, as a user drives it ---------------------------------------------------
    async def quick_open(self, name: str) -> None:
        """Ctrl+P, the file's name, Enter: the file opens in the active editor group."""
        await self.send("press", key="Control+P")
        await self.wait_for(".quick-input-widget input")
        await self.send("type", text=name)
        # The row must be the focused one: Enter while the list is still being filled (a row shown,
        # none focused yet) accepts nothing and leaves the picker open.
        await self.wait_for(".quick-input-list .monaco-list-row.focused", has_text=name)
        await self.send("press", key="Enter")
        await self.wait_for(".tab.active", has_text=name)

    async def command(self, title: str) -> None:
        """A command from the palette (F1), by its exact title (others may start the same)."""
        await self.send("press", key="F1")
        await self.wait_for(".quick-input-widget input")
        await self.send("type", text=title)
        # A row's aria-label is its title, then ", " and its keybinding when it has one.
        row = ".quick-input-list .monaco-list-row"
        await self.click(f'{row}[aria-label="{title}"], {row}[aria-label^="{title}, "]')

    async def notifications(self) -> list[str]:
        return await self.texts(".notifications-toasts .notification-list-item-message")

    async def status_items(self) -> list[str]:
        return [t.strip() for t in await self.texts(".statusbar-item") if t.strip()]


class CodeServer:
    """A code-server process with the built extension, a fresh user-data folder and a password."""

    def __init__(self, tmp: Path, venv_on_path: bool = True) -> None:
        self.tmp = tmp
        # False: a user with nothing of jaxlsp installed (the system's folders only on PATH), for
        # the server the extension carries (tests/clients/vscode/test_bundled.py).
        self.venv_on_path = venv_on_path
        self.home = tmp / "home"
        self.user_data = tmp / "user-data"
        self.extensions = tmp / "extensions"
        self.config = tmp / "code-server.yaml"
        self.password = secrets.token_urlsafe(24)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "code-server.log"
        self.process: asyncio.subprocess.Process | None = None

    def env(self) -> dict[str, str]:
        # The venv's bin first on PATH: the extension's default launch finds the `jaxlsp` script
        # there, as after `pip install jaxlsp` into an environment on PATH.
        path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}" if self.venv_on_path else SYSTEM_PATH
        env = {
            **os.environ,
            "PATH": path,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.tmp / "xdg" / "config"),
            "XDG_CACHE_HOME": str(self.tmp / "xdg" / "cache"),
            "XDG_DATA_HOME": str(self.tmp / "xdg" / "data"),
            "PASSWORD": self.password,
        }
        env.pop("VIRTUAL_ENV", None)
        return env

    def argv(self, *extra: str) -> list[str]:
        node = shutil.which("node")
        assert node is not None
        return [
            node,
            str(ENTRY),
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
            "--config",
            str(self.config),
            *extra,
        ]

    async def start(self, settings: dict[str, Any] | None = None) -> None:
        for folder in (self.home, self.user_data / "User", self.extensions):
            folder.mkdir(parents=True, exist_ok=True)
        # VS Code takes the extension host's environment from a login shell, which resets PATH
        # (/etc/profile): put the venv's bin there the way a user's profile would (pipx's
        # ~/.local/bin, an activated conda base).
        profile = f'export PATH="{VENV_BIN}:$PATH"\n' if self.venv_on_path else f'export PATH="{SYSTEM_PATH}"\n'
        (self.home / ".profile").write_text(profile)
        (self.user_data / "User" / "settings.json").write_text(
            json.dumps({**USER_SETTINGS, **(settings or {})}, indent=1)
        )
        self.config.write_text("")  # nothing from ~/.config/code-server
        install = await asyncio.create_subprocess_exec(
            *self.argv("--install-extension", str(VSIX)),
            env=self.env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(install.communicate(), scaled(120))
        assert install.returncode == 0 and b"successfully installed" in out, out.decode(errors="replace")
        log = self.log.open("wb")
        self.process = await asyncio.create_subprocess_exec(
            *self.argv(
                "--bind-addr",
                f"127.0.0.1:{self.port}",
                "--auth",
                "password",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-getting-started-override",
                "--ignore-last-opened",
            ),
            env=self.env(),
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
        # Listening: its log says so (a deadline, not a pace).
        for _ in range(600):
            if "HTTP server listening" in self.log.read_text(errors="replace"):
                return
            if self.process.returncode is not None:
                break
            await asyncio.sleep(0.1)
        raise AssertionError(f"code-server did not start:\n{self.log.read_text(errors='replace')[-3000:]}")

    def extension_log(self) -> str:
        """The extension's output channel ("jaxlsp"), as code-server writes it to its log folder."""
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.user_data.glob("logs/**/*jaxlsp*.log")))

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), scaled(20))
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


Open = Callable[..., Awaitable[tuple[CodeServer, Workbench]]]
VIEWPORT = (1600, 1000)


@pytest.fixture
async def vscode(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Open]:
    """``await vscode(folder, settings, viewport, venv_on_path)``: code-server on ``folder``, logged
    in, the workbench up."""
    require_code_server()
    servers: list[CodeServer] = []
    drivers: list[asyncio.subprocess.Process] = []
    shots = ARTIFACTS / request.node.name
    shutil.rmtree(shots, ignore_errors=True)

    async def open_(
        folder: Path,
        settings: dict[str, Any] | None = None,
        viewport: tuple[int, int] = VIEWPORT,
        venv_on_path: bool = True,
    ) -> tuple[CodeServer, Workbench]:
        server = CodeServer(tmp_path / f"code-server-{len(servers)}", venv_on_path)
        servers.append(server)
        await server.start(settings)
        process = await start_browser(viewport)
        drivers.append(process)
        page = Workbench(process, shots, server.extension_log)
        await page.send("goto", url=f"{server.url}/login")
        await page.send("click", selector="input[type=password]")
        await page.send("type", text=server.password, delay=0)
        await page.send("press", key="Enter")
        # scaled inside: seconds on the reference machine, scaled() below
        await page.wait("location.pathname === '/' || location.pathname.endsWith('/')", timeout=30)
        await page.send("goto", timeout=scaled(90), url=f"{server.url}/?folder={folder}", ms=int(scaled(60) * 1000))
        # scaled inside: seconds on the reference machine, scaled() below
        await page.wait_for(".monaco-workbench .part.editor", timeout=90)
        return server, page

    try:
        yield open_
    finally:
        for process in drivers:
            await close_browser(process)
        for index, server in enumerate(servers):
            await server.stop()
            # The logs beside the screenshots: what code-server and the extension said.
            shots.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(server.log, shots / f"code-server-{index}.log")
            (shots / f"jaxlsp-{index}.log").write_text(server.extension_log())
