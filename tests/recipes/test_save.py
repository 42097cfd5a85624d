"""Saving completed profiles into jaxlsp.toml: nothing of the user's is lost or overwritten."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxlsp.capture.inputs.plan import find_entrypoint
from jaxlsp.recipes import NeedsInput, Resolved, apply_answers, load_recipe, select_profile
from jaxlsp.recipes.save import SaveError, replace_atomically, save_profile

MODEL = (
    "import jax\n\ndef f(x: jax.Array):\n    return jax.numpy.tanh(x)\n\ndef g(x: jax.Array):\n    return f(x) * 2\n"
)
RECIPE = """# my recipes (keep this)
version = 1

[profiles.dimmed]   # asks for batch
target = "model.py::f"
inputs.args = [ { kind = "array", shape = ["batch", 3] } ]  # x
"""


def _workspace(tmp_path: Path, recipe: str | None = RECIPE) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    if recipe is not None:
        (tmp_path / "jaxlsp.toml").write_text(recipe)
    return tmp_path


def _proposal(root: Path) -> tuple[NeedsInput, Resolved]:
    recipe_path = root / "jaxlsp.toml"
    recipe = load_recipe(recipe_path) if recipe_path.exists() else None
    entrypoint = find_entrypoint(root / "model.py", "g", root)
    needs = select_profile(recipe, root / "model.py", "g", entrypoint=entrypoint, workspace_root=root)
    assert isinstance(needs, NeedsInput)
    answers = {needs.missing[0]["path"]: [2, 3]}
    resolved = apply_answers(needs, answers)
    assert isinstance(resolved, Resolved)
    return needs, resolved


def _dimmed(root: Path) -> Resolved:
    recipe = load_recipe(root / "jaxlsp.toml")
    needs = select_profile(recipe, root / "model.py", "f", "dimmed")
    assert isinstance(needs, NeedsInput)
    resolved = apply_answers(needs, {"profiles.dimmed.dims.batch": 4})
    assert isinstance(resolved, Resolved)
    return resolved


def test_a_proposal_is_appended_and_the_rest_stays_byte_identical(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    _, resolved = _proposal(root)
    saved = save_profile(resolved, {}, base=root)
    text = (root / "jaxlsp.toml").read_text()
    assert saved.path == root / "jaxlsp.toml" and not saved.created
    assert text.startswith(RECIPE.rstrip("\n") + "\n\n[profiles.g]")
    profile = load_recipe(root / "jaxlsp.toml").results["g"]
    assert isinstance(profile, Resolved) and profile.table["inputs"]["args"][0]["shape"] == [2, 3]


def test_a_new_recipe_is_created_with_its_version(tmp_path: Path) -> None:
    root = _workspace(tmp_path, recipe=None)
    _, resolved = _proposal(root)
    saved = save_profile(resolved, {}, base=root)
    assert saved.created and (root / "jaxlsp.toml").read_text().startswith("version = 1\n\n[profiles.g]")


def test_answers_are_set_in_place_keeping_comments_and_layout(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    os.chmod(root / "jaxlsp.toml", 0o600)
    save_profile(_dimmed(root), {"profiles.dimmed.dims.batch": 4}, base=root)
    text = (root / "jaxlsp.toml").read_text()
    for line in RECIPE.splitlines():
        assert line in text  # every original line, comments included, is still there
    assert tomllib.loads(text)["profiles"]["dimmed"]["dims"] == {"batch": 4}
    assert (root / "jaxlsp.toml").stat().st_mode & 0o777 == 0o600


def test_unsaved_editor_text_blocks_the_write(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    with pytest.raises(SaveError, match="unsaved changes"):
        save_profile(_dimmed(root), {"profiles.dimmed.dims.batch": 4}, base=root, editor_text=RECIPE + "# typing\n")
    assert (root / "jaxlsp.toml").read_text() == RECIPE
    save_profile(_dimmed(root), {"profiles.dimmed.dims.batch": 4}, base=root, editor_text=RECIPE)  # same text: fine


def test_a_file_changed_since_it_was_read_is_not_overwritten(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    target = root / "jaxlsp.toml"
    with pytest.raises(SaveError, match="changed while"):
        replace_atomically(target, b"version = 1\n", before=b"something else\n")
    assert target.read_text() == RECIPE
    assert [p.name for p in root.iterdir() if p.name.endswith(".tmp")] == []  # no litter


def test_symlinks_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    resolved = _dimmed(root)
    elsewhere = tmp_path / "elsewhere.toml"
    (root / "jaxlsp.toml").rename(elsewhere)
    (root / "jaxlsp.toml").symlink_to(elsewhere)
    with pytest.raises(SaveError, match="symbolic link"):
        save_profile(resolved, {"profiles.dimmed.dims.batch": 4}, base=root)
    assert elsewhere.read_text() == RECIPE
    (root / "jaxlsp.toml").unlink()
    (root / "jaxlsp.toml").write_bytes(RECIPE.encode() + b"# \xff\n")
    with pytest.raises(SaveError, match="not UTF-8"):
        save_profile(resolved, {"profiles.dimmed.dims.batch": 4}, base=root)


def test_answers_outside_the_profile_or_leaving_it_incomplete_write_nothing(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    resolved = _dimmed(root)
    with pytest.raises(SaveError, match="not a key of profile dimmed"):
        save_profile(resolved, {"profiles.other.dims.batch": 4}, base=root)
    with pytest.raises(SaveError, match="still be incomplete"):
        save_profile(resolved, {"profiles.dimmed.dims.other": 4}, base=root)
    assert (root / "jaxlsp.toml").read_text() == RECIPE


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(["# a comment ✓", "", "   ", "# [profiles.x] in a comment", "\t# tab"]),
        max_size=6,
    )
)
def test_appending_keeps_any_prefix(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    root = tmp_path_factory.mktemp("ws")
    prefix = "\n".join(["version = 1", *lines]) + "\n"
    _workspace(root, recipe=prefix)
    _, resolved = _proposal(root)
    save_profile(resolved, {}, base=root)
    assert (root / "jaxlsp.toml").read_text().startswith(prefix.rstrip("\n"))
