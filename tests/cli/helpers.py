"""Running the ``jaxlsp`` command line as a user does, for the CLI tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from jaxlsp.graph import io
from tests import deadlines


def run(args: list[str], cwd: Path, seconds: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m jaxlsp ARGS`` in ``cwd``, its output captured, within a deadline of ``seconds``
    on the reference machine (``tests/deadlines.py``: it follows this machine while it waits)."""
    return deadlines.run(
        [sys.executable, "-m", "jaxlsp", *args], seconds, cwd=cwd, capture_output=True, text=True, check=False
    )


def expanded(path: Path) -> dict[str, Any]:
    """The version 1 JSON of the graph file at ``path`` (``trace -o`` writes the compact form):
    read as every reader does (``io.read`` takes both forms), written as ``export --format json``
    writes it."""
    return io.to_json(io.read(path))
