"""Learned calls that disagree on a size become one call with that dimension symbolic
(capture/inputs/learnedshapes.py, issue 56.5): the store keeps each distinct call of a target,
the lookup names the dimensions as the author does, and a failed symbolic trace is remembered."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from jaxlsp.capture.inputs import learnedshapes
from jaxlsp.capture.inputs.signatures import MAX_CALLS, SignatureStore

MODELS = """
from jaxtyping import Array, Float


def pool(feats: Float[Array, "rows width"], mask):
    return feats


def pair(x, y):
    return x


class Block:
    def __call__(self, h, x: Float[Array, "*lead d"]):
        return h
"""


def _array(*shape: int, dtype: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "array", "shape": list(shape)}
    if dtype:
        out["dtype"] = dtype
    return out


def _function(*args: Any) -> dict[str, Any]:
    return {"kind": "function", "inputs": {"args": list(args)}}


def _models(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def test_a_size_the_calls_disagree_on_takes_the_annotation_name_and_a_mask_shares_it(tmp_path: Path) -> None:
    path = _models(tmp_path)
    three = _function(_array(3, 6), _array(3, dtype="bool"))
    five = _function(_array(5, 6), _array(5, dtype="bool"))
    table, sizes = learnedshapes.merged([five, three], path, "pool")
    assert table["inputs"]["args"] == [
        {"kind": "array", "shape": ["rows", 6]},
        {"kind": "array", "shape": ["rows"], "dtype": "bool"},
    ]
    assert table["symbolic"] == ["rows"] and sizes == {"rows": [3, 5]}


def test_unannotated_dimensions_are_batch_when_leading_else_param_and_axis(tmp_path: Path) -> None:
    path = _models(tmp_path)
    calls = [_function(_array(2, 7, 4), _array(9, 8)), _function(_array(3, 5, 4), _array(9, 6))]
    table, sizes = learnedshapes.merged(calls, path, "pair")
    assert table["inputs"]["args"] == [
        {"kind": "array", "shape": ["batch", "x_1", 4]},
        {"kind": "array", "shape": [9, "y_1"]},
    ]
    assert sizes == {"batch": [2, 3], "x_1": [5, 7], "y_1": [6, 8]}
    # a module's ``__call__``: self is not a parameter; an axis after a variadic part has no name
    calls = [
        {"kind": "equinox", "inputs": {"args": [_array(4), _array(2, 3)]}},
        {"kind": "equinox", "inputs": {"args": [_array(6), _array(2, 5)]}},
    ]
    table, sizes = learnedshapes.merged(calls, path, "Block")
    assert table["inputs"]["args"] == [{"kind": "array", "shape": ["batch"]}, {"kind": "array", "shape": [2, "x_1"]}]


def test_calls_that_differ_in_more_than_sizes_are_not_merged(tmp_path: Path) -> None:
    path = _models(tmp_path)
    for other in (
        _function(_array(5, 6), _array(5, dtype="int32")),  # another dtype
        _function(_array(5, 6, 1), _array(5, dtype="bool")),  # another rank
        {"kind": "function", "inputs": {"args": [_array(5, 6), 2]}},  # another Python value
    ):
        newest = _function(_array(3, 6), _array(3, dtype="bool"))
        assert learnedshapes.merged([newest, other], path, "pool") == (newest, {})


def _record(path: Path, caller: Path, batch: int, line: int = 3) -> dict[str, Any]:
    return {
        "path": str(path),
        "name": "pool",
        "kind": "function",
        "table": _function(_array(batch, 6), _array(batch, dtype="bool")),
        "callsite": {"path": str(caller), "line": line},
        "sources": {str(caller): hashlib.sha256(caller.read_bytes()).hexdigest()},
        "config": {"x64": False},
    }


def test_the_store_keeps_each_distinct_call_and_answers_them_merged(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    path = _models(root)
    first, second = root / "test_a.py", root / "test_b.py"
    first.write_text("a = 1\n")
    second.write_text("b = 2\n")
    store = SignatureStore(root, tmp_path / "cache")
    store.add([_record(path, first, 3)], "/py", "tests/test_a.py")
    store.add([_record(path, second, 5)], "/py", "tests/test_b.py")
    store.add([_record(path, second, 5)], "/py", "tests/test_b.py")  # the same call again: one kept
    found = store.lookup("/py", path, "pool")
    assert found is not None
    assert found.table["symbolic"] == ["rows"] and found.sizes == {"rows": [3, 5]}
    assert found.newest is not None and found.newest["inputs"]["args"][0]["shape"] == [5, 6]
    assert found.where(root) == "test_b.py:3 and others, symbolic where they disagree: rows = 3, 5"
    assert found.config == {"x64": False}
    # a changed caller drops its call alone: the other is answered as it was made
    first.write_text("a = 2\n")
    found = store.lookup("/py", path, "pool")
    assert found is not None and found.sizes == {} and found.table == _record(path, second, 5)["table"]
    # at most MAX_CALLS distinct calls, the newest kept
    for batch in range(10, 10 + MAX_CALLS + 2):
        store.add([_record(path, second, batch)], "/py", "tests/test_b.py")
    found = store.lookup("/py", path, "pool")
    assert found is not None and len(found.others) == MAX_CALLS - 1
    assert found.sizes["rows"][-1] == 10 + MAX_CALLS + 1


def test_a_failed_symbolic_trace_answers_the_newest_concrete_call_until_the_target_changes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    path = _models(root)
    caller = root / "test_a.py"
    caller.write_text("a = 1\n")
    store = SignatureStore(root, tmp_path / "cache")
    store.add([_record(path, caller, 3), _record(path, caller, 5)], "/py", "tests")
    assert store.mark_concrete("/py", path, "pool", "rows", "InconclusiveDimensionOperation: 'rows'")
    found = store.lookup("/py", path, "pool")
    assert found is not None and "symbolic" not in found.table and found.sizes == {}
    assert found.table["inputs"]["args"][0]["shape"] == [5, 6]
    assert "concrete: rows failed symbolically" in found.where(root)
    path.write_text(MODELS + "\n# edited\n")  # the target's own file changed: symbolic again
    found = store.lookup("/py", path, "pool")
    assert found is not None and found.table["symbolic"] == ["rows"]
    assert not store.mark_concrete("/py", path, "other", "rows", "no such target")
