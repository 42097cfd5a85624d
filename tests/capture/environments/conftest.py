"""Fixtures for capture environments: a second venv without flax, a stand-in wheel, an LSP client
that answers install prompts.

The second venv takes well under a second and needs no network: ``python -m venv --without-pip``
and then a symlink, in its site-packages, to every entry of the test runner's site-packages
except flax's. jax, pip and the rest are the runner's own files; flax cannot be imported and
``importlib.metadata`` does not list it, exactly as in a venv where it was never installed.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig

from tests.server.conftest import SERVER_COMMAND, SERVER_ENV, JaxClient, initialize_params, make_client, within

WORKSPACES = Path(__file__).resolve().parents[2] / "workspaces"
MAIN_SITE = Path(sysconfig.get_paths()["purelib"])
STAND_IN_VERSION = "0.12.8"


def copy_env_workspace(dest: Path) -> Path:
    target = dest / "environments"
    shutil.copytree(WORKSPACES / "environments", target)
    return target.resolve()


def make_venv(dest: Path, hide: tuple[str, ...] = ("flax",)) -> Path:
    """A venv at ``dest`` whose site-packages links the runner's, less the ``hide`` packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = dest / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert site.is_dir(), site
    for entry in MAIN_SITE.iterdir():
        if entry.name.lower().startswith(hide) or entry.name == "__pycache__":
            continue
        (site / entry.name).symlink_to(entry)
    return dest / "bin" / "python"


def site_of(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def build_stand_in_wheel(folder: Path, name: str = "flax", version: str = STAND_IN_VERSION) -> Path:
    """A pure-Python wheel named ``name`` whose module says it is a stand-in (no build tools)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'"""A stand-in built by the jaxlsp tests."""\nSTAND_IN = True\n__version__ = "{version}"\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: jaxlsp test stand-in\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: jaxlsp-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


class EnvClient(JaxClient):
    """Answers trust prompts with ``trust_reply`` and install prompts with ``install_answer``."""

    def __init__(self) -> None:
        self.trust_reply: str | None = "Cancel"
        self.install_answer: str | None = "Cancel"
        super().__init__()

    @property  # type: ignore[override]
    def trust_answer(self) -> str | None:
        # The prompt handler records the message before it reads the answer.
        last = self.trust_prompts[-1] if self.trust_prompts else ""
        return self.trust_reply if last.startswith("Trust ") else self.install_answer

    @trust_answer.setter
    def trust_answer(self, value: str | None) -> None:
        self.trust_reply = value

    def install_prompts(self) -> list[str]:
        return [m for m in self.trust_prompts if not m.startswith("Trust ")]


# Installs read pip's own configuration from the environment, as in a terminal: here a local
# folder of wheels and no index, so the accepted install needs no network.
WHEELS = Path(tempfile.mkdtemp(prefix="jaxlsp-test-wheels-"))
INSTALL_ENV = {**SERVER_ENV, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
for var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
    INSTALL_ENV.pop(var, None)  # the routes under test are chosen by each test, not by the runner's shell
CONFIG = ClientServerConfig(
    server_command=SERVER_COMMAND, client_factory=lambda: make_client(EnvClient), server_env=INSTALL_ENV
)


@pytest.fixture(scope="session")
def stand_in_wheel() -> Path:
    return build_stand_in_wheel(WHEELS)


@pytest.fixture
def no_flax(tmp_path: Path) -> Path:
    """The interpreter of a fresh venv without flax."""
    return make_venv(tmp_path / "noflax")


def env_session(name: str, options: Any, clients: list[str] | None = None) -> Any:
    """A client on a fresh copy of the environments workspace; ``options(tmp_path)`` gives the
    ``initializationOptions.jaxlsp`` section (after making what it names, e.g. a venv)."""

    @pytest_lsp.fixture(config=CONFIG, params=clients or ["visual-studio-code"], name=name)
    async def fixture(lsp: EnvClient, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
        root = copy_env_workspace(tmp_path)
        lsp.client_name = request.param
        lsp.workspace = root
        params = initialize_params(request.param, root)
        params.initialization_options = {"jaxlsp": options(tmp_path)}
        lsp.initialize_result = await within(lsp.initialize_session(params))
        yield
        await lsp.finish()

    return fixture


def own_flax_untouched() -> bool:
    """The runner's own flax is the real one (an install never went into the server's environment)."""
    text = (MAIN_SITE / "flax" / "__init__.py").read_text(encoding="utf-8")
    return "STAND_IN" not in text and os.path.isdir(MAIN_SITE / "flax" / "linen")


@pytest.fixture(autouse=True)
def fresh_probe_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with an empty disk cache of environment checks (they count probe runs)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
