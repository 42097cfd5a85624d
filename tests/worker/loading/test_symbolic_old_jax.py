"""Symbolic dimensions where ``import jax`` does not load ``jax.export`` (JAX before 0.8; GPJax's
lock file pins 0.7.1, inside the supported range): every symbolic trace there, a recipe's
``symbolic`` or learned calls that disagree on a size, failed with ``AttributeError: module 'jax'
has no attribute 'export'``."""

from __future__ import annotations

from pathlib import Path

import jax
import pytest

from jaxlsp.worker.core.failures import Workspace
from jaxlsp.worker.loading.inputs import InputBuilder
from jaxlsp.worker.loading.loading import Loader


def test_symbolic_dimensions_are_made_where_jax_export_is_not_an_attribute_of_jax(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "model.py"
    target.write_text("")
    monkeypatch.delattr(jax, "export")  # as after a bare ``import jax`` before JAX 0.8
    builder = InputBuilder(Loader(str(target), Workspace(str(tmp_path))), ["n"], seed=0)
    assert str(builder.dim("n")) == "n"
    assert str(builder.dim("2*n")) == "2*n"
