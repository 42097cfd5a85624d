"""Needs-input answers as the user typed them, parsed once, here, by the recipe's own rules.

Clients send the text the user typed for each missing item (``answers: {path: "text"}``); every
editor then behaves the same (``"1.5, 4"`` for a shape is an error everywhere, never ``{1, 4}``
in one editor and a dimension named ``1.5`` in another). By the item's ``kind``:

- ``dimension``: a positive integer (``32``);
- ``shape``: positive integers and dimension names, in brackets, parentheses or neither, separated
  by commas or spaces (``[8, 784]``, ``(batch, 784)``, ``8 784``; ``[]`` is a scalar);
- ``inputs``: a table, as a TOML inline table (``{ args = [{ kind = "array", shape = [4, 3] }] }``)
  or JSON;
- ``value`` (and any other kind): a TOML value as written in ``jaxlsp.toml`` (``3``, ``"relu"``,
  ``{ kind = "array", shape = [4] }``), or JSON.

An answer that is not a string (an older client's typed value) is taken as it is. :func:`fill`
applies answers round by round (an ``inputs`` answer may name new dimensions, asked next) and
returns the needs-input again, with ``errors`` by path, when one does not parse or check.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jaxlsp.recipes import bounds, schema
from jaxlsp.recipes.problems import RecipeError, format_key_path
from jaxlsp.recipes.propose import apply_answers
from jaxlsp.recipes.selection import NeedsInput, Resolved, Selected

MAX_ANSWER = 4096  # characters: a typed answer is a line, not a file
_POSITIVE = re.compile(r"[1-9][0-9]*")


class AnswerError(ValueError):
    """An answer that does not parse; the message says what was expected and what came."""


def _quote(text: str, limit: int = 40) -> str:
    return json.dumps(text if len(text) <= limit else text[:limit] + "…")


def parse_dimension(text: str) -> int:
    body = text.strip()
    if not _POSITIVE.fullmatch(body):
        raise AnswerError(f"expected a positive integer (the dimension's size), got {_quote(body)}")
    return int(body)


def parse_shape(text: str) -> list[int | str]:
    body = text.strip()
    if len(body) >= 2 and (body[0], body[-1]) in (("[", "]"), ("(", ")")):
        body = body[1:-1]
    dims: list[int | str] = []
    for part in re.split(r"[,\s]+", body.strip()):
        if part == "":
            continue
        item = part[1:-1] if len(part) >= 2 and part[0] == part[-1] and part[0] in "\"'" else part
        if _POSITIVE.fullmatch(item):
            dims.append(int(item))
        elif schema.IDENTIFIER.fullmatch(item):
            dims.append(item)
        else:
            raise AnswerError(
                f"expected a shape such as [8, 784] or [batch, 784]: {_quote(part)} is neither a positive integer "
                "nor a dimension name"
            )
    if not dims and body.strip() not in ("",):
        raise AnswerError(f"expected a shape such as [8, 784] or [batch, 784], got {_quote(text.strip())}")
    return dims


def parse_value(text: str) -> Any:
    """A TOML value as in jaxlsp.toml, else JSON."""
    body = text.strip()
    try:
        return tomllib.loads(f"value = {body}")["value"]
    except (tomllib.TOMLDecodeError, KeyError):
        pass
    try:
        return json.loads(body)
    except ValueError:
        raise AnswerError(
            f'expected a TOML value as in jaxlsp.toml (3, "relu", {{ kind = "array", shape = [4] }}) or JSON, '
            f"got {_quote(body)}"
        ) from None


def parse_answer(kind: str, text: str) -> Any:
    """One typed answer for an item of ``kind``; raises :class:`AnswerError`."""
    if len(text) > MAX_ANSWER:
        raise AnswerError(f"an answer is one line of at most {MAX_ANSWER:,} characters, got {len(text):,}")
    if not text.strip():
        raise AnswerError("an answer is needed")
    if kind == "dimension":
        return parse_dimension(text)
    if kind == "shape":
        return parse_shape(text)
    value = parse_value(text)
    if kind == "inputs" and not isinstance(value, dict):
        raise AnswerError(
            'expected a table: { args = [...], kwargs = {...} } of input specs, or { factory = "module:function" }'
        )
    return value


def parse_answers(items: list[dict[str, Any]], answers: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Answers to ``items`` (needs-input items) parsed by each item's kind: ``(values, errors)``,
    both keyed by path. Answers to paths not among ``items`` are left out of both."""
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    kinds = {str(item["path"]): str(item.get("kind", "value")) for item in items}
    for path, answer in answers.items():
        if path not in kinds:
            continue
        try:
            value = parse_answer(kinds[path], answer) if isinstance(answer, str) else answer
        except AnswerError as exc:
            errors[path] = str(exc)
            continue
        wide = next(bounds.wide_integers(value), None)  # as in a recipe: no value needs more than 64 bits
        if wide is not None:
            inner = format_key_path(wide[0])
            errors[path] = f"{inner}: {bounds.too_wide(wide[1])}" if inner else bounds.too_wide(wide[1])
            continue
        values[path] = value
    return values, errors


def fill(needs: NeedsInput, answers: Mapping[str, Any]) -> Selected:
    """Apply ``answers`` (typed text by item path) to ``needs``, round by round: each round takes
    the answers to the items then asked, and may ask new ones. The result is resolved, or a
    needs-input to ask again: with ``errors`` (path -> message) when an answer did not parse or
    check, else with what is still missing. A resolved profile carries the parsed answers
    (``answers``, for saving). Answers to things never asked raise RecipeError."""
    current: Selected = needs
    remaining = dict(answers)
    parsed: dict[str, Any] = {}
    while isinstance(current, NeedsInput) and remaining:
        round_: NeedsInput = current
        asked = [m for m in round_.missing if str(m["path"]) in remaining]
        if not asked:
            break
        now = {str(m["path"]): remaining.pop(str(m["path"])) for m in asked}
        values, errors = parse_answers(asked, now)
        if errors:
            return replace(round_, errors=errors)
        try:
            current = apply_answers(round_, values)
        except RecipeError as exc:
            return replace(round_, errors=_by_answer(exc, list(values)))
        parsed.update(values)
    if remaining and isinstance(current, NeedsInput):
        apply_answers(current, remaining)  # raises: those were not asked for
    return replace(current, answers=parsed) if isinstance(current, Resolved) else current


def _by_answer(exc: RecipeError, paths: list[str]) -> dict[str, str]:
    """Each problem under the answer whose path covers its key (``profiles.p.inputs`` covers
    ``profiles.p.inputs.args[0].shape``)."""
    errors: dict[str, str] = {}
    for problem in exc.problems:
        key = problem.key_path
        owner = next((p for p in paths if key == p or key.startswith((p + ".", p + "["))), None)
        where = owner or key or (paths[0] if paths else "")
        inner = key[len(owner) :].lstrip(".") if owner is not None else ""
        detail = f"{inner}: {problem.message}" if inner else problem.message
        errors[where] = f"{errors[where]}; {detail}" if where in errors else detail
    return errors
