"""The pygls server object, its protocol (which advertises ``experimental.jaxlsp``), the server's
lifecycle (initialize, initialized, shutdown, fanned out to the features) and its wiring:
:func:`create_server` builds every feature with the services it needs, by type. Features see the
server as a :class:`~jaxlsp.server.host.Host`, which :class:`JaxServer` implements."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import unquote

import attrs
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path

from jaxlsp import __version__
from jaxlsp.capture.environment import userpath
from jaxlsp.graph import collector
from jaxlsp.server import transport, wire
from jaxlsp.server.display import quoted, visible, visible_lines
from jaxlsp.server.encoded import Encoded
from jaxlsp.server.params import invalid, local_path, shown
from jaxlsp.server.session import ClientSupport, Options, Session
from jaxlsp.server.views import OpenNotebooks, View, cell_view, notebook_view
from jaxlsp.textfiles import unresolvable

if TYPE_CHECKING:
    from jaxlsp.server.features import Feature

log = logging.getLogger(__name__)
EXTENSIONS_VERSION = 1
IDLE_SWEEP_AFTER = 30.0  # seconds without a message before kept objects are swept (collector.sweep)
IDLE_SWEEP_EVERY = 600.0  # seconds between two sweeps at least
MAX_METHOD = 256  # characters in a method name
METHOD_NOT_FOUND = -32601
# LSP 3.17 notebook sync: Jupyter notebooks (VS Code's notebook editor). Every cell, markdown too:
# a client syncs only the cells a selector's ``cells`` names (vscode-languageclient drops the
# rest), and a cell's index must be its index in the .ipynb. Only Python cells are read as code.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="jupyter-notebook")],
    save=True,
)


def experimental_capabilities(commands: list[str]) -> dict[str, wire.ExperimentalCapabilities]:
    """What ``ServerCapabilities.experimental`` advertises (docs/lsp-extensions.md); ``commands``
    are the registered ones."""
    return {
        "jaxlsp": {
            "version": EXTENSIONS_VERSION,
            "discover": True,
            "traceGraph": True,
            "environment": True,
            "openGraph": True,
            "costs": True,
            "diff": True,
            "values": True,
            "commands": commands,
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
    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        # cattrs' detailed validation goes on past the first mismatch and pygls formats the whole
        # exception group: a 16,000-character string as a code action's diagnostics took 5 s
        # (one failure per character), 5 ms at the first failure. Our error does not quote it.
        self._converter.detailed_validation = False
        self.last_message = time.monotonic()
        self._writes: set[asyncio.Future[Any]] = set()  # writes of send_text in flight (asyncio writers)
        self.reader_idle: asyncio.Event | None = None  # set by transport.run: all input read is handled

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
        self.last_message = time.monotonic()
        method = getattr(message, "method", None)
        if isinstance(method, str) and len(method) > MAX_METHOD:
            # pygls would quote the whole name back ("Method Not Found: ..."), 10 MB and all.
            if hasattr(message, "id"):
                self.send_error(
                    message.id, METHOD_NOT_FOUND, f"no method named {method[:60]!r}... ({len(method):,} characters)"
                )
            return
        # pygls drops every message after ``shutdown`` without a word, so a request then would wait
        # forever: the protocol says to answer it with InvalidRequest.
        if self._shutdown and getattr(message, "method", "") != types.EXIT and hasattr(message, "id"):
            if getattr(message, "method", None) is not None:
                error = JsonRpcInvalidRequest()
                error.message = f"the server is shutting down: {message.method} is refused (send exit)"
                self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)

    def cancel_request(self, msg_id: int | str) -> None:
        """``$/cancelRequest`` for ``msg_id``, as pygls handles it (cancel the request's task if it
        is still running; nothing for an unknown or finished one), straight from the transport."""
        self.last_message = time.monotonic()
        future = self._request_futures.pop(msg_id, None)
        if future is not None:
            future.cancel()

    def _handle_response(self, msg_id: Any, result: Any | None = None, error: Any | None = None) -> None:
        # A request of ours whose waiter was cancelled (the client cancelled the trace that asked
        # for trust or progress) has a cancelled future: pygls would set its result anyway and log
        # an InvalidStateError traceback per late answer (4,460 in a cancel storm). Drop it.
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            del self._request_futures[msg_id]
            return
        super()._handle_response(msg_id, result, error)

    def _send_response(self, msg_id: Any, result: Any | None = None, error: Any | None = None) -> None:
        # A big answer a handler encoded in slices (encoded.py) is sent as it is: pygls would
        # convert and encode it again in one piece, holding the loop.
        if error is None and isinstance(result, Encoded):
            self._result_types.pop(msg_id, None)
            self.send_text(f'{{"jsonrpc": "2.0", "id": {json.dumps(msg_id)}, "result": {result.text}}}')
            return
        if error is not None and isinstance(error.message, str):
            # An editor shows an error's message to the user (VS Code: showErrorMessage). Names are
            # escaped where a message is made; text passed on whole is escaped here, lines kept.
            error = attrs.evolve(error, message=visible_lines(error.message))
        super()._send_response(msg_id, result, error)

    def unstructure(self, value: Any) -> Any:
        """``value`` (an lsprotocol type) as JSON-ready data, as pygls sends it."""
        return self._converter.unstructure(value)

    def send_text(self, body: str) -> None:
        """One message whose JSON text is ``body``, framed as pygls frames its own (``_send_data``)."""
        if self.writer is None:
            log.error("unable to send a message: no transport")
            return
        header = f"Content-Length: {len(body.encode(self.CHARSET))}\r\n"
        if self._include_headers:
            data = f"{header}Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n{body}"
        else:
            data = body
        written = self.writer.write(data.encode(self.CHARSET))
        if inspect.isawaitable(written):  # an asyncio writer's drain: pygls leaves it to run too
            self._writes.add(task := asyncio.ensure_future(written))
            task.add_done_callback(self._writes.discard)

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None:
        """An error response written as it is: ``id`` may be null (a message whose id is unreadable)."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Generator[Any, Any, Any]:
        # pygls quotes an unknown command's whole name back: name it by a short prefix instead.
        if params.command not in self.fm.commands:
            raise invalid(f"params.command: no command named {shown(params.command)}")
        return (yield from super().lsp_workspace__execute_command(params))

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        result.capabilities.experimental = experimental_capabilities(sorted(self.fm.commands))
        return result


class JaxServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            name="jaxlsp", version=__version__, protocol_cls=JaxProtocol, notebook_document_sync=NOTEBOOK_SYNC
        )
        self.session = Session()
        self.notebooks = OpenNotebooks()  # cell document URIs of the notebooks the client syncs
        # The lifecycle, fanned out: called once the client said initialized, and at shutdown.
        self.on_initialized: list[Callable[[], None]] = []
        self.on_shutdown: list[Callable[[], Awaitable[None]]] = []
        # Called with each file whose text changed (typed, closed, or changed on disk).
        self.edit_listeners: list[Callable[[Path], None]] = []
        # Called with each document the client opens (live shapes trace what it defines).
        self.open_listeners: list[Callable[[str], None]] = []
        # a notebook synchronised cell by cell was opened or saved (its path): live shapes
        self.notebook_listeners: list[Callable[[Path], None]] = []
        # the user hovered this document line (live shapes trace that line's target first)
        self.hover_listeners: list[Callable[[str, int], None]] = []
        self.shown_listeners: list[Callable[[str], None]] = []
        # A target's live-shapes state for its lens title (live.py): None when it has nothing to say.
        self.live_note: Callable[[str, str], str | None] = lambda uri, name: None
        # A target's live state and its cause (``("notLive", "needs input ...")``), None when live
        # shapes have not seen it: a hover on a line without a shape says why, an action offers
        # Learn shapes (create_server reads it from the live scheduler).
        self.live_state: Callable[[str, str], tuple[str, str] | None] = lambda uri, name: None
        self.sweeper: asyncio.Future[None] | None = None  # sweep_when_idle, from initialized on

    @property
    def jax_protocol(self) -> JaxProtocol:
        assert isinstance(self.protocol, JaxProtocol)
        return self.protocol

    def close(self) -> None:
        """pygls' ``shutdown`` (stop the loop, the thread pool, a TCP server), typed."""
        super().shutdown()  # type: ignore[no-untyped-call]

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls' stdio server on :mod:`jaxlsp.server.transport`'s bounded loop; a stream that breaks
        a limit ends the server with one log line and exit status 1."""
        self._stop_event = threading.Event()
        reader = transport.StdinReader(stdin or sys.stdin.buffer, self.thread_pool)
        out = stdout or sys.stdout.buffer
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a test's BytesIO has no descriptor
            transport.widen_pipe(out.fileno())
        writer = transport.ThreadedWriter(out, self._stop_event.set)
        self.protocol.set_writer(writer)
        broken: transport.TransportError | None = None
        try:
            asyncio.run(transport.run(self._stop_event, reader, self.jax_protocol))
        except transport.TransportError as exc:
            broken = exc
        except BrokenPipeError:
            log.error("the connection to the client is lost: shutting down")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.close()
            writer.close()  # what is still queued goes out (``exit`` sent it already)
        if broken is not None:
            transport.fatal(broken)

    def start_tcp(self, host: str, port: int) -> None:
        """One client over TCP, through the same bounded loop."""
        self._stop_event = stop = threading.Event()
        done: asyncio.Future[None] | None = None

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)
            try:
                await transport.run(stop, transport.StreamReader(reader), self.jax_protocol)
            except transport.TransportError as exc:
                if done is not None and not done.done():
                    done.set_exception(exc)
                return
            if done is not None and not done.done():
                done.set_result(None)

        async def serve() -> None:
            nonlocal done
            done = asyncio.get_running_loop().create_future()
            server = await asyncio.start_server(connection, host, port, limit=transport.MAX_HEADER + 1)
            async with server:
                await done

        try:
            asyncio.run(serve())
        except transport.TransportError as exc:
            self.close()
            transport.fatal(exc)
        except (KeyboardInterrupt, SystemExit):
            pass
        self.close()

    async def input_handled(self) -> None:
        """Return once every message the client has sent so far was handed to its handler (the
        reader waits for more): a request that a later one in the same burst supersedes or cancels
        is then cancelled before it starts anything (``transport.framing.Frames.idle``)."""
        idle = self.jax_protocol.reader_idle
        if idle is not None:
            await idle.wait()

    def configure(self, params: types.InitializeParams) -> None:
        roots: list[Path] = []
        for folder in params.workspace_folders or []:
            self._add_root(roots, to_fs_path(folder.uri))
        if not roots:
            root = params.root_path or (to_fs_path(params.root_uri) if params.root_uri else None)
            self._add_root(roots, root)
        for (
            folder_root
        ) in roots:  # no PYTHONPATH entry inside a workspace reaches a capture (capture/environment/userpath.py)
            userpath.add_workspace(folder_root)
        self.session.support = ClientSupport.from_capabilities(params.capabilities)
        self.session.options = Options.parse(params.initialization_options)
        self.session.start(roots)

    def _add_root(self, roots: list[Path], path: str | None) -> None:
        """Add a workspace folder, unless it cannot be a folder at all (a NUL character, a symlink
        loop): that one is refused, logged now and told to the user once initialized, and the
        session goes on with the others."""
        if not path or any(path == refused for refused, _ in self.session.refused):
            return
        why = unresolvable(Path(path))
        if why is None:
            roots.append(Path(path))
            return
        log.warning("workspace folder %s is not used: %s", visible(path), why)
        self.session.refused.append((path, why))

    def tell_refused(self) -> None:
        for path, why in self.session.refused:
            message = f"jaxlsp: the workspace folder {quoted(path)} is not used: {why}"
            self.window_show_message(types.ShowMessageParams(types.MessageType.Warning, message))

    def lines(self, path: Path) -> list[str]:
        """A file's lines as the index has them (the open document, else a bounded disk read;
        never pygls' own unbounded read of a document the client did not open)."""
        from jaxlsp.discovery.chunks import normalize_newlines

        return normalize_newlines(self.session.index.text(path) or "").split("\n")

    def view(self, uri: str) -> View | None:
        """The document at ``uri`` over the index: a file, a notebook cell the client synchronises,
        or a notebook as one document (views.py); None for anything else."""
        ref = self.notebooks.cell(uri)
        if ref is not None:
            doc = self.workspace.text_documents.get(unquote(uri))
            return cell_view(ref, self.session.index.cells(ref.path), doc.source if doc is not None else "")
        path = local_path(uri)
        if path is None:
            return None
        if path.suffix == ".ipynb":
            cells = self.session.index.cells(path)
            if cells is None:
                return None
            doc = self.workspace.text_documents.get(unquote(uri))
            return notebook_view(uri, path, cells, doc.source if doc is not None else None)
        return View(uri, path, self.lines(path))

    def frame_location(
        self, frame: Any, path_text: str | None = None, cell_uris: list[str] | None = None
    ) -> tuple[str, types.Range]:
        """A graph frame (1-based lines, code-point columns) as a URI and a range in client units;
        ``path_text`` is the frame's absolute path (graph paths are relative: ``Trace.frame_path``).
        In a notebook: the cell's document when the client synchronises cells, else the notebook's;
        ``cell_uris`` (a trace's ``cellUris``: the notebook's cell documents when it was traced)
        name the frame's cell even after cells were inserted or deleted above it."""
        from jaxlsp.discovery.entrypoints import Span
        from jaxlsp.server.convert import to_range

        path = Path(path_text if path_text is not None else frame.path)
        if frame.cell is None:
            lines = self.lines(path)
            span = Span(frame.line - 1, frame.column, frame.end_line - 1, frame.end_column)
            return path.as_uri(), to_range(span, lines, self.workspace.position_codec)
        then = cell_uris[frame.cell] if cell_uris and frame.cell < len(cell_uris) else None
        uri = (then if then and self.notebooks.cell(then) else None) or self.notebooks.cell_uri(path, frame.cell)
        uri = uri or path.as_uri()
        view = self.view(uri)
        start = view.frame_line(frame.cell, frame.line) if view is not None else None
        if view is None or start is None:
            return uri, types.Range(types.Position(0, 0), types.Position(0, 0))
        end = view.frame_line(frame.cell, frame.end_line)
        span = Span(start, frame.column, end if end is not None else start, frame.end_column)
        return uri, to_range(span, view.lines, self.workspace.position_codec)

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

    def hovered(self, uri: str, line: int) -> None:
        for listener in self.hover_listeners:
            try:
                listener(uri, line)
            except Exception:  # what a feature learns from a hover must not lose the hover
                log.exception("hover listener failed")

    def opened(self, uri: str) -> None:
        for listener in self.open_listeners:
            try:
                listener(uri)
            except Exception:  # a feature that fails to follow an open must not lose the document
                log.exception("open listener failed")

    def notify(self, method: str, params: Any) -> None:
        self.protocol.notify(method, params)

    def unstructure(self, value: Any) -> Any:
        return self.jax_protocol.unstructure(value)

    def refresh_lenses(self) -> None:
        """Ask the client to re-request lenses, only when it said it can take the request."""
        if self.session.support.code_lens_refresh:
            self.workspace_code_lens_refresh(None)


def _log_show_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.info("window/showDocument failed: %s", future.exception())


def register_lifecycle(server: JaxServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: JaxServer, params: types.InitializeParams) -> None:
        ls.configure(params)

    @server.feature(types.INITIALIZED)
    def initialized(ls: JaxServer, params: types.InitializedParams) -> None:
        ls.tell_refused()
        ls.sweeper = asyncio.ensure_future(sweep_when_idle(ls.jax_protocol))
        for started in ls.on_initialized:
            started()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: JaxServer, params: Any) -> None:
        if ls.sweeper is not None:
            ls.sweeper.cancel()
        for stop in ls.on_shutdown:
            try:
                await stop()
            except Exception:  # one feature that fails to stop must not keep the others running
                log.exception("a feature failed to shut down")


async def sweep_when_idle(protocol: JaxProtocol) -> None:
    """Sweep the kept objects (``collector.sweep``: frees the reference cycles frozen with them)
    once the client has been quiet for ``IDLE_SWEEP_AFTER`` seconds, at most once in
    ``IDLE_SWEEP_EVERY`` seconds: the one full pass over everything would hold requests up to a
    second in a big workspace. Runs until cancelled."""
    swept = time.monotonic()
    while True:
        now = time.monotonic()
        wait = max(IDLE_SWEEP_AFTER - (now - protocol.last_message), IDLE_SWEEP_EVERY - (now - swept))
        if wait > 0:
            await asyncio.sleep(wait)
            continue
        collector.sweep()
        swept = time.monotonic()


def create_server() -> JaxServer:
    """The server with every feature, each given the services it uses (esbonio's way, by type)."""
    from jaxlsp.capture.service import CaptureService
    from jaxlsp.live.schedule import Target
    from jaxlsp.server.features.costs import Costs
    from jaxlsp.server.features.diff import Diff
    from jaxlsp.server.features.discover import Discover
    from jaxlsp.server.features.documents import Documents
    from jaxlsp.server.features.environment import Environments
    from jaxlsp.server.features.exporting import Export
    from jaxlsp.server.features.graphs import Graphs
    from jaxlsp.server.features.hover import Hover
    from jaxlsp.server.features.learning import Learning
    from jaxlsp.server.features.lenses import Lenses
    from jaxlsp.server.features.live import Live
    from jaxlsp.server.features.navigation import Navigation
    from jaxlsp.server.features.notebooks import Notebooks
    from jaxlsp.server.features.tracing import Tracing
    from jaxlsp.server.features.trust import TrustPrompt
    from jaxlsp.server.features.values import Values
    from jaxlsp.server.features.viewer import Viewer

    server = JaxServer()
    register_lifecycle(server)
    trust = TrustPrompt(server)
    environments = Environments(server, trust)
    capture = CaptureService(store=server.session.graphs, gate=environments.before_capture)
    server.on_shutdown.append(capture.close)
    navigation = Navigation(server)
    viewer = Viewer(server, navigation)
    documents = Documents(server)
    tracing = Tracing(server, trust, capture)
    live = Live(server, tracing)
    learning = Learning(server, trust)
    learning.after.append(live.learned)  # what is open is traced again on what was learned
    live.saved.append(learning.saved)  # a save learns again what loads the file, where learning on open is on

    def live_state(uri: str, name: str) -> tuple[str, str] | None:
        status = live.scheduler.statuses.get(Target(uri, name))
        return None if status is None else (status.state, status.cause)

    server.live_state = live_state
    features: list[Feature] = [
        documents,
        Notebooks(server, documents),
        Lenses(server, documents),
        Discover(server, documents),
        trust,
        tracing,
        live,
        learning,
        Values(server, tracing, capture),
        Graphs(server),
        Costs(server),
        Diff(server),
        navigation,
        Export(server, navigation),
        Hover(server, viewer, documents),
        environments,
        viewer,
    ]
    for feature in features:
        feature.register(server)
    return server
