"""The server as its features see it: :class:`Host`, what a feature may ask of the server.

:class:`jaxlsp.server.app.JaxServer` implements it and ``create_server`` hands it to every feature,
with the other features and services each one needs, by type. A feature depends on this module,
never on ``app`` (which imports the features to build them): this is all of the server a feature
reaches, and a test may give a feature anything that has these members.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TypeVar

from lsprotocol import types
from pygls.progress import Progress
from pygls.workspace import Workspace

from jaxlsp.server.session import Session
from jaxlsp.server.views import OpenNotebooks, View

F = TypeVar("F", bound=Callable[..., Any])


class Host(Protocol):
    """The server's state, its hooks and what it sends to the client, as features use them."""

    # What every feature shares: the workspace session (index, graphs, trust, options) and the
    # notebooks the client synchronises cell by cell.
    session: Session
    notebooks: OpenNotebooks

    # Hooks: the lifecycle and what the editor does, fanned out to the features that follow them.
    on_initialized: list[Callable[[], None]]  # the client said initialized
    on_shutdown: list[Callable[[], Awaitable[None]]]
    edit_listeners: list[Callable[[Path], None]]  # a file's text changed (typed, closed, on disk)
    open_listeners: list[Callable[[str], None]]  # the client opened this document
    notebook_listeners: list[Callable[[Path], None]]  # a notebook synchronised by cells opened or saved
    hover_listeners: list[Callable[[str, int], None]]  # the user hovered this document line
    shown_listeners: list[Callable[[str], None]]  # the editor shows this document (asked its lenses or hints)
    live_note: Callable[[str, str], str | None]  # a target's live-shapes state for its lens title
    live_state: Callable[[str, str], tuple[str, str] | None]  # its live state and cause (hover, actions)

    # pygls: handlers, documents, progress.
    def feature(self, feature_name: str, options: Any | None = None) -> Callable[[F], F]: ...

    def command(self, command_name: str) -> Callable[[F], F]: ...

    @property
    def workspace(self) -> Workspace: ...

    @property
    def work_done_progress(self) -> Progress: ...

    # Messages to the client.
    def notify(self, method: str, params: Any) -> None:
        """A notification of ours (``jaxlsp/...``)."""

    def unstructure(self, value: Any) -> Any:
        """``value`` (an lsprotocol type) as JSON-ready data, as pygls sends it."""

    def window_show_message(self, params: types.ShowMessageParams) -> None: ...

    def window_log_message(self, params: types.LogMessageParams) -> None: ...

    async def window_show_message_request_async(
        self, params: types.ShowMessageRequestParams
    ) -> types.MessageActionItem | None: ...

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...

    def client_register_capability(
        self, params: types.RegistrationParams, callback: Callable[[None], None] | None = None
    ) -> Future[None]: ...

    def show_document(self, params: types.ShowDocumentParams) -> None:
        """``window/showDocument`` when the client supports it, never waiting for the answer."""

    def refresh_lenses(self) -> None:
        """Ask the client to re-request lenses, when it said it can take the request."""

    # Documents over the index, and the hooks' senders.
    def view(self, uri: str) -> View | None:
        """The document at ``uri``: a file, a synchronised notebook cell or a whole notebook."""

    def frame_location(
        self, frame: Any, path_text: str | None = None, cell_uris: list[str] | None = None
    ) -> tuple[str, types.Range]:
        """A graph frame as a URI and a range in client units."""

    def edited(self, path: Path) -> None: ...

    def opened(self, uri: str) -> None: ...

    def hovered(self, uri: str, line: int) -> None: ...

    async def input_handled(self) -> None:
        """Return once every message the client has sent so far was handed to its handler."""
