"""Write a recipe and a target file into a temporary folder; read problems back as short lines."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.recipes import NeedsInput, Recipe, RecipeError, Resolved, load_recipe, select_profile

HEADER = 'version = 1\n\n[profiles.p]\ntarget = "model.py::f"\n'


def write(root: Path, text: str, *, dedent: bool = True) -> Path:
    (root / "model.py").write_text("def f(*args, **kwargs):\n    return args\n")
    path = root / "jaxlsp.toml"
    path.write_text(textwrap.dedent(text) if dedent else text)
    return path


def load(root: Path, text: str) -> Recipe:
    return load_recipe(write(root, text))


def problems(root: Path, text: str) -> list[str]:
    """``["LINE: key.path: message", ...]`` of a recipe that must fail."""
    with pytest.raises(RecipeError) as info:
        load(root, text)
    return [f"{p.line}: {p.key_path}: {p.message}" for p in info.value.problems]


def profile(root: Path, body: str, name: str = "p") -> dict[str, Any]:
    """The resolved profile of ``HEADER + body`` (profile ``p``)."""
    recipe = load(root, HEADER + textwrap.dedent(body))
    result = select_profile(recipe, root / "model.py", "f", name)
    assert isinstance(result, Resolved), result
    return dict(result.profile)


def needs(root: Path, body: str) -> NeedsInput:
    recipe = load(root, HEADER + textwrap.dedent(body))
    result = select_profile(recipe, root / "model.py", "f", "p")
    assert isinstance(result, NeedsInput), result
    return result


def inputs(root: Path, body: str) -> list[Any]:
    """The resolved positional input specs of ``HEADER + body``."""
    return list(profile(root, body)["inputs"]["args"])
