"""From a trace request to a worker request, and from a worker's result to a graph: where the
inputs come from is planned once (``capture/inputs/plan.py``); here the plan, the interpreter and
the request's options become the worker's one request (``build_request``), and its result a
graph (``finish``). The capture service (``service.py``) runs what lies between; no pygls here.

Failures come back as :class:`TraceFailure` with the protocol's error kinds (``needs_input`` and
``refused`` for recipe problems, ``import``, ``trace``, ``timeout``, ``crash``, ``memory``), the
user's source frame when there is one, and one paragraph of text for humans.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jaxlsp.capture.environment import allowed_env, compatibility, interpreters
from jaxlsp.capture.environment.compatibility import Report
from jaxlsp.capture.environment.interpreters import InterpreterError, Selection, select_interpreter
from jaxlsp.capture.inputs import plan
from jaxlsp.capture.inputs.plan import Origin
from jaxlsp.capture.launch.early import workspace_root_for as workspace_root_for  # where it lived: a public name
from jaxlsp.capture.launch.supervise import CaptureOutcome
from jaxlsp.capture.request import TimeOptions as TimeOptions  # the request's forms, where callers found them
from jaxlsp.capture.request import TraceFailure as TraceFailure
from jaxlsp.capture.request import TraceRequest as TraceRequest
from jaxlsp.capture.request import ValuesOptions as ValuesOptions
from jaxlsp.graph import io
from jaxlsp.graph.model import Graph
from jaxlsp.recipes import RecipeError, Resolved, resolve_table
from jaxlsp.recipes.mesh import size_of, too_few
from jaxlsp.recipes.problems import format_key_path
from jaxlsp.recipes.schema import MAX_DEVICES
from jaxlsp.worker.protocol import ErrorKind, MeshSpec, resolve_limits

if TYPE_CHECKING:
    from jaxlsp.graph.compact import CompactFile


@dataclass
class TraceOutcome:
    graph: Graph
    capture: CaptureOutcome
    resolved: Resolved
    request: dict[str, Any] = field(default_factory=dict)
    route: str = interpreters.OWN  # how the interpreter that ran it was chosen
    origin: Origin | None = None  # where the inputs came from (capture/inputs/plan.py)
    # The worker's compact form checked, when the caller asked for it (the CLI's -o, written as it
    # came); ``graph`` is then its small parts only: no nodes, no values (graph/compact.py).
    compact: CompactFile | None = None

    def inputs_line(self) -> str | None:
        """``inputs from PATH:LINE (test|script|module)``: the call site the inputs came from."""
        if self.origin is None:
            return None
        if self.origin.how == "example" and self.origin.example is not None:
            callsite = self.capture.result.get("callsite") or {}
            path = str(callsite.get("path", self.origin.example["path"]))
            if not os.path.isabs(path):
                path = os.path.join(str(self.request.get("workspaceRoot") or self.origin.root), path)
            rel = Path(os.path.relpath(path, self.origin.root)).as_posix()
            cell = f"cell {callsite['cell']}:" if callsite.get("cell") is not None else ""
            return f"inputs from {rel}:{cell}{callsite.get('line', '?')} ({self.origin.example['kind']})"
        return self.origin.line()

    def learned(self) -> Resolved | None:
        """The profile to save: the static site's, or what the example run learned (its recipe
        form when the call can be written as one, else ``from`` the example)."""
        if self.origin is None or self.origin.how == "profile":
            return None
        if self.origin.how != "example":
            return self.resolved if self.resolved.recipe is None else None
        learned = self.capture.result.get("learned") or {}
        table = dict(self.resolved.table)
        if isinstance(learned.get("table"), dict):
            table = {"target": table["target"], **learned["table"]}
        base = self.origin.base or self.origin.root
        try:
            made = resolve_table(self.resolved.name, table, base)
        except RecipeError:
            made = resolve_table(self.resolved.name, self.resolved.table, base)
        return made if isinstance(made, Resolved) else None


def parse_target(spec: str) -> tuple[Path, str]:
    """``path/to/file.py::Name`` (``Name`` may be dotted) into its parts."""
    path, sep, name = spec.rpartition("::")
    if not sep or not path or not name:
        raise TraceFailure(ErrorKind.REFUSED, f"expected FILE::NAME (e.g. model.py::MLP), got {spec!r}")
    return Path(path), name


def remember_signatures(prepared: Prepared, result: Mapping[str, Any]) -> int:
    """Keep the call signatures a capture recorded (none are kept from a failed capture)."""
    records = result.get("signatures")
    req = prepared.req
    if not records or req is None or not result.get("ok") or not req.signatures:
        return 0
    from jaxlsp.capture.inputs import signatures

    example = prepared.request["profile"].get("example")
    target = prepared.request["target"]
    source = example["text"] if example else f"a trace of {Path(str(target['path'])).name}::{target['name']}"
    try:
        return signatures.SignatureStore(req.workspace_root, req.signature_cache).add(
            list(records), prepared.python, source
        )
    except OSError:
        return 0  # an unwritable cache: the trace is still good


def choose_python(req: TraceRequest, resolved: Resolved) -> Selection:
    """The interpreter and the route that chose it, in docs/environments.md's order (no process runs)."""
    try:
        return select_interpreter(
            workspace_root=req.workspace_root,
            request=req.python,
            recipe=resolved.python,
            setting=req.setting_python,
            client=req.client_python,
        )
    except InterpreterError as exc:
        raise TraceFailure(ErrorKind.REFUSED, str(exc)) from None


def _pod(profile: dict[str, Any], name: str) -> None:
    """``--topology NAME`` over the profile's: its mesh must cover the pod's devices (refused at
    the mesh's key otherwise, as the recipe check refuses it: recipes/topology.py)."""
    from jaxlsp.recipes.topology import mismatch
    from jaxlsp.worker.topology import parse

    pod = parse(name)
    if pod is None:
        raise TraceFailure(
            ErrorKind.REFUSED, f"--topology: expected GENERATION:AxB or AxBxC (such as v5e:4x4), got {name!r}"
        )
    if str(profile.get("device") or "cpu") != "cpu":
        raise TraceFailure(
            ErrorKind.REFUSED, f"--topology {name} traces on the CPU, and the device is {profile['device']}"
        )
    mesh = cast("MeshSpec | None", profile.get("mesh"))
    count = pod.devices or "N"
    if mesh is None:
        raise TraceFailure(
            ErrorKind.REFUSED,
            f"--topology {name} needs a mesh over its devices in the profile "
            f"(mesh = {{ axes = {{ data = {count} }} }})",
        )
    problem = mismatch(pod, mesh)
    if problem is not None:
        label = str(profile.get("name") or "")
        where = format_key_path(("profiles", label, "mesh")) if label else "the profile's mesh"
        raise TraceFailure(ErrorKind.REFUSED, f"{where}: {problem} (--topology {name})")
    profile["topology"] = pod.name
    profile.pop("devices", None)  # virtual CPU devices the mesh asked for: the pod gives them now


def build_request(
    req: TraceRequest, resolved: Resolved, recipe_path: Path | None, origin: Origin | None = None
) -> dict[str, Any]:
    target: dict[str, Any] = {**resolved.target}
    path = Path(str(target["path"]))
    target["path"] = str(path if path.is_absolute() else req.file.resolve())
    if req.cell is not None and Path(target["path"]).resolve() == req.file.resolve():
        target["cell"] = req.cell
    profile = dict(resolved.profile)
    if _definitions_only(req, target, profile):
        profile["load"] = "definitions"
    if req.device:
        profile["device"] = req.device
    if (req.values is not None or req.time is not None) and profile.get("symbolic"):
        profile = with_sizes(
            profile, {**(req.time.dims if req.time else {}), **(req.values.dims if req.values else {})}
        )
    if req.devices is not None:
        if str(profile.get("device") or "cpu") != "cpu":
            raise TraceFailure(
                ErrorKind.REFUSED,
                f"--devices {req.devices} makes virtual CPU devices, and the device is {profile['device']}",
            )
        if not 1 <= req.devices <= MAX_DEVICES:
            raise TraceFailure(
                ErrorKind.REFUSED, f"--devices: expected a number from 1 to {MAX_DEVICES}, got {req.devices}"
            )
        profile["devices"] = req.devices
        mesh = cast("MeshSpec | None", profile.get("mesh"))
        if mesh is not None and req.devices < size_of(mesh):
            name = str(profile.get("name") or "")
            where = format_key_path(("profiles", name, "mesh")) if name else "the profile's mesh"
            raise TraceFailure(ErrorKind.REFUSED, too_few(mesh, where, req.devices, "--devices"))
    elif profile.get("devices") and str(profile.get("device") or "cpu") != "cpu":
        raise TraceFailure(
            ErrorKind.REFUSED,
            f"devices = {profile['devices']} makes virtual CPU devices, and the device is {profile['device']}",
        )
    if req.topology is not None:
        _pod(profile, req.topology)
    # an example runs from the project root, as its user runs it (discovery/roots.py)
    root = origin.root if origin is not None and "example" in profile else req.workspace_root.resolve()
    request: dict[str, Any] = {
        "target": target,
        "profile": profile,
        "workspaceRoot": str(root),
        "transport": "packed",  # frames once each; finish() reads it back (jaxlsp.graph.io)
    }
    if origin is not None and origin.how == "site" and origin.site is not None:
        from jaxlsp.discovery.callsites.sites import import_folders

        folders = import_folders(origin.site.path.resolve(), origin.root.resolve())
        request["siteFolders"] = [str(p) for p in folders]
    if req.offline:
        request["offline"] = True
    if req.signatures:
        request["signatures"] = True
    if not req.replay:
        request["replay"] = False
    if recipe_path is not None:
        request["recipePath"] = str(recipe_path)
        if req.paths_from_recipe:
            request["pathBase"] = str(recipe_path.parent)
    request["limits"] = resolve_limits(req.limits)
    # A timed run splits a fusion's time over its equations by their FLOPs: it needs the costs.
    if req.costs or req.xla_compare or req.time is not None:
        request["costs"] = {"cacheDir": str(cost_cache_dir()), "xlaCompare": req.xla_compare}
    if req.compiled:
        request["compiled"] = True
    if req.values is not None:
        request["values"] = req.values.request()
    if req.time is not None:
        request["time"] = req.time.request()
    names = resolved.profile.get("env")
    if names:
        request["env"] = allowed_env.named(names)
    return request


def _definitions_only(req: TraceRequest, target: Mapping[str, Any], profile: Mapping[str, Any]) -> bool:
    """Whether ``req.definitions_only`` changes the load: a ``.py`` target whose profile imports
    the file whole (``load = "module"``, the default) loads its definitions only."""
    if not req.definitions_only or Path(str(target["path"])).suffix != ".py":
        return False
    return profile.get("load") not in ("definitions", "cells")


def cost_cache_dir() -> Path:
    """Where the worker keeps XLA's per-equation figures: ``$XDG_CACHE_HOME/jaxlsp/costs``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxlsp" / "costs"


def with_sizes(profile: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """The profile with its symbolic dimensions given sizes (a values run needs concrete arrays);
    a TraceFailure (needs input) names the dimensions that have none."""
    names = [str(n) for n in profile.get("symbolic", [])]
    missing = [n for n in names if not (isinstance(sizes.get(n), int) and sizes[n] > 0)]
    if missing:
        raise TraceFailure(
            ErrorKind.NEEDS_INPUT,
            f"a values run needs sizes for the symbolic dimension{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (the graph is traced for any size; the run needs arrays): give them "
            f"with {' '.join(f'--dim {n}=SIZE' for n in missing)} on the command line, or dims in jaxlsp/trace",
            dims=missing,
        )

    def sized(spec: Any) -> Any:
        if isinstance(spec, list):
            return [sized(s) for s in spec]
        if not isinstance(spec, dict):
            return spec
        out = {k: sized(v) for k, v in spec.items()}
        if spec.get("kind") == "array" and isinstance(spec.get("shape"), list):
            out["shape"] = [sizes[d] if isinstance(d, str) and d in names else d for d in spec["shape"]]
        return out

    return {k: (sized(v) if k in ("inputs", "init") else v) for k, v in profile.items() if k != "symbolic"}


@dataclass
class Prepared:
    """Everything decided before a capture runs: what to send, to which interpreter."""

    request: dict[str, Any]
    python: str
    resolved: Resolved
    recipe_path: Path | None = None
    route: str = interpreters.OWN  # how ``python`` was chosen
    kind: str | None = None  # the target's kind when known (which packages the check asks for)
    origin: Origin | None = None  # where the inputs come from
    req: TraceRequest | None = None  # what it was prepared from (auto's next example is prepared alike)
    # ``req.definitions_only`` changed the profile's load to ``definitions`` (a live trace's choice,
    # not the profile's): a failure for a name that load left unset is the live trace's own doing
    definitions_only: bool = False

    def running(self) -> str | None:
        """``running PATH[::TEST] to learn the inputs`` before an example runs; else None."""
        example = self.request["profile"].get("example")
        return f"running {example['text']} to learn the inputs" if example else None


def prepare(req: TraceRequest) -> Prepared:
    """Plan the inputs and build the worker request; raises TraceFailure (or SitesWanted)."""
    if sys.platform == "win32":
        raise TraceFailure(ErrorKind.REFUSED, "capture runs on Linux and macOS only; Windows is not supported yet")
    planned = plan.plan(req)
    resolved, recipe_path, origin = planned.resolved, planned.recipe_path, planned.origin
    selection = choose_python(req, resolved)
    request = build_request(req, resolved, recipe_path, origin)
    kind = request["target"].get("kind")
    if kind is None and req.discovered is not None:  # inferred by the worker; discovery's kind says
        entry = req.discovered.entrypoint  # which packages the check needs (the CLI's: check_environment)
        kind = entry.kind if entry is not None else None
    forced = _definitions_only(req, request["target"], resolved.profile)
    return Prepared(request, selection.python, resolved, recipe_path, selection.route, kind, origin, req, forced)


def next_example(prepared: Prepared, failure: TraceFailure) -> Prepared | None:
    """auto's next example, when ``prepared``'s run ended or failed without calling the target
    (an ``example`` failure; a timeout or a crash is not retried); None when there is none."""
    origin = prepared.origin
    if failure.kind != ErrorKind.EXAMPLE or prepared.req is None or origin is None:
        return None
    following = plan.next_example(prepared.resolved, origin)
    if following is None:
        return None
    made, after = following
    request = build_request(prepared.req, made, prepared.recipe_path, after)
    return replace(prepared, request=request, resolved=made, origin=after)


def check_environment(prepared: Prepared, refresh: bool = False) -> Report:
    """The (cached) compatibility check of the prepared capture's interpreter; it runs that
    interpreter, so only once the workspace is trusted (the CLI is an explicit user action).

    A kind left to discovery (the CLI's: its discovery imports libcst) is looked up only when it
    could change the verdict: when the check without it fails, or flax or equinox (which a kind
    may need) is not fine in that interpreter; the report is then exactly the one for the
    discovered kind."""
    selection = Selection(prepared.python, prepared.route)
    device = str(prepared.request["profile"].get("device") or "cpu")
    kind = prepared.kind
    req = prepared.req
    if kind is None and req is not None and req.discovered is None:
        report = compatibility.CACHE.check(selection, None, device, refresh)
        every_need = sorted({p for needs in compatibility.NEEDS_BY_KIND.values() for p in needs})
        problems = compatibility.evaluate(selection, report.probe, every_need, device, compatibility.nvidia_driver())
        if report.ok and not any(p.severity == "error" for p in problems):
            return report
        kind, refresh = plan.discovered_kind(req), False  # the probe is fresh now
    return compatibility.CACHE.check(selection, kind, device, refresh)


def finish(prepared: Prepared, outcome: CaptureOutcome, decode: Callable[[Any], Graph] = io.from_json) -> TraceOutcome:
    """Decode a capture's outcome into a graph (``decode``: from the worker's JSON form, checked;
    a server's store reads it as packed columns instead, capture/service.py); raises TraceFailure."""
    result = outcome.result
    if not result.get("ok"):
        error = result.get("error") or {"kind": ErrorKind.INTERNAL, "message": "the worker returned no result"}
        kind = _kind(error["kind"])
        message = error["message"]
        example = prepared.request["profile"].get("example")
        if example and kind in (ErrorKind.TIMEOUT, ErrorKind.MEMORY, ErrorKind.CRASH):
            message = f"running {example['text']} did not reach {prepared.request['target']['name']}: {message}"
        root = prepared.request.get("workspaceRoot")
        raise TraceFailure(
            kind,
            message,
            error.get("frame"),
            logs=outcome.logs[-4000:],
            root=str(root) if root else None,
            skipped=error.get("skipped"),
            symbolic=list(error["symbolic"]["dimensions"]) if "symbolic" in error else None,
        )
    graph_json = result.get("graph")
    if graph_json is None:
        raise TraceFailure(ErrorKind.INTERNAL, "the worker reported success without a graph")
    try:
        graph = decode(graph_json)
    except ValueError as exc:  # a graph the format refuses: a bug of the worker, said as one
        raise TraceFailure(ErrorKind.INTERNAL, f"the worker's graph is not a valid jaxlsp graph: {exc}") from None
    remember_signatures(prepared, result)
    return TraceOutcome(graph, outcome, prepared.resolved, prepared.request, prepared.route, prepared.origin)


def _kind(sent: object) -> ErrorKind:
    """The kind a result's JSON names (the worker is staged from this tree, so it knows no other)."""
    try:
        return ErrorKind(sent)
    except ValueError:
        return ErrorKind.INTERNAL
