"""``jaxlsp.traceGraph`` (command) and ``jaxlsp/trace`` (request).

Until the server asks for workspace trust (no user code may run before it), both answer a clear
RequestFailed error, never a fake graph; the CLI's ``jaxlsp trace`` is the explicit way meanwhile.
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException

from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import TRACE_COMMAND
from jaxlsp.server.params import as_dict, invalid, require_str, text_document_uri

REQUEST_FAILED = -32803
NOT_YET = (
    "tracing is not available yet from the editor: it needs workspace trust, which this server does not "
    "ask for yet; run `jaxlsp trace FILE::NAME` in a terminal meanwhile"
)


def register(server: JaxServer) -> None:
    @server.command(TRACE_COMMAND)
    def trace_graph(ls: JaxServer, *args: Any) -> None:
        if len(args) != 1:
            raise invalid(f"{TRACE_COMMAND}: expected one argument {{uri, name, profile?}}, got {len(args)}")
        arg = as_dict(args[0])
        require_str(arg, "uri", "arguments[0]")
        require_str(arg, "name", "arguments[0]")
        raise JsonRpcException(NOT_YET, code=REQUEST_FAILED)

    @server.feature("jaxlsp/trace")
    def trace(ls: JaxServer, params: Any) -> None:
        text_document_uri(params, "params")
        require_str(as_dict(params), "name", "params")
        raise JsonRpcException(NOT_YET, code=REQUEST_FAILED)
