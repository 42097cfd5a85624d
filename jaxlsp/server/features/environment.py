"""Capture environments from the editor: ``jaxlsp/environment``, the command
``jaxlsp.checkEnvironment`` and the reviewed install.

The check runs the selected interpreter, so it waits for the workspace folder's trust like a trace
does. A problem an install fixes is offered through ``window/showMessageRequest`` with the exact
command; only the answer ``Install`` runs it, into the selected interpreter's environment, with
work-done progress, every line in a log file under ``$XDG_CACHE_HOME/jaxlsp/logs/`` and the log
sent as ``window/logMessage``. The logic lives in :mod:`jaxlsp.capture.environment.compatibility` and
:mod:`jaxlsp.capture.environment.install`; this module only speaks LSP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Any, cast

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from jaxlsp.capture.engine import Prepared, check_environment, choose_python
from jaxlsp.capture.environment import compatibility
from jaxlsp.capture.environment.compatibility import Report
from jaxlsp.capture.environment.install import InstallPlan, InstallResult, plan_install, run_install
from jaxlsp.capture.environment.interpreters import InterpreterError, Selection, select_interpreter
from jaxlsp.capture.inputs.plan import fresh_sites, select
from jaxlsp.capture.request import Discovered, SitesWanted, TraceFailure, TraceRequest
from jaxlsp.server import wire
from jaxlsp.server.display import visible
from jaxlsp.server.features.trust import TrustPrompt
from jaxlsp.server.host import Host
from jaxlsp.server.params import REQUEST_FAILED, as_dict, file_path, invalid, parse
from jaxlsp.worker.protocol import ErrorKind

log = logging.getLogger(__name__)
INSTALL, CANCEL = "Install", "Cancel"
LOG_MESSAGE_LIMIT = 1024 * 1024  # characters of an install log sent as window/logMessage


class Environments:
    """The check, the install offer and the installs of one server; also the capture service's
    gate (:meth:`before_capture`)."""

    def __init__(self, ls: Host, trust: TrustPrompt) -> None:
        self.ls = ls
        self.trust = trust
        self.cache = compatibility.CACHE
        self.install_lock = asyncio.Lock()  # one install at a time

    def register(self, server: Host) -> None:
        @server.feature(wire.ENVIRONMENT)
        async def check(ls: Host, params: Any) -> wire.EnvironmentResult:
            data = parse(params if params is not None else {}, wire.EnvironmentParams)
            uri = data["textDocument"]["uri"] if "textDocument" in data else None
            report = await self.check(
                uri, data.get("name"), data.get("device"), "params.textDocument.uri", data.get("refresh", False)
            )
            return _result(report)

        @server.command(wire.CHECK_ENVIRONMENT_COMMAND)
        async def check_command(ls: Host, *args: Any) -> wire.EnvironmentResult:
            if len(args) > 1:
                raise invalid(
                    f"{wire.CHECK_ENVIRONMENT_COMMAND}: expected no argument or one {{uri?, name?, device?}},"
                    f" got {len(args)}"
                )
            argument = as_dict(args[0]) if args and args[0] is not None else {}
            data = parse(argument, wire.CheckEnvironmentArguments, "arguments[0]")
            # asked for on demand: always re-run
            report = await self.check(
                data.get("uri"), data.get("name"), data.get("device"), "arguments[0].uri", refresh=True
            )
            installed = False
            if not report.ok and report.requirements:
                installed = await self.offer_install(report)
                if installed:
                    report = await asyncio.to_thread(
                        self.cache.check, report.selection, report.kind, report.device, True
                    )
            if report.ok:
                ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, visible(report.message())))
            elif not report.requirements or installed:
                ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, visible(report.message())))
            result = _result(report)
            result["installed"] = installed
            return result

    # -- what a trace calls -------------------------------------------------------------------------
    async def before_capture(self, prepared: Prepared) -> TraceFailure | None:
        """The cached check of a trusted trace's interpreter; a fixable problem is offered for
        install. None when the capture may go on, else the refusal (nothing of the target ran)."""
        report = await asyncio.to_thread(check_environment, prepared)
        if report.ok:
            return None
        if report.requirements and await self.offer_install(report):
            report = await asyncio.to_thread(check_environment, prepared, True)
            if report.ok:
                return None
        return TraceFailure(ErrorKind.REFUSED, report.message())

    # -- the reviewed install -----------------------------------------------------------------------
    async def offer_install(self, report: Report) -> bool:
        """Ask to run the exact install command; True when it ran and succeeded."""
        plan = plan_install(report.selection, report.requirements, has_pip=bool(report.probe.packages.get("pip")))
        # Each part on its own line, escaped (display.py): an interpreter path inside the workspace
        # is the workspace's to name, and must not write lines of its own into the question.
        message = (
            f"{visible(report.message())}\n\nInstall into {visible(report.selection.describe())} now by running:\n"
            f"{visible(plan.text)}"
        )
        try:
            answer = await self.ls.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=message,
                    actions=[types.MessageActionItem(INSTALL), types.MessageActionItem(CANCEL)],
                )
            )
        except Exception:  # a client that cannot ask its user: nothing is installed
            log.warning("the client could not ask to install", exc_info=True)
            answer = None
        if answer is None or answer.title != INSTALL:
            self.ls.window_log_message(
                types.LogMessageParams(
                    types.MessageType.Info, f"jaxlsp: install declined; nothing was run ({plan.text})"
                )
            )
            return False
        async with self.install_lock:
            result = await self._install(plan)
        self.cache.forget(report.selection.python)
        return result.ok

    async def _install(self, plan: InstallPlan) -> InstallResult:
        progress = await _begin_progress(self.ls, f"Installing {' '.join(plan.requirements)}", plan.text)

        def on_line(line: str) -> None:
            if progress is not None and line.strip():
                self.ls.work_done_progress.report(progress, types.WorkDoneProgressReport(message=line[-200:]))

        try:
            result = await run_install(plan, on_line)
        finally:
            if progress is not None:
                self.ls.work_done_progress.end(progress, types.WorkDoneProgressEnd())
        text = result.log.read_text(encoding="utf-8", errors="replace")
        self.ls.window_log_message(
            types.LogMessageParams(
                types.MessageType.Info if result.ok else types.MessageType.Error,
                f"jaxlsp: install log {visible(str(result.log))}:\n{text[-LOG_MESSAGE_LIMIT:]}",
            )
        )
        if result.ok:
            note = f"Installed {' '.join(plan.requirements)} into {plan.selection.describe()} in {result.took:.1f} s"
            kind = types.MessageType.Info
        else:
            last = result.tail.splitlines()[-1] if result.tail else ""
            note = f"The install failed (exit status {result.returncode}): {last}"
            kind = types.MessageType.Error
        self.ls.window_show_message(types.ShowMessageParams(kind, visible(f"{note}. Full log: {result.log}")))
        return result

    # -- the request and the command -----------------------------------------------------------------
    async def check(self, uri: str | None, name: str | None, device: str | None, where: str, refresh: bool) -> Report:
        """Select (as a trace of ``uri``/``name`` would, else for the workspace), trust, check."""
        session = self.ls.session
        options = session.options
        name = name or None
        device = device or options.device
        cell = self.ls.notebooks.cell(uri) if uri else None  # a notebook cell's document: its notebook
        path = cell.path if cell is not None else file_path(uri, where) if uri else None
        folder = session.folder_of(path) if path else (session.roots[0] if session.roots else Path.cwd())
        # Trust first: selecting may run the python3 on PATH to ask whether it has JAX.
        if not await self.trust.ensure(folder):
            raise JsonRpcException(
                f"not checked: {visible(str(folder))} is not trusted to run its code, and checking runs "
                "the Python interpreter a trace would use",
                code=REQUEST_FAILED,
            )
        selection, kind, profile_device = self._select(folder, path, name, options)
        device = device or profile_device
        return await asyncio.to_thread(self.cache.check, selection, kind, device or "cpu", refresh)

    def _select(
        self, folder: Path, path: Path | None, name: str | None, options: Any
    ) -> tuple[Selection, str | None, str | None]:
        """The interpreter, kind and profile device a trace of ``path``/``name`` would use (the
        recipe's profile when there is a usable one), else the workspace's interpreter."""
        resolved = None
        entry = self.ls.session.entrypoint(path, name) if path is not None and name else None
        req = TraceRequest(
            file=path or folder,
            name=name or "",
            workspace_root=folder,
            setting_python=options.python,
            client_python=options.selected_python,
            discovered=Discovered(
                self.ls.session.entrypoint(path.resolve(), name) if path is not None and name else None
            ),
        )
        if path is not None and name:
            try:
                try:
                    resolved, _ = select(req)
                except SitesWanted as wanted:  # no profile names it: auto's choice, from a fresh look at its sites
                    found = Discovered(wanted.entrypoint, fresh_sites(req, wanted.entrypoint))
                    resolved, _ = select(dataclasses.replace(req, discovered=found))
            except TraceFailure:
                resolved = None  # no usable profile yet (needs input...): no recipe python either
        if resolved is None:
            try:
                selection = select_interpreter(
                    workspace_root=folder, setting=options.python, client=options.selected_python
                )
            except InterpreterError as exc:
                raise JsonRpcException(str(exc), code=REQUEST_FAILED) from None
            return selection, getattr(entry, "kind", None), None
        try:
            selection = choose_python(req, resolved)
        except TraceFailure as failure:
            raise JsonRpcException(failure.message, code=REQUEST_FAILED) from None
        kind = resolved.target.get("kind") or getattr(entry, "kind", None)
        return selection, kind, str(resolved.profile.get("device") or "cpu")


async def _begin_progress(ls: Host, title: str, message: str) -> str | None:
    if not ls.session.support.work_done_progress:
        return None
    token = f"jaxlsp-install-{uuid.uuid4()}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:
        return None
    ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, message=message))
    return token


def _result(report: Report) -> wire.EnvironmentResult:
    data = cast(wire.EnvironmentResult, report.to_json())  # Report.to_json builds this shape
    if report.requirements:
        plan = plan_install(report.selection, report.requirements, has_pip=bool(report.probe.packages.get("pip")))
        data["install"] = plan.text
    return data
