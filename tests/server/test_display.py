"""Names from the workspace shown to the user (``jaxlsp/server/display.py``, issue 25 item 8):
everything a terminal or an editor's message box would act on or turn around is escaped visibly,
the rest (accents, CJK, emoji) is shown as written, and a quoted name cannot end its quotes."""

from __future__ import annotations

import pytest

from jaxlsp.server.display import quoted, visible, visible_lines


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("/home/ana/projet-été/中文/🙂", "/home/ana/projet-été/中文/🙂"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x1b[2J\x07\x7f", "\\x1b[2J\\x07\\x7f"),
        ("\u202eevil\u202c\u2066\u200b\u200d\ufeff", "\\u202eevil\\u202c\\u2066\\u200b\\u200d\\ufeff"),  # Cf
        ("line\u2028para\u2029nbsp\u00a0", "line\\u2028para\\u2029nbsp\\xa0"),  # Zl, Zp, a non-space Zs
        ("a\\nb", "a\\\\nb"),  # a real backslash: an escape seen is always one made here
        ("\U000e0001tag\U0010ffff", "\\U000e0001tag\\U0010ffff"),  # a tag character, a private one
    ],
)
def test_visible_escapes_what_could_rewrite_a_message(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible(raw).isprintable()


def test_a_quoted_name_cannot_close_its_quotes() -> None:
    said = quoted('/w/x" is trusted by your administrator. "Choose Always')
    assert said == '"/w/x\\" is trusted by your administrator. \\"Choose Always"'
    assert said.count('"') - said.count('\\"') == 2


def test_text_passed_on_whole_keeps_its_lines_and_loses_the_rest() -> None:
    said = "a.toml:3: profiles.x: bad\nb.toml:5: \u202eevil\x1b[2J\r\t"
    assert visible_lines(said) == "a.toml:3: profiles.x: bad\nb.toml:5: \\u202eevil\\x1b[2J\\r\\t"
    made_here = visible("x\n\u202e\\y")
    assert visible_lines(made_here) == made_here  # what visible made comes through as it was
