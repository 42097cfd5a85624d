"""End-to-end fixtures: a real ``python -m jaxlsp serve`` driven by a pytest-lsp client.

Every test gets its own copy of a fixture workspace (``tests/workspaces/<name>``) in ``tmp_path``
and its own server process, so tests are independent and can run in parallel (``-n 2``).

The test client (:class:`JaxClient`) records what the server sends on its own initiative:
``workspace/codeLens/refresh`` requests, ``client/registerCapability`` registrations and work-done
progress. Tests wait on those with :func:`within` over events, never by sleeping: every wait is a
deadline in seconds on the reference machine that follows this machine while it waits
(``tests/deadlines.py``), and around a helper that has its own, the test's deadline is the one that
counts (``within(client.request(...), 240)``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, Union

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.lsp.client import LanguageClient as BaseLanguageClient
from pygls.protocol import JsonRPCResponseMessage, default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from tests import deadlines

WORKSPACES = Path(__file__).resolve().parent.parent / "workspaces"
SERVER_COMMAND = [sys.executable, "-m", "jaxlsp", "serve"]
CLIENTS = ["visual-studio-code", "neovim"]
WAIT = 10.0  # seconds (reference machine, scaled inside within) for one wait on the server: a deadline, not a pace

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = WAIT) -> T:
    """Await with a deadline of ``seconds`` on the reference machine, so a silent server fails the
    test instead of hanging it. The deadline follows the machine while it waits, and inside another
    ``within`` (a helper's default around a request, under the test's own) the outer one counts."""
    return await deadlines.wait_for(awaitable, seconds)


def plain(value: Any) -> Any:
    """pygls hands untyped results over as namedtuples: turn them back into JSON-like data."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _client_converter() -> Any:
    """pygls' converter, except that a CodeAction carrying a command stays a CodeAction.

    lsprotocol picks ``Command`` for any object with a ``command`` key; a CodeAction's
    ``command`` is an object, a Command's is a string.
    """
    converter = default_converter()

    def command_or_action(obj: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], command_or_action)  # noqa: UP007
    # Results of jaxlsp's own requests stay JSON: pygls' namedtuples would rename keys that are
    # not identifiers (needs-input ``errors`` are keyed by paths such as ``profiles.p.dims.batch``).
    converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
    return converter


class JaxClient(LanguageClient):
    """A pytest-lsp client that records the server's own requests and progress."""

    def __init__(self) -> None:
        super().__init__(converter_factory=_client_converter)
        self.client_name = ""
        self.workspace = Path()
        self.initialize_result: types.InitializeResult | None = None
        self.refreshes = 0
        self.registrations: list[types.Registration] = []
        self.trust_answer: str | None = "Cancel"  # what the "user" answers to a trust prompt
        self.trust_prompts: list[str] = []
        self.finished: list[dict[str, Any]] = []  # jaxlsp/traceFinished notifications
        self.shown: list[types.ShowDocumentParams] = []  # window/showDocument requests
        self.show_answers = True  # False: answer showDocument with null, as a sloppy client might
        self.progress_kinds: dict[types.ProgressToken, list[str]] = {}
        self._changed = asyncio.Event()
        self._versions: dict[str, int] = {}
        self._finished = False

    within = staticmethod(within)
    plain = staticmethod(plain)

    async def finish(self) -> None:
        """``shutdown`` + ``exit``, and wait for the server process to end (once)."""
        if not self._finished:
            self._finished = True
            await within(self.shutdown_session())

    # -- what the server sends -----------------------------------------------------------------
    def _signal(self) -> None:
        self._changed.set()

    async def wait_until(self, predicate: Callable[[], bool], seconds: float = WAIT) -> None:
        """Wait until ``predicate()`` holds; it is re-checked whenever the server sends something."""

        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await within(loop(), seconds)

    async def wait_for_refreshes(self, count: int) -> None:
        await self.wait_until(lambda: self.refreshes >= count)

    def indexing_ended(self) -> bool:
        return any("end" in kinds for kinds in self.progress_kinds.values())

    async def wait_indexed(self) -> None:
        """Wait for the end of the indexing progress (every client used here supports progress)."""
        await self.wait_until(self.indexing_ended)

    @property
    def refresh_support(self) -> bool:
        caps = self.capabilities
        ws = caps.workspace if caps else None
        return bool(ws and ws.code_lens and ws.code_lens.refresh_support)

    # -- documents -----------------------------------------------------------------------------
    def uri(self, relpath: str) -> str:
        return (self.workspace / relpath).as_uri()

    def open(self, relpath: str) -> str:
        path = self.workspace / relpath
        uri = path.as_uri()
        self._versions[uri] = 1
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=path.read_text(encoding="utf-8")
                )
            )
        )
        return uri

    def open_text(self, uri: str, text: str) -> str:
        """A document the client holds under ``uri`` with ``text`` (not the file's own text)."""
        self._versions[uri] = 1
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        return uri

    def edit(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """One incremental change replacing ``start..end`` (line, character) by ``text``."""
        self._versions[uri] += 1
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*start), types.Position(*end)), text=text
        )
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self._versions[uri]),
                content_changes=[change],
            )
        )

    async def lenses(self, uri: str) -> list[types.CodeLens]:
        result = await within(
            self.text_document_code_lens_async(
                types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
        )
        return list(result or [])

    async def lens_names(self, uri: str) -> list[tuple[str, int]]:
        """``(name, 0-based line)`` of every lens, in order."""
        return [(lens.data["name"], lens.range.start.line) for lens in await self.lenses(uri)]

    async def actions(self, uri: str, line: int, character: int = 0, end: tuple[int, int] | None = None) -> list[Any]:
        last = types.Position(*end) if end else types.Position(line, character)
        result = await within(
            self.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(types.Position(line, character), last),
                    context=types.CodeActionContext(diagnostics=[]),
                )
            )
        )
        return list(result or [])

    async def request(self, method: str, params: Any, seconds: float = WAIT) -> Any:
        """A request's result (plain JSON) within ``seconds``, or the deadline of a ``within`` around it."""
        return plain(await within(self.protocol.send_request_async(method, params), seconds))


class StderrClient(JaxClient):
    """A client that keeps the server's stderr (as text lines) instead of forwarding it."""

    def __init__(self) -> None:
        super().__init__()
        self.stderr_lines: list[str] = []
        self._stderr_task: asyncio.Task[None] | None = None

    async def start_io(self, cmd: str, *args: Any, **kwargs: Any) -> None:
        await BaseLanguageClient.start_io(self, cmd, *args, **kwargs)
        self._stderr_task = asyncio.create_task(self._collect())

    async def _collect(self) -> None:
        process = self._server
        if process is None or process.stderr is None:
            return
        while line := await process.stderr.readline():  # drain continuously: never let the pipe fill
            self.stderr_lines.append(line.decode("utf-8", "replace").rstrip("\n"))

    async def stderr_closed(self) -> list[str]:
        """Everything the server wrote to stderr, once it has exited."""
        assert self._stderr_task is not None
        await within(asyncio.shield(self._stderr_task))
        return self.stderr_lines

    async def stop(self) -> Any:
        if self._stderr_task is not None:
            self._stderr_task.cancel()
        return await super().stop()


def make_client(cls: type[JaxClient] = JaxClient) -> JaxClient:
    client = cls()
    features = dict(DEFAULT_CLIENT_FEATURES)
    default_progress = features.pop(types.PROGRESS)
    features.pop(types.WINDOW_SHOW_DOCUMENT, None)  # ours below records what the server asks to show
    register_lsp_features(client, features)

    @client.feature(types.PROGRESS)
    def on_progress(ls: JaxClient, params: types.ProgressParams) -> None:
        default_progress(ls, params)
        value = plain(params.value) if params.value else {}
        ls.progress_kinds.setdefault(params.token, []).append(value.get("kind", "?"))
        ls._signal()

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(ls: JaxClient, params: None) -> None:
        ls.refreshes += 1
        ls._signal()

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(ls: JaxClient, params: types.RegistrationParams) -> None:
        ls.registrations.extend(params.registrations)
        ls._signal()

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_message_request(ls: JaxClient, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        ls.trust_prompts.append(params.message)
        ls._signal()
        return types.MessageActionItem(title=ls.trust_answer) if ls.trust_answer else None

    @client.feature(types.WINDOW_SHOW_DOCUMENT)
    def on_show_document(ls: JaxClient, params: types.ShowDocumentParams) -> types.ShowDocumentResult | None:
        ls.shown.append(params)
        ls._signal()
        return types.ShowDocumentResult(success=True) if ls.show_answers else None

    @client.feature("jaxlsp/traceFinished")
    def on_trace_finished(ls: JaxClient, params: Any) -> None:
        ls.finished.append(plain(params))
        ls._signal()

    return client


# The per-user trust store (XDG_CONFIG_HOME) and exports (XDG_CACHE_HOME): keep the tests' apart.
SERVER_ENV = {
    **os.environ,
    "XDG_CONFIG_HOME": tempfile.mkdtemp(prefix="jaxlsp-test-config-"),
    "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="jaxlsp-test-cache-"),
}
CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=make_client, server_env=SERVER_ENV)
IMPORTTIME_CONFIG = ClientServerConfig(
    server_command=[sys.executable, "-X", "importtime", "-m", "jaxlsp", "serve"],
    client_factory=lambda: make_client(StderrClient),
    server_env=SERVER_ENV,
)


def copy_workspace(name: str, dest: Path, *leave_out: str) -> Path:
    """A private copy of ``tests/workspaces/NAME`` under ``dest``, less the ``leave_out`` patterns."""
    target = dest / name
    shutil.copytree(WORKSPACES / name, target, ignore=shutil.ignore_patterns(*leave_out) if leave_out else None)
    return target.resolve()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A private copy of ``tests/workspaces/lsp_basic``."""
    return copy_workspace("lsp_basic", tmp_path)


def initialize_params(client_name: str, root: Path) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=pytest_lsp.client_capabilities(client_name),
        root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
    )


def _session(clients: list[str], name: str, config: ClientServerConfig = CONFIG) -> Any:
    """A client fixture, initialized on a fresh workspace copy, once per client capability set."""

    @pytest_lsp.fixture(config=config, params=clients, name=name)
    async def fixture(lsp: JaxClient, request: pytest.FixtureRequest, workspace: Path) -> AsyncIterator[None]:
        lsp.client_name = request.param
        lsp.workspace = workspace
        lsp.initialize_result = await within(lsp.initialize_session(initialize_params(request.param, workspace)))
        yield
        await lsp.finish()

    return fixture


def trusted_session(
    workspace: str,
    name: str = "client",
    config: ClientServerConfig = CONFIG,
    options: dict[str, Any] | None = None,
    leave_out: tuple[str, ...] = (),
) -> Any:
    """A VS Code-like client on a copy of ``tests/workspaces/WORKSPACE`` (less ``leave_out``);
    ``options`` are its ``initializationOptions.jaxlsp``, by default trusted with live shapes off
    (the tests that use it trace explicitly and count what ran)."""
    jaxlsp = {"liveShapes": False, "trusted": True} if options is None else options

    @pytest_lsp.fixture(config=config, params=["visual-studio-code"], name=name)
    async def fixture(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
        root = copy_workspace(workspace, tmp_path, *leave_out)
        lsp.client_name = request.param
        lsp.workspace = root
        params = initialize_params(request.param, root)
        params.initialization_options = {"jaxlsp": jaxlsp}
        lsp.initialize_result = await within(lsp.initialize_session(params))
        yield
        await lsp.finish()

    return fixture


client = _session(CLIENTS, "client")
# ``python -X importtime -m jaxlsp serve`` with VS Code's capabilities; the client keeps stderr.
importtime_client = _session(["visual-studio-code"], "importtime_client", IMPORTTIME_CONFIG)
