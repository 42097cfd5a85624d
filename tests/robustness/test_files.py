"""The user's files through the real server: saving a completed profile into ``jaxlsp.toml`` keeps
every byte of the user's text and leaves no temporary file, an unsaved editor buffer of the recipe
is never overwritten, and a malformed recipe becomes a diagnostic on the recipe, not a crash.
(The save module's own cases, a concurrent change between read and write included, are in
``tests/recipes/test_save.py``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled
from tests.robustness.helpers import Peer, RpcError, server_env

pytest.importorskip("jax")

MODEL = "import jax\n\n\ndef f(x: jax.Array):\n    return jax.numpy.tanh(x)\n"
RECIPE = """# my recipes: keep this comment   (and this spacing)
version   = 1

[profiles.dimmed]   # asks for batch
target = "model.py::f"
inputs.args = [ { kind = "array", shape = ["batch", 3] } ]  # x
"""


def workspace(tmp_path: Path, recipe: str = RECIPE) -> Path:
    root = tmp_path / "files"
    root.mkdir()
    (root / "model.py").write_text(MODEL)
    (root / "jaxlsp.toml").write_text(recipe)
    return root


def trusted_peer(peer_factory: Any, root: Path) -> tuple[Peer, str]:
    peer: Peer = peer_factory(env=server_env())
    peer.initialize(root, options={"trusted": True, "liveShapes": False})
    return peer, peer.open(root / "model.py")


def test_saving_answers_keeps_the_users_bytes_and_is_atomic(peer_factory: Any, tmp_path: Path) -> None:
    root = workspace(tmp_path)
    peer, uri = trusted_peer(peer_factory, root)
    asked = peer.call(
        "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "dimmed"}, timeout=scaled(120)
    )
    paths = [item["path"] for item in asked["needsInput"]]
    assert paths == ["profiles.dimmed.dims.batch"], asked
    before = (root / "jaxlsp.toml").stat().st_ino
    done = peer.call(
        "jaxlsp/trace",
        {"textDocument": {"uri": uri}, "name": "f", "profile": "dimmed", "answers": {paths[0]: 4}, "save": True},
        timeout=scaled(120),
    )
    assert done["summary"]["ops"] >= 1 and done["saved"] == (root / "jaxlsp.toml").as_uri()
    text = (root / "jaxlsp.toml").read_text()
    assert text == RECIPE + "dims = {batch = 4}\n", text  # the answer added; every byte before it kept
    assert sorted(p.name for p in root.iterdir()) == ["jaxlsp.toml", "model.py"], "a temporary file was left"
    assert (root / "jaxlsp.toml").stat().st_ino != before, "written in place, not replaced atomically"


def test_an_unsaved_editor_buffer_of_the_recipe_is_not_overwritten(peer_factory: Any, tmp_path: Path) -> None:
    root = workspace(tmp_path)
    peer, uri = trusted_peer(peer_factory, root)
    peer.open(root / "jaxlsp.toml", RECIPE + "# typed in the editor, not saved yet\n")
    done = peer.call(
        "jaxlsp/trace",
        {
            "textDocument": {"uri": uri},
            "name": "f",
            "profile": "dimmed",
            "answers": {"profiles.dimmed.dims.batch": 4},
            "save": True,
        },
        timeout=scaled(120),
    )
    assert "saved" not in done and done["summary"]["ops"] >= 1  # the trace goes on
    assert (root / "jaxlsp.toml").read_text() == RECIPE
    warnings = [
        m for m in peer.seen if m["method"] == "window/showMessage" and "unsaved changes" in m["params"]["message"]
    ]
    assert warnings, [m["method"] for m in peer.seen]


@pytest.mark.parametrize(
    "broken",
    [
        "version = 1\n[profiles.dimmed\ntarget = 'model.py::f'\n",  # an unclosed table header
        "version = 1\n\n[profiles.dimmed]\ntarget = 'model.py::f'\ntarget = 'again'\n",  # a duplicate key
        "version = 1\n\n[profiles.dimmed]\ntarget = 5\ninputs = 'x'\n",  # wrong types
        "\x00\xff not toml at all",
    ],
)
def test_a_malformed_recipe_gets_a_diagnostic(peer_factory: Any, tmp_path: Path, broken: str) -> None:
    root = workspace(tmp_path, broken)
    peer, uri = trusted_peer(peer_factory, root)
    with pytest.raises(RpcError) as info:
        peer.call("jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "dimmed"}, timeout=scaled(60))
    assert "jaxlsp.toml" in info.value.message, info.value.message
    recipe_uri = (root / "jaxlsp.toml").resolve().as_uri()
    published = [
        m["params"]
        for m in peer.seen
        if m["method"] == "textDocument/publishDiagnostics"
        and m["params"]["uri"] == recipe_uri
        and m["params"]["diagnostics"]
    ]
    assert published, [m["method"] for m in peer.seen]
    assert peer.alive()
