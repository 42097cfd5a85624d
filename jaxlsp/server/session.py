"""Per-server state: the workspace index, the classifier, and what the client can do."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from jaxlsp.discovery import Classifier, Discovery, Entrypoint, WorkspaceIndex
from jaxlsp.graph.store import GraphStore
from jaxlsp.textfiles import real_path
from jaxlsp.trust_store import ChoiceStore, TrustStore


@dataclass(frozen=True)
class ClientSupport:
    """The client capabilities that change what the server sends."""

    code_lens_refresh: bool = False
    work_done_progress: bool = False
    watched_files_registration: bool = False
    show_document: bool = False
    opens_graphs: bool = False  # "Open graph" can reach the user: showDocument, or the client opens it

    @classmethod
    def from_capabilities(cls, caps: types.ClientCapabilities) -> ClientSupport:
        ws = caps.workspace
        window = caps.window
        show_document = bool(window and window.show_document and window.show_document.support)
        experimental = caps.experimental.get("jaxlsp") if isinstance(caps.experimental, dict) else None
        opt_in = isinstance(experimental, dict) and experimental.get("openGraph") is True
        return cls(
            code_lens_refresh=bool(ws and ws.code_lens and ws.code_lens.refresh_support),
            work_done_progress=bool(window and window.work_done_progress),
            watched_files_registration=bool(
                ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration
            ),
            show_document=show_document,
            opens_graphs=show_document or opt_in,
        )


@dataclass
class Options:
    """``initializationOptions.jaxlsp``: read once at initialize."""

    trusted: bool = False  # the editor's own workspace trust (VS Code fills it)
    python: str | None = None  # the setting jaxlsp.python: the interpreter to capture in
    selected_python: str | None = None  # the client's selected interpreter (VS Code: the Python extension's)
    device: str | None = None  # cpu | cuda:N | tpu | tpu:N for every trace, over the profile's (like --device)
    limits: dict[str, int] | None = None  # graph-size limits {equations, values, bytes} over the defaults
    timeout: float | None = None
    inlay_hints: bool = False  # shapes at the end of assignment lines (off by default)
    costs: bool = False  # measure XLA's costs in every trace (jaxlsp/costs), not only when asked
    live_shapes: bool = True  # re-trace on open and save (live.py); false turns it off
    replay: bool = True  # repeated Linen layers traced once (worker/reuse/replay.py); false traces every call
    learn_on_open: str = "off"  # jaxlsp.learn.onOpen: "on", "off" or "ask" (once per folder; features/learning.py)
    live_slots: int | None = None  # live traces at once (None: features/live.py's live_slots())

    @classmethod
    def parse(cls, raw: Any) -> Options:
        section = raw.get("jaxlsp") if isinstance(raw, dict) else None
        if not isinstance(section, dict):
            return cls()
        python = section.get("python")
        selected = section.get("selectedPython")
        device = section.get("device")
        limits = section.get("limits")
        timeout = section.get("timeout")
        learn = section.get("learn")
        slots = section.get("liveSlots")
        on_open = learn.get("onOpen") if isinstance(learn, dict) else None
        if isinstance(on_open, bool):
            on_open = "on" if on_open else "off"
        return cls(
            trusted=section.get("trusted") is True,
            python=python if isinstance(python, str) and python else None,
            selected_python=selected if isinstance(selected, str) and selected else None,
            device=device if isinstance(device, str) and device else None,
            limits=(
                {k: v for k, v in limits.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
                if isinstance(limits, dict)
                else None
            ),
            timeout=float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None,
            inlay_hints=section.get("inlayHints") is True,
            costs=section.get("costs") is True,
            live_shapes=section.get("liveShapes") is not False,
            replay=section.get("replay") is not False,
            learn_on_open=on_open if on_open in ("on", "off", "ask") else "off",
            live_slots=slots if isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1 else None,
        )


@dataclass
class Session:
    roots: list[Path] = field(default_factory=list)
    support: ClientSupport = field(default_factory=ClientSupport)
    options: Options = field(default_factory=Options)
    index: WorkspaceIndex = field(default_factory=lambda: WorkspaceIndex([]))
    classifier: Classifier | None = None
    indexed: bool = False
    trust: TrustStore = field(default_factory=TrustStore)
    choices: ChoiceStore = field(default_factory=ChoiceStore)  # what the user's own traces ran (live.py)
    trusted_once: set[Path] = field(default_factory=set)
    graphs: GraphStore = field(default_factory=GraphStore)
    refused: list[tuple[str, str]] = field(default_factory=list)  # workspace folders not used, and why

    def folder_of(self, path: Path) -> Path:
        """The workspace folder holding ``path`` (the innermost root), else the file's folder."""
        path = real_path(path)
        inside = [r for r in self.index.roots if path.is_relative_to(r)]
        return max(inside, key=lambda r: len(r.parts)) if inside else path.parent

    def is_trusted(self, folder: Path) -> bool:
        # The editor's trust covers its workspace folders, not any file the client names outside
        # them; with no folders at all it covers nothing, and each file's folder is asked about.
        resolved = real_path(folder)
        editor = self.options.trusted and any(resolved.is_relative_to(real_path(r)) for r in self.roots)
        return editor or folder in self.trusted_once or self.trust.is_trusted(folder)

    def start(self, roots: list[Path]) -> None:
        self.roots = roots
        self.index = WorkspaceIndex(roots)
        self.classifier = Classifier(self.index)

    def discover_ready(self, near: Path | None = None) -> WorkspaceIndex:
        """The index, made around ``near``'s folder when no initialize came (trusting no folder)."""
        if self.classifier is None:
            self.index = WorkspaceIndex([near.parent if near is not None else Path.cwd()])
            self.classifier = Classifier(self.index)
        return self.index

    def discover(self, path: Path, revalidate: bool = False) -> Discovery:
        """Entrypoints of ``path``. With ``revalidate``, a client that watches no files still gets
        lenses that follow disk changes (a ``git checkout`` changing a base class)."""
        self.discover_ready(path)
        assert self.classifier is not None
        if revalidate and not self.support.watched_files_registration:
            self.index.revalidate()
        return self.classifier.discover(path)

    def entrypoint(self, path: Path, name: str) -> Entrypoint | None:
        """The entrypoint (or driver) ``name`` of ``path``, from the warm index."""
        found = self.discover(path)
        return next((e for e in (*found.entrypoints, *found.drivers) if e.name == name), None)
