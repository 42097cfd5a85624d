"""Recipes: ``jaxlsp.toml`` read, checked (every key, with line numbers), resolved into the worker
protocol's :class:`~jaxlsp.worker.protocol.ResolvedProfile`, and proposed from discovery.

Stdlib only (but for tomlkit, which ``save`` uses to edit a file in place): no pygls, no jax.
See ``docs/recipes.md`` for the file format.
"""

from __future__ import annotations

from jaxlsp.recipes.answers import AnswerError, fill, parse_answer
from jaxlsp.recipes.problems import Problem, RecipeError, format_key_path, parse_key_path
from jaxlsp.recipes.profile import resolve_table
from jaxlsp.recipes.propose import apply_answers, propose, propose_site, propose_target
from jaxlsp.recipes.recipe import Recipe, find_recipe, load_recipe, parse_recipe, select_profile
from jaxlsp.recipes.render import render_profile, render_recipe
from jaxlsp.recipes.schema import MAX_ARRAYS, MAX_ELEMENTS, RECIPE_FILE
from jaxlsp.recipes.selection import NeedsInput, Resolved, Selected

__all__ = [
    "MAX_ARRAYS",
    "MAX_ELEMENTS",
    "RECIPE_FILE",
    "AnswerError",
    "NeedsInput",
    "Problem",
    "Recipe",
    "RecipeError",
    "Resolved",
    "Selected",
    "apply_answers",
    "fill",
    "find_recipe",
    "format_key_path",
    "load_recipe",
    "parse_answer",
    "parse_key_path",
    "parse_recipe",
    "propose",
    "propose_site",
    "propose_target",
    "render_profile",
    "render_recipe",
    "resolve_table",
    "select_profile",
]
