"""Hovers ahead of the queue: a hover that arrived behind requests which cannot change its answer is
handled before them (issue 25).

The loop handles messages one at a time in the order they came. A burst of 1,000 ``jaxlsp/trace``
requests costs the loop about a millisecond each (structured, dispatched, superseded, answered),
so a hover the editor sent during the burst waited for every trace in front of it: 200-250 ms in
the soak, 350-370 ms on a slower machine, though the loop never stalled. The hover's answer does
not depend on those requests: a trace changes what a hover shows only when it finishes, long after
it was read, and a code lens, a graph page or a cancel change nothing a hover reads.

The LSP allows exactly this ("the server may decide to use a parallel execution strategy and may
wish to return responses in a different order than the requests were received ... as long as this
reordering doesn't affect the correctness of the responses"), so :class:`Lookahead` looks through
the messages buffered but not yet read and lets the first ``textDocument/hover`` go first when
everything in front of it is a request from :data:`OVERTAKEN` or a ``$/cancelRequest``. It never
goes past anything else: a document or workspace notification (the text the hover reads), a
response (to the trust question), ``jaxlsp/cursorMoved`` (which, like a hover, highlights nodes in
open viewer pages: the later of the two must win), a command, ``shutdown``; nor past anything it
cannot read as one well-framed JSON object of at most :data:`MAX_BODY` bytes. What it cannot read is
left to the loop, which reads, resynchronises and answers it as before.

Each buffered message is looked at once (where the look stopped is kept until the loop reads past
it), at most :data:`MAX_FRAMES` per turn of the loop.
"""

from __future__ import annotations

import json
import re
from typing import Final

PRIORITY: Final = "textDocument/hover"
# Requests whose handling changes nothing a hover reads: reads of documents and graphs, and traces,
# whose graph a hover sees once it is traced (an answer arrives long after its request is read).
OVERTAKEN: Final = frozenset(
    {
        "textDocument/hover",
        "textDocument/codeLens",
        "codeLens/resolve",
        "textDocument/inlayHint",
        "textDocument/codeAction",
        "textDocument/definition",
        "textDocument/documentSymbol",
        "jaxlsp/trace",
        "jaxlsp/graph",
        "jaxlsp/node",
        "jaxlsp/values",
        "jaxlsp/nodesAt",
        "jaxlsp/costs",
        "jaxlsp/discover",
        "jaxlsp/environment",
    }
)
CANCEL: Final = "$/cancelRequest"
MAX_BODY = 64 * 1024  # bytes: a bigger body is not parsed twice (once here, once when it is read)
MAX_FRAMES = 1000  # messages looked at in one turn of the loop (about 5 ms of json.loads)
# What the loop reads as a header block, in the plain form every client sends; any other form is
# left to the loop.
_FRAME = re.compile(rb"Content-Length: (\d{1,9})\r\n(?:Content-Type: [^\r\n]{0,200}\r\n)?\r\n")
_HEADER_ROOM = 256  # bytes within which a header block of that form ends


def kind(body: bytes) -> str:
    """``priority`` (a hover request), ``overtaken`` (what a hover may go past) or ``barrier``."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return "barrier"
    if type(data) is not dict or data.get("jsonrpc") != "2.0":
        return "barrier"
    method = data.get("method")
    msg_id = data.get("id")
    if type(method) is not str:
        return "barrier"  # a response, or not a message at all
    if type(msg_id) in (int, str):
        if method == PRIORITY:
            return "priority"
        return "overtaken" if method in OVERTAKEN else "barrier"
    if "id" not in data and method == CANCEL:
        return "overtaken"
    return "barrier"


class Lookahead:
    """Where the look through a buffer stopped: ``scan`` is the offset in the buffer up to which
    every message may be overtaken; ``blocked`` says the message at ``scan`` may not be."""

    def __init__(self) -> None:
        self.scan = 0
        self.blocked = False

    def reset(self) -> None:
        """The buffer was rebuilt (bytes pushed back in front): look again from its start."""
        self.scan = 0
        self.blocked = False

    def rebase(self, by: int) -> None:
        """The buffer lost its first ``by`` bytes (read already)."""
        self.scan = max(self.scan - by, 0)

    def find(self, buffer: bytes, pos: int) -> tuple[int, int, int] | None:
        """A hover in ``buffer`` after ``pos`` (a message boundary) with only messages it may
        overtake before it, and at least one: its frame's start, its body's start and end."""
        if self.scan < pos:  # the loop read past where the look stopped: nothing of it is left
            self.scan, self.blocked = pos, False
        looked = 0
        while not self.blocked and looked < MAX_FRAMES:
            match = _FRAME.match(buffer, self.scan)
            if match is None:
                # Not yet a whole header block (wait for more), or one of another form (stop).
                rest = buffer[self.scan : self.scan + _HEADER_ROOM]
                self.blocked = len(rest) == _HEADER_ROOM or b"\n\r\n" in rest or not _could_start(rest)
                return None
            length = int(match.group(1))
            start, end = match.end(), match.end() + length
            if length > MAX_BODY:
                self.blocked = True
                return None
            if end > len(buffer):
                return None  # the body is still arriving
            looked += 1
            found = kind(buffer[start:end])
            if found == "priority":
                if self.scan == pos:
                    return None  # it is next anyway
                return self.scan, start, end
            if found == "barrier":
                self.blocked = True
                return None
            self.scan = end
        return None


def _could_start(rest: bytes) -> bool:
    """Whether ``rest`` (no newline-blank-line in it) can be the start of a plain header block."""
    head = b"Content-Length: "
    return head.startswith(rest[: len(head)]) if len(rest) < len(head) else rest.startswith(head)
