"""Notebooks as Jupyter saves them (nbformat 4.5: ids, outputs, sources as lists of lines)."""

from __future__ import annotations

import json
from pathlib import Path

# What a plot or a print leaves in a saved notebook: outputs are read with the notebook, then ignored.
PNG_OUTPUT = {
    "output_type": "display_data",
    "metadata": {},
    "data": {"text/plain": ["<Figure size 640x480 with 1 Axes>"], "image/png": "iVBORw0KGgo" * 50},
}
STREAM_OUTPUT = {"output_type": "stream", "name": "stdout", "text": ["step 0: loss 2.31\n", "step 100: loss 0.52\n"]}


def notebook_json(cells: list[tuple[str, str]], language: str = "python") -> str:
    """``cells`` as ``(kind, source)`` pairs; code cells get an execution count and an output."""
    out: list[dict[str, object]] = []
    for i, (kind, source) in enumerate(cells):
        cell: dict[str, object] = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}}
        cell["source"] = source.splitlines(keepends=True)
        if kind == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [STREAM_OUTPUT] if i % 2 else []
        out.append(cell)
    metadata = {
        "kernelspec": {"display_name": language, "language": language, "name": language},
        "language_info": {"name": language},
    }
    return json.dumps({"cells": out, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    path.write_text(notebook_json(cells), encoding="utf-8")
    return path
