"""``jaxlsp.learnShapes``: run the workspace's own examples once and keep every reached target's
call (capture/inputs/learning.py), with ``$/progress``; then what is open is traced live on what was
learned. On a file, only the examples whose imports reach it run, within the budget asked for. It
never starts on its own: the command (a palette entry, the ``Learn shapes`` code action) in a
folder the user trusts (asked, as a trace asks)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, cast

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.capture.environment.interpreters import InterpreterError, select_interpreter
from jaxlsp.capture.inputs import learning
from jaxlsp.capture.inputs.examplecache import ExampleCache
from jaxlsp.capture.inputs.importers import ImportGraph
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.capture.launch.client import run_capture
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.discovery.roots import project_root
from jaxlsp.server import wire
from jaxlsp.server.display import visible
from jaxlsp.server.features.trust import TrustPrompt
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, as_dict, file_path, invalid, parse

TITLE = "Learning shapes"


class Learning:
    def __init__(self, ls: Host, trust: TrustPrompt) -> None:
        self.ls = ls
        self.trust = trust
        self.running: asyncio.Task[Any] | None = None
        self.after: list[Any] = []  # called with the folder once something was learned (live)

    def register(self, server: Host) -> None:
        @server.command(wire.LEARN_SHAPES_COMMAND)
        async def learn(ls: Host, *args: Any) -> wire.LearnShapesResult:
            if len(args) > 1:
                raise invalid(f"{wire.LEARN_SHAPES_COMMAND}: expected no argument or one {{uri?}}, got {len(args)}")
            argument = as_dict(args[0]) if args and args[0] is not None else {}
            data = parse(argument, wire.LearnShapesArguments, "arguments[0]")
            budget = data.get("budget")
            if budget is not None and not budget > 0:
                raise invalid(f"arguments[0].budget: expected seconds above 0, got {budget!r}")
            return await self.learn(data.get("uri"), budget=budget)

    def _target(self, uri: str | None) -> tuple[Path, Path]:
        """The folder (or file) whose examples run, and the workspace folder it is in."""
        if uri is not None:
            path = file_path(uri, "arguments[0].uri")
            if not path.exists():
                raise invalid(f"arguments[0].uri: no such file or folder: {visible(str(path))}")
            return path, self.ls.session.folder_of(path if path.is_file() else path / "_")
        roots = list(self.ls.session.roots)
        if not roots:
            raise invalid(f"{wire.LEARN_SHAPES_COMMAND}: no workspace folder is open; give {{uri}}")
        return roots[0], roots[0]

    async def learn(
        self, uri: str | None, *, budget: float | None = None, scripts: bool = True
    ) -> wire.LearnShapesResult:
        """Run the examples of ``uri`` (a folder's, or those whose imports reach a file) within
        ``budget`` seconds; ``scripts=False``: test files only (what opening a file runs)."""
        where, folder = self._target(uri)
        if not await self.trust.ensure(folder):
            raise JsonRpcException(
                f"not learned: {visible(str(folder))} is not trusted to run its code (answer Trust once or Always)",
                code=REQUEST_FAILED,
            )
        options = self.ls.session.options
        try:
            python = select_interpreter(
                workspace_root=folder, setting=options.python, client=options.selected_python
            ).python
        except InterpreterError as exc:
            raise JsonRpcException(visible(str(exc)), code=REQUEST_FAILED) from None
        root = project_root(where if where.is_file() else where / "_", folder)
        graph = ImportGraph(folder)
        examples = await asyncio.to_thread(learning.find_examples, [where], root, scripts=scripts, graph=graph)
        if not examples:
            what = "imports" if where.is_file() else "under"
            raise JsonRpcException(
                f"nothing to learn from: no test file or documented script {what} {visible(str(where))}",
                code=REQUEST_FAILED,
            )
        token = await self._begin(f"{len(examples)} examples")
        store = SignatureStore(folder)
        cancel = asyncio.Event()

        async def run(request: dict[str, Any], exe: str, capture: CaptureOptions) -> Any:
            return await run_capture(request, exe, CaptureOptions(**{**capture.__dict__, "cancel": cancel}))

        def progress(done: int, total: int, learned: int, example: learning.ExampleOutcome) -> None:
            if token is not None:
                message = f"{done}/{total} examples, {learned} targets learned ({example.text}: {example.outcome})"
                report = types.WorkDoneProgressReport(message=message, percentage=int(100 * done / total))
                self.ls.work_done_progress.report(token, report)

        try:
            report = await learning.learn_async(
                root,
                examples,
                python,
                store=store,
                cache=ExampleCache(folder),
                graph=graph,
                budget=budget or learning.BUDGET,
                progress=progress,
                run=run,
            )
        except asyncio.CancelledError:
            cancel.set()
            raise
        finally:
            if token is not None:
                self.ls.work_done_progress.end(token, types.WorkDoneProgressEnd())
        message = f"jaxlsp: learned the inputs of {len(report.targets)} targets from {len(report.examples)} examples"
        summary = report.json()
        if summary["cached"]:
            message += f" ({summary['ran']} ran, {summary['cached']} unchanged since they last ran)"
        if report.stopped:
            message += f"; stopped: {report.stopped}"
        if report.failures:
            message += (
                f"; {len(report.failures)} failed (first: {report.failures[0].text}: {report.failures[0].message})"
            )
        self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, visible(message)))
        if report.targets:
            for hear in self.after:
                hear(folder)
        return cast(wire.LearnShapesResult, report.json())

    async def _begin(self, message: str) -> str | None:
        if not self.ls.session.support.work_done_progress:
            return None
        token = f"jaxlsp-learn-{uuid.uuid4()}"
        try:
            await self.ls.work_done_progress.create_async(token)
        except Exception:
            return None
        begin = types.WorkDoneProgressBegin(title=TITLE, message=message, percentage=0, cancellable=False)
        self.ls.work_done_progress.begin(token, begin)
        return token
