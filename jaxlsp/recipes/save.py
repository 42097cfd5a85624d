"""Saving a completed profile into ``jaxlsp.toml`` without losing a byte of the user's.

A proposed profile is appended as a new ``[profiles.NAME]`` section (everything before it stays
byte-identical); answers to a profile already in the file are set in place with tomlkit, which
keeps comments, order and formatting. The new text is checked like any recipe before it is
written, then written atomically (a temporary file in the same folder, ``os.replace``), and only
when the file still holds what was read: a concurrent edit, an unsaved editor buffer or a
symbolic link is never overwritten.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from jaxlsp.recipes import bounds
from jaxlsp.recipes.problems import RecipeError, parse_key_path
from jaxlsp.recipes.recipe import parse_recipe
from jaxlsp.recipes.render import render_profile
from jaxlsp.recipes.schema import RECIPE_FILE, VERSION
from jaxlsp.recipes.selection import Resolved


class SaveError(Exception):
    """The profile was not saved; the message says why and where (the file is untouched)."""


@dataclass(frozen=True)
class Saved:
    path: Path
    created: bool  # the file did not exist before
    profile: str


def recipe_file(resolved: Resolved, base: Path) -> Path:
    """Where the profile goes: the recipe it came from, else ``jaxlsp.toml`` in ``base``."""
    return resolved.recipe if resolved.recipe is not None else base / RECIPE_FILE


def save_profile(
    resolved: Resolved, answers: Mapping[str, Any], *, base: Path, editor_text: str | None = None
) -> Saved:
    """Write ``resolved`` (a proposal, or a recipe profile completed by ``answers``) to its file.

    ``editor_text`` is the file's text in an open editor buffer, if any: when it differs from the
    disk the user has unsaved edits, and nothing is written. Raises :class:`SaveError`.
    """
    target = recipe_file(resolved, base)
    if target.is_symlink():
        raise SaveError(f"{target} is a symbolic link: jaxlsp does not rewrite it; add the profile by hand")
    try:
        before: bytes | None = target.read_bytes()
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise SaveError(f"{target}: cannot be read ({exc.strerror})") from None
    try:
        text = before.decode("utf-8") if before is not None else ""
    except UnicodeDecodeError as exc:
        raise SaveError(f"{target}: not UTF-8 text (byte {exc.start}); not rewritten") from None
    if editor_text is not None and editor_text != text:
        raise SaveError(f"{target} has unsaved changes in the editor: save or revert them, then trace again")

    if resolved.recipe is not None:
        new_text = _set_answers(target, text, resolved.name, answers)
    else:
        head = text.rstrip("\n") + "\n\n" if text.strip() else f"version = {VERSION}\n\n"
        new_text = head + render_profile(resolved.name, resolved.table)
    _check(target, new_text, resolved.name)
    replace_atomically(target, new_text.encode("utf-8"), before)
    return Saved(target, before is None, resolved.name)


def _set_answers(target: Path, text: str, profile: str, answers: Mapping[str, Any]) -> str:
    try:
        bounds.check_text(text, target)  # tomlkit, like tomllib, is slow on a 20,000-part dotted key
    except RecipeError as exc:
        raise SaveError(str(exc)) from None
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise SaveError(f"{target}: {exc}") from None
    for key, value in answers.items():
        path = parse_key_path(key)
        if path[:2] != ("profiles", profile) or len(path) < 3:
            raise SaveError(f"{key}: not a key of profile {profile}")
        _assign(doc, path, value, target)
    return tomlkit.dumps(doc)


def _assign(doc: Any, path: tuple[str | int, ...], value: Any, target: Path) -> None:
    """Set ``path`` in the tomlkit document, creating inline tables for missing keys."""
    node = doc
    for i, part in enumerate(path[:-1]):
        where = ".".join(str(p) for p in path[: i + 1])
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise SaveError(f"{target}: {where} does not exist")
            node = node[part]
            continue
        if not isinstance(node, Mapping):
            raise SaveError(f"{target}: {where} is not a table")
        if part not in node:
            node[part] = tomlkit.inline_table()  # type: ignore[index]
        node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise SaveError(f"{target}: {'.'.join(str(p) for p in path)} does not exist")
    elif not isinstance(node, Mapping):
        raise SaveError(f"{target}: {'.'.join(str(p) for p in path[:-1])} is not a table")
    node[last] = value


def _check(target: Path, text: str, profile: str) -> None:
    """The new text must be a valid recipe in which the profile resolves completely."""
    try:
        recipe = parse_recipe(text, target, strict=False)  # another profile's problems are its own
    except RecipeError as exc:
        raise SaveError(f"the saved file would not be a valid recipe: {exc}") from None
    if recipe.problems.get(profile):
        raise SaveError(f"the saved file would not be a valid recipe: {RecipeError(recipe.problems[profile])}")
    if not isinstance(recipe.results.get(profile), Resolved):
        raise SaveError(f"profile {profile} would still be incomplete in {target}")


def replace_atomically(target: Path, data: bytes, before: bytes | None) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        mode = target.stat().st_mode & 0o7777 if before is not None else 0o644
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        # Last look before the swap: whatever changed the file since it was read wins.
        try:
            now: bytes | None = target.read_bytes()
        except FileNotFoundError:
            now = None
        if now != before:
            raise SaveError(f"{target} changed while the profile was being saved: not overwritten; trace again")
        os.replace(tmp, target)
    except OSError as exc:
        raise SaveError(f"{target}: cannot be written ({exc.strerror or exc})") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
