"""Dimension names beside the numbers (``f32[8,128]  batch x 128``), from the sizes the
jaxtyping annotations bound during the trace (the graph's ``contracts.dims``). No pygls here."""

from __future__ import annotations

from typing import Any


def names_at(contracts: dict[str, Any] | None, path: str, line: int) -> dict[int, str]:
    """Size -> dimension name in the innermost checked function around ``path:line`` (the graph's
    spelling, 1-based); a size two names share is left out (which one it is cannot be told)."""
    around = [
        d
        for d in (contracts or {}).get("dims", [])
        if d.get("path") == path and int(d.get("line", 0)) <= line <= int(d.get("endLine", 0))
    ]
    if not around:
        return {}
    inner = min(around, key=lambda d: int(d["endLine"]) - int(d["line"]))
    by_size: dict[int, list[str]] = {}
    for name, size in inner["dims"].items():
        by_size.setdefault(int(size), []).append(str(name))
    return {size: names[0] for size, names in by_size.items() if len(names) == 1}


def label(shape: tuple[int, ...] | list[int], names: dict[int, str]) -> str | None:
    """``batch x 128`` for a shape with at least one named size, else None."""
    if not shape or not any(d in names for d in shape):
        return None
    return " \u00d7 ".join(names.get(d, str(d)) for d in shape)
