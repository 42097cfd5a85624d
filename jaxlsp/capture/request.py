"""What a trace asks (:class:`TraceRequest`) and how it fails (:class:`TraceFailure`): the one form
the server's ``jaxlsp/trace`` and the CLI's ``jaxlsp trace`` are written into, read by input
planning (``capture/inputs/plan.py``) and by the engine that builds the worker's request from it
(``capture/engine.py``). Plain data only: what the caller's discovery already knows of the target
comes as :class:`Discovered` (an entrypoint, its call sites), never as a way to look it up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.worker.protocol import ErrorKind

if TYPE_CHECKING:
    from jaxlsp.discovery.callsites.sites import CallSite
    from jaxlsp.discovery.entrypoints import Entrypoint
    from jaxlsp.recipes import NeedsInput


@dataclass
class ValuesOptions:
    """A values run (``jaxlsp trace --values``, ``values: true``): what to keep of the arrays."""

    save: Path | None = None  # write the selected values to this .npz
    nodes: list[str] = field(default_factory=list)  # what ``save`` writes (node ids, value ids, port labels)
    inline: list[str] = field(default_factory=list)  # value ids returned as arrays (at most 4,096 elements)
    dims: dict[str, int] = field(default_factory=dict)  # sizes of the profile's symbolic dimensions

    def request(self) -> dict[str, Any]:
        """The worker request's ``values`` object (``protocol.ValuesRequest``)."""
        out: dict[str, Any] = {}
        if self.save is not None:
            out["save"] = str(self.save.resolve())
        if self.nodes:
            out["nodes"] = list(self.nodes)
        if self.inline:
            out["inline"] = list(self.inline)
        return out


@dataclass
class TimeOptions:
    """A timed run (``jaxlsp trace --time``, ``time: true``): the compiled program run ``repeat``
    times after a warm-up, under the profiler, on the profile's inputs made as for a values run."""

    repeat: int = 5
    dims: dict[str, int] = field(default_factory=dict)  # sizes of the profile's symbolic dimensions

    def request(self) -> dict[str, Any]:
        """The worker request's ``time`` object (``protocol.TimeRequest``)."""
        return {"repeat": self.repeat}


@dataclass(frozen=True)
class Discovered:
    """What the caller's own discovery found of the target before the trace (the server's warm
    index): the entrypoint (None: discovery does not know it as a target), and its call sites
    once looked up. Sites cost a search of the workspace, and only a target that no profile names
    and no learned call covers needs them: left ``None``, planning stops with
    :class:`SitesWanted` when it comes to them, and the caller asks again with them filled in."""

    entrypoint: Entrypoint | None
    sites: tuple[CallSite, ...] | None = None


class SitesWanted(Exception):
    """Planning needs the target's call sites, which :attr:`TraceRequest.discovered` left out:
    look them up for ``entrypoint`` and ask again (``capture/inputs/plan.py``)."""

    def __init__(self, entrypoint: Entrypoint | None) -> None:
        super().__init__("the target's call sites are needed to choose its inputs")
        self.entrypoint = entrypoint


@dataclass
class TraceRequest:
    file: Path
    name: str
    workspace_root: Path
    profile: str | None = None
    recipe: Path | None = None
    python: str | None = None
    device: str | None = None
    # Interpreter routes after ``python`` (``--python``) and the recipe's (capture/environment/interpreters.py).
    setting_python: str | None = None  # the setting jaxlsp.python
    client_python: str | None = None  # the client's selected interpreter
    limits: dict[str, int] | None = None  # graph-size limits (worker/tracing/limits.py); None: the defaults
    # What the caller's discovery found of the target (the server's warm index); None: planning
    # discovers what it needs itself, with a fresh index of the root, and only where it needs it
    # (the CLI: its discovery imports libcst, 1.5-1.9 s a profile that names the target never needs)
    discovered: Discovered | None = None
    # Answers to an earlier needs-input (missing item path -> TOML-form value).
    answers: dict[str, Any] | None = None
    costs: bool = False  # measure XLA's costs of every equation (worker/program/costs.py)
    xla_compare: bool = False  # and XLA's whole-program cost and memory analysis (implies costs)
    # compile the program for the profile's devices and read back collectives, fusions, shardings
    # and per-device memory (worker/program/compiled.py)
    compiled: bool = False
    values: ValuesOptions | None = None  # also run the graph on the profile's inputs (statistics)
    time: TimeOptions | None = None  # also time the compiled program on those inputs (implies costs)
    # The graph's workspace paths relative to the recipe's folder (the CLI) instead of the root.
    paths_from_recipe: bool = False
    devices: int | None = None  # N virtual CPU devices (--devices), overriding the profile's
    topology: str | None = None  # a TPU pod to compile for (--topology), overriding the profile's
    # A notebook target: the cell whose definition is meant (the server's lens knows it); None:
    # the last code cell that defines the name.
    cell: int | None = None
    # Where the inputs come from without a recipe profile: None or "auto" (capture/inputs/plan.py),
    # or an example "PATH[::TEST] [ARGS]" to run (relative to ``cwd``), which overrides any profile.
    source: str | None = None
    cwd: Path | None = None  # what a --from path is relative to (the current folder)
    # The project root examples run from (discovery/roots.py); None: found from the target.
    root: Path | None = None
    # auto may pick an example to run (the CLI); False (the editor): examples are offered as choices
    run_examples: bool = True
    # a live trace: the worker reaches no other machine, and a capture that wanted to is refused
    # (worker/core/offline.py), never a download on opening a file
    offline: bool = False
    # A live trace of a file no trace of the user's imported whole: a ``.py`` target's top level is
    # not run (``load = "definitions"``) where its profile would import the file whole; a script
    # whose top level trains runs only when someone chose it (docs/live-shapes.md)
    definitions_only: bool = False
    # False: every Linen module call is traced, none replayed (worker/reuse/replay.py; the CLI's --no-replay)
    replay: bool = True
    # Record the call signatures of the workspace's targets that run (worker/examples/signatures.py),
    # and use a learned one when the target has no profile (capture/inputs/signatures.py)
    signatures: bool = True
    signature_cache: Path | None = None  # where they are kept; None: the per-user cache


@dataclass
class TraceFailure(Exception):
    """A trace that made no graph: its kind (the worker's, or the client's own for a recipe
    problem or an answer still needed), one paragraph for humans, the user's frame when known."""

    kind: ErrorKind
    message: str
    frame: dict[str, Any] | None = None
    needs: NeedsInput | None = None
    logs: str = ""
    problems: list[Any] = field(default_factory=list)  # recipe problems (path, line, key_path, message)
    examples: list[dict[str, Any]] = field(default_factory=list)  # runnable choices (needs-input)
    dims: list[str] = field(default_factory=list)  # symbolic dimensions a values run needs sizes for
    # the workspace root the frame's path is shown relative to, as graphs show paths (the frame
    # itself keeps the absolute path: the server's diagnostics need it)
    root: str | None = None
    # the top-level name a ``load = "definitions"`` left unset that the failure needed (the
    # worker's ``ErrorInfo.skipped``)
    skipped: str | None = None
    # the symbolic dimensions JAX could not keep as symbols (the worker's ``ErrorInfo.symbolic``:
    # its names; empty when JAX did not say which); None for any other failure
    symbolic: list[str] | None = None

    def __post_init__(self) -> None:
        self.kind = ErrorKind(self.kind)  # a kind spelled as JSON spells it is made its member

    def paragraph(self) -> str:
        where = ""
        if self.frame:
            cell = f"cell {self.frame['cell']}:" if self.frame.get("cell") is not None else ""
            path = str(self.frame.get("path"))
            if self.root and os.path.isabs(path) and Path(path).is_relative_to(self.root):
                path = Path(path).relative_to(self.root).as_posix()
            where = f" at {path}:{cell}{self.frame.get('line')}"
            if self.frame.get("column") is not None:
                where += f":{int(self.frame['column']) + 1}"
        return f"{self.kind.replace('_', ' ')}{where}: {self.message}"
