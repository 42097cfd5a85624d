"""The packed graph (jaxlsp.graph.packed) reads a compact (version 2) object strictly: a malformed
column or table names itself, a row the version 1 rules refuse names its row."""

from __future__ import annotations

from typing import Any

import pytest

from jaxlsp.graph import io
from tests.graph.forms import corrupt
from tests.graph.test_samples import small_graph


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("nodes.primitive[2]", 99, r"^nodes\.primitive\[2\]: expected an index from 0 to 15, got 99"),
        ("nodes.primitive[0]", "add", r"^nodes\.primitive\[0\]: expected an integer, got a string"),
        ("nodes.params", [0], r"^nodes\.params: expected 7 entries \(the count\), got 1"),
        ("nodes.frames[1]", 5, r"^nodes\.frames\[1\]: expected an index from 0 to 1, got 5"),
        ("nodes.group[0]", 7, r"^nodes\.group\[0\]: expected an index from -1 to 3, got 7"),
        ("nodes.refs[0]", 1000, r"^nodes\.refs\[0\]: refers to value 1000, not from 0 to 12"),
        ("nodes.refs", [], r"^nodes\.refs: expected 18 entries"),
        ("nodes.count", -1, r"^nodes\.count: expected an integer >= 0"),
        ("nodes.extra", [], r"^nodes\.extra: expected an object"),
        ("values.flags[0]", 9, r"^values\.flags\[0\]: expected an index from 0 to 5, got 9"),
        ("values.extra.literal", [[99, 1.0]], r"^values\.extra\.literal\[0\]: expected \[row \(0 to 12\), member\]"),
        ("tables.frames", [1, 2, 3], r"^tables\.frames: expected 8 integers per frame"),
        ("tables.frames[1]", 0, r"^tables\.frames\[0:8\]\.line: expected an integer >= 1, got 0"),
        ("tables.shapes", [[-1]], r"^tables\.shapes\[0\]\[0\]: expected an integer >= 0"),
        ("tables.strings", [1], r"^tables\.strings\[0\]: expected a string"),
        ("values.extra.literal", [[7, float("nan")]], r"^values\.extra\.literal\[0\]\[1\]: not a JSON value"),
    ],
)
def test_malformed_compact_input_names_the_column(where: str, value: Any, message: str) -> None:
    data = corrupt(where, value)
    with pytest.raises(ValueError, match=message):
        io.from_json(data)


def test_a_row_the_version_1_rules_refuse_is_named_by_its_row() -> None:
    data = io.to_compact(small_graph())
    data["nodes"]["extra"]["costs"] = [[3, {"flops": -1}]]
    with pytest.raises(ValueError, match=r"^nodes\[3\]\.costs: missing key 'bytes'"):
        io.from_json(data)
