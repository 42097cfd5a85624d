"""jaxlsp in JupyterLab: the prebuilt labextension ("Trace graph" in the cell toolbar and the
command palette) and the jupyter-lsp spec that starts ``jaxlsp serve`` for Python notebooks."""

from __future__ import annotations

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jaxlsp-jupyterlab"}]
