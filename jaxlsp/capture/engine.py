"""From ``FILE::NAME`` to a worker request, and from a worker's result to a graph: recipe,
profile, interpreter. The capture service (``service.py``) runs what lies between; no pygls here.

Failures come back as :class:`TraceFailure` with the protocol's error kinds (``needs_input`` and
``refused`` for recipe problems, ``import``, ``trace``, ``timeout``, ``crash``, ``memory``), the
user's source frame when there is one, and one paragraph of text for humans.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jaxlsp.capture.environment import allowed_env, compatibility, interpreters, userpath
from jaxlsp.capture.environment.compatibility import Report
from jaxlsp.capture.environment.interpreters import InterpreterError, Selection, select_interpreter
from jaxlsp.capture.inputs import autoinputs
from jaxlsp.capture.inputs.autoinputs import Origin
from jaxlsp.capture.launch.early import workspace_root_for as workspace_root_for  # where it lived: a public name
from jaxlsp.capture.launch.supervise import CaptureOutcome
from jaxlsp.graph import io
from jaxlsp.graph.model import Graph
from jaxlsp.recipes import (
    NeedsInput,
    RecipeError,
    Resolved,
    fill,
    find_recipe,
    load_recipe,
    resolve_table,
    select_profile,
)
from jaxlsp.recipes.mesh import size_of, too_few
from jaxlsp.recipes.problems import format_key_path
from jaxlsp.recipes.propose import new_profile_name
from jaxlsp.recipes.schema import MAX_DEVICES
from jaxlsp.worker.protocol import MeshSpec, resolve_limits

if TYPE_CHECKING:
    from jaxlsp.graph.compact import CompactFile


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
    # How to find the target's entrypoint (for proposals); the server passes its warm index.
    find_entrypoint: Callable[[Path, str], Any] | None = None
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
    # Where the inputs come from without a recipe profile: None or "auto" (capture/inputs/autoinputs.py),
    # or an example "PATH[::TEST] [ARGS]" to run (relative to ``cwd``), which overrides any profile.
    source: str | None = None
    cwd: Path | None = None  # what a --from path is relative to (the current folder)
    # The project root examples run from (discovery/roots.py); None: found from the target.
    root: Path | None = None
    # The call sites of a target (the server passes its warm finder); None: a fresh index of the root.
    find_sites: Callable[[Path, str, Any], list[Any]] | None = None
    # auto may pick an example to run (the CLI); False (the editor): examples are offered as choices
    run_examples: bool = True
    # a live trace: the worker reaches no other machine, and a capture that wanted to is refused
    # (worker/core/offline.py), never a download on opening a file
    offline: bool = False
    # False: every Linen module call is traced, none replayed (worker/reuse/replay.py; the CLI's --no-replay)
    replay: bool = True
    # Record the call signatures of the workspace's targets that run (worker/examples/signatures.py),
    # and use a learned one when the target has no profile (capture/inputs/signatures.py)
    signatures: bool = True
    signature_cache: Path | None = None  # where they are kept; None: the per-user cache


@dataclass
class TraceFailure(Exception):
    kind: str
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


@dataclass
class TraceOutcome:
    graph: Graph
    capture: CaptureOutcome
    resolved: Resolved
    request: dict[str, Any] = field(default_factory=dict)
    route: str = interpreters.OWN  # how the interpreter that ran it was chosen
    origin: Origin | None = None  # where the inputs came from (capture/inputs/autoinputs.py)
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
        raise TraceFailure("refused", f"expected FILE::NAME (e.g. model.py::MLP), got {spec!r}")
    return Path(path), name


def project_root_for(req: TraceRequest) -> Path:
    """The root examples run from: ``--root``, else the project root of the target (discovery/roots.py)."""
    from jaxlsp.discovery.roots import project_root

    if req.root is not None:
        return req.root.resolve()
    return project_root(req.file, req.workspace_root)


def select(req: TraceRequest) -> tuple[Resolved, Path | None]:
    """The resolved profile for the target (with ``req.answers`` filled in), or a TraceFailure
    (recipe errors, needs-input, answers that do not fit)."""
    resolved, recipe_path, _ = select_with_origin(req)
    return resolved, recipe_path


def select_with_origin(req: TraceRequest) -> tuple[Resolved, Path | None, Origin]:
    """:func:`select`, and where the inputs came from (a profile, a call site, an example run)."""
    file = req.file.resolve()
    if not file.is_file():
        raise TraceFailure("refused", f"no such file: {req.file}")
    userpath.add_workspace(req.workspace_root)  # before any probe or worker: PYTHONPATH stays outside it
    recipe_path = req.recipe.resolve() if req.recipe else find_recipe(file, req.workspace_root.resolve())
    try:
        # Lenient: a broken profile is reported when it is the one chosen, never for the others.
        recipe = load_recipe(recipe_path, strict=False) if recipe_path else None
    except RecipeError as exc:
        raise TraceFailure("refused", str(exc), problems=list(exc.problems)) from None
    find = req.find_entrypoint or (lambda path, name: find_entrypoint(path, name, req.workspace_root))
    # Discovery only where it serves: proposals and call sites. The CLI's discovery imports libcst
    # (1.5-1.9 s on the shared machine), which a profile that names the target never needs.
    found: list[Any] = []

    def entry() -> Any:
        if not found:
            found.append(find(file, req.name))
        return found[0]

    base = recipe_path.parent if recipe_path is not None else req.workspace_root.resolve()
    if req.source not in (None, "auto"):
        return _explicit(req, entry(), recipe, recipe_path, base)
    try:
        root_dir = req.workspace_root.resolve()
        selected = select_profile(recipe, file, req.name, req.profile, entrypoint=None, workspace_root=root_dir)
        if selected.recipe is None:  # no profile: a proposal, made from the entrypoint
            selected = select_profile(recipe, file, req.name, req.profile, entrypoint=entry(), workspace_root=root_dir)
    except RecipeError as exc:  # no such profile, several candidates, a target file gone...
        raise TraceFailure("refused", str(exc), problems=list(exc.problems)) from None
    root = project_root_for(req)
    origin = Origin("profile", root)
    if selected.recipe is None and req.profile is None:  # the call a capture saw, when one was learned
        found_learned = _learned(req, file, base, selected)
        if found_learned is not None:
            return found_learned[0], recipe_path, found_learned[1]
    if selected.recipe is None and req.profile is None:  # no profile: where else the inputs can come from
        target_text = str(selected.proposal["target"] if isinstance(selected, NeedsInput) else selected.table["target"])
        sites = req.find_sites or (lambda path, name, entry: autoinputs.find_sites(path, name, root, entry))
        entrypoint = entry()
        selected, origin = autoinputs.choose(
            entrypoint,
            selected,
            file=file,
            name=req.name,
            base=base,
            taken=list(recipe.tables) if recipe is not None else [],
            root=root,
            sites=lambda: sites(file, req.name, entrypoint),
            target_text=target_text,
            run_examples=req.run_examples,
        )
        origin.base = base
    if isinstance(selected, NeedsInput) and req.answers:
        try:
            # Typed text, parsed by the recipe's rules; one that does not parse is asked again.
            selected = fill(selected, req.answers)
        except RecipeError as exc:
            raise TraceFailure("refused", f"the answers do not fit: {exc}", problems=list(exc.problems)) from None
    if isinstance(selected, NeedsInput):
        if selected.errors:
            wrong = "; ".join(f"{path}: {message}" for path, message in selected.errors.items())
            raise TraceFailure("needs_input", f"{req.name}: answers to ask again: {wrong}", needs=selected)
        missing = "; ".join(str(m.get("message") or m.get("path")) for m in selected.missing)
        where = f" (recipe {recipe_path})" if recipe_path else " (no jaxlsp.toml profile for it: one was proposed)"
        raise TraceFailure(
            "needs_input", f"{req.name}{where} needs input: {missing}", needs=selected, examples=origin.examples
        )
    return selected, recipe_path, origin


def _learned(req: TraceRequest, file: Path, base: Path, selected: Any) -> tuple[Resolved, Origin] | None:
    """The target's learned call as its profile (capture/inputs/signatures.py), when one is kept, fresh,
    for the interpreter this trace runs in; None otherwise."""
    if not req.signatures:
        return None
    from jaxlsp.capture.inputs import signatures

    try:
        python = select_interpreter(
            workspace_root=req.workspace_root, request=req.python, setting=req.setting_python, client=req.client_python
        ).python
    except InterpreterError:
        return None
    store = signatures.SignatureStore(req.workspace_root, req.signature_cache)
    try:
        found = store.lookup(python, file, req.name)
    except OSError:
        return None
    if found is None:
        return None
    target = selected.proposal["target"] if isinstance(selected, NeedsInput) else selected.table["target"]
    try:
        name = selected.name if isinstance(selected, Resolved) else new_profile_name(req.name, [])
        made = resolve_table(name, {"target": target, **found.table}, base)
    except RecipeError:
        return None  # a call the recipe rules refuse now: the usual ways say what is needed
    if not isinstance(made, Resolved):
        return None
    root = req.workspace_root.resolve()
    origin = Origin("learned", root, note=f"inputs from a learned call at {found.where(root)} (learned)")
    origin.base = base
    return made, origin


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


def _explicit(
    req: TraceRequest, entrypoint: Any, recipe: Any, recipe_path: Path | None, base: Path
) -> tuple[Resolved, Path | None, Origin]:
    """``--from PATH[::TEST]``: run that example, whatever the recipe says."""
    from jaxlsp.recipes.examples import ExampleError
    from jaxlsp.recipes.propose import target_text

    root = project_root_for(req)
    try:
        example = autoinputs.from_text(str(req.source), (req.cwd or Path.cwd()).resolve())
    except ExampleError as exc:
        raise TraceFailure("refused", f"--from: {exc}") from None
    taken = list(recipe.tables) if recipe is not None else []
    name = new_profile_name(req.name, taken)
    kind = getattr(entrypoint, "kind", None)
    try:
        made = autoinputs.example_profile(kind, target_text(req.file.resolve(), req.name, base), base, name, example)
    except RecipeError as exc:
        raise TraceFailure("refused", str(exc), problems=list(exc.problems)) from None
    if not isinstance(made, Resolved):
        raise TraceFailure("refused", f"--from {req.source}: not a runnable example")
    origin = Origin("example", root, example=example)
    origin.base = base
    return made, recipe_path, origin


def save_base(req: TraceRequest, recipe_path: Path | None) -> Path:
    """The folder a proposed profile is saved in: the recipe's, else the workspace root."""
    return recipe_path.parent if recipe_path is not None else req.workspace_root.resolve()


def find_entrypoint(file: Path, name: str, root: Path) -> Any:
    from jaxlsp.discovery import Classifier, WorkspaceIndex

    found = Classifier(WorkspaceIndex([root])).discover(file)
    entry = next((e for e in (*found.entrypoints, *found.drivers) if e.name == name), None)
    if entry is None and "." in name and file.suffix == ".py":  # a method (``Term.vf``) is a target too
        from jaxlsp.discovery.methods import method_entry

        try:
            entry = method_entry(file.resolve(), name, file.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return None
    return entry


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
        raise TraceFailure("refused", str(exc)) from None


def _pod(profile: dict[str, Any], name: str) -> None:
    """``--topology NAME`` over the profile's: its mesh must cover the pod's devices (refused at
    the mesh's key otherwise, as the recipe check refuses it: recipes/topology.py)."""
    from jaxlsp.recipes.topology import mismatch
    from jaxlsp.worker.topology import parse

    pod = parse(name)
    if pod is None:
        raise TraceFailure("refused", f"--topology: expected GENERATION:AxB or AxBxC (such as v5e:4x4), got {name!r}")
    if str(profile.get("device") or "cpu") != "cpu":
        raise TraceFailure("refused", f"--topology {name} traces on the CPU, and the device is {profile['device']}")
    mesh = cast("MeshSpec | None", profile.get("mesh"))
    count = pod.devices or "N"
    if mesh is None:
        raise TraceFailure(
            "refused",
            f"--topology {name} needs a mesh over its devices in the profile "
            f"(mesh = {{ axes = {{ data = {count} }} }})",
        )
    problem = mismatch(pod, mesh)
    if problem is not None:
        label = str(profile.get("name") or "")
        where = format_key_path(("profiles", label, "mesh")) if label else "the profile's mesh"
        raise TraceFailure("refused", f"{where}: {problem} (--topology {name})")
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
    if req.device:
        profile["device"] = req.device
    if (req.values is not None or req.time is not None) and profile.get("symbolic"):
        profile = with_sizes(
            profile, {**(req.time.dims if req.time else {}), **(req.values.dims if req.values else {})}
        )
    if req.devices is not None:
        if str(profile.get("device") or "cpu") != "cpu":
            raise TraceFailure(
                "refused", f"--devices {req.devices} makes virtual CPU devices, and the device is {profile['device']}"
            )
        if not 1 <= req.devices <= MAX_DEVICES:
            raise TraceFailure("refused", f"--devices: expected a number from 1 to {MAX_DEVICES}, got {req.devices}")
        profile["devices"] = req.devices
        mesh = cast("MeshSpec | None", profile.get("mesh"))
        if mesh is not None and req.devices < size_of(mesh):
            name = str(profile.get("name") or "")
            where = format_key_path(("profiles", name, "mesh")) if name else "the profile's mesh"
            raise TraceFailure("refused", too_few(mesh, where, req.devices, "--devices"))
    elif profile.get("devices") and str(profile.get("device") or "cpu") != "cpu":
        raise TraceFailure(
            "refused",
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
            "needs_input",
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
    # The kind from discovery, asked only when the environment check needs it (check_environment).
    find_kind: Callable[[], str | None] | None = None

    def running(self) -> str | None:
        """``running PATH[::TEST] to learn the inputs`` before an example runs; else None."""
        example = self.request["profile"].get("example")
        return f"running {example['text']} to learn the inputs" if example else None


def prepare(req: TraceRequest) -> Prepared:
    """Select the profile and build the worker request; raises TraceFailure."""
    if sys.platform == "win32":
        raise TraceFailure("refused", "capture runs on Linux and macOS only; Windows is not supported yet")
    resolved, recipe_path, origin = select_with_origin(req)
    selection = choose_python(req, resolved)
    request = build_request(req, resolved, recipe_path, origin)
    kind = request["target"].get("kind")
    find_kind = None
    if kind is None:  # inferred by the worker; discovery's kind says which packages the check needs
        if req.find_entrypoint is not None:  # the server's warm index: at once
            kind = getattr(req.find_entrypoint(req.file.resolve(), req.name), "kind", None)
        else:  # the CLI's discovery imports libcst: only if the check's verdict depends on the kind
            file, name, root = req.file.resolve(), req.name, req.workspace_root
            find_kind = functools.partial(_discovered_kind, file, name, root)
    return Prepared(
        request, selection.python, resolved, recipe_path, selection.route, kind, origin, req, find_kind=find_kind
    )


def _discovered_kind(file: Path, name: str, root: Path) -> str | None:
    kind: str | None = getattr(find_entrypoint(file, name, root), "kind", None)
    return kind


def next_example(prepared: Prepared, failure: TraceFailure) -> Prepared | None:
    """auto's next example, when ``prepared``'s run ended or failed without calling the target
    (an ``example`` failure; a timeout or a crash is not retried); None when there is none."""
    origin = prepared.origin
    if failure.kind != "example" or prepared.req is None or origin is None or origin.how != "example":
        return None
    if not origin.fallbacks:
        return None
    example, rest = origin.fallbacks[0], origin.fallbacks[1:]
    table = prepared.resolved.table
    base = origin.base or origin.root
    try:
        made = autoinputs.example_profile(
            str(table["kind"]) if table.get("kind") else None,
            str(table["target"]),
            base,
            prepared.resolved.name,
            example,
        )
    except RecipeError:
        return None
    if not isinstance(made, Resolved):
        return None
    after = Origin("example", origin.root, example=example, fallbacks=rest, base=origin.base)
    request = build_request(prepared.req, made, prepared.recipe_path, after)
    return replace(prepared, request=request, resolved=made, origin=after)


def check_environment(prepared: Prepared, refresh: bool = False) -> Report:
    """The (cached) compatibility check of the prepared capture's interpreter; it runs that
    interpreter, so only once the workspace is trusted (the CLI is an explicit user action).

    A kind left to discovery (``prepared.find_kind``) is looked up only when it could change the
    verdict: when the check without it fails, or flax or equinox (which a kind may need) is not
    fine in that interpreter; the report is then exactly the one for the discovered kind."""
    selection = Selection(prepared.python, prepared.route)
    device = str(prepared.request["profile"].get("device") or "cpu")
    kind = prepared.kind
    if kind is None and prepared.find_kind is not None:
        report = compatibility.CACHE.check(selection, None, device, refresh)
        every_need = sorted({p for needs in compatibility.NEEDS_BY_KIND.values() for p in needs})
        problems = compatibility.evaluate(selection, report.probe, every_need, device, compatibility.nvidia_driver())
        if report.ok and not any(p.severity == "error" for p in problems):
            return report
        kind, refresh = prepared.find_kind(), False  # the probe is fresh now
    return compatibility.CACHE.check(selection, kind, device, refresh)


def finish(prepared: Prepared, outcome: CaptureOutcome, decode: Callable[[Any], Graph] = io.from_json) -> TraceOutcome:
    """Decode a capture's outcome into a graph (``decode``: from the worker's JSON form, checked;
    a server's store reads it as packed columns instead, capture/service.py); raises TraceFailure."""
    result = outcome.result
    if not result.get("ok"):
        error = result.get("error") or {"kind": "internal", "message": "the worker returned no result"}
        message = error["message"]
        example = prepared.request["profile"].get("example")
        if example and error["kind"] in ("timeout", "memory", "crash"):
            message = f"running {example['text']} did not reach {prepared.request['target']['name']}: {message}"
        root = prepared.request.get("workspaceRoot")
        raise TraceFailure(
            error["kind"], message, error.get("frame"), logs=outcome.logs[-4000:], root=str(root) if root else None
        )
    graph_json = result.get("graph")
    if graph_json is None:
        raise TraceFailure("internal", "the worker reported success without a graph")
    try:
        graph = decode(graph_json)
    except ValueError as exc:  # a graph the format refuses: a bug of the worker, said as one
        raise TraceFailure("internal", f"the worker's graph is not a valid jaxlsp graph: {exc}") from None
    remember_signatures(prepared, result)
    return TraceOutcome(graph, outcome, prepared.resolved, prepared.request, prepared.route, prepared.origin)
