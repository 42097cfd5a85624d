"""TOML text for profiles: what a client saves into ``jaxlsp.toml``.

:func:`render_profile` writes one ``[profiles.NAME]`` section (plus ``dims``, ``init`` and
``inputs`` sub-tables), with a ``# needs input`` comment per missing item; :func:`render_recipe`
writes a whole file. ``tomllib.loads`` of the text gives the tables back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jaxlsp.recipes.problems import KeyPath, format_key_path, quote_key, toml_value
from jaxlsp.recipes.schema import VERSION

_SECTIONS = ("dims", "init", "inputs")  # profile keys written as sub-tables


def render_value(value: object) -> str:
    """One TOML value, inline (tables as inline tables)."""
    return toml_value(value)


def _array_lines(key: str, items: list[Any]) -> list[str]:
    if not items:
        return [f"{quote_key(key)} = []"]
    return [f"{quote_key(key)} = [", *(f"    {render_value(v)}," for v in items), "]"]


def _section(path: KeyPath, table: Mapping[str, Any], comments: Iterable[str]) -> list[str]:
    """``[path]`` then its plain keys; ``args`` lists over lines; ``kwargs`` as a sub-table."""
    lines = [f"[{format_key_path(path)}]", *comments]
    later: list[str] = []
    for key, value in table.items():
        if key == "kwargs" and isinstance(value, Mapping) and value:
            later += ["", *_section((*path, key), value, ())]
        elif key == "args" and isinstance(value, list):
            lines += _array_lines(key, value)
        else:
            lines.append(f"{quote_key(key)} = {render_value(value)}")
    if len(lines) == 1 and later:  # nothing but sub-tables: their headers imply this one
        return later[1:]
    return lines + later


def render_profile(name: str, profile: Mapping[str, Any], missing: Iterable[Mapping[str, Any]] = ()) -> str:
    """The ``[profiles.NAME]`` section for a profile table (from a recipe, a proposal or answers)."""
    base: KeyPath = ("profiles", name)
    notes: dict[str, list[str]] = {}
    for item in missing:
        where = str(item.get("path", ""))
        section = next((s for s in _SECTIONS if where.startswith(format_key_path((*base, s)))), "")
        notes.setdefault(section, []).append(f"# needs input: {where}: {item.get('message', '')}")
    plain = {k: v for k, v in profile.items() if k not in _SECTIONS or not isinstance(v, Mapping)}
    lines = _section(base, plain, notes.pop("", []))
    for section in _SECTIONS:
        value = profile.get(section)
        comments = notes.pop(section, [])
        if isinstance(value, Mapping):
            lines += ["", *_section((*base, section), value, comments)]
        elif comments:
            lines += ["", *comments]
    return "\n".join(lines) + "\n"


def render_recipe(profiles: Mapping[str, Mapping[str, Any]]) -> str:
    """A whole ``jaxlsp.toml``: ``version = 1`` and every profile."""
    parts = [f"version = {VERSION}\n"]
    parts += [render_profile(name, table) for name, table in profiles.items()]
    return "\n".join(parts)
