"""``jaxlsp.learnShapes``: run the workspace's own examples once and keep every reached target's
call (capture/inputs/learning.py), with ``$/progress``; then what is open is traced live on what was
learned. On a file, only the examples whose imports reach it run, within the budget asked for.
It starts on its own in one case only (issue 56): ``jaxlsp.learn.onOpen`` is ``"on"``, or
``"ask"`` and the user answered "Learn on open" for the folder (asked once, the first time a file
with a target not learned yet is opened there and test files import it; kept per user like trust),
and the folder is trusted: opening such a file then runs, in the background, the test files that
import it (never a script), and saving a file runs again the ones that load it. Otherwise only the
command (a palette entry, the ``Learn shapes`` code action) runs it, in a folder the user trusts
(asked, as a trace asks)."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
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
from jaxlsp.server.display import quoted, visible
from jaxlsp.server.features.trust import TrustPrompt
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, as_dict, file_path, invalid, local_path, parse
from jaxlsp.trust_store import LearnOnOpenStore

TITLE = "Learning shapes"
ON_OPEN_BUDGET = 300.0  # seconds a learn started by opening (or saving) a file may take
LEARN_ON_OPEN, NEVER_HERE, NOT_NOW = "Learn on open", "Never here", "Not now"

log = logging.getLogger(__name__)


def on_open_prompt(folder: Path) -> str:
    """The once-asked question about ``folder``: the same sentence whatever the folder is called."""
    return (
        f"Learn the shapes of the files you open in {quoted(folder)} by running the test files that import them"
        " (in the background, at low priority)?"
    )


class Learning:
    def __init__(self, ls: Host, trust: TrustPrompt, choices: LearnOnOpenStore | None = None) -> None:
        self.ls = ls
        self.trust = trust
        # called with the folder and the targets (absolute path, name) it may have new inputs for
        self.after: list[Callable[[Path, set[tuple[str, str]]], None]] = []
        self.choices = choices or LearnOnOpenStore()  # the user's once-asked answers, per folder
        self._asked: set[Path] = set()  # folders asked in this session (a dismissed question is not repeated)
        # documents opened (True) or saved (False) whose examples run next, one learn at a time
        self._waiting: list[tuple[str, bool]] = []
        self._background: asyncio.Task[None] | None = None

    def register(self, server: Host) -> None:
        server.open_listeners.append(self.opened)

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

    # -- on open, once chosen -------------------------------------------------------------------------
    def opened(self, uri: str) -> None:
        self._consider(uri, may_ask=True)

    def saved(self, uri: str) -> None:
        """A save: the examples that load the file run again (only those: the others are cached)."""
        self._consider(uri, may_ask=False)

    def _chosen(self, folder: Path) -> bool | None:
        """Whether ``folder`` learns on open: the setting, else the user's answer (None: not asked)."""
        mode = self.ls.session.options.learn_on_open
        if mode != "ask":
            return mode == "on"
        return self.choices.choice(folder)

    def _consider(self, uri: str, may_ask: bool) -> None:
        path = local_path(uri)
        if path is None or path.suffix != ".py" or self.ls.session.options.learn_on_open == "off":
            return
        session = self.ls.session
        folder = session.folder_of(path)
        if not session.is_trusted(folder):
            return  # nothing runs before trust, and learning never asks for it
        chosen = self._chosen(folder)
        if chosen is False or (chosen is None and (not may_ask or folder in self._asked)):
            return
        if (uri, may_ask) not in self._waiting:
            self._waiting.append((uri, may_ask))
        if self._background is None or self._background.done():
            self._background = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self._waiting:
            uri, opened = self._waiting.pop(0)
            try:
                await self._learn_opened(uri, opened)
            except JsonRpcException as exc:  # nothing imports it, no interpreter: nothing to say unasked
                log.info("learn on open of %s: %s", uri, exc.message)
            except Exception:
                log.warning("learn on open of %s failed", uri, exc_info=True)

    def _dark(self, path: Path) -> bool:
        """Whether ``path`` defines a target with no learned call yet."""
        entries = self.ls.session.discover(path).entrypoints
        if not entries:
            return False
        learned = {(s.path, s.name) for s in SignatureStore(self.ls.session.folder_of(path)).all()}
        real = os.path.realpath(path)
        return any((real, e.name) not in learned for e in entries)

    async def _learn_opened(self, uri: str, opened: bool) -> None:
        """Opened: learn when the file has a dark target. Saved: whatever loads it may teach
        otherwise now (the examples it does not change are cached, and not run)."""
        path = local_path(uri)
        if path is None or (opened and not self._dark(path)):
            return
        await self.learn(
            uri, budget=ON_OPEN_BUDGET, scripts=False, confirm=self._confirm, quiet=True, live_as_learned=True
        )

    async def _confirm(self, folder: Path) -> bool:
        """Asked once, with examples to run: the user's answer for ``folder``, kept when it is one."""
        chosen = self._chosen(folder)
        if chosen is not None:
            return chosen
        if folder in self._asked:
            return False
        self._asked.add(folder)
        try:
            answer = await self.ls.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Info,
                    message=on_open_prompt(folder),
                    actions=[types.MessageActionItem(t) for t in (LEARN_ON_OPEN, NEVER_HERE, NOT_NOW)],
                )
            )
        except Exception:  # a client that cannot ask its user: nothing runs
            log.warning("the client could not ask whether to learn on open", exc_info=True)
            return False
        title = answer.title if answer is not None else NOT_NOW
        if title in (LEARN_ON_OPEN, NEVER_HERE):
            self.choices.set(folder, title == LEARN_ON_OPEN)
        return title == LEARN_ON_OPEN

    # -- the command -------------------------------------------------------------------------------------
    async def learn(
        self,
        uri: str | None,
        *,
        budget: float | None = None,
        scripts: bool = True,
        confirm: Callable[[Path], Awaitable[bool]] | None = None,
        quiet: bool = False,
        live_as_learned: bool = False,
    ) -> wire.LearnShapesResult:
        """Run the examples of ``uri`` (a folder's, or those whose imports reach a file) within
        ``budget`` seconds; ``scripts=False``: test files only (what opening a file runs). With
        ``confirm``, only once it says yes for the folder, asked when there is something to run;
        ``quiet``: the summary is logged, not shown (a run nobody asked for just now).
        ``live_as_learned``: what is open is traced again as soon as a running example teaches a
        new target, not once at the end: a file opened wants its shapes from the first test that
        calls it, not after the slowest one that imports it (nmn's ``rotary_yat.py``: 13 test
        files) nor after the rest of that test's file (interpax: 260 s)."""
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
        if confirm is not None and not await confirm(folder):
            return cast(wire.LearnShapesResult, learning.LearnReport().json())
        token = await self._begin(f"{len(examples)} examples")
        store = SignatureStore(folder)
        cancel = asyncio.Event()

        async def run(request: dict[str, Any], exe: str, capture: CaptureOptions) -> Any:
            return await run_capture(request, exe, CaptureOptions(**{**capture.__dict__, "cancel": cancel}))

        heard = False  # what is open was traced again on something this learn kept

        def new_inputs(targets: set[tuple[str, str]]) -> None:
            nonlocal heard
            if live_as_learned:
                heard = True
                for hear in self.after:
                    hear(folder, targets)

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
                new_inputs=new_inputs,
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
        if quiet:
            self.ls.window_log_message(types.LogMessageParams(types.MessageType.Info, visible(message)))
        else:
            self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, visible(message)))
        if report.targets and not heard:
            taught = learning.absolute_targets(report.targets, root)
            for hear in self.after:
                hear(folder, taught)
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
