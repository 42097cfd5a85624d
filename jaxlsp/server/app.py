"""The pygls server object, its protocol (which advertises ``experimental.jaxlsp``) and its wiring."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path

from jaxlsp import __version__
from jaxlsp.server import wire
from jaxlsp.server.session import ClientSupport, Options, Session

EXTENSIONS_VERSION = 1


def experimental_capabilities() -> dict[str, wire.ExperimentalCapabilities]:
    """What ``ServerCapabilities.experimental`` advertises (docs/lsp-extensions.md)."""
    return {
        "jaxlsp": {
            "version": EXTENSIONS_VERSION,
            "discover": True,
            "traceGraph": True,
            "commands": ["jaxlsp.traceGraph", "jaxlsp.listTrusted", "jaxlsp.revokeTrust"],
        }
    }


class JaxProtocol(LanguageServerProtocol):
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

    def frame_location(self, frame: Any) -> tuple[str, types.Range]:
        """A graph frame (1-based lines, code-point columns) as a URI and a range in client units."""
        from jaxlsp.discovery.chunks import normalize_newlines
        from jaxlsp.discovery.model import Span
        from jaxlsp.server.convert import to_range

        path = Path(frame.path)
        lines = normalize_newlines(self.session.index.text(path) or "").split("\n")
        span = Span(frame.line - 1, frame.column, frame.end_line - 1, frame.end_column)
        return path.as_uri(), to_range(span, lines, self.workspace.position_codec)

    def refresh_lenses(self) -> None:
        """Ask the client to re-request lenses, only when it said it can take the request."""
        if self.session.support.code_lens_refresh:
            self.workspace_code_lens_refresh(None)


def create_server() -> JaxServer:
    from jaxlsp.server.features import discover, documents, lenses, tracing, views

    server = JaxServer()
    for feature in (documents, lenses, discover, tracing, views):
        feature.register(server)
    return server
