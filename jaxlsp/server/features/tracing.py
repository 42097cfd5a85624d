"""Tracing from the editor: trust, ``jaxlsp/trace`` and ``jaxlsp.traceGraph``, the graph methods.

Nothing runs before the user trusts the workspace folder: the editor's own trust
(``initializationOptions.jaxlsp.trusted``), an earlier "Always" kept in the per-user store, or
the answer to a ``window/showMessageRequest`` sent now. Then the capture runs through the warm
spare (started on first use, never before trust) with work-done progress; a cancel kills the
worker at once; a new trace of the same target supersedes the running one.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.capture.engine import Prepared, TraceFailure, TraceRequest, finish, prepare, save_base
from jaxlsp.capture.spare import SparePool
from jaxlsp.capture.speculate import capture_speculatively, structure_of
from jaxlsp.discovery.callsites import CallSiteFinder
from jaxlsp.graph.store import Trace
from jaxlsp.graph.summary import summarize
from jaxlsp.recipes import Resolved
from jaxlsp.recipes.save import SaveError, recipe_file, save_profile
from jaxlsp.server import wire
from jaxlsp.server.app import JaxServer
from jaxlsp.server.convert import TRACE_COMMAND, range_json
from jaxlsp.server.params import file_path, invalid, parse, shown

log = logging.getLogger(__name__)
REQUEST_FAILED = -32803
MAX_RUNNING = 2  # captures at once; more wait in line
MAX_WAITING = 8  # beyond this a request is refused rather than queued
MAX_HINTS = 64  # targets whose variables structure is remembered
TRUST_ONCE, TRUST_ALWAYS, TRUST_CANCEL = "Trust once", "Always", "Cancel"
# Work-done percentages at the start of each phase (the worker announces import, trace, build).
PHASE_PERCENT = {"run": 10, "import": 10, "trace": 40, "build": 80}  # run: an example, to learn the inputs


class Tracer:
    """Per-server tracing state: the spare, the queue, the running traces by target."""

    def __init__(self, ls: JaxServer) -> None:
        self.ls = ls
        self.pool: SparePool | None = None
        self.slots = asyncio.Semaphore(MAX_RUNNING)
        self.waiting = 0
        self.running: dict[tuple[Path, str], asyncio.Task[Any]] = {}
        self.diagnosed: dict[tuple[str, str], str] = {}  # (uri, name) -> the uri holding its diagnostic
        # (file, name, profile) -> the variables structure its last capture found (capture/speculate.py)
        self.hints: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self.finder: CallSiteFinder | None = None  # call sites through the session's index

    async def ensure_trusted(self, folder: Path) -> bool:
        session = self.ls.session
        if session.is_trusted(folder):
            return True
        try:
            answer = await self.ls.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=f"Trust {folder} to run its code for tracing?",
                    actions=[types.MessageActionItem(t) for t in (TRUST_ONCE, TRUST_ALWAYS, TRUST_CANCEL)],
                )
            )
        except Exception:  # a client that cannot ask its user: nothing runs
            log.warning("the client could not ask for trust", exc_info=True)
            answer = None
        title = answer.title if answer is not None else TRUST_CANCEL
        if title == TRUST_ALWAYS:
            session.trust.add(folder)
        elif title == TRUST_ONCE:
            session.trusted_once.add(folder.resolve())
        else:
            return False
        return True

    async def trace(self, args: TraceArgs) -> dict[str, Any]:
        session = self.ls.session
        path, name = args.path, args.name
        folder = session.folder_of(path)
        if not await self.ensure_trusted(folder):
            raise JsonRpcException(
                f"not traced: {folder} is not trusted to run its code (answer Trust once or Always)",
                code=REQUEST_FAILED,
            )
        key = (path.resolve(), name)
        previous = self.running.get(key)
        if previous is not None and not previous.done():
            previous.cancel()  # a new request for the same target supersedes the running one
        task = asyncio.ensure_future(self._run(args, folder))
        self.running[key] = task
        try:
            return await task
        finally:
            if self.running.get(key) is task:
                del self.running[key]

    async def _run(self, args: TraceArgs, folder: Path) -> dict[str, Any]:
        options = self.ls.session.options
        uri, name = args.uri, args.name
        req = TraceRequest(
            file=args.path,
            name=name,
            workspace_root=folder,
            profile=args.profile,
            setting_python=options.python,
            client_python=options.selected_python,
            device=options.device,
            limits=options.limits,
            find_entrypoint=self._entrypoint,
            answers=args.answers,
            # inputs from call sites (capture/autoinputs.py): a lens traces a complete static one at
            # once; examples run only when the user picks one (``example``, from a needs-input answer)
            source=args.example,
            cwd=folder,
            run_examples=False,
            find_sites=self._sites,
        )
        if options.timeout:
            req.timeout = options.timeout
        progress = _Progress(self.ls, f"Tracing {name}")
        await progress.begin("prepare")
        saved: str | None = None
        try:
            try:
                prepared = prepare(req)
            except TraceFailure as failure:
                return self._failed(uri, name, failure)
            learning = prepared.origin is not None and prepared.origin.how == "example"
            if args.save and not learning:  # what an example run learns is saved once it is known
                saved = self._save(prepared, req)
            running = prepared.running()
            if running:
                progress.report(running, PHASE_PERCENT["run"])
            # The interpreter's cached check (its first process, after trust): a missing package or
            # backend is refused here, before any user import, or installed on the user's yes.
            refused = await self.ls.environment.before_capture(prepared)
            if refused is not None:
                return self._failed(uri, name, refused)
            if self.waiting >= MAX_WAITING:
                raise JsonRpcException("too many traces waiting: try again when some finish", code=REQUEST_FAILED)
            self.waiting += 1
            try:
                await self.slots.acquire()
            finally:
                self.waiting -= 1
            try:
                progress.report("start", 5)
                pool = self._pool()
                await pool.start(prepared.python)  # never before trust: this is the first process
                hint_key = (str(args.path.resolve()), name, prepared.resolved.name)
                outcome, _ = await capture_speculatively(
                    pool,
                    prepared.request,
                    hint=self.hints.get(hint_key),
                    python=prepared.python,
                    timeout=req.timeout,
                    on_phase=lambda phase: progress.report(phase, PHASE_PERCENT.get(phase)),
                )
                self._remember_hint(hint_key, structure_of(outcome))
            finally:
                self.slots.release()
            try:
                traced = finish(prepared, outcome)
            except TraceFailure as failure:
                return self._failed(uri, name, failure)
        finally:
            progress.end()
        trace = self.ls.session.graphs.add(
            traced.graph,
            {"uri": uri, "name": name, "profile": traced.resolved.name, "interpreter": outcome.python},
        )
        # Kept graphs are large, long-lived and acyclic: move them out of the cyclic collector's
        # reach, or every later collection scans them all (traces slowed 2x with 16 kept). Done
        # right after the reply goes out, which need not wait for it.
        asyncio.get_running_loop().call_soon(_collect_and_freeze)
        result: dict[str, Any] = {
            "traceId": trace.id,
            "summary": _summary(trace),
            "coverage": {"complete": traced.graph.coverage.complete, "notes": list(traced.graph.coverage.notes)},
            "freshness": "fresh",
            "interpreter": outcome.python,
            "interpreterRoute": prepared.route,
            "profile": traced.resolved.name,
        }
        if args.save and learning:
            saved = self._save_learned(traced.learned(), prepared, req)
        if saved is not None:
            result["saved"] = saved
        line = traced.inputs_line()
        if line:
            result["inputsFrom"] = line.removeprefix("inputs from ")
        self._diagnose(uri, name, None)
        self.ls.protocol.notify("jaxlsp/traceFinished", {"uri": uri, "name": name, "ok": True, "traceId": trace.id})
        self.ls.refresh_lenses()  # titles now carry the trace's figures
        return result

    def _diagnose(self, uri: str, name: str, failure: TraceFailure | None) -> None:
        """One diagnostic at the failing user line, or recipe problems at their jaxlsp.toml lines;
        cleared by the target's next success."""
        previous = self.diagnosed.pop((uri, name), None)
        if previous is not None:
            self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=previous, diagnostics=[]))
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
            self.ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=recipe.resolve().as_uri(), diagnostics=diagnostics)
            )
            self.diagnosed[(uri, name)] = recipe.resolve().as_uri()
            return
        frame = failure.frame or {}
        where = Path(str(frame["path"])).as_uri() if frame.get("path") else uri
        line = max(int(frame.get("line", 1)) - 1, 0)
        column = int(frame.get("column", 0) or 0)
        end_line = max(int(frame.get("endLine", line + 1)) - 1, line)
        end_column = int(frame.get("endColumn", column + 1) or column + 1)
        if not frame:
            line, column, end_line, end_column = 0, 0, 0, 0
        diagnostic = types.Diagnostic(
            range=types.Range(types.Position(line, column), types.Position(end_line, end_column)),
            message=f"tracing {name} failed ({failure.kind}): {failure.message}",
            severity=types.DiagnosticSeverity.Error,
            source="jaxlsp",
            code=failure.kind,
        )
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=where, diagnostics=[diagnostic]))
        self.diagnosed[(uri, name)] = where

    def _remember_hint(self, key: tuple[str, str, str], structure: Any) -> None:
        """The variables structure a capture reported, for the target's next capture."""
        self.hints.pop(key, None)
        if structure is not None:
            self.hints[key] = structure
            while len(self.hints) > MAX_HINTS:
                self.hints.popitem(last=False)

    def _save(self, prepared: Prepared, req: TraceRequest) -> str | None:
        """Write the completed profile to jaxlsp.toml (the client asked); the file's URI, or None
        when it was there already. A refusal is told to the user and the trace goes on."""
        resolved = prepared.resolved
        if resolved.recipe is not None and not req.answers:
            return None  # the profile is in the file as it stands
        target = recipe_file(resolved, save_base(req, prepared.recipe_path))
        document = self.ls.workspace.text_documents.get(target.resolve().as_uri())
        try:
            saved = save_profile(
                resolved,
                req.answers or {},
                base=target.parent,
                editor_text=document.source if document is not None else None,
            )
        except SaveError as exc:
            self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, f"jaxlsp: {exc}"))
            return None
        return saved.path.resolve().as_uri()

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
            self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, f"jaxlsp: {exc}"))
            return None
        return saved.path.resolve().as_uri()

    def _sites(self, path: Path, name: str, entry: Any) -> list[Any]:
        """The target's call sites, read through the server's warm index (nothing runs)."""
        from jaxlsp.discovery.callsites import CallSiteFinder
        from jaxlsp.discovery.roots import project_root

        session = self.ls.session
        if entry is None or session.classifier is None:
            return []
        root = project_root(path, session.folder_of(path))
        if self.finder is None or self.finder.root != root:
            self.finder = CallSiteFinder(session.index, root, session.classifier)
        return self.finder.find(entry)

    def _entrypoint(self, path: Path, name: str) -> Any:
        found = self.ls.session.discover(path)
        return next((e for e in (*found.entrypoints, *found.drivers) if e.name == name), None)

    def _failed(self, uri: str, name: str, failure: TraceFailure) -> dict[str, Any]:
        if failure.needs is not None:
            data = failure.needs.to_json()
            answer: dict[str, Any] = {"needsInput": data.get("needsInput", []), "proposal": data.get("toml", "")}
            if failure.examples:
                answer["examples"] = failure.examples  # one pick traces it (``example``)
            return answer
        self._diagnose(uri, name, failure)
        self.ls.protocol.notify(
            "jaxlsp/traceFinished", {"uri": uri, "name": name, "ok": False, "error": failure.paragraph()}
        )
        raise JsonRpcException(f"{failure.paragraph()}", code=REQUEST_FAILED, data={"kind": failure.kind})

    def _pool(self) -> SparePool:
        if self.pool is None:
            self.pool = SparePool()
        return self.pool


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


def _summary(trace: Trace) -> wire.TraceSummary:
    graph = trace.graph
    return {
        "ops": len(graph.nodes),
        "values": len(graph.values),
        "groups": len(graph.groups),
        "parameters": int(summarize(graph).get("parameters", 0)),
        "outputs": trace.output_types(),
    }


def _location_json(ls: JaxServer, frame: Any) -> wire.Location:
    uri, rng = ls.frame_location(frame)
    return {"uri": uri, "range": range_json(rng)}


class _Progress:
    """Work-done progress for one trace, only for clients that support it."""

    def __init__(self, ls: JaxServer, title: str) -> None:
        self.ls = ls
        self.title = title
        self.token: str | None = None

    async def begin(self, message: str) -> None:
        if not self.ls.session.support.work_done_progress:
            return
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


@dataclass(frozen=True)
class TraceArgs:
    """What ``jaxlsp/trace`` and ``jaxlsp.traceGraph`` take."""

    uri: str
    path: Path
    name: str
    profile: str | None = None
    answers: dict[str, Any] | None = None  # needs-input item path -> value
    save: bool = False  # write the completed profile to jaxlsp.toml
    example: str | None = None  # run this example to learn the inputs (capture/autoinputs.py)


def _target(arg: Any, where: str) -> TraceArgs:
    data: wire.TraceParams | wire.TraceGraphArguments
    if isinstance(arg, dict) and "textDocument" in arg:
        params = parse(arg, wire.TraceParams, where)
        uri, where_uri, data = params["textDocument"]["uri"], f"{where}.textDocument.uri", params
    else:
        args = parse(arg, wire.TraceGraphArguments, where)
        uri, where_uri, data = args["uri"], f"{where}.uri", args
    return TraceArgs(
        uri,
        file_path(uri, where_uri),
        data["name"],
        data.get("profile"),
        data.get("answers") or None,
        data.get("save", False),
        data.get("example"),
    )


def register(server: JaxServer) -> None:
    tracer = Tracer(server)
    server.tracer = tracer

    @server.command(TRACE_COMMAND)
    async def trace_graph(ls: JaxServer, *args: Any) -> dict[str, Any]:
        if len(args) != 1:
            raise invalid(f"{TRACE_COMMAND}: expected one argument {{uri, name, profile?}}, got {len(args)}")
        return await tracer.trace(_target(args[0], "arguments[0]"))

    @server.feature("jaxlsp/trace")
    async def trace(ls: JaxServer, params: Any) -> dict[str, Any]:
        return await tracer.trace(_target(params, "params"))

    @server.feature("jaxlsp/graph")
    def graph(ls: JaxServer, params: Any) -> dict[str, Any]:
        data = parse(params, wire.GraphParams)
        trace_id = data["traceId"]
        group = data.get("group")
        cursor = data.get("cursor")
        limit = data.get("limit", 200)
        if not 1 <= limit <= 5000:
            raise invalid(f"params.limit: expected an integer from 1 to 5000, got {shown(limit)}")
        try:
            return ls.session.graphs.page(trace_id, group, cursor, limit)
        except KeyError as exc:
            raise JsonRpcException(f"unknown trace or group: {shown(exc.args[0])}", code=REQUEST_FAILED) from None
        except ValueError:
            raise invalid(f"params.cursor: not a cursor of this trace: {shown(cursor)}") from None

    @server.feature("jaxlsp/node")
    def node(ls: JaxServer, params: Any) -> dict[str, Any]:
        data = parse(params, wire.NodeParams)
        trace_id, node_id = data["traceId"], data["nodeId"]
        stored = ls.session.graphs.get(trace_id)
        if stored is None:
            raise JsonRpcException(f"unknown trace: {shown(trace_id)}", code=REQUEST_FAILED)
        found = stored.node(node_id)
        if found is None:
            raise JsonRpcException(f"unknown node {shown(node_id)} in trace {trace_id}", code=REQUEST_FAILED)
        return {
            "id": found.id,
            "kind": "node",
            "primitive": found.primitive,
            "params": found.params,
            "inputs": [stored.value_json(v) for v in found.inputs],
            "outputs": [stored.value_json(v) for v in found.outputs],
            "scope": found.scope,
            "group": found.group,
            "transforms": list(found.transforms),
            "frames": [_location_json(ls, f) for f in found.frames],
        }

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: JaxServer, params: Any) -> None:
        if tracer.pool is not None:
            await tracer.pool.close()
        if ls.viewer is not None:
            await ls.viewer.stop()

    @server.command("jaxlsp.listTrusted")
    def list_trusted(ls: JaxServer, *args: Any) -> list[str]:
        return [str(f) for f in ls.session.trust.folders()]

    @server.command("jaxlsp.revokeTrust")
    def revoke_trust(ls: JaxServer, *args: Any) -> bool:
        if len(args) != 1 or not isinstance(args[0], str) or not 0 < len(args[0]) <= 4096 or "\x00" in args[0]:
            raise invalid("jaxlsp.revokeTrust: expected one argument, the folder path")
        folder = Path(args[0])
        ls.session.trusted_once.discard(folder.resolve())
        return ls.session.trust.remove(folder)
