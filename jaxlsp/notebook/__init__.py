"""Jupyter notebooks (``.ipynb``) as Python modules: cells, IPython lines neutralised, positions
mapped between a notebook's (cell, line) and its module's line.

Stdlib only: discovery, the CLI, the server and the capture worker (which runs in the user's
interpreter, staged like ``jaxlsp.graph``) all read notebooks through this package, so the module
a lens was computed on is the module the worker runs.
"""

from jaxlsp.notebook.cells import (
    MAX_NOTEBOOK_BYTES,
    SUFFIX,
    Block,
    Cell,
    Module,
    NotebookError,
    build_module,
    cells_shown,
    find_blocks,
    is_notebook,
    parse_cells,
    read_module,
    source_digest,
)
from jaxlsp.notebook.magics import Neutralised, neutralise

__all__ = [
    "MAX_NOTEBOOK_BYTES",
    "SUFFIX",
    "Block",
    "Cell",
    "Module",
    "Neutralised",
    "NotebookError",
    "build_module",
    "cells_shown",
    "find_blocks",
    "is_notebook",
    "neutralise",
    "parse_cells",
    "read_module",
    "source_digest",
]
