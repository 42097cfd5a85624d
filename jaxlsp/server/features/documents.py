"""Document sync, watched files, the background workspace index (with work-done progress), and
the "not analysed" diagnostics where discovery did not look.

Nothing here parses on the event loop for longer than a slice (``SLICE``): an opened or changed
document is summarised by a background task that yields between statements, watched-file changes
are handled the same way, and a request that needs a file's summary awaits :meth:`Documents.ready`
(which also makes, in slices, the parses a lens request needs). A 25,000-function file held every
request 19 s, 16,000 watched-file changes 4.5 s (issue 25).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
import uuid
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import TypeVar

from lsprotocol import types

from jaxlsp.discovery import Discovery
from jaxlsp.discovery.budget import Refusal
from jaxlsp.discovery.chunks import normalize_newlines
from jaxlsp.notebook import Module, build_module, cells_shown, is_notebook
from jaxlsp.server.host import Host
from jaxlsp.server.params import local_path

log = logging.getLogger(__name__)
REPORT_EVERY = 25  # files between two progress reports
# Seconds of indexing between two chances for requests (and cancels) to run. A hover waits a slice
# of each busy task at each of its three turns of the loop (read, handle, answer): at 10 ms, its
# median during the hostile files was 56-93 ms, at 4 ms 30 ms (benchmarks/soak.py, issue 25).
SLICE = 0.004
SOURCES = (".py", ".pyi", ".ipynb")  # what ready() and discover() summarise
KEEP_DISCOVERIES = 32  # files whose entrypoints are kept for the next lens request
MAX_SKIP_DIAGNOSTICS = 100  # "not analysed" diagnostics per file; one more says how many were left out
T = TypeVar("T")


def settle() -> None:
    """Keep what was just summarised out of the garbage collector's full passes.

    Summaries hold no cycles, so refcounting frees them when they are replaced; but a full pass
    walks every live object, and a few hundred thousand of them (a workspace of big files) made
    passes of 0.2-1 s on a busy machine, holding the loop as long. ``gc.freeze`` moves the live
    objects out of those passes; the young generations are collected first, so the cyclic garbage
    of the moment is not kept with them."""
    gc.collect(1)
    gc.freeze()


async def sliced(steps: Generator[None, None, T]) -> T:
    """Run ``steps`` to its end, letting the event loop in every ``SLICE`` seconds.

    What each slice made and keeps (summaries, the details parsed for a lens answer) is frozen
    before the loop goes on (:func:`settle`): left in the collector's old generation until the
    work's end, 10,000 functions' details made full passes of 44-190 ms in the loop, each walking
    everything parsed so far (loop watchdog, issue 25); a slice's young generations are a few
    thousand objects, collected in well under a millisecond."""
    paused = time.monotonic()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if time.monotonic() - paused >= SLICE:
            settle()
            await asyncio.sleep(0)
            paused = time.monotonic()


class Documents:
    def __init__(self, ls: Host) -> None:
        self.ls = ls
        self.index_task: asyncio.Future[None] | None = None
        self._said: dict[Path, tuple[tuple[int, str], ...]] = {}  # what each file's skips said last
        self._published: dict[Path, set[str]] = {}  # the documents each file's skips went to
        self._refreshing: dict[Path, asyncio.Task[None]] = {}  # open documents being summarised
        self._discovered: dict[tuple[Path, str, int], Discovery] = {}  # by (file, text digest, generation)

    def register(self, server: Host) -> None:
        server.on_initialized.append(self.initialized)

        @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
        def did_open(ls: Host, params: types.DidOpenTextDocumentParams) -> None:
            self.sync(params.text_document.uri)
            ls.opened(params.text_document.uri)

        @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
        def did_change(ls: Host, params: types.DidChangeTextDocumentParams) -> None:
            self.sync(params.text_document.uri)

        @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
        def did_close(ls: Host, params: types.DidCloseTextDocumentParams) -> None:
            path = local_path(params.text_document.uri)
            if path is not None and ls.session.index.close(path):
                ls.refresh_lenses()
            if path is not None:
                ls.edited(path)  # closing drops unsaved edits: the disk text counts again

        @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
        async def watched(ls: Host, params: types.DidChangeWatchedFilesParams) -> None:
            await self.files_changed(event.uri for event in params.changes)

    async def files_changed(self, uris: Iterable[str]) -> None:
        """Files changed on disk: each re-read and re-summarised in slices, each path once."""
        ls = self.ls
        changed = False
        paused = time.monotonic()
        seen: set[str] = set()
        for uri in uris:
            if uri in seen:
                continue
            seen.add(uri)
            path = local_path(uri)
            if path is not None and path.suffix in (".py", ".ipynb"):
                changed = await sliced(ls.session.index.file_changed_steps(path)) or changed
                ls.edited(path)
            if time.monotonic() - paused >= SLICE:
                await asyncio.sleep(0)
                paused = time.monotonic()
        settle()
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
        new_file = self.ls.session.index.put_text(path, doc.source)
        self.ls.edited(path)
        self.schedule(path, new_file)

    def use_notebook(self, path: Path, cells: Module) -> None:
        """An open notebook's module (its cells as the client has them), summarised in slices."""
        new_file = self.ls.session.discover_ready(path).put_notebook(path, cells)
        self.ls.edited(path)
        self.schedule(path, new_file)

    def schedule(self, path: Path, changed: bool) -> None:
        """Summarise the open document ``path`` in the background (one task per file at a time)."""
        key = path.resolve()
        if key not in self._refreshing:
            self._refreshing[key] = asyncio.ensure_future(self.refresh(key, changed))
        elif changed:  # a new file while the task runs: other files' lenses may change too
            self.ls.refresh_lenses()

    async def refresh(self, path: Path, changed: bool) -> None:
        """Summarise an open document's latest text in slices (text that comes meanwhile too),
        then refresh lenses when other files may see a change and say what was not analysed."""
        index = self.ls.session.index
        try:
            while index.is_stale(path):
                changed = await sliced(index.refresh_steps(path)) or changed
        except Exception:
            log.exception("summarising %s failed", path)
        finally:
            self._refreshing.pop(path, None)
        settle()
        if changed:
            self.ls.refresh_lenses()
        self.report_skips(path)

    def path_of(self, uri: str) -> Path | None:
        """The file a document shows: a notebook cell's notebook, or the URI's own file."""
        ref = self.ls.notebooks.cell(uri)
        return ref.path if ref is not None else local_path(uri)

    async def discover(self, path: Path) -> Discovery | None:
        """``path``'s entrypoints, made in slices (:meth:`ready`, then the classifier's steps),
        kept for the file's text and the index's generation: a lens request after a hover or a
        scroll asks for the same again. None for a file discovery does not read (by its suffix)."""
        if path.suffix not in SOURCES:
            return None
        await self.ready(path)
        session = self.ls.session
        index = session.discover_ready(path)
        if not session.support.watched_files_registration:
            index.revalidate()  # a client that watches no files still sees disk changes
        fs = await sliced(index.summary_steps(path))
        key = (path.resolve(), fs.digest if fs is not None else "", index.generation)
        found = self._discovered.get(key)
        if found is None:
            assert session.classifier is not None
            found = await sliced(session.classifier.discover_steps(path))
            self._discovered[key] = found
            settle()  # the details parsed for it and its entrypoints
            while len(self._discovered) > KEEP_DISCOVERIES:
                self._discovered.pop(next(iter(self._discovered)))
        return found

    async def ready(self, path: Path | None) -> None:
        """The index's summary of ``path`` is current, and the parses a lens or discover answer
        needs are made (function details, class fields), all in slices: what the classifier does
        next only looks things up. A request cancelled meanwhile leaves the summary to finish."""
        if path is None or path.suffix not in SOURCES:
            return
        task = self._refreshing.get(path.resolve())
        if task is not None:
            await asyncio.shield(task)
        session = self.ls.session
        index = session.discover_ready(path)
        fs = await sliced(index.summary_steps(path))
        self.report_skips(path)  # a file read here first (not indexed yet, not opened as Python)
        if fs is None or session.classifier is None:
            return
        triggers = session.classifier.triggers(fs)
        paused = time.monotonic()
        for _, fn in fs.functions():
            if not fn.is_async and fn.words & triggers:
                _ = fn.detail  # parsed once, cached on the summary
            if time.monotonic() - paused >= SLICE:
                settle()  # what this slice parsed and keeps: see sliced()
                await asyncio.sleep(0)
                paused = time.monotonic()
        classes = [info.cls for _, info in fs.chunks if info.cls is not None]
        while classes:
            cls = classes.pop()
            _ = cls.linen_fields, cls.init_params
            classes.extend(cls.nested)
            if time.monotonic() - paused >= SLICE:
                settle()
                await asyncio.sleep(0)
                paused = time.monotonic()

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
        if shown is not None:
            self.use_notebook(path, build_module(shown))
            return
        if index.close(path):
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
        if len(skips) > MAX_SKIP_DIAGNOSTICS:
            left = len(skips) - MAX_SKIP_DIAGNOSTICS
            log.warning("not analysed: %s: %d more statements", path, left)
            more = f"{left:,} more statements after this one (at most {MAX_SKIP_DIAGNOSTICS} are listed)"
            skips = [*skips[:MAX_SKIP_DIAGNOSTICS], Refusal(skips[MAX_SKIP_DIAGNOSTICS].line, more)]
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
                    settle()  # out of the garbage collector's full passes, file by file
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
            settle()
            session.indexed = True
            if token is not None:
                ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=f"{count} files indexed"))
        ls.refresh_lenses()
