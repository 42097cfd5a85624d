"""docs/recipes.md tracks the code: its TOML examples load, its dtype and key lists are the code's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxlsp.recipes import NeedsInput, Resolved, parse_recipe
from jaxlsp.recipes.schema import DTYPES, GENERATORS, PROFILE_KEYS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "recipes.md").read_text()
EXAMPLES = re.findall(r"```toml\n(.*?)```", DOC, re.S)


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("text", EXAMPLES)
def test_every_example_loads_and_resolves(text: str, tmp_path: Path) -> None:
    recipe = parse_recipe(text, tmp_path / "jaxlsp.toml")
    assert recipe.results
    for result in recipe.results.values():
        assert isinstance(result, Resolved | NeedsInput)
        if isinstance(result, NeedsInput):
            assert all(item["kind"] == "dimension" for item in result.missing)


def test_every_key_dtype_and_generator_is_documented() -> None:
    for key in PROFILE_KEYS:
        assert f"| `{key}` |" in DOC, key
    for dtype in DTYPES:
        assert f"`{dtype}`" in DOC, dtype
    for kind in GENERATORS:
        assert f'{{ kind = "{kind}"' in DOC, kind
