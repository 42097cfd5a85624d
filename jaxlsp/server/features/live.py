"""Live shapes: on open and on save, the targets that document touches are traced again in the
background, so hover, inlay hints, lens titles and failure diagnostics follow the saved text
without a click (docs/live-shapes.md).

Which targets: the entrypoints the document defines and every target whose newest graph read it
(its ``sources``). With which inputs: what the user's last explicit trace of it used (a picked
example, answers), else what it would use without asking (its profile, a complete static call
site, a complete proposal, a saved profile). Never an example nobody picked, never a question,
never anything in an untrusted folder. When they run: ``jaxlsp/live/schedule.py``. Each trace
goes through :meth:`Tracing.live` (the explicit path: same storage, hover, lens, diagnostics).

``jaxlsp.liveShapes`` (initializationOptions, or ``workspace/didChangeConfiguration``) turns it
off; ``jaxlsp/liveStatus`` tells the client every target's state.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

from jaxlsp.capture.launch import phases
from jaxlsp.capture.service import MAX_RUNNING
from jaxlsp.live.edits import changed_lines, touches
from jaxlsp.live.schedule import FAILED, FRESH, NOT_LIVE, QUEUED, TRACING, LiveScheduler, Outcome, Target
from jaxlsp.server import wire
from jaxlsp.server.display import visible
from jaxlsp.server.features.tracing import TraceArgs, Tracing
from jaxlsp.server.host import Host
from jaxlsp.server.params import local_path

NOTES = {FRESH: "live", TRACING: "live: tracing\u2026", QUEUED: "live: queued", FAILED: "live: failed"}
MAX_NOTE = 60  # characters of a not-live reason in a lens title
MAX_TEXTS = 64  # documents whose last saved text is kept to see what a save changed


def live_slots() -> int:
    """Live traces at once: as many as the capture service runs (more would only wait in its line),
    at most one per core of this machine (each capture is a busy process; opening every file of a
    300-target library took 5 minutes to settle one trace at a time, issue 56)."""
    return max(1, min(MAX_RUNNING, os.cpu_count() or 1))


class Live:
    def __init__(self, ls: Host, tracing: Tracing) -> None:
        self.ls = ls
        self.tracing = tracing
        self.scheduler = LiveScheduler(run=self._trace, changed=self._changed, slots=live_slots())
        self._notify_soon = False
        # Where each live trace's time goes (capture/launch/phases.py): when its newest save was heard
        # and queued, and the traces that ended since the last status (logged once it is sent).
        self._heard: dict[Target, tuple[float, float]] = {}
        self._ended: list[tuple[Target, str, phases.Phases]] = []
        # Each document's text at its last open or save: a save's changed lines put the targets
        # defined around them first (live/edits.py). The newest MAX_TEXTS documents only.
        self._texts: OrderedDict[str, str] = OrderedDict()
        # The line each document was last hovered at: after the targets a save edited, the one
        # the user looks at goes before its neighbours (the newest MAX_TEXTS documents only).
        self._hovered: OrderedDict[str, int] = OrderedDict()
        self.saved: list[Callable[[str], None]] = []  # hear each save too (features/learning.py: learn on open)

    def register(self, server: Host) -> None:
        server.open_listeners.append(self.opened)
        server.hover_listeners.append(self.hovered)
        server.shown_listeners.append(self.scheduler.prefer)
        server.notebook_listeners.append(self.notebook_touched)
        server.on_initialized.append(self.initialized)
        server.on_shutdown.append(self.scheduler.close)
        server.live_note = self.note
        self.tracing.explicit.append(self._explicit)

        @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
        def did_save(ls: Host, params: types.DidSaveTextDocumentParams) -> None:
            self.touched(params.text_document.uri)
            for hear in self.saved:
                hear(params.text_document.uri)

        @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
        def did_change_configuration(ls: Host, params: types.DidChangeConfigurationParams) -> None:
            self.configure(params.settings)

    def initialized(self) -> None:
        options = self.ls.session.options
        self.scheduler.enabled = options.live_shapes
        self.scheduler.slots = options.live_slots or live_slots()

    def configure(self, settings: Any) -> None:
        """``{"jaxlsp": {"liveShapes": bool}}`` pushed by the client; other keys are not ours."""
        section = settings.get("jaxlsp") if isinstance(settings, dict) else None
        value = section.get("liveShapes") if isinstance(section, dict) else None
        if not isinstance(value, bool) or value == self.scheduler.enabled:
            return
        self.ls.session.options.live_shapes = value
        if value:
            self.scheduler.enable()
            for document in list(self.ls.workspace.text_documents.values()):
                self.touched(document.uri)  # what is open becomes live now
        else:
            self.scheduler.disable()
        self.ls.refresh_lenses()

    # -- which targets -----------------------------------------------------------------------------
    def learned(self, folder: Path, targets: set[tuple[str, str]]) -> None:
        """New inputs were learned in ``folder`` for ``targets`` (absolute path, name;
        features/learning.py): what is open there is traced again, as if just opened, those
        targets too when they are fresh on older inputs or failed twice the same way on them (a
        learned call failing at a value check, whose test is now kept to replay)."""
        names: dict[str, set[str]] = {}
        for file, name in targets:
            names.setdefault(str(Path(file).resolve()), set()).add(name)
        for document in list(self.ls.workspace.text_documents.values()):
            path = local_path(document.uri)
            if path is not None and path.resolve().is_relative_to(folder.resolve()):
                self.scheduler.inputs_changed(document.uri, names.get(str(path.resolve()), set()))
                self.touched(document.uri)

    def opened(self, uri: str) -> None:
        self.touched(uri)

    def hovered(self, uri: str, line: int) -> None:
        self._hovered.pop(uri, None)
        self._hovered[uri] = line
        while len(self._hovered) > MAX_TEXTS:
            self._hovered.popitem(last=False)

    def notebook_touched(self, path: Path) -> None:
        """A notebook the client synchronises cell by cell was opened or saved: queue the targets
        its cells define, each by its cell's document (as the cell's lens traces it). The worker
        reads the notebook from disk, which is what the user saved."""
        if not self.scheduler.enabled:
            return
        session = self.ls.session
        if not session.is_trusted(session.folder_of(path)):
            return
        heard = time.monotonic()
        uris = self.ls.notebooks.uris(path) or []
        found = session.discover(path).entrypoints
        wanted: list[Target] = []
        for uri in uris:
            view = self.ls.view(uri)
            if view is None or view.cells is None or view.cell is None:
                continue
            for entry in found:
                where = view.cells.locate(entry.header.line)
                block = view.cells.block(where[0]) if where is not None else None
                if block is not None and block.cell == view.cell:
                    wanted.append(Target(uri, entry.name))
        queued = time.monotonic()
        for target in wanted:
            self._heard[target] = (heard, queued)
        self.scheduler.submit([(t, self.fingerprint(t)) for t in wanted])

    def touched(self, uri: str) -> None:
        """``uri`` was opened or saved: queue the targets its text feeds. A notebook sent as one
        document (jupyterlab-lsp) is one document here too: its targets are traced by its URI,
        each from the last cell that defines it, the worker reading the notebook as saved."""
        if not self.scheduler.enabled:
            return
        heard = time.monotonic()
        path = local_path(uri)
        if path is None:
            return
        if path.suffix == ".ipynb" and self.ls.notebooks.is_open(path):
            return  # synchronised cell by cell: it comes through notebook_touched
        session = self.ls.session
        if not session.is_trusted(session.folder_of(path)):
            return  # no process, no prompt: trust comes only from the user
        resolved = str(path.resolve())
        if path.suffix not in (".py", ".ipynb"):  # a data file (config.json): the graphs that read it
            if session.graphs.covering(resolved):
                self._submit(uri, [], resolved, heard)
            return
        entries = list(session.discover(path).entrypoints)
        text = session.index.text(path)
        before = self._texts.pop(uri, None)
        if text is not None:
            self._texts[uri] = text
            while len(self._texts) > MAX_TEXTS:
                self._texts.popitem(last=False)
        # the targets the user just edited go first, then the one last hovered, then those traced
        # before (a target with no graph yet is most often one with no inputs, whose check that
        # says so took 0.03-0.06 s each: a model file's six neighbours held its trace up 0.3 s)
        edited = changed_lines(before, text) if before is not None and text is not None else []
        looked = self._hovered.get(uri)
        graphs = session.graphs
        entries.sort(
            key=lambda e: (
                not touches(edited, e.body.line, e.body.end_line),
                looked is None or not e.header.line <= looked <= e.body.end_line,
                graphs.latest(uri, e.name) is None,
            )
        )
        self._submit(uri, [Target(uri, entry.name) for entry in entries], resolved, heard)

    def _submit(self, uri: str, wanted: list[Target], resolved: str, heard: float) -> None:
        """Queue ``wanted`` (the targets ``uri`` defines, in order), then every other target whose
        newest graph read the file at ``resolved``."""
        session = self.ls.session
        seen = set(wanted)
        for trace in session.graphs.covering(resolved):  # newest first: targets whose graph read it
            target = Target(str(trace.meta.get("uri")), str(trace.meta.get("name")))
            if target in seen or session.graphs.latest(target.uri, target.name) is not trace:
                continue
            if self._path_of(target.uri) is None:
                continue
            seen.add(target)
            wanted.append(target)
        submitted = [(t, self.fingerprint(t)) for t in wanted]
        queued = time.monotonic()
        for target in wanted:
            self._heard[target] = (heard, queued)
        self.scheduler.submit(submitted)

    def fingerprint(self, target: Target) -> str:
        """The text a trace of ``target`` would read now: its file and its newest graph's sources."""
        index = self.ls.session.index
        path = self._path_of(target.uri)
        files = {str(path.resolve())} if path is not None else set()
        trace = self.ls.session.graphs.latest(target.uri, target.name)
        if trace is not None:
            files |= {trace.resolve(p) for p in trace.sources}
        digest = hashlib.sha256()
        for file in sorted(files):
            text = index.text(Path(file))
            digest.update(file.encode())
            digest.update(hashlib.sha256((text if text is not None else "\0missing").encode()).digest())
        return digest.hexdigest()

    # -- running ---------------------------------------------------------------------------------------
    def _path_of(self, uri: str) -> Path | None:
        """The file a target's document is: itself, or the notebook a cell's document is in."""
        ref = self.ls.notebooks.cell(uri)
        return ref.path if ref is not None else local_path(uri)

    async def _trace(self, target: Target) -> Outcome:
        path = self._path_of(target.uri)
        if path is None:
            return Outcome(NOT_LIVE, "not a file")
        folder = self.ls.session.folder_of(path)
        if not self.ls.session.is_trusted(folder):
            return Outcome(NOT_LIVE, f"{visible(str(folder))} is not trusted")
        ref = self.ls.notebooks.cell(target.uri)
        args = self.tracing.picked.get((target.uri, target.name)) or TraceArgs(
            target.uri, path, target.name, cell=ref.cell if ref is not None else None
        )
        now = time.monotonic()
        heard, queued = self._heard.pop(target, (now, now))
        timing = phases.Phases(saved=heard)
        timing.mark("discover", queued)
        timing.mark("wait", now)
        phases.CURRENT.set(timing)  # this task's own context: the captures it starts inherit it
        outcome = await self.tracing.live(args, folder)
        timing.mark("publish")
        self._ended.append((target, outcome.state, timing))
        return outcome

    def _explicit(self, starting: bool) -> None:
        if starting:
            self.scheduler.pause()
        else:
            self.scheduler.resume()

    # -- what the client hears -------------------------------------------------------------------------
    def note(self, uri: str, name: str) -> str | None:
        """The lens title's live part: ``live``, ``live: tracing…``, ``not live: needs input (…)``."""
        status = self.scheduler.statuses.get(Target(uri, name))
        if status is None:
            return None
        if status.state == NOT_LIVE:
            reason = status.cause if len(status.cause) <= MAX_NOTE else status.cause[: MAX_NOTE - 1] + "\u2026"
            return f"not live: {reason}"
        return NOTES.get(status.state)

    def status(self) -> wire.LiveStatus:
        targets: list[wire.LiveTarget] = []
        for target, status in self.scheduler.snapshot():
            item: wire.LiveTarget = {"uri": target.uri, "name": target.name, "state": status.state}  # type: ignore[typeddict-item]
            if status.cause and status.state in (FAILED, NOT_LIVE):
                item["reason"] = status.cause
            if status.trace_id:
                item["traceId"] = status.trace_id
            if status.waiting:
                item["waiting"] = True
            targets.append(item)
        return {"enabled": self.scheduler.enabled, "targets": targets, "started": self.scheduler.started}

    def _changed(self) -> None:
        # Several changes in one turn of the loop are one notification (and one lens refresh).
        if self._notify_soon:
            return
        self._notify_soon = True
        asyncio.get_running_loop().call_soon(self._notify)

    def _notify(self) -> None:
        self._notify_soon = False
        self.ls.notify(wire.LIVE_STATUS, self.status())
        ended, self._ended = self._ended, []
        for target, state, timing in ended:
            timing.mark("status")
            self.ls.window_log_message(
                types.LogMessageParams(type=types.MessageType.Log, message=phases.summary(target.name, state, timing))
            )
        self.ls.refresh_lenses()
