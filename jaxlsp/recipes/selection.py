"""What resolving a profile gives: a :class:`Resolved` profile or a :class:`NeedsInput` answer.

Both carry the profile's TOML-form table (``table`` / ``proposal``: what ``jaxlsp.toml`` holds
under ``[profiles.NAME]``), so a client can save a proposed or completed profile with
:func:`jaxlsp.recipes.render.render_profile`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxlsp.worker.protocol import ResolvedProfile, Target


@dataclass(frozen=True, slots=True)
class Resolved:
    """A profile with everything known: what the worker gets, plus where it came from."""

    name: str  # the profile's key under [profiles]; ``profile["name"]`` is None for a proposal
    profile: ResolvedProfile
    target: Target
    python: str | None  # the ``python`` key: an absolute path, or a command name as written
    table: dict[str, Any]  # the TOML-form profile table
    recipe: Path | None  # the jaxlsp.toml it came from; None for a proposal
    # The needs-input answers filled in, parsed (key path -> TOML-form value): what saving writes.
    answers: dict[str, Any] = field(default_factory=dict)
    # A proposal traced with its annotations' dimensions symbolic (recipes/symbolic.py): what it
    # asks instead when the program cannot be traced for any size.
    fallback: NeedsInput | None = None


@dataclass(frozen=True, slots=True)
class NeedsInput:
    """Something must be asked for (a dimension's size, a shape, a value): never guessed.

    ``missing`` items are JSON objects: ``path`` (the key path to fill, e.g.
    ``profiles.mlp.dims.batch``), ``kind`` (``dimension`` | ``shape`` | ``value`` | ``inputs``),
    ``message`` (what is needed, in words) and, by kind, ``name`` and ``usedAt`` (dimensions) or
    ``param`` and ``annotation`` (proposals). ``proposal`` is the profile table with what is
    known; :func:`jaxlsp.recipes.propose.apply_answers` fills the answers in.
    """

    name: str
    missing: list[dict[str, Any]]
    proposal: dict[str, Any]
    base: Path  # the folder the target is relative to (the recipe's folder)
    recipe: Path | None = None  # the jaxlsp.toml it came from; None for a proposal
    pending: list[dict[str, Any]] = field(default_factory=list)  # items only a proposal knows
    # Answers that did not parse or check, by item path (jaxlsp.recipes.answers.fill): ask again.
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        from jaxlsp.recipes.render import render_profile

        data: dict[str, Any] = {
            "needsInput": self.missing,
            "profile": self.name,
            "proposal": self.proposal,
            "toml": render_profile(self.name, self.proposal, missing=self.missing),
        }
        if self.errors:
            data["errors"] = dict(self.errors)
        return data


Selected = Resolved | NeedsInput
