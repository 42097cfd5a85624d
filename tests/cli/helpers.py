"""Running the ``jaxlsp`` command line as a user does, for the CLI tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from jaxlsp.graph import io
from tests.deadlines import scaled


def run(args: list[str], cwd: Path, timeout: float = scaled(300)) -> subprocess.CompletedProcess[str]:
    """``python -m jaxlsp ARGS`` in ``cwd``, its output captured, within ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, "-m", "jaxlsp", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def expanded(path: Path) -> dict[str, Any]:
    """The version 1 JSON of the graph file at ``path`` (``trace -o`` writes the compact form):
    read as every reader does (``io.read`` takes both forms), written as ``export --format json``
    writes it."""
    return io.to_json(io.read(path))
