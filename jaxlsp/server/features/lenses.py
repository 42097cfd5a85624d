"""``textDocument/codeLens`` (+ resolve) and ``textDocument/codeAction``: one "Trace graph" per
entrypoint, and once it is traced an "Open graph" and a "Trace with values" beside it (as code
actions too, for editors without lenses; "Trace with values" and "Trace compiled" are always
code actions), on a values
run's first non-finite diagnostic an action that opens the graph at its node, and on a target
that is not live for want of inputs a "Learn shapes" action (``jaxlsp.learnShapes`` on its
workspace folder, issue 46). A notebook cell's
document gets the lenses of the entrypoints in that cell.

A document gets the lenses of at most ``MAX_LENS_ENTRIES`` entrypoints (in file order); past
them one more lens, on the first entrypoint left out, says how many were left out (a
25,000-function file answered 4.7 MB of lenses, issue 25). The answer waits for the document's
summary (:meth:`Documents.ready`), which is made in slices: other requests go on meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Generator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.discovery import Discovery, Entrypoint
from jaxlsp.server import wire
from jaxlsp.server.convert import (
    COMPILED_TITLE,
    LENS_TITLE,
    OPEN_TITLE,
    VALUES_TITLE,
    compiled_command,
    open_command,
    shown_span,
    to_range,
    trace_command,
    values_command,
)
from jaxlsp.server.encoded import Encoded, encode_list
from jaxlsp.server.features.documents import Documents, sliced
from jaxlsp.server.features.tracing import NON_FINITE
from jaxlsp.server.features.unshaped import learnable
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, as_dict
from jaxlsp.textfiles import Shortage


def shortage_error(exc: Shortage) -> JsonRpcException:
    """The answer when the system refused a read for want of descriptors or memory."""
    return JsonRpcException(
        f"not analysed: {exc.strerror} (the server is short of a system resource; try again)",
        code=REQUEST_FAILED,
    )


log = logging.getLogger(__name__)
LEARN_TITLE = "Learn shapes"
MAX_CHANGES = 90  # characters of the changes since the last trace in a lens title
MAX_LENS_ENTRIES = 2_000  # entrypoints with lenses in one document (the benchmark's 5,000-line file has 520)


class Lenses:
    def __init__(self, ls: Host, documents: Documents) -> None:
        self.ls = ls
        self.documents = documents

    def register(self, server: Host) -> None:
        @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))
        async def code_lens(ls: Host, params: types.CodeLensParams) -> Encoded:
            for hear in ls.shown_listeners:  # editors ask for the lenses of the documents they show
                hear(params.text_document.uri)
            path = self.documents.path_of(params.text_document.uri)
            try:
                found = await self.documents.discover(path) if path is not None else None
                lenses = await sliced(self.lens_steps(params.text_document.uri, found))
            except Shortage as exc:  # never an empty list that reads as "nothing to trace here"
                raise shortage_error(exc) from None
            # Up to 2,001 lenses: converted and encoded in slices (encoded.py), not by pygls in one piece.
            return await encode_list(lenses, ls.unstructure)

        @server.feature(types.CODE_LENS_RESOLVE)
        def resolve(ls: Host, lens: types.CodeLens) -> types.CodeLens:
            return self.resolve(lens)

        @server.feature(
            types.TEXT_DOCUMENT_CODE_ACTION,
            types.CodeActionOptions(
                code_action_kinds=[types.CodeActionKind.Empty, types.CodeActionKind.QuickFix], resolve_provider=False
            ),
        )
        async def code_action(ls: Host, params: types.CodeActionParams) -> list[types.CodeAction]:
            uri = params.text_document.uri
            path = self.documents.path_of(uri)
            try:
                # In slices and kept, as for lenses: classifying a 25,000-function file in one piece
                # held the loop 0.4 s.
                found = await self.documents.discover(path) if path is not None else None
            except Shortage:
                found = None  # the actions that need no discovery are still offered
            return self.actions(uri, params.range, list(params.context.diagnostics), found)

    def lens_steps(self, uri: str, found: Discovery | None = None) -> Generator[None, None, list[types.CodeLens]]:
        """The document's lenses, from ``found`` when the caller discovered its file already;
        yielding between entrypoints (:func:`sliced` runs it in slices)."""
        session = self.ls.session
        view = self.ls.view(uri)
        if view is None:
            return []
        if found is None or found.path != view.path.resolve():
            found = session.discover(view.path, revalidate=True)
        codec = self.ls.workspace.position_codec
        lenses = []
        shown = 0
        for i, e in enumerate(found.entrypoints):
            yield
            header = shown_span(e.header, view)
            if header is None:  # in another cell of the notebook
                continue
            where = to_range(header, view.lines, codec)
            if shown == MAX_LENS_ENTRIES:
                left = 0
                for other in found.entrypoints[i:]:
                    left += shown_span(other.header, view) is not None
                    yield
                lenses.append(types.CodeLens(range=where, command=_left_out(left)))
                log.info("%s: lenses for %d entrypoints left out (at most %d)", view.path, left, MAX_LENS_ENTRIES)
                break
            shown += 1
            data: wire.LensData = {"uri": uri, "name": e.name, "kind": e.kind}
            lenses.append(types.CodeLens(range=where, data=data))
            if session.graphs.latest(uri, e.name) is not None:
                if session.support.opens_graphs:  # traced: a second lens opens it
                    lenses.append(types.CodeLens(range=where, data={"uri": uri, "name": e.name, "open": True}))
                # and a third runs it on its inputs (the profile is known to work)
                lenses.append(types.CodeLens(range=where, data={"uri": uri, "name": e.name, "values": True}))
        return lenses

    def resolve(self, lens: types.CodeLens) -> types.CodeLens:
        data: Any = as_dict(lens.data)
        if not (isinstance(data, dict) and isinstance(data.get("uri"), str) and isinstance(data.get("name"), str)):
            return lens
        if data.get("open"):
            trace = self.ls.session.graphs.latest(data["uri"], data["name"])
            if trace is not None:
                lens.command = open_command(trace.id)
            return lens
        if data.get("values"):
            lens.command = values_command(data["uri"], data["name"])
            return lens
        lens.command = trace_command(data["uri"], data["name"])
        lens.command.title = self.title(data["uri"], data["name"])
        return lens

    def actions(
        self,
        uri: str,
        where: types.Range,
        diagnostics: list[types.Diagnostic] | None = None,
        found: Discovery | None = None,
    ) -> list[types.CodeAction]:
        """The code actions at ``where``; from ``found`` when the caller discovered the file already."""
        session = self.ls.session
        view = self.ls.view(uri)
        first, last = (view.to_module(where.start.line), view.to_module(where.end.line)) if view else (None, None)
        if view is None or first is None or last is None:
            return []
        actions = self.reveal_actions(diagnostics or []) if session.support.opens_graphs else []
        if found is None or found.path != view.path.resolve():
            found = session.discover(view.path)
        entry = _entry_at(found.entrypoints, first, last)
        if entry is None:
            return actions
        command = trace_command(uri, entry.name)
        actions.append(
            types.CodeAction(title=f"{LENS_TITLE}: {entry.name}", kind=types.CodeActionKind.Empty, command=command)
        )
        trace = session.graphs.latest(uri, entry.name) if session.support.opens_graphs else None
        if trace is not None:  # the "Open graph" lens, for editors without lenses (eglot)
            opener = open_command(trace.id)
            actions.append(
                types.CodeAction(title=f"{OPEN_TITLE}: {entry.name}", kind=types.CodeActionKind.Empty, command=opener)
            )
        values = values_command(uri, entry.name)
        actions.append(
            types.CodeAction(title=f"{VALUES_TITLE}: {entry.name}", kind=types.CodeActionKind.Empty, command=values)
        )
        compiled = compiled_command(uri, entry.name)
        actions.append(
            types.CodeAction(title=f"{COMPILED_TITLE}: {entry.name}", kind=types.CodeActionKind.Empty, command=compiled)
        )
        if learnable(self.ls.live_state(uri, entry.name)):  # not live for want of inputs (issue 46)
            actions.append(self.learn_action(view.path))
        return actions

    def learn_action(self, path: Path) -> types.CodeAction:
        """``Learn shapes``: run the tests and documented scripts of the file's workspace folder
        once (features/learning.py), so that what they call gets inputs and goes live. The
        folder, not the file's own: a model's tests are seldom beside it."""
        folder = self.ls.session.folder_of(path)
        argument: wire.LearnShapesArguments = {"uri": folder.as_uri()}
        command = types.Command(title=LEARN_TITLE, command=wire.LEARN_SHAPES_COMMAND, arguments=[argument])
        return types.CodeAction(title=LEARN_TITLE, kind=types.CodeActionKind.Empty, command=command)

    def reveal_actions(self, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
        """On a values run's first non-finite diagnostic: open the graph at its node."""
        actions = []
        for diagnostic in diagnostics:
            data: Any = as_dict(diagnostic.data)
            if diagnostic.code != NON_FINITE or not isinstance(data, dict):
                continue
            trace_id, node_id = data.get("traceId"), data.get("nodeId")
            if not isinstance(trace_id, str) or not isinstance(node_id, str):
                continue
            trace = self.ls.session.graphs.get(trace_id)
            node = trace.node(node_id) if trace is not None else None
            if node is None:
                continue
            actions.append(
                types.CodeAction(
                    title=f"Reveal {node.primitive} ({node.id}) in the graph",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    command=open_command(trace_id, node_id),
                    is_preferred=True,
                )
            )
        return actions

    def title(self, uri: str, name: str) -> str:
        """``Trace graph``, or after a trace ``Trace graph · 1,234 ops · f32[2,10] +1`` (``Re-trace (stale)``),
        and after a re-trace what changed (``· +12 ops; Dense_1 dot_general f32[4,8] → f32[4,16]``)."""
        session = self.ls.session
        trace = session.graphs.latest(uri, name)
        live = self.ls.live_note(uri, name)  # live shapes: tracing, failed, not live (why)
        if trace is None:
            return f"{LENS_TITLE} · {live}" if live else LENS_TITLE
        figures = lens_figures(trace.node_count, trace.output_types())
        changes = session.graphs.changes(trace)
        if changes is not None:
            summary = changes.summary()
            figures += " · " + (summary if len(summary) <= MAX_CHANGES else summary[: MAX_CHANGES - 1] + "\u2026")
        stale = trace.stale_sources(lambda p: session.index.text(Path(p)))
        figures += f" · {live}" if live else ""
        return f"Re-trace (stale) · {figures}" if stale else f"{LENS_TITLE} · {figures}"


LENS_OUTPUTS = 2


def _left_out(count: int) -> types.Command:
    """A lens that says how many entrypoints get none (no command to run: an empty command id)."""
    title = f"jaxlsp: {count:,} more entrypoints here get no lens (at most {MAX_LENS_ENTRIES:,} per document)"
    return types.Command(title=title, command="")


def lens_figures(ops: int, outputs: list[str]) -> str:
    """``1,234 ops · f32[2,10], f32[32] +1``: the first outputs' types, and how many are left out."""
    shown = ", ".join(outputs[:LENS_OUTPUTS])
    more = f" +{len(outputs) - LENS_OUTPUTS}" if len(outputs) > LENS_OUTPUTS else ""
    return f"{ops:,} ops" + (f" · {shown}{more}" if shown else "")


def _entry_at(entries: tuple[Entrypoint, ...], first: int, last: int) -> Entrypoint | None:
    """The entrypoint whose def/class line is in the range, else the innermost one around it."""
    for e in entries:
        if first <= e.header.line <= last:
            return e
    around = [e for e in entries if e.body.line <= first and last <= e.body.end_line]
    return max(around, key=lambda e: e.header.line, default=None)
