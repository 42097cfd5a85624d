"""Where a trace's inputs come from when no recipe profile names them: ``--from auto``.

In order: the best complete static call site of the target in the workspace (its values become
the profile), else the profile proposed from the definition when it is complete (annotations say
everything), else a run of the best runnable examples (the tests that reach the target, run in
one pytest session in rank order, or else one script or module) up to the target's first call
(when that run ends or fails without calling it, the next scripts or modules, or the tests'
session when the first run was not it, at most two),
else a needs-input answer (pre-filled from the best partial call site when there is one) that also
lists the runnable examples as choices. ``--from PATH[::TEST]`` runs that example. Nothing here
runs user code: the worker does, later, and only what this chose.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.recipes import NeedsInput, RecipeError, Resolved, resolve_table
from jaxlsp.recipes.examples import ExampleError, parse_example
from jaxlsp.recipes.propose import propose_site
from jaxlsp.worker.protocol import ExampleSpec

if TYPE_CHECKING:
    from jaxlsp.discovery.callsites.sites import CallSite
    from jaxlsp.discovery.entrypoints import Entrypoint

MAX_TESTS = 8  # tests tried in one run, in rank order
MAX_FALLBACKS = 2  # further examples run, one after another, when the first run does not reach it


@dataclass
class Origin:
    """Where the inputs came from: ``profile`` (a recipe), ``site`` (a static call site),
    ``proposal`` (the definition), ``example`` (a run of ``example``), ``learned`` (a call an
    earlier capture recorded: capture/inputs/signatures.py)."""

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
    sites: Callable[[], list[CallSite]],
    target_text: str,
    run_examples: bool = True,
) -> tuple[Resolved | NeedsInput, Origin]:
    """``auto`` for a target with no recipe profile; see the module docstring. Without
    ``run_examples`` (the editor) no example is chosen to run: they are offered as choices."""
    found = sites()
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
