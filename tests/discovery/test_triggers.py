"""The names that make a function worth a closer look (``Classifier.triggers``) cost one
qualification per name, not one per binding (issue 25): a 10,000-cell notebook binding ``jax`` in
every cell qualified each binding by looking through all the earlier ones (0.4 s of CPU in one
piece on the server's event loop, found by the soak's loop watchdog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxlsp.discovery import Classifier, WorkspaceIndex

BINDINGS = 2_000


def test_a_name_bound_thousands_of_times_is_qualified_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cells.py"
    path.write_text("".join(f"import jax\n\n@jax.jit\ndef g{i}(x):\n    return x\n\n" for i in range(BINDINGS)))
    index = WorkspaceIndex([tmp_path])
    classifier = Classifier(index)
    fs = index.summary(path)
    assert fs is not None and len(fs.bindings["jax"]) == BINDINGS
    asked: list[str] = []
    qualify = Classifier.qualify

    def counted(self: Classifier, fs: object, name: str, *args: object, **kwargs: object) -> object:
        asked.append(name)
        return qualify(self, fs, name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Classifier, "qualify", counted)
    triggers = classifier.triggers(fs)
    assert "jax" in triggers
    assert asked.count("jax") <= 1, f"jax was qualified {asked.count('jax')} times"
    # and the entrypoints are those of a file that binds jax once
    assert [e.name for e in classifier.discover(path).entrypoints] == [f"g{i}" for i in range(BINDINGS)]
