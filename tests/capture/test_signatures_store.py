"""The learned-signature store (capture/inputs/signatures.py): per workspace root in the per-user cache,
per interpreter, dropped when a caller's file changed, never holding another root's targets."""

from __future__ import annotations

from pathlib import Path

from jaxlsp.capture.inputs.signatures import SignatureStore


def _record(path: Path, caller: Path, name: str = "Attention") -> dict[str, object]:
    import hashlib

    return {
        "path": str(path),
        "name": name,
        "kind": "linen",
        "table": {"kind": "linen", "inputs": {"args": [{"kind": "array", "shape": [2, 8, 16]}]}},
        "callsite": {"path": str(caller), "line": 3},
        "sources": {str(caller): hashlib.sha256(caller.read_bytes()).hexdigest()},
    }


def test_a_signature_is_kept_per_interpreter_and_dropped_when_its_caller_changes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    layers, model = root / "layers.py", root / "model.py"
    layers.write_text("class Attention: ...\n")
    model.write_text("from layers import Attention\n")
    store = SignatureStore(root, tmp_path / "cache")
    assert store.add([_record(layers, model)], "/py/a", "a trace of model.py::Model") == 1
    assert not list(root.rglob("*.json"))  # nothing in the workspace
    found = store.lookup("/py/a", layers, "Attention")
    assert found is not None and found.where(root) == "model.py:3" and found.learned_from.startswith("a trace")
    assert store.lookup("/py/b", layers, "Attention") is None  # another interpreter learned nothing
    layers.write_text("class Attention:\n    pass\n")  # the target's own file: still used
    assert store.lookup("/py/a", layers, "Attention") is not None
    model.write_text("from layers import Attention as A\n")  # the caller: the call may be gone
    assert store.lookup("/py/a", layers, "Attention") is None
    assert store.all() == []  # dropped, not kept for later


def test_an_unchanged_call_writes_nothing_and_other_roots_are_never_mixed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    layers, model = root / "layers.py", root / "model.py"
    layers.write_text("x = 1\n")
    model.write_text("y = 2\n")
    store = SignatureStore(root, tmp_path / "cache")
    store.add([_record(layers, model)], "/py/a", "one")
    before = store.file.stat().st_mtime_ns
    store.file.touch()
    touched = store.file.stat().st_mtime_ns
    assert store.add([_record(layers, model)], "/py/a", "one") == 1
    assert store.file.stat().st_mtime_ns == touched != 0 and before != 0
    elsewhere = tmp_path / "other" / "mod.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text("z = 3\n")
    assert store.add([_record(elsewhere, model, "Outside")], "/py/a", "one") == 0  # not this workspace's
    other = SignatureStore(tmp_path / "other", tmp_path / "cache")
    assert other.all() == []
