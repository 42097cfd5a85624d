"""Which lines a save changed (jaxlsp/live/edits.py): replacements, insertions and deletions, on the
new text's lines."""

from __future__ import annotations

from jaxlsp.live.edits import changed_lines, touches

OLD = "a\nb\nc\nd\n"


def test_a_replaced_line_is_its_own_range() -> None:
    assert changed_lines(OLD, "a\nB\nc\nd\n") == [(1, 1)]


def test_inserted_lines_are_their_range_in_the_new_text() -> None:
    assert changed_lines(OLD, "a\nb\nx\ny\nc\nd\n") == [(2, 3)]


def test_a_deletion_is_where_the_lines_were() -> None:
    assert changed_lines(OLD, "a\nd\n") == [(0, 1)]
    assert changed_lines(OLD, OLD) == []


def test_touches_is_an_overlap_of_line_ranges() -> None:
    assert touches([(2, 3)], 3, 9) and touches([(2, 3)], 0, 2) and not touches([(2, 3)], 4, 9)
