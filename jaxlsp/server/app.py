"""The pygls server object, its protocol (which advertises ``experimental.jaxlsp``) and its wiring."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import attrs
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path

from jaxlsp import __version__
from jaxlsp.server import wire
from jaxlsp.server.session import ClientSupport, Options, Session

log = logging.getLogger(__name__)
EXTENSIONS_VERSION = 1


def experimental_capabilities() -> dict[str, wire.ExperimentalCapabilities]:
    """What ``ServerCapabilities.experimental`` advertises (docs/lsp-extensions.md)."""
    return {
        "jaxlsp": {
            "version": EXTENSIONS_VERSION,
            "discover": True,
            "traceGraph": True,
            "environment": True,
            "openGraph": True,
            "commands": [
                "jaxlsp.traceGraph",
                "jaxlsp.listTrusted",
                "jaxlsp.revokeTrust",
                "jaxlsp.checkEnvironment",
                "jaxlsp.openGraph",
            ],
        }
    }


@attrs.define
class RawRequest:
    """A ``jaxlsp/...`` request whose params stay plain JSON (dicts, lists)."""

    id: int | str
    method: str
    jsonrpc: str
    params: Any = None


@attrs.define
class RawNotification:
    method: str
    jsonrpc: str
    params: Any = None


class JaxProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        # pygls turns untyped params into namedtuples, which rename keys that are not Python
        # identifiers (needs-input answers are key paths such as ``profiles.mlp.dims.batch``) and
        # drop a ``type_name`` key: our own methods get their params as sent.
        method = data.get("method") if isinstance(data, dict) else None
        if isinstance(method, str) and method.startswith("jaxlsp/") and "jsonrpc" in data:
            cls = RawRequest if "id" in data else RawNotification
            return self._converter.structure(data, cls)
        return super().structure_message(data)

    def handle_message(self, message: Any) -> None:
        # pygls drops every message after ``shutdown`` without a word, so a request then would wait
        # forever: the protocol says to answer it with InvalidRequest.
        if self._shutdown and getattr(message, "method", "") != types.EXIT and hasattr(message, "id"):
            if getattr(message, "method", None) is not None:
                error = JsonRpcInvalidRequest()
                error.message = f"the server is shutting down: {message.method} is refused (send exit)"
                self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        result.capabilities.experimental = experimental_capabilities()
        return result


class JaxServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(name="jaxlsp", version=__version__, protocol_cls=JaxProtocol)
        self.session = Session()
        self.index_task: object = None
        self.tracer: Any = None  # features.tracing.Tracer
        self.environment: Any = None  # features.environment.Environments
        self.viewer: Any = None  # features.viewer.Viewers
        # Called with each file whose text changed (typed, closed, or changed on disk).
        self.edit_listeners: list[Callable[[Path], None]] = []

    def configure(self, params: types.InitializeParams) -> None:
        roots: list[Path] = []
        for folder in params.workspace_folders or []:
            path = to_fs_path(folder.uri)
            if path:
                roots.append(Path(path))
        if not roots:
            root = params.root_path or (to_fs_path(params.root_uri) if params.root_uri else None)
            if root:
                roots.append(Path(root))
        self.session.support = ClientSupport.from_capabilities(params.capabilities)
        self.session.options = Options.parse(params.initialization_options)
        self.session.start(roots)

    def frame_location(self, frame: Any, path_text: str | None = None) -> tuple[str, types.Range]:
        """A graph frame (1-based lines, code-point columns) as a URI and a range in client units;
        ``path_text`` is the frame's absolute path (graph paths are relative: ``Trace.frame_path``)."""
        from jaxlsp.discovery.chunks import normalize_newlines
        from jaxlsp.discovery.model import Span
        from jaxlsp.server.convert import to_range

        path = Path(path_text if path_text is not None else frame.path)
        lines = normalize_newlines(self.session.index.text(path) or "").split("\n")
        span = Span(frame.line - 1, frame.column, frame.end_line - 1, frame.end_column)
        return path.as_uri(), to_range(span, lines, self.workspace.position_codec)

    def show_document(self, params: types.ShowDocumentParams) -> None:
        """``window/showDocument`` for clients that support it, without waiting for the answer: a
        reply of ours never hangs on the editor (one that answers null, late or never)."""
        if not self.session.support.show_document:
            return
        self.window_show_document(params).add_done_callback(_log_show_failure)

    def edited(self, path: Path) -> None:
        for listener in self.edit_listeners:
            try:
                listener(path)
            except Exception:  # a view that fails to follow an edit must not lose the edit
                log.exception("edit listener failed")

    def refresh_lenses(self) -> None:
        """Ask the client to re-request lenses, only when it said it can take the request."""
        if self.session.support.code_lens_refresh:
            self.workspace_code_lens_refresh(None)


def _log_show_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.info("window/showDocument failed: %s", future.exception())


def create_server() -> JaxServer:
    from jaxlsp.server.features import discover, documents, environment, lenses, tracing, viewer, views

    server = JaxServer()
    for feature in (documents, lenses, discover, tracing, environment, views, viewer):
        feature.register(server)
    return server
