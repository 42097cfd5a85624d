"""The message loop under the server: pygls' stdio/TCP reader, with the limits a client can abuse.

pygls 2.1's ``run_async`` reads a ``Content-Length`` of any size (a header claiming a petabyte
raises MemoryError and the server dies with a traceback), leaves a request unanswered when its
body is not JSON, nests too deeply for ``json.loads``, or does not fit its params type, and hands
every nested object to the protocol's ``object_hook`` (so a ``jsonrpc`` key deep inside params is
taken for a message). This loop keeps pygls' framing and dispatch and adds:

- a 64 MiB cap on a message and 8 KiB on a header line: over it, one log line and exit 1 (the
  stream cannot be resynchronised, and reading the body would hold it all in memory);
- resynchronisation after broken framing (pygls waits forever): a line that is not a header, a
  ``Content-Length`` that is not a decimal count (``-5``, ``0x20``), a body with no header, are
  skipped up to the next ``Content-Length`` header (:func:`.framing.resynchronise`, at most
  64 MiB); the request whose framing broke gets ``-32600`` as soon as its id can be read from what
  was skipped, and one warning says how many bytes were dropped. A length short by a byte leaves the
  end of its body in front of the next header: the body is answered ``-32700`` and the reader
  resynchronises on that header. A length too long swallows the start of the next message: the
  complete message it framed is handled, and the rest is read again as the next header;
- ``-32700`` for a body that is not JSON, with the request's id when one can be read from it;
- ``-32600`` for a message nested deeper than :data:`.messages.MAX_DEPTH`, ``-32602`` for a request
  whose params do not fit the method's type, both with the request's id;
- ``-32602`` naming the key path for a list or object over :data:`.messages.MAX_ITEMS` members, or
  a message of over :data:`.messages.MAX_VALUES` values, checked before structuring
  (:func:`.messages.oversized`): 16,000 diagnostics in a code action took 1.4 s to structure, a
  64 MiB message of small objects minutes;
- ``-32602`` for a request with a lone surrogate (``"\\ud800"``) in a string, and U+FFFD for one
  in a notification (:func:`.messages.lone_surrogates`);
- only the top-level object is structured into a message;
- a hover buffered behind requests that cannot change its answer (a burst of traces, lenses,
  cancels) is handled before them (:mod:`jaxlsp.server.lookahead`); stdin's pipe is read by
  :class:`.streams.PipeInput`, which keeps everything that arrived in view for that look.

It is a local guard for what belongs upstream in pygls (docs/reliability.md). Its rooms, each
importing only those above it in this list:

- :mod:`.streams`: what the loop reads (stdin on the loop's thread or in the pool, a TCP stream);
- :mod:`.writer`: what it writes to (the client's stream, written by a thread of its own);
- :mod:`.messages`: one body decoded, checked against the bounds and dispatched, or answered;
- :mod:`.framing`: headers and bodies out of the stream, and resynchronisation after broken framing;
- :mod:`.loop`: the loop itself (:func:`run`), and the end of a session.
"""

from __future__ import annotations

from jaxlsp.server.transport.framing import MAX_HEADER, TransportError
from jaxlsp.server.transport.loop import fatal, run
from jaxlsp.server.transport.streams import CHUNK, PIPE_BUFFER, StdinReader, StreamReader, widen_pipe
from jaxlsp.server.transport.writer import ThreadedWriter

__all__ = [
    "CHUNK",
    "MAX_HEADER",
    "PIPE_BUFFER",
    "StdinReader",
    "StreamReader",
    "ThreadedWriter",
    "TransportError",
    "fatal",
    "run",
    "widen_pipe",
]
