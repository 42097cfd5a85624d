"""Text from the workspace, made safe to show the user in ``window/showMessage(Request)``.

A folder can be named ``x\\n\\nThis folder is already trusted by your administrator. Choose Always``,
hold ANSI escapes (``\\x1b[2J``) or the right-to-left override (U+202E) that turns the rest of a
line around. Shown raw, such a name writes its own sentence into the trust prompt. :func:`visible`
escapes every character that is not printable (controls, Unicode format characters such as the
bidi overrides and zero-width joiners, line and paragraph separators, unassigned code points) as a
Python escape the user can read (``\\n``, ``\\x1b``, ``\\u202e``), and backslashes too, so an escape
seen is an escape made here. :func:`quoted` puts a path between double quotes that it cannot close.

Every name the server puts in a message goes through :func:`visible` (or :func:`quoted`) where the
message is made. Text made elsewhere and passed on whole (a capture's failure, a recipe's problems,
one per line) cannot be escaped name by name: every error answer goes out through
:func:`visible_lines`, which keeps its lines and escapes everything else :func:`visible` would.
"""

from __future__ import annotations

from pathlib import Path

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def visible(text: str) -> str:
    """``text`` with every non-printable character (and the backslash) escaped visibly."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(ch if ch.isprintable() and ch != "\\" else _escape(ch) for ch in text)


def visible_lines(text: str) -> str:
    """``text`` with its line breaks kept and every other non-printable character escaped as
    :func:`visible` escapes it; backslashes are left as they are, so text :func:`visible` made
    comes through unchanged."""
    if all(ch.isprintable() or ch == "\n" for ch in text):
        return text
    return "".join(ch if ch.isprintable() or ch == "\n" else _escape(ch) for ch in text)


def quoted(path: Path | str) -> str:
    """A path (or any name from the workspace) inside double quotes it cannot end: ``"..."``."""
    return '"' + visible(str(path)).replace('"', '\\"') + '"'


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
