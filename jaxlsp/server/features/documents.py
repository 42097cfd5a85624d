"""Document sync, watched files, the background workspace index (with work-done progress), and
the "not analysed" diagnostics where discovery did not look."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from pathlib import Path

from lsprotocol import types

from jaxlsp.discovery.chunks import normalize_newlines
from jaxlsp.notebook import build_module, cells_shown, is_notebook
from jaxlsp.server.app import JaxServer
from jaxlsp.server.params import local_path

log = logging.getLogger(__name__)
REPORT_EVERY = 25  # files between two progress reports
SLICE = 0.01  # seconds of indexing between two chances for requests (and cancels) to run


class Documents:
    def __init__(self, ls: JaxServer) -> None:
        self.ls = ls
        self.index_task: asyncio.Future[None] | None = None
        self._said: dict[Path, tuple[tuple[int, str], ...]] = {}  # what each file's skips said last
        self._published: dict[Path, set[str]] = {}  # the documents each file's skips went to

    def register(self, server: JaxServer) -> None:
        server.on_initialized.append(self.initialized)

        @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
        def did_open(ls: JaxServer, params: types.DidOpenTextDocumentParams) -> None:
            self.sync(params.text_document.uri)
            ls.opened(params.text_document.uri)

        @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
        def did_change(ls: JaxServer, params: types.DidChangeTextDocumentParams) -> None:
            self.sync(params.text_document.uri)

        @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
        def did_close(ls: JaxServer, params: types.DidCloseTextDocumentParams) -> None:
            path = local_path(params.text_document.uri)
            if path is not None and ls.session.index.close(path):
                ls.refresh_lenses()
            if path is not None:
                ls.edited(path)  # closing drops unsaved edits: the disk text counts again

        @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
        def watched(ls: JaxServer, params: types.DidChangeWatchedFilesParams) -> None:
            changed = False
            for event in params.changes:
                path = local_path(event.uri)
                if path is not None and path.suffix in (".py", ".ipynb"):
                    changed = ls.session.index.file_changed(path) or changed
                    ls.edited(path)
            if changed:
                ls.refresh_lenses()

    def initialized(self) -> None:
        ls = self.ls
        if ls.session.support.watched_files_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=p) for p in ("**/*.py", "**/*.ipynb")]
            )
            registration = types.Registration(
                id=str(uuid.uuid4()), method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
            )
            ls.client_register_capability(types.RegistrationParams(registrations=[registration]))
        self.index_task = asyncio.ensure_future(self.index_workspace())

    def sync(self, uri: str) -> None:
        """Feed an open document's text to the index; other files' lenses may depend on it."""
        path = local_path(uri)
        if path is not None and is_notebook(path):
            self.sync_notebook(uri, path)
            return
        if path is None or path.suffix not in (".py", ".pyi"):
            return
        doc = self.ls.workspace.get_text_document(uri)
        if self.ls.session.index.set_text(path, doc.source):
            self.ls.refresh_lenses()
        self.ls.edited(path)
        self.report_skips(path)

    def sync_notebook(self, uri: str, path: Path) -> None:
        """A notebook opened as one Python document (jupyterlab-lsp's virtual document): its code
        cells as the client shows them, unsaved edits included, feed the index like an open
        ``.py`` document's text, so an edited cell gets its lenses and marks traces stale. When the
        document cannot be read as the notebook's cells (:func:`jaxlsp.notebook.cells_shown`),
        the disk's cells count."""
        ls = self.ls
        doc = ls.workspace.get_text_document(uri)
        if ls.notebooks.is_open(path) or doc.language_id not in (None, "python"):
            return  # synchronised cell by cell (notebooks.py), or the notebook's JSON as text
        index = ls.session.index
        saved = index.disk_cells(path)
        shown = cells_shown(saved, normalize_newlines(doc.source).split("\n")) if saved is not None else None
        changed = index.set_notebook(path, build_module(shown)) if shown is not None else index.close(path)
        if changed:
            ls.refresh_lenses()
        ls.edited(path)
        self.report_skips(path)

    def report_skips(self, path: Path) -> None:
        """A warning diagnostic (and a log line) where discovery did not look: a file it did not
        read, statements it did not parse (discovery/budget.py). Cleared once there is nothing to say."""
        skips = self.ls.session.index.skips(path)
        key = Path(os.path.abspath(path))
        said = tuple((s.line, s.reason) for s in skips)
        if self._said.get(key, ()) == said:
            return
        self._said[key] = said
        by_uri: dict[str, list[types.Diagnostic]] = {uri: [] for uri in self._published.pop(key, ())}
        for skip in skips:
            log.warning("not analysed: %s:%d: %s", path, skip.line + 1, skip.reason)
            uri, line = self.where(key, skip.line)
            by_uri.setdefault(uri, []).append(
                types.Diagnostic(
                    range=types.Range(types.Position(line, 0), types.Position(line + 1, 0)),
                    message=f"jaxlsp did not analyse this {'file' if skip.whole_file else 'statement'}: "
                    f"{skip.reason} (nothing defined here gets a lens)",
                    severity=types.DiagnosticSeverity.Warning,
                    source="jaxlsp",
                    code="not-analysed",
                )
            )
        by_uri.setdefault(key.as_uri(), [])
        for uri, diagnostics in by_uri.items():
            self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
        self._published[key] = {uri for uri, diagnostics in by_uri.items() if diagnostics}

    def where(self, path: Path, line: int) -> tuple[str, int]:
        """The document and line showing module ``line`` of ``path``: in a notebook whose cells the
        client synchronises, the cell's document; else the file (a whole-notebook document's line)."""
        cells = self.ls.session.index.cells(path) if path.suffix == ".ipynb" else None
        found = cells.locate(line) if cells is not None else None
        if found is None:
            return path.as_uri(), line
        uri = self.ls.notebooks.cell_uri(path, found[0])
        if uri is not None:
            return uri, found[1]
        view = self.ls.view(path.as_uri())
        shown = view.from_module(line) if view is not None else None
        return path.as_uri(), shown if shown is not None else 0

    async def index_workspace(self) -> None:
        ls = self.ls
        session = ls.session
        token: str | None = None
        if session.support.work_done_progress:
            token = f"jaxlsp-index-{uuid.uuid4()}"
            try:
                await ls.work_done_progress.create_async(token)
                ls.work_done_progress.begin(
                    token,
                    types.WorkDoneProgressBegin(title="jaxlsp: indexing", message="scanning workspace", percentage=0),
                )
            except Exception:  # a client that refuses progress still gets an index
                log.warning("work-done progress refused; indexing silently", exc_info=True)
                token = None
        count = 0
        paused = time.monotonic()
        try:
            for done in session.index.scan():
                if done is not None:
                    count += 1
                    if session.index.skips(done):
                        self.report_skips(done)
                    if token is not None and count % REPORT_EVERY == 0:
                        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=f"{count} files"))
                if time.monotonic() - paused >= SLICE:
                    await asyncio.sleep(0)  # let requests and cancels in, between statements
                    paused = time.monotonic()
            for path in list(session.index.unread):
                self.report_skips(path)
        except Exception:
            log.exception("workspace indexing failed")
        finally:
            session.indexed = True
            if token is not None:
                ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=f"{count} files indexed"))
        ls.refresh_lenses()
