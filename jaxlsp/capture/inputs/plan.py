"""Where a trace's inputs come from, decided once for each trace: :func:`plan` reads the request
(``capture/request.py``) and answers with the profile to trace and its :class:`Origin`.

In order: an example named with ``--from`` (``source``), whatever the recipe says; else the
recipe profile that names the target; else a call an earlier capture recorded (a learned call,
``signatures.py``), fresh, for the interpreter this trace would run in; else ``auto``
(``autoinputs.py``): a complete static call site, the definition's own proposal, a run of the
best examples, or a needs-input answer that offers them. Answers to an earlier needs-input are
filled in last. Nothing here runs user code or starts a worker; the engine (``capture/engine.py``)
builds the worker's request from the plan.

Discovery is asked only where it serves (a proposal, ``--from``'s kind, call sites): what the
caller's discovery found comes with the request (:class:`~jaxlsp.capture.request.Discovered`);
without it, a fresh index of the root is read here, lazily: the CLI's discovery imports libcst
(1.5-1.9 s on the shared machine), which a profile that names the target never needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jaxlsp.capture.environment import userpath
from jaxlsp.capture.environment.interpreters import InterpreterError, select_interpreter
from jaxlsp.capture.inputs import autoinputs
from jaxlsp.capture.inputs.autoinputs import Origin
from jaxlsp.capture.request import SitesWanted, TraceFailure, TraceRequest
from jaxlsp.recipes import (
    NeedsInput,
    Recipe,
    RecipeError,
    Resolved,
    fill,
    find_recipe,
    load_recipe,
    resolve_table,
    select_profile,
)
from jaxlsp.recipes.propose import new_profile_name
from jaxlsp.worker.protocol import ErrorKind

if TYPE_CHECKING:
    from jaxlsp.discovery.callsites.sites import CallSite
    from jaxlsp.discovery.entrypoints import Entrypoint


@dataclass
class Plan:
    """The profile a trace runs and where its inputs came from."""

    resolved: Resolved
    recipe_path: Path | None  # the recipe read (None: no jaxlsp.toml above the target)
    origin: Origin


def plan(req: TraceRequest) -> Plan:
    """The profile for the target (with ``req.answers`` filled in) and where its inputs come from;
    raises TraceFailure (recipe errors, needs-input, answers that do not fit), or SitesWanted when
    ``req.discovered`` left out call sites this target needs."""
    file = req.file.resolve()
    if not file.is_file():
        raise TraceFailure(ErrorKind.REFUSED, f"no such file: {req.file}")
    userpath.add_workspace(req.workspace_root)  # before any probe or worker: PYTHONPATH stays outside it
    recipe_path = req.recipe.resolve() if req.recipe else find_recipe(file, req.workspace_root.resolve())
    try:
        # Lenient: a broken profile is reported when it is the one chosen, never for the others.
        recipe = load_recipe(recipe_path, strict=False) if recipe_path else None
    except RecipeError as exc:
        raise TraceFailure(ErrorKind.REFUSED, str(exc), problems=list(exc.problems)) from None
    found: list[Entrypoint | None] = []

    def entry() -> Entrypoint | None:
        if not found:
            found.append(req.discovered.entrypoint if req.discovered is not None else _entrypoint(req))
        return found[0]

    base = save_base(req, recipe_path)
    if req.source not in (None, "auto"):
        return _explicit(req, entry(), recipe, recipe_path, base)
    try:
        root_dir = req.workspace_root.resolve()
        selected = select_profile(recipe, file, req.name, req.profile, entrypoint=None, workspace_root=root_dir)
        if selected.recipe is None:  # no profile: a proposal, made from the entrypoint
            selected = select_profile(recipe, file, req.name, req.profile, entrypoint=entry(), workspace_root=root_dir)
    except RecipeError as exc:  # no such profile, several candidates, a target file gone...
        raise TraceFailure(ErrorKind.REFUSED, str(exc), problems=list(exc.problems)) from None
    root = project_root_for(req)
    origin = Origin("profile", root)
    if selected.recipe is None and req.profile is None:  # the call a capture saw, when one was learned
        learned = _learned(req, file, base, selected)
        if learned is not None:
            return Plan(learned[0], recipe_path, learned[1])
    if selected.recipe is None and req.profile is None:  # no profile: where else the inputs can come from
        target_text = str(selected.proposal["target"] if isinstance(selected, NeedsInput) else selected.table["target"])
        entrypoint = entry()
        sites = _sites(req, file, root, entrypoint)
        selected, origin = autoinputs.choose(
            entrypoint,
            selected,
            file=file,
            name=req.name,
            base=base,
            taken=list(recipe.tables) if recipe is not None else [],
            root=root,
            sites=lambda: sites,
            target_text=target_text,
            run_examples=req.run_examples,
        )
        origin.base = base
    if isinstance(selected, NeedsInput) and req.answers:
        try:
            # Typed text, parsed by the recipe's rules; one that does not parse is asked again.
            selected = fill(selected, req.answers)
        except RecipeError as exc:
            raise TraceFailure(
                ErrorKind.REFUSED, f"the answers do not fit: {exc}", problems=list(exc.problems)
            ) from None
    if isinstance(selected, NeedsInput):
        if selected.errors:
            wrong = "; ".join(f"{path}: {message}" for path, message in selected.errors.items())
            raise TraceFailure(ErrorKind.NEEDS_INPUT, f"{req.name}: answers to ask again: {wrong}", needs=selected)
        missing = "; ".join(str(m.get("message") or m.get("path")) for m in selected.missing)
        where = f" (recipe {recipe_path})" if recipe_path else " (no jaxlsp.toml profile for it: one was proposed)"
        raise TraceFailure(
            ErrorKind.NEEDS_INPUT, f"{req.name}{where} needs input: {missing}", needs=selected, examples=origin.examples
        )
    return Plan(selected, recipe_path, origin)


def select(req: TraceRequest) -> tuple[Resolved, Path | None]:
    """:func:`plan`'s profile and the recipe it was read from."""
    planned = plan(req)
    return planned.resolved, planned.recipe_path


def next_example(resolved: Resolved, origin: Origin) -> tuple[Resolved, Origin] | None:
    """auto's next example after ``origin``'s run ended or failed without calling the target (its
    profile, and the origin whose fallbacks are the rest); None when there is none."""
    if origin.how != "example" or not origin.fallbacks:
        return None
    example, rest = origin.fallbacks[0], origin.fallbacks[1:]
    table = resolved.table
    try:
        made = autoinputs.example_profile(
            str(table["kind"]) if table.get("kind") else None,
            str(table["target"]),
            origin.base or origin.root,
            resolved.name,
            example,
        )
    except RecipeError:
        return None
    if not isinstance(made, Resolved):
        return None
    return made, Origin("example", origin.root, example=example, fallbacks=rest, base=origin.base)


def project_root_for(req: TraceRequest) -> Path:
    """The root examples run from: ``--root``, else the project root of the target (discovery/roots.py)."""
    from jaxlsp.discovery.roots import project_root

    if req.root is not None:
        return req.root.resolve()
    return project_root(req.file, req.workspace_root)


def save_base(req: TraceRequest, recipe_path: Path | None) -> Path:
    """The folder a proposed profile is saved in: the recipe's, else the workspace root."""
    return recipe_path.parent if recipe_path is not None else req.workspace_root.resolve()


def find_entrypoint(file: Path, name: str, root: Path) -> Entrypoint | None:
    """The entrypoint (or driver, or method: ``Term.vf``) ``name`` of ``file``, from a fresh index of ``root``."""
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


def discovered_kind(req: TraceRequest) -> str | None:
    """The target's kind as discovery says it: the caller's, else a fresh index's (libcst)."""
    entry = req.discovered.entrypoint if req.discovered is not None else _entrypoint(req)
    return entry.kind if entry is not None else None


def fresh_sites(req: TraceRequest, entrypoint: Entrypoint | None) -> tuple[CallSite, ...]:
    """The target's call sites from a fresh index of its project root (a caller with no warm finder)."""
    return tuple(autoinputs.find_sites(req.file.resolve(), req.name, project_root_for(req), entrypoint))


def _entrypoint(req: TraceRequest) -> Entrypoint | None:
    return find_entrypoint(req.file.resolve(), req.name, req.workspace_root)


def _sites(req: TraceRequest, file: Path, root: Path, entrypoint: Entrypoint | None) -> list[CallSite]:
    if req.discovered is None:
        return autoinputs.find_sites(file, req.name, root, entrypoint)
    if req.discovered.sites is None:
        raise SitesWanted(entrypoint)
    return list(req.discovered.sites)


def _learned(
    req: TraceRequest, file: Path, base: Path, selected: Resolved | NeedsInput
) -> tuple[Resolved, Origin] | None:
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


def _explicit(
    req: TraceRequest, entrypoint: Entrypoint | None, recipe: Recipe | None, recipe_path: Path | None, base: Path
) -> Plan:
    """``--from PATH[::TEST]``: run that example, whatever the recipe says."""
    from jaxlsp.recipes.examples import ExampleError
    from jaxlsp.recipes.propose import target_text

    root = project_root_for(req)
    try:
        example = autoinputs.from_text(str(req.source), (req.cwd or Path.cwd()).resolve())
    except ExampleError as exc:
        raise TraceFailure(ErrorKind.REFUSED, f"--from: {exc}") from None
    taken = list(recipe.tables) if recipe is not None else []
    name = new_profile_name(req.name, taken)
    kind = entrypoint.kind if entrypoint is not None else None
    try:
        made = autoinputs.example_profile(kind, target_text(req.file.resolve(), req.name, base), base, name, example)
    except RecipeError as exc:
        raise TraceFailure(ErrorKind.REFUSED, str(exc), problems=list(exc.problems)) from None
    if not isinstance(made, Resolved):
        raise TraceFailure(ErrorKind.REFUSED, f"--from {req.source}: not a runnable example")
    origin = Origin("example", root, example=example)
    origin.base = base
    return Plan(made, recipe_path, origin)
