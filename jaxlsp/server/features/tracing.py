"""Tracing from the editor: ``jaxlsp/trace`` and the ``jaxlsp.traceGraph`` command.

Nothing runs before the user trusts the workspace folder (:class:`TrustPrompt`). Then the capture
service (``jaxlsp/capture/service.py``) runs the trace: compatibility gate, queue, warm spare,
hints, storage. This module only speaks LSP around it: work-done progress, a new trace of the same
target superseding the running one, saving a completed profile, the failure diagnostic, the
``jaxlsp/traceFinished`` notification and the lens refresh. Live traces (``live.py``) take the
same path through :meth:`Tracing.live`, which never asks the user anything; an explicit trace
pauses live work while it runs (``explicit``). A live trace runs only what the user chose
(docs/live-shapes.md): an example they traced the target with, a file's whole top level once a
trace of theirs imported it (else ``load = "definitions"``), a static call site whose values
import nothing beyond the target's own imports; the user's traces say so to the session's
per-user :class:`~jaxlsp.trust_store.ChoiceStore`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.capture.engine import Prepared, check_environment
from jaxlsp.capture.inputs.plan import save_base
from jaxlsp.capture.launch import phases
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.capture.request import Discovered, SitesWanted, TimeOptions, TraceFailure, TraceRequest, ValuesOptions
from jaxlsp.capture.service import Busy, CaptureService
from jaxlsp.discovery.callsites.finder import CallSiteFinder
from jaxlsp.discovery.callsites.importchain import foreign_refs, import_chain
from jaxlsp.graph.compiled import size
from jaxlsp.graph.compiled import summary_json as compiled_summary
from jaxlsp.graph.model import Frame
from jaxlsp.graph.store import Trace
from jaxlsp.live.downloads import site_download
from jaxlsp.live.schedule import FAILED, FRESH, NOT_LIVE, Outcome
from jaxlsp.recipes import Resolved
from jaxlsp.recipes.save import SaveError, recipe_file, save_profile
from jaxlsp.server import wire
from jaxlsp.server.convert import range_json, shown_span, to_range
from jaxlsp.server.display import visible
from jaxlsp.server.features.trust import TrustPrompt
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, file_path, invalid, parse
from jaxlsp.server.views import OpenNotebooks
from jaxlsp.trust_store import ChoiceStore
from jaxlsp.worker.protocol import ErrorKind

log = logging.getLogger(__name__)
# Work-done percentages at the start of each phase (the worker announces import, trace, build).
# run: an example, to learn the inputs; values: the graph run on the profile's inputs
PHASE_PERCENT = {
    "run": 10,
    "import": 10,
    "trace": 40,
    "build": 70,
    "costs": 75,
    "compile": 77,
    "time": 78,
    "values": 80,
}
MAX_REPEAT = 1000  # profiled runs a timed trace may ask for
NON_FINITE = "non-finite"  # the code of a values run's first non-finite diagnostic
SHAPE_CONTRACT = "shape-contract"  # the code of a jaxtyping annotation the traced values broke
FIT = "does-not-fit"  # the code of the error a compile for a TPU pod that does not fit a chip gives

TraceAnswer = wire.TraceResult | wire.NeedsInputResult
Owner = tuple[str, str, str]  # (uri, name, what): who published a diagnostic


class NotLive(Exception):
    """A live trace that does not run: nothing to go on without asking the user (the reason)."""


@dataclass(frozen=True)
class TraceArgs:
    """What ``jaxlsp/trace`` and ``jaxlsp.traceGraph`` take."""

    uri: str
    path: Path
    name: str
    profile: str | None = None
    answers: dict[str, Any] | None = None  # needs-input item path -> value
    save: bool = False  # write the completed profile to jaxlsp.toml
    costs: bool = False  # measure XLA's costs of every equation
    cell: int | None = None  # a notebook target's cell
    example: str | None = None  # run this example to learn the inputs (capture/inputs/plan.py)
    values: bool = False  # also run the graph on the profile's inputs
    dims: dict[str, int] | None = None  # sizes of symbolic dimensions, for a values or timed run
    compiled: bool = False  # also compile for the profile's devices (what XLA made of it)
    time: bool = False  # also time the compiled program under the profiler
    repeat: int | None = None  # with time: the runs profiled (default 5)
    picked: bool = False  # what an explicit trace that succeeded used: live traces may run it again

    @classmethod
    def parse(cls, arg: Any, where: str, notebooks: OpenNotebooks) -> TraceArgs:
        """From ``jaxlsp/trace``'s params (``textDocument``) or the command's argument (``uri``):
        a file, a notebook (with ``cell``, or its last definition) or a notebook cell's document."""
        data: wire.TraceParams | wire.TraceGraphArguments
        if isinstance(arg, dict) and "textDocument" in arg:
            params = parse(arg, wire.TraceParams, where)
            uri, where_uri, data = params["textDocument"]["uri"], f"{where}.textDocument.uri", params
        else:
            args = parse(arg, wire.TraceGraphArguments, where)
            uri, where_uri, data = args["uri"], f"{where}.uri", args
        cell = data.get("cell")
        if cell is not None and cell < 0:
            raise invalid(f"{where}.cell: expected a cell index, got {cell}")
        repeat = data.get("repeat")
        if repeat is not None and not 1 <= repeat <= MAX_REPEAT:
            raise invalid(f"{where}.repeat: expected a number of runs from 1 to {MAX_REPEAT}, got {repeat}")
        if repeat is not None and not data.get("time"):
            raise invalid(f"{where}.repeat: goes with time: true")
        ref = notebooks.cell(uri)
        return cls(
            uri,
            ref.path if ref is not None else file_path(uri, where_uri),
            data["name"],
            data.get("profile"),
            data.get("answers") or None,
            data.get("save", False),
            data.get("costs", False),
            ref.cell if ref is not None else cell,
            data.get("example"),
            data.get("values", False),
            data.get("dims") or None,
            data.get("compiled", False),
            data.get("time", False),
            repeat,
        )


class Tracing:
    def __init__(self, ls: Host, trust: TrustPrompt, capture: CaptureService) -> None:
        self.ls = ls
        self.trust = trust
        self.capture = capture
        capture.on_note = lambda text: ls.window_log_message(types.LogMessageParams(types.MessageType.Log, text))
        self.running: dict[tuple[Path, str], asyncio.Task[TraceAnswer]] = {}
        self.diagnosed: dict[tuple[str, str], str] = {}  # (uri, name) -> the uri holding its diagnostic
        # Every document's diagnostics by who published them: one target's clear (or a contract
        # check's) never wipes another's at the same document.
        self.published: dict[str, dict[Owner, list[types.Diagnostic]]] = {}
        self.finder: CallSiteFinder | None = None  # call sites through the session's index
        # What the user chose for each target in its last explicit trace that made a graph (the
        # profile, an example to learn from, answers): what live traces use for it without asking.
        self.picked: dict[tuple[str, str], TraceArgs] = {}
        self.explicit: list[Callable[[bool], None]] = []  # hear True as an explicit trace starts, False at its end
        self.traced: list[Callable[[TraceArgs, Trace], None]] = []  # hear of every trace that made a graph
        # Why a live trace left a target's static call sites out (they import beyond its own imports)
        self.unusable: dict[tuple[Path, str], str] = {}

    def register(self, server: Host) -> None:
        @server.command(wire.TRACE_GRAPH_COMMAND)
        async def trace_graph(ls: Host, *args: Any) -> TraceAnswer:
            if len(args) != 1:
                raise invalid(
                    f"{wire.TRACE_GRAPH_COMMAND}: expected one argument {{uri, name, profile?}}, got {len(args)}"
                )
            return await self.trace(TraceArgs.parse(args[0], "arguments[0]", ls.notebooks))

        @server.command(wire.TRACE_WITH_VALUES_COMMAND)
        async def trace_with_values(ls: Host, *args: Any) -> TraceAnswer:
            if len(args) != 1:
                raise invalid(
                    f"{wire.TRACE_WITH_VALUES_COMMAND}: expected one argument {{uri, name, profile?}}, got {len(args)}"
                )
            return await self.trace(
                dataclasses.replace(TraceArgs.parse(args[0], "arguments[0]", ls.notebooks), values=True)
            )

        @server.command(wire.TRACE_COMPILED_COMMAND)
        async def trace_compiled(ls: Host, *args: Any) -> TraceAnswer:
            if len(args) != 1:
                raise invalid(
                    f"{wire.TRACE_COMPILED_COMMAND}: expected one argument {{uri, name, profile?}}, got {len(args)}"
                )
            return await self.trace(
                dataclasses.replace(TraceArgs.parse(args[0], "arguments[0]", ls.notebooks), compiled=True)
            )

        @server.feature(wire.TRACE)
        async def trace(ls: Host, params: Any) -> TraceAnswer:
            return await self.trace(TraceArgs.parse(params, "params", ls.notebooks))

    async def trace(self, args: TraceArgs) -> TraceAnswer:
        folder = self.ls.session.folder_of(args.path)
        if not await self.trust.ensure(folder):
            raise JsonRpcException(
                f"not traced: {visible(str(folder))} is not trusted to run its code (answer Trust once or Always)",
                code=REQUEST_FAILED,
            )
        key = (args.path.resolve(), args.name)
        previous = self.running.get(key)
        if previous is not None and not previous.done():
            previous.cancel()  # a new request for the same target supersedes the running one
        task = asyncio.ensure_future(self._run(args, folder))
        self.running[key] = task
        for hear in self.explicit:
            hear(True)  # live work yields to the user's own request
        try:
            answer = await task
        finally:
            if self.running.get(key) is task:
                del self.running[key]
            for hear in self.explicit:
                hear(False)
        if "traceId" in answer:
            self.picked[(args.uri, args.name)] = dataclasses.replace(
                args, save=False, values=False, dims=None, compiled=False, time=False, repeat=None, picked=True
            )
        return answer

    async def live(self, args: TraceArgs, folder: Path) -> Outcome:
        """A live trace: the explicit path (storage, diagnostics, lens refresh) without a question
        to the user; a target with nothing to go on is ``notLive`` with the reason."""
        try:
            answer = await self._run(args, folder, live=True)
        except NotLive as exc:
            return Outcome(NOT_LIVE, str(exc))
        except JsonRpcException as exc:
            return Outcome(FAILED, exc.message or "the trace failed")
        if "needsInput" in answer:
            unusable = self.unusable.get((args.path.resolve(), args.name))
            return Outcome(NOT_LIVE, unusable or _needs_reason(answer))
        return Outcome(FRESH, trace_id=answer.get("traceId"))

    def request(self, args: TraceArgs, folder: Path, live: bool = False) -> TraceRequest:
        """What the capture engine takes, in one step: the target's entrypoint from the warm index
        (its call sites are looked up only when planning asks for them: :meth:`prepare`). A
        ``live`` trace reaches no other machine, and runs the top level of a ``.py`` file only
        when the user's own trace imported it whole (else ``load = "definitions"``): a script whose
        top level trains runs only when someone chose it."""
        options = self.ls.session.options
        file = args.path.resolve()
        return TraceRequest(
            file=args.path,
            name=args.name,
            workspace_root=folder,
            profile=args.profile,
            setting_python=options.python,
            client_python=options.selected_python,
            device=options.device,
            limits=options.limits,
            discovered=Discovered(self.ls.session.entrypoint(file, args.name)),
            answers=args.answers,
            costs=args.costs or options.costs,
            replay=options.replay,
            cell=args.cell,
            # inputs from call sites (capture/inputs/plan.py): a lens traces a complete static one at
            # once; examples run only when the user picks one (``example``, from a needs-input answer)
            source=args.example,
            cwd=folder,
            run_examples=False,
            offline=live,
            definitions_only=live and file.suffix == ".py" and not self.ls.session.choices.ran_module(file),
            values=ValuesOptions(dims=dict(args.dims or {})) if args.values else None,
            compiled=args.compiled,
            time=TimeOptions(repeat=args.repeat or 5, dims=dict(args.dims or {})) if args.time else None,
        )

    def prepare(self, req: TraceRequest, live: bool = False, picked: bool = False) -> Prepared:
        """The capture service's prepare, with the target's call sites from the warm finder when
        planning comes to them (no profile names it, no learned call covers it); a live trace takes
        only those it may use (:meth:`_live_sites`) unless the user's own trace chose its site."""
        try:
            return _prepare_live(self.capture, req) if live else self.capture.prepare(req)
        except SitesWanted as wanted:
            find = self._live_sites if live and not picked else self._sites
            sites = tuple(find(req.file.resolve(), req.name, wanted.entrypoint))
            found = dataclasses.replace(req.discovered or Discovered(wanted.entrypoint), sites=sites)
            req = dataclasses.replace(req, discovered=found)
            return _prepare_live(self.capture, req) if live else self.capture.prepare(req)

    async def _run(self, args: TraceArgs, folder: Path, live: bool = False) -> TraceAnswer:
        req = self.request(args, folder, live=live)
        timing: phases.Phases | None = None
        forced = False  # a live trace that loads the file's definitions only because nobody chose more
        if not live:  # where the user's own trace spent its time, as a live trace's (capture/launch/phases.py)
            timing = phases.Phases(saved=time.monotonic())
            phases.CURRENT.set(timing)  # this task's own context (``trace`` runs it as a task)
        progress = Progress(self.ls, f"Live shapes: tracing {args.name}" if live else f"Tracing {args.name}")
        await progress.begin("prepare")
        saved: str | None = None
        # a live trace after an edit that left the program as it was moves the last graph's
        # positions instead (capture/reuse.py); the user's own request always traces
        options = CaptureOptions(on_phase=lambda phase: progress.report(phase, PHASE_PERCENT.get(phase)), reuse=live)
        if self.ls.session.options.timeout:
            timeout = self.ls.session.options.timeout
            options = dataclasses.replace(options, timeout=timeout, example_timeout=timeout)
        try:
            # the user's own trace this session chose its site: its live re-traces may use it too
            prepared = self.prepare(req, live, picked=args.picked)
            learning = prepared.origin is not None and prepared.origin.how == "example"
            if live:
                await _quietly_runnable(prepared, args, self.ls.session.choices)
                forced = prepared.definitions_only
            if args.save and not learning:  # what an example run learns is saved once it is known
                saved = self._save(prepared, req)
            running = prepared.running()
            if running:
                progress.report(running, PHASE_PERCENT["run"])
            progress.report("start", 5)
            meta = {"uri": args.uri, "name": args.name, "answers": args.answers, "dims": args.dims}
            if not live:  # the user runs it now: later live traces may run the same (docs/live-shapes.md)
                _remember(self.ls.session.choices, prepared, args.name)
            captured = await self.capture.run(prepared, options, meta)
        except TraceFailure as failure:
            if live and failure.kind == ErrorKind.REFUSED:
                # what the user's text cannot fix by an edit that keeps it running (a factory
                # returning a module, a limit): the target is not live, with why; no diagnostic
                raise NotLive(failure.message) from None
            if forced and failure.skipped is not None:
                raise NotLive(
                    "it needs a value its file's top level computes by running code, which a live trace "
                    "does not run until you trace it once"
                ) from None
            return self._failed(args, failure)
        except Busy as exc:
            raise JsonRpcException(str(exc), code=REQUEST_FAILED) from None
        except (JsonRpcException, asyncio.CancelledError, NotLive):
            raise
        except Exception as exc:  # a bug of ours: still a finished trace and a diagnostic, never a bare -32603
            log.exception("tracing %s failed", args.name)
            return self._failed(args, TraceFailure(ErrorKind.INTERNAL, f"jaxlsp failed: {type(exc).__name__}: {exc}"))
        finally:
            progress.end()
        trace = captured.trace
        assert trace is not None  # the service has the session's store
        cell_uris = self.ls.notebooks.uris(args.path)
        if cell_uris is not None:  # which cell document each traced cell index is (views.py)
            trace.meta["cellUris"] = cell_uris
        # Kept graphs are large, long-lived and acyclic: move them out of the cyclic collector's
        # reach, or every later collection scans them all (traces slowed 2x with 16 kept). Done
        # right after the reply goes out, which need not wait for it.
        asyncio.get_running_loop().call_soon(_collect_and_freeze)
        graph = captured.outcome.graph
        result: wire.TraceResult = {
            "traceId": trace.id,
            "summary": _summary(trace),
            "coverage": {"complete": graph.coverage.complete, "notes": list(graph.coverage.notes)},
            "freshness": "fresh",
            "interpreter": captured.outcome.capture.python,
            "interpreterRoute": prepared.route,
            "profile": captured.outcome.resolved.name,
        }
        if args.save and learning:
            saved = self._save_learned(captured.outcome.learned(), prepared, req)
        if saved is not None:
            result["saved"] = saved
        line = captured.outcome.inputs_line()
        if line:
            result["inputsFrom"] = line.removeprefix("inputs from ")
        replayed = captured.outcome.capture.result.get("replayed")
        if isinstance(replayed, int) and replayed > 0:
            result["replayed"] = replayed
        self._diagnose(args.uri, args.name, None)
        self.diagnose_contracts(args.uri, args.name, trace)
        self.diagnose_fit(args, trace)
        for hear in self.traced:
            hear(args, trace)
        compiled = compiled_summary(graph)
        if compiled is not None:
            result["compiled"] = compiled  # type: ignore[typeddict-item]  # summary_json's keys are CompiledSummary's
        if graph.execution is not None:
            result["values"] = self.values_summary(trace)
            self.diagnose_values(args.uri, args.name, trace)
        if graph.time is not None:
            result["time"] = time_summary(graph.time)
        finished: wire.TraceFinished = {"uri": args.uri, "name": args.name, "ok": True, "traceId": trace.id}
        self.ls.notify(wire.TRACE_FINISHED, finished)
        self.ls.refresh_lenses()  # titles now carry the trace's figures
        if timing is not None:
            timing.mark("publish")
            self.ls.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Log, message=phases.summary(args.name, "traced", timing, kind="trace")
                )
            )
        return result

    def _failed(self, args: TraceArgs, failure: TraceFailure) -> wire.NeedsInputResult:
        if failure.needs is not None:
            data = failure.needs.to_json()
            answer: wire.NeedsInputResult = {
                "needsInput": data.get("needsInput", []),
                "proposal": data.get("toml", ""),
                "profile": data.get("profile", ""),
            }
            if data.get("errors"):
                answer["errors"] = data["errors"]  # answers that did not parse: shown, then asked again
            if failure.examples:
                answer["examples"] = failure.examples  # type: ignore[typeddict-item]  # one pick traces it
            return answer
        self.publish((args.uri, args.name, FIT), {})  # what an earlier compile said is no longer known
        self._diagnose(args.uri, args.name, failure)
        finished: wire.TraceFinished = {"uri": args.uri, "name": args.name, "ok": False, "error": failure.paragraph()}
        self.ls.notify(wire.TRACE_FINISHED, finished)
        why: dict[str, Any] = {"kind": failure.kind}
        if failure.dims:
            why["dims"] = failure.dims  # a values run asks for the sizes of these dimensions
        raise JsonRpcException(failure.paragraph(), code=REQUEST_FAILED, data=why)

    def _diagnose(self, uri: str, name: str, failure: TraceFailure | None) -> None:
        """One diagnostic at the failing user line, or recipe problems at their jaxlsp.toml lines;
        cleared by the target's next success."""
        self.diagnosed.pop((uri, name), None)
        self.publish((uri, name, "trace"), {})
        if failure is None:
            return
        if failure.problems and failure.problems[0].path is not None:
            recipe = Path(failure.problems[0].path)
            diagnostics = [
                types.Diagnostic(
                    range=types.Range(
                        types.Position(max((p.line or 1) - 1, 0), 0), types.Position(max((p.line or 1) - 1, 0), 1000)
                    ),
                    message=f"{p.key_path}: {p.message}" if p.key_path else p.message,
                    severity=types.DiagnosticSeverity.Error,
                    source="jaxlsp",
                    code="recipe",
                )
                for p in failure.problems
                if p.path is not None and Path(p.path) == recipe
            ]
            self.publish((uri, name, "trace"), {recipe.resolve().as_uri(): diagnostics})
            self.diagnosed[(uri, name)] = recipe.resolve().as_uri()
            return
        frame = failure.frame or {}
        where, at = uri, types.Range(types.Position(0, 0), types.Position(0, 0))
        if frame.get("path"):  # in a notebook, its cell's document when the client syncs cells
            where, at = self.ls.frame_location(_frame(frame))
        said = failure.message
        own = f"tracing {name} failed: "  # the worker's own context: said once, not twice
        said = said[len(own) :] if said.startswith(own) else said
        diagnostic = types.Diagnostic(
            range=at,
            message=f"tracing {name} failed ({failure.kind}): {said}",
            severity=types.DiagnosticSeverity.Error,
            source="jaxlsp",
            code=failure.kind,
        )
        self.publish((uri, name, "trace"), {where: [diagnostic]})
        self.diagnosed[(uri, name)] = where

    def _save_learned(self, learned: Resolved | None, prepared: Prepared, req: TraceRequest) -> str | None:
        """Save what an example run learned (its recipe form, else ``from``) like a proposal."""
        if learned is None:
            return None
        target = recipe_file(learned, save_base(req, prepared.recipe_path))
        document = self.ls.workspace.text_documents.get(target.resolve().as_uri())
        try:
            saved = save_profile(
                learned, {}, base=target.parent, editor_text=document.source if document is not None else None
            )
        except SaveError as exc:
            self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, visible(f"jaxlsp: {exc}")))
            return None
        return saved.path.resolve().as_uri()

    def _sites(self, path: Path, name: str, entry: Any) -> list[Any]:
        """The target's call sites, read through the server's warm index (nothing runs)."""
        from jaxlsp.discovery.callsites.finder import CallSiteFinder
        from jaxlsp.discovery.roots import project_root

        session = self.ls.session
        if entry is None or session.classifier is None:
            return []
        root = project_root(path, session.folder_of(path))
        if self.finder is None or self.finder.root != root:
            self.finder = CallSiteFinder(session.index, root, session.classifier)
        return self.finder.find(entry)

    def _live_sites(self, path: Path, name: str, entry: Any) -> list[Any]:
        """The call sites a live trace may take its inputs from: a static site whose values name a
        workspace module the target does not import (a class a test file defines) would import it,
        and run its top level, on every open (discovery/callsites/importchain.py)."""
        sites = self._sites(path, name, entry)
        index = self.ls.session.index
        root = self.finder.root if self.finder is not None else path.parent
        chain: set[Path] | None = None
        kept: list[Any] = []
        left: list[str] = []
        for site in sites:
            if site.static:
                chain = import_chain(index, path) if chain is None else chain
                foreign = foreign_refs(index, site, path, chain)
                if foreign:
                    left.append(f"its call site at {site.where(root)} uses {foreign[0]}")
                    continue
            kept.append(site)
        key = (path.resolve(), name)
        if left:
            self.unusable[key] = (
                f"{left[0]}, which {name}'s file does not import: a live trace imports nothing more; "
                "trace it once to use it"
            )
        else:
            self.unusable.pop(key, None)
        return kept

    def values_summary(self, trace: Trace) -> wire.ValuesSummary:
        """The trace's values run in brief (its graph has an ``execution``)."""
        execution = trace.execution or {}
        validation = execution.get("validation") or {}
        summary: wire.ValuesSummary = {
            "values": trace.values_with_stats(),
            "seconds": float(execution.get("seconds") or 0.0),
            "validation": validation.get("status", "mismatch"),
        }
        mismatch = validation.get("mismatch") or {}
        if validation.get("status") == "mismatch":
            summary["mismatch"] = str(mismatch.get("message") or validation.get("message") or validation.get("error"))
        first = self.first_non_finite(trace)
        if first is not None:
            summary["firstNonFinite"] = first
        gradients = execution.get("gradients")
        if gradients is not None:
            summary["zeroGradients"] = list(gradients.get("zero") or [])
        return summary

    def first_non_finite(self, trace: Trace) -> wire.FirstNonFinite | None:
        first = (trace.execution or {}).get("firstNonFinite")
        if not first:
            return None
        out: wire.FirstNonFinite = {
            "nodeId": str(first["node"]),
            "valueId": str(first["value"]),
            "primitive": str(first["primitive"]),
            "kind": str(first["kind"]),
            "message": str(first["message"]),
        }
        node = trace.node(str(first["node"]))
        frame = node.source if node is not None else None
        if frame is not None:
            uri, rng = self.ls.frame_location(frame, trace.frame_path(frame))  # graph paths are relative
            out["location"] = {"uri": uri, "range": range_json(rng)}
        return out

    def diagnose_values(self, uri: str, name: str, trace: Trace) -> None:
        """A warning at the first non-finite value's line, with the summary line's text; its code
        action (``lenses.py``) reveals the node in the graph."""
        first = self.first_non_finite(trace)
        if first is None or "location" not in first:
            return
        location = first["location"]
        rng = location["range"]
        diagnostic = types.Diagnostic(
            range=types.Range(
                types.Position(rng["start"]["line"], rng["start"]["character"]),
                types.Position(rng["end"]["line"], rng["end"]["character"]),
            ),
            message=first["message"],
            severity=types.DiagnosticSeverity.Warning,
            source="jaxlsp",
            code=NON_FINITE,
            data={"traceId": trace.id, "nodeId": first["nodeId"]},
        )
        self.publish((uri, name, "trace"), {location["uri"]: [diagnostic]})
        self.diagnosed[(uri, name)] = location["uri"]

    def diagnose_contracts(self, uri: str, name: str, trace: Trace) -> None:
        """A warning on each jaxtyping annotation the trace's values broke (the graph's
        ``contracts``); the target's next trace replaces them."""
        by_uri: dict[str, list[types.Diagnostic]] = {}
        for violation in (trace.contracts or {}).get("violations", []):
            frame = _frame(violation["source"])
            where, at = self.ls.frame_location(frame, trace.frame_path(frame), trace.meta.get("cellUris"))
            by_uri.setdefault(where, []).append(
                types.Diagnostic(
                    range=at,
                    message=str(violation["message"]),
                    severity=types.DiagnosticSeverity.Warning,
                    source="jaxlsp",
                    code=SHAPE_CONTRACT,
                    data={"traceId": trace.id, "function": violation.get("function"), "param": violation.get("param")},
                )
            )
        self.publish((uri, name, "contract"), by_uri)

    def diagnose_fit(self, args: TraceArgs, trace: Trace) -> None:
        """An error at the target's line when its compile for a TPU pod does not fit a chip (the
        graph's ``compiled.fit``, issue 49), with the lines holding the memory as related
        information; the target's next trace replaces it."""
        owner = (args.uri, args.name, FIT)
        compiled = trace.info.compiled or {}
        verdict = compiled.get("fit") or {}
        if verdict.get("fits") is not False:
            self.publish(owner, {})
            return
        where, at = args.uri, types.Range(types.Position(0, 0), types.Position(0, 0))
        entry = self.ls.session.entrypoint(args.path, args.name)
        view = self.ls.view(args.uri)
        span = shown_span(entry.header, view) if entry is not None and view is not None else None
        if span is not None and view is not None:
            at = to_range(span, view.lines, self.ls.workspace.position_codec)
        elif entry is not None and args.path.suffix == ".py":  # not open: the file on disk
            header = entry.header
            frame = Frame(str(args.path), header.line + 1, header.column, header.end_line + 1, header.end_column)
            where, at = self.ls.frame_location(frame)
        related = []
        for held in verdict.get("held") or []:
            if held.get("path") and held.get("line"):
                line = int(held["line"])
                frame = Frame(str(held["path"]), line, 0, line, 0)
                uri, rng = self.ls.frame_location(frame, trace.frame_path(frame), trace.meta.get("cellUris"))
                said = "per chip" if held.get("kind") == "input" else "whole"
                related.append(
                    types.DiagnosticRelatedInformation(
                        types.Location(uri, rng), f"{held['label']} holds {size(int(held['bytes']))} {said}"
                    )
                )
        pod = (compiled.get("topology") or {}).get("name", "its topology")
        diagnostic = types.Diagnostic(
            range=at,
            message=f"{args.name} compiled for {pod}: {verdict.get('message') or 'does not fit a chip'}",
            severity=types.DiagnosticSeverity.Error,
            source="jaxlsp",
            code=FIT,
            related_information=related or None,
            data={"traceId": trace.id},
        )
        self.publish(owner, {where: [diagnostic]})

    def publish(self, owner: Owner, by_uri: dict[str, list[types.Diagnostic]]) -> None:
        """``owner``'s diagnostics are now ``by_uri`` (nothing elsewhere); each document whose
        set changed is published with every owner's diagnostics there."""
        touched = set(by_uri)
        for uri, owners in self.published.items():
            if owner in owners:
                del owners[owner]
                touched.add(uri)
        for uri, diagnostics in by_uri.items():
            if diagnostics:
                self.published.setdefault(uri, {})[owner] = diagnostics
        for uri in sorted(touched):
            owners = self.published.get(uri, {})
            shown: list[types.Diagnostic] = []
            said: set[tuple[int, int, str]] = set()  # two targets that call one function: one warning
            for d in (d for diagnostics in owners.values() for d in diagnostics):
                key = (d.range.start.line, d.range.start.character, d.message)
                if key not in said:
                    said.add(key)
                    shown.append(d)
            self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=shown))
            if not owners:
                self.published.pop(uri, None)

    def _save(self, prepared: Prepared, req: TraceRequest) -> str | None:
        """Write the completed profile to jaxlsp.toml (the client asked); the file's URI, or None
        when it was there already. A refusal is told to the user and the trace goes on."""
        resolved = prepared.resolved
        if resolved.recipe is not None and not resolved.answers:
            return None  # the profile is in the file as it stands
        target = recipe_file(resolved, save_base(req, prepared.recipe_path))
        document = self.ls.workspace.text_documents.get(target.resolve().as_uri())
        try:
            saved = save_profile(
                resolved,
                resolved.answers,  # as parsed, never the typed text
                base=target.parent,
                editor_text=document.source if document is not None else None,
            )
        except SaveError as exc:
            self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, visible(f"jaxlsp: {exc}")))
            return None
        return saved.path.resolve().as_uri()


def _prepare_live(capture: CaptureService, req: TraceRequest) -> Prepared:
    """Prepare a live trace: a refusal before anything ran (several profiles for the target, a
    broken recipe) makes the target not live, not a diagnostic on every open; needs-input goes on
    as usual (its answer says why it is not live)."""
    try:
        return capture.prepare(req)
    except TraceFailure as failure:
        if failure.needs is not None or failure.kind == ErrorKind.NEEDS_INPUT:
            raise
        raise NotLive(failure.message) from None


def _target_file(prepared: Prepared) -> Path:
    return Path(str(prepared.request["target"]["path"]))


def _remember(choices: ChoiceStore, prepared: Prepared, name: str) -> None:
    """The user's own trace of ``name`` runs ``prepared``: its example, and its file's top level
    when it is imported whole (a ``.py`` file's ``load = "module"``, the default)."""
    profile = prepared.request["profile"]
    file = _target_file(prepared)
    whole = file.suffix == ".py" and profile.get("load") not in ("definitions", "cells")
    try:
        choices.record(file, name, module=whole, example=profile.get("example"))
    except OSError as exc:  # the trace goes on; live traces keep asking for what it ran
        log.warning("could not record what the trace of %s ran: %s", name, exc)


async def _quietly_runnable(prepared: Prepared, args: TraceArgs, choices: ChoiceStore) -> None:
    """Raise :class:`NotLive` unless a live trace may run ``prepared`` without asking: an example
    runs only when the user traced the target with it on this machine (a recipe's ``from`` is
    the repository author's choice, not theirs) or learned from it (capture/inputs/replays.py),
    and an interpreter that needs an install is not offered one (the explicit trace offers it)."""
    origin = prepared.origin
    example = prepared.request["profile"].get("example")
    # an example learning kept for the target (its call could not be spelled) ran by the user's
    # choice to learn, as that learn ran it: replaying it up to the call is what it taught
    kept = origin is not None and origin.how == "learned"
    if example is not None and not kept and not choices.ran_example(_target_file(prepared), args.name, example):
        raise NotLive(
            f"its inputs come from running {example.get('text') or 'an example'}, which you have not traced it "
            "with: trace it once to let live shapes run it"
        )
    site = origin.site if origin is not None and origin.how == "site" and not args.picked else None
    if site is not None:  # opening a file never fetches a checkpoint (live/downloads.py)
        fetches = site_download(site.init, site.inputs, site.where(origin.root) if origin is not None else "")
        if fetches is not None:
            raise NotLive(fetches)
    if (prepared.request.get("profile") or {}).get("load") == "cells":
        # the cells above a notebook target run whole (training, plots): never on every save
        raise NotLive('its profile runs the notebook\'s cells above it (load = "cells"): trace it when you want it')
    report = await asyncio.to_thread(check_environment, prepared)
    if not report.ok:
        raise NotLive(f"the interpreter cannot trace it: {report.message()}")


def _needs_reason(answer: TraceAnswer) -> str:
    """Why a target that needs input is not live: the items asked for, and the examples to pick."""
    data: dict[str, Any] = dict(answer)
    items: list[Any] = list(data.get("needsInput") or [])
    said = ", ".join(str(i.get("path") if isinstance(i, dict) else i) for i in items[:3])
    # a proposal traced symbolically that fell back (recipes/symbolic.py): which dimension, and why
    forced = next((f"; {i['symbolic']}" for i in items if isinstance(i, dict) and i.get("symbolic")), "")
    examples = data.get("examples") or []
    if examples:
        return (
            f"needs input ({said}){forced}; its inputs could come from running an example: trace it once and pick one"
        )
    return f"needs input ({said}){forced}: trace it once and answer"


def _frame(data: dict[str, Any]) -> Frame:
    """A worker's error frame as a graph frame (the fields the worker may leave out filled in)."""
    line = max(int(data.get("line", 1)), 1)
    column = max(int(data.get("column", 0) or 0), 0)
    cell = data.get("cell")
    return Frame(
        path=str(data["path"]),
        line=line,
        column=column,
        end_line=max(int(data.get("endLine", line)), line),
        end_column=int(data.get("endColumn", column + 1) or column + 1),
        cell=cell if isinstance(cell, int) else None,
    )


def _collect_and_freeze() -> None:
    # Frozen without a collection first: a full collection walks every object of the process in
    # one C call the loop waits on (1.4 s beside two 60,000-equation graphs, docs/reliability.md).
    # What cyclic garbage exists right now is kept with them; acyclic garbage is freed as always.
    gc.freeze()


def _summary(trace: Trace) -> wire.TraceSummary:
    return {
        "ops": trace.node_count,
        "values": trace.value_count,
        "groups": len(trace.info.groups),
        "parameters": trace.parameters(),
        "outputs": trace.output_types(),
    }


class Progress:
    """Work-done progress for one trace, only for clients that support it."""

    def __init__(self, ls: Host, title: str) -> None:
        self.ls = ls
        self.title = title
        self.token: str | None = None

    async def begin(self, message: str) -> None:
        if not self.ls.session.support.work_done_progress:
            return
        # Not for a trace that a request already sent behind it supersedes or cancels: of 1,000
        # traces sent at once over 10 targets, each asked the client to create its progress (a
        # request and an answer more per trace, in a burst that hovers queue behind).
        await self.ls.input_handled()
        token = f"jaxlsp-trace-{uuid.uuid4()}"
        try:
            await self.ls.work_done_progress.create_async(token)
        except Exception:
            return
        self.token = token
        self.ls.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=self.title, message=message, percentage=0, cancellable=False)
        )

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.token is not None:
            self.ls.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    def end(self) -> None:
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd())
            self.token = None


def time_summary(time: dict[str, Any]) -> wire.TimeSummary:
    """A timed run in brief: the step, the busy time and the module table's rows."""
    from jaxlsp.graph.timing import rows

    return {
        "step": float(time["step"]),
        "busy": float(time["busy"]),
        "attributed": float(time["attributed"]),
        "repeat": int(time["repeat"]),
        "device": str(time["device"]),
        "modules": [{"module": r.label, "seconds": r.seconds} for r in rows(time)],
    }
