"""Where a trace's inputs come from, decided once for each trace: :func:`plan` reads the request
(``capture/request.py``) and answers with the profile to trace and its :class:`Origin`.

In order: an example named with ``--from PATH[::TEST]`` (``source``), whatever the recipe says;
else the recipe profile that names the target; else a call an earlier capture recorded (a learned
call, ``signatures.py``), fresh, for the interpreter this trace would run in, or, when learning saw
only calls no recipe can spell, the example that reached it, replayed up to the call as
``--from`` runs one (``replays.py``); else ``auto``
(:func:`choose`): the best complete static call site of the target in the workspace (its values
become the profile), else the profile proposed from the definition when it is complete
(annotations say everything), else a run of the best runnable examples (the tests that reach the
target, run in one pytest session in rank order, or else one script or module) up to the
target's first call (when that run ends or fails without calling it, the next scripts or modules,
or the tests' session when the first run was not it, at most two), else a needs-input answer
(pre-filled from the best partial call site when there is one) that also lists the runnable
examples as choices. Answers to an earlier needs-input are filled in last.

Nothing here runs user code or starts a worker: the worker runs, later, only what this chose;
the engine (``capture/engine.py``) builds the worker's request from the plan. Discovery is asked
only where it serves (a proposal, ``--from``'s kind, call sites): what the caller's discovery found
comes with the request (:class:`~jaxlsp.capture.request.Discovered`); without it, a fresh index
of the root is read here, lazily: the CLI's discovery imports libcst (1.5-1.9 s on the shared
machine), which a profile that names the target never needs.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.capture.environment import userpath
from jaxlsp.capture.environment.interpreters import InterpreterError, select_interpreter
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
from jaxlsp.recipes.examples import ExampleError, parse_example
from jaxlsp.recipes.propose import new_profile_name, propose_site
from jaxlsp.worker.protocol import ErrorKind, ExampleSpec

if TYPE_CHECKING:
    from jaxlsp.capture.inputs.signatures import SignatureStore
    from jaxlsp.discovery.callsites.sites import CallSite
    from jaxlsp.discovery.entrypoints import Entrypoint

MAX_TESTS = 8  # tests tried in one run, in rank order
MAX_FALLBACKS = 2  # further examples run, one after another, when the first run does not reach it


@dataclass
class Origin:
    """Where the inputs came from: ``profile`` (a recipe), ``site`` (a static call site),
    ``proposal`` (the definition), ``example`` (a run of ``example``), ``learned`` (a call an
    earlier capture recorded: capture/inputs/signatures.py; with ``example``, the example learning
    kept because that call could not be spelled, replayed: capture/inputs/replays.py)."""

    how: str
    root: Path
    site: CallSite | None = None
    example: ExampleSpec | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)  # runnable choices, for needs-input
    # auto's next examples to run when ``example`` finishes or fails without calling the target
    fallbacks: list[ExampleSpec] = field(default_factory=list)
    base: Path | None = None  # the folder a profile made from it is saved in (the recipe's)
    note: str | None = None  # ``learned``: "inputs from a learned call at PATH:LINE (learned)"

    def line(self) -> str | None:
        """``inputs from PATH:LINE (KIND)`` for a static site (runs say theirs when they are done)."""
        if self.note is not None:
            return self.note
        if self.site is not None:
            return f"inputs from {self.site.where(self.root)} ({self.site.kind})"
        return None


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
        selected, origin = choose(
            entrypoint,
            selected,
            file=file,
            name=req.name,
            base=base,
            taken=list(recipe.tables) if recipe is not None else [],
            root=root,
            sites=sites,
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
        made = example_profile(
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
    return tuple(find_sites(req.file.resolve(), req.name, project_root_for(req), entrypoint))


def _entrypoint(req: TraceRequest) -> Entrypoint | None:
    return find_entrypoint(req.file.resolve(), req.name, req.workspace_root)


def _sites(req: TraceRequest, file: Path, root: Path, entrypoint: Entrypoint | None) -> list[CallSite]:
    if req.discovered is None:
        return find_sites(file, req.name, root, entrypoint)
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
    from jaxlsp.capture.inputs.replays import ReplayStore

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
    target = selected.proposal["target"] if isinstance(selected, NeedsInput) else selected.table["target"]
    # a learned call that failed to trace where the test that made it runs (a value check:
    # capture/learnedretry.py) replays that test first, as long as the failure holds
    if found is None or ReplayStore.beside(store).failed_first(python, file, req.name):
        replayed = _replayed(req, python, file, base, selected, str(target), store)
        if replayed is not None or found is None:
            return replayed
    # A values or timed run needs arrays: where the learned calls disagree on a size (a symbolic
    # table), it runs on the newest call the program really made, not on sizes asked for.
    concrete = (req.values is not None or req.time is not None) and found.newest is not None
    table = found.newest if concrete and found.newest is not None else found.table
    try:
        name = selected.name if isinstance(selected, Resolved) else new_profile_name(req.name, [])
        made = resolve_table(name, {"target": target, **table}, base)
    except RecipeError:
        return None  # a call the recipe rules refuse now: the usual ways say what is needed
    if not isinstance(made, Resolved):
        return None
    root = req.workspace_root.resolve()
    origin = Origin("learned", root, note=f"inputs from a learned call at {found.where(root)} (learned)")
    origin.base = base
    return made, origin


def _replayed(
    req: TraceRequest,
    python: str,
    file: Path,
    base: Path,
    selected: Resolved | NeedsInput,
    target: str,
    store: SignatureStore,
) -> tuple[Resolved, Origin] | None:
    """The example learning kept for a target whose learned call no recipe can spell
    (capture/inputs/replays.py), as ``--from`` would run it: up to the target's first call, its
    real arguments traced; None when none is kept, fresh, for this interpreter."""
    from jaxlsp.capture.inputs.replays import ReplayStore

    try:
        kept = ReplayStore.beside(store).lookup(python, file, req.name)
    except OSError:
        return None
    if kept is None or not Path(str(kept.example.get("path", ""))).exists():
        return None
    name = selected.name if isinstance(selected, Resolved) else new_profile_name(req.name, [])
    try:
        made = example_profile(kept.kind, target, base, name, kept.spec())
    except RecipeError:
        return None
    if not isinstance(made, Resolved):
        return None
    origin = Origin("learned", project_root_for(req), example=kept.spec(), base=base)
    origin.note = kept.note()
    return made, origin


def _explicit(
    req: TraceRequest, entrypoint: Entrypoint | None, recipe: Recipe | None, recipe_path: Path | None, base: Path
) -> Plan:
    """``--from PATH[::TEST]``: run that example, whatever the recipe says."""
    from jaxlsp.recipes.propose import target_text

    root = project_root_for(req)
    try:
        example = from_text(str(req.source), (req.cwd or Path.cwd()).resolve())
    except ExampleError as exc:
        raise TraceFailure(ErrorKind.REFUSED, f"--from: {exc}") from None
    taken = list(recipe.tables) if recipe is not None else []
    name = new_profile_name(req.name, taken)
    kind = entrypoint.kind if entrypoint is not None else None
    try:
        made = example_profile(kind, target_text(req.file.resolve(), req.name, base), base, name, example)
    except RecipeError as exc:
        raise TraceFailure(ErrorKind.REFUSED, str(exc), problems=list(exc.problems)) from None
    if not isinstance(made, Resolved):
        raise TraceFailure(ErrorKind.REFUSED, f"--from {req.source}: not a runnable example")
    origin = Origin("example", root, example=example)
    origin.base = base
    return Plan(made, recipe_path, origin)


# -- auto: the workspace's own call sites and examples ------------------------------------------


def find_sites(file: Path, name: str, root: Path, entry: Entrypoint | None) -> list[CallSite]:
    """The call sites of ``name`` in ``file``, read from the workspace under ``root`` (a fresh index)."""
    from jaxlsp.discovery import Classifier, WorkspaceIndex
    from jaxlsp.discovery.callsites.finder import CallSiteFinder

    if entry is None:
        return []
    index = WorkspaceIndex([root])
    return CallSiteFinder(index, root, Classifier(index)).find(entry)


def choices(sites: Sequence[CallSite], root: Path) -> list[dict[str, Any]]:
    """The runnable examples among ``sites``, best first, once each: what a needs-input offers."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for s in sites:
        if s.example is None or s.example in seen:
            continue
        seen.add(s.example)
        spec = _parse(s.example, root, s.kind) if s.kind == "script" else None
        text = spec["text"] if spec is not None else s.example  # with its documented arguments
        item: dict[str, Any] = {"example": text, "kind": s.kind, "path": s.where(root), "static": s.static}
        if s.via:
            item["via"] = s.via
        out.append(item)
    return out


def example_for(sites: Sequence[CallSite], root: Path) -> ExampleSpec | None:
    """One run for the best runnable examples: the tests among the best ones together (pytest
    runs them in this order and the first call stops it), else the best script or module."""
    runnable = [s for s in sites if s.example is not None]
    if not runnable:
        return None
    best = runnable[0]
    if best.kind != "test":
        return _parse(str(best.example), root, best.kind)
    tests: list[str] = []
    for s in runnable:
        if s.kind == "test" and s.example not in tests:
            tests.append(str(s.example))
    tests = tests[:MAX_TESTS]
    spec = _parse(tests[0], root, "test")
    if spec is None:
        return None
    ids: list[str] = []
    for text in tests:
        one = _parse(text, root, "test")
        if one is not None:
            ids += one.get("tests", [])
    spec["tests"] = ids
    spec["text"] = tests[0] if len(tests) == 1 else f"{tests[0]} (and {len(tests) - 1} more)"
    return spec


def fallbacks_for(sites: Sequence[CallSite], root: Path, first: ExampleSpec) -> list[ExampleSpec]:
    """The runnable examples auto tries after ``first`` (at most :data:`MAX_FALLBACKS`, best
    first): the scripts and modules it did not run, and, where the first of them ranks, the
    tests' one session when ``first`` was not it (a notebook ranked first that fails at import
    must leave the tests after it to run; when ``first`` ran them, they all ran)."""
    ran = {str(first.get("text")), *(str(t) for t in first.get("tests", []))}
    tests_ran = first.get("kind") == "test"
    out: list[ExampleSpec] = []
    for s in sites:
        if s.example is None:
            continue
        if s.kind == "test":
            if not tests_ran:
                tests_ran = True
                session = example_for([t for t in sites if t.kind == "test"], root)
                if session is not None:
                    out.append(session)
            if len(out) == MAX_FALLBACKS:
                break
            continue
        spec = _parse(s.example, root, s.kind)
        if spec is not None and spec["text"] not in ran:  # as it runs: with its documented arguments
            ran.add(spec["text"])
            out.append(spec)
        if len(out) == MAX_FALLBACKS:
            break
    return out


def _parse(text: str, root: Path, kind: str) -> ExampleSpec | None:
    """The example ``text`` as it would run, or None when it cannot: a script (a package's
    ``__main__.py``) that requires arguments its docs do not give would exit with its usage."""
    try:
        spec = parse_example(text, root, kind=kind)
    except ExampleError:
        return None
    spec = documented(spec, root)
    if spec["kind"] == "script" and not spec.get("argv") and _needs_arguments(Path(spec["path"])) is not None:
        return None
    return spec


def _needs_arguments(path: Path) -> str | None:
    from jaxlsp.discovery.commands import needs_arguments

    return needs_arguments(path)


def documented(spec: ExampleSpec, root: Path) -> ExampleSpec:
    """A script without arguments with those its docs run it with (``python main.py
    --workdir=/tmp/mnist --config=configs/default.py`` in its README: discovery/commands.py)."""
    if spec["kind"] != "script" or spec.get("argv"):
        return spec
    from jaxlsp.discovery.commands import documented_command

    command = documented_command(Path(spec["path"]), root)
    if command is None:
        return spec
    text = " ".join([spec["text"], *(shlex.quote(a) for a in command.argv)])
    return {**spec, "argv": list(command.argv), "text": text}


def from_text(text: str, cwd: Path) -> ExampleSpec:
    """``--from PATH[::TEST] [ARGS]`` on the command line, relative to ``cwd``; raises ExampleError."""
    return parse_example(text, cwd)


def example_profile(
    entry_kind: str | None, target: str, base: Path, name: str, example: ExampleSpec
) -> Resolved | NeedsInput:
    """A profile that runs ``example`` (the recipe form: ``from``, relative to ``base``)."""
    table: dict[str, Any] = {"target": target, "from": relative_from(example, base)}
    if entry_kind:
        table["kind"] = entry_kind
    result = resolve_table(name, table, base)
    if isinstance(result, Resolved):
        result.profile["example"] = example  # the combined tests and the text as chosen
    return result


def relative_from(example: ExampleSpec, base: Path) -> str:
    """The ``from`` text of ``example`` relative to ``base`` (a recipe's folder)."""
    path = Path(example["path"])
    rel = Path(os.path.relpath(path, base)).as_posix()
    tests = example.get("tests") or []
    if example["kind"] == "test" and tests:
        first = tests[0]
        _, sep, test = first.partition("::")
        return f"{rel}::{test}" if sep else rel
    return " ".join([rel, *(shlex.quote(a) for a in example.get("argv", []))])


def choose(
    entry: Entrypoint | None,
    proposal: Resolved | NeedsInput,
    *,
    file: Path,
    name: str,
    base: Path,
    taken: Sequence[str],
    root: Path,
    sites: Sequence[CallSite],
    target_text: str,
    run_examples: bool = True,
) -> tuple[Resolved | NeedsInput, Origin]:
    """``auto`` for a target with no recipe profile; see the module docstring. Without
    ``run_examples`` (the editor) no example is chosen to run: they are offered as choices."""
    found = list(sites)
    kind = entry.kind if entry is not None else None
    for site in found:
        if not site.complete or entry is None:
            continue
        try:
            made = propose_site(entry, site, where=site.where(root), base=base, taken=taken)
        except RecipeError:
            continue  # over the limits, 64-bit: the next site may fit
        if isinstance(made, Resolved):
            return made, Origin("site", root, site=site)
    # the workspace calls it only inside a JAX context (``with jax.set_mesh(mesh):``): the
    # definition's own proposal would trace it outside, so the example runs first
    in_context = bool(found) and any(m.where == "context" for m in found[0].missing)
    # a method's definition says nothing of its instance (``Solver.step``'s solver): a run first
    method = entry is not None and entry.method
    if isinstance(proposal, Resolved) and not in_context and not method:
        return proposal, Origin("proposal", root)
    example = example_for(found, root) if run_examples else None
    if example is not None:
        made_example = example_profile(kind, target_text, base, proposal.name, example)
        if isinstance(made_example, Resolved):
            return made_example, Origin("example", root, example=example, fallbacks=fallbacks_for(found, root, example))
    if isinstance(proposal, Resolved):
        return proposal, Origin("proposal", root)
    options = choices(found, root)
    if not options and isinstance(proposal, NeedsInput) and entry is not None:
        # nothing runs it: the sizes its jaxtyping annotations name stay symbols (recipes/symbolic.py)
        from jaxlsp.recipes.symbolic import propose_symbolic

        annotated = propose_symbolic(entry, proposal)
        if annotated is not None:
            names = ", ".join(annotated.profile.get("symbolic", []))
            note = f"inputs from the jaxtyping annotations{f' ({names} symbolic)' if names else ''}"
            return annotated, Origin("proposal", root, note=note)
    partial = next((s for s in found if s.static and entry is not None), None)
    if partial is not None and entry is not None:
        try:
            prefilled = propose_site(entry, partial, where=partial.where(root), base=base, taken=taken)
        except RecipeError:
            prefilled = proposal
        if isinstance(prefilled, NeedsInput):
            return prefilled, Origin("site", root, site=partial, examples=options)
    return proposal, Origin("proposal", root, examples=options)
