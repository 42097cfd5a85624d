"""The jupyter-lsp spec of jaxlsp (entry point ``jupyter_lsp_spec_v1``): ``jaxlsp serve`` for
Python files and notebooks.

jupyter-lsp calls :func:`jaxlsp` with its ``LanguageServerManager`` when the Jupyter server
starts; an empty answer (jaxlsp not installed where Jupyter runs) leaves jaxlsp out. The server
reads notebooks from their documents' text, so jupyter-lsp need not write virtual documents to
disk (``requires_documents_on_disk: false``): the notebook's document has the ``.ipynb`` file's URI.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from typing import Any

KEY = "jaxlsp"


def command() -> list[str] | None:
    """``jaxlsp serve`` as this environment would run it, or None when jaxlsp is not installed.

    ``-I``: jupyter-lsp starts the server in the Jupyter server's working directory, usually the
    notebooks' folder, which must not be on ``sys.path`` (a folder's own ``jaxlsp/`` or
    ``lsprotocol.py`` would load into the server: docs/security.md)."""
    if importlib.util.find_spec("jaxlsp") is not None:
        return [sys.executable, "-I", "-m", "jaxlsp", "serve"]
    found = shutil.which("jaxlsp")
    return [found, "serve"] if found else None


def jaxlsp(manager: Any = None) -> dict[str, dict[str, Any]]:
    argv = command()
    if argv is None:
        return {}
    return {
        KEY: {
            "version": 2,
            "argv": argv,
            "languages": ["python"],
            "mime_types": ["text/python", "text/x-ipython", "text/x-python"],
            "display_name": "jaxlsp",
            "requires_documents_on_disk": False,
        }
    }
