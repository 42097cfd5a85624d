"""``jaxlsp learn`` and ``jaxlsp.learnShapes``: run the workspace's own examples once each and keep
the call signatures of every target they reach (issue 46).

The examples are the workspace's test files (pytest's names: ``test_*.py``, ``*_test.py``), each
run as ``python -m pytest FILE`` would, and the scripts its README or docs run with their
arguments (``discovery/commands.py``). Each runs in the capture sandbox of the chosen interpreter
(offline, the memory cap, its own deadline), with the signature hooks in every workspace file
(``worker/examples/learning.py``), and is stopped once it has nothing new to teach. They run side
by side, up to the machine's cores, each at low priority, and the whole run answers within its
budget with what it learned so far. A file asks only for the examples whose imports reach it
(:mod:`.importers`, issue 56); an example that loads nothing changed since it last taught is not
run again (:mod:`.examplecache`). What they recorded goes to the per-user store
(:mod:`.signatures`); a target then traces, and shows live shapes, on the call it was reached with.
A call no recipe can spell (a term holding a Python function) keeps the example that reached it
instead (:mod:`.replays`): the target then traces by replaying that test up to the call.
Nothing here runs unless someone asked: the CLI command, or the LSP command in a trusted folder
(or, once the user chose it there, opening a file: its test files only).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.capture.inputs.examplecache import CachedExample, ExampleCache, kept
from jaxlsp.capture.inputs.importers import ImportGraph
from jaxlsp.capture.inputs.keptfile import sha256_of
from jaxlsp.capture.inputs.replays import ReplayStore
from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.worker.protocol import ExampleSpec

if TYPE_CHECKING:  # imported where used: the CLI's early worker starts before asyncio is imported
    import asyncio

EXAMPLE_TIMEOUT = 120.0  # seconds one example may run by default, at least (example_limit); sooner once idle
BUDGET = 900.0  # seconds for the whole run
IDLE = 20.0  # seconds without a new signature after which an example is stopped (a compile can take 10)
MAX_EXAMPLES = 200
_SKIP = frozenset({".venv", "venv", "node_modules", "build", "dist", "__pycache__", "site-packages", ".git"})


@dataclass
class ExampleOutcome:
    text: str  # as the user would type it, relative to the root
    outcome: str  # finished | stopped | failed | exited | timeout | error | cached (not run: nothing it loads changed)
    message: str  # one line
    learned: int  # signatures it recorded
    seconds: float


@dataclass
class LearnReport:
    examples: list[ExampleOutcome] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)  # "path::Name" learned (relative), sorted
    seconds: float = 0.0
    stopped: str | None = None  # "cancelled" | "out of time" when the run ended early

    @property
    def failures(self) -> list[ExampleOutcome]:
        return [e for e in self.examples if e.outcome not in ("finished", "stopped", "cached")]

    def json(self) -> dict[str, Any]:
        return {
            "learned": len(self.targets),
            "targets": self.targets,
            "examples": [e.__dict__ for e in self.examples],
            "failures": [f"{e.text}: {e.message}" for e in self.failures],
            "ran": sum(1 for e in self.examples if e.outcome != "cached"),
            "cached": sum(1 for e in self.examples if e.outcome == "cached"),
            "seconds": round(self.seconds, 3),
            **({"stopped": self.stopped} if self.stopped else {}),
        }


def _is_test_file(path: Path) -> bool:
    name = path.name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _walk(folder: Path) -> Iterable[Path]:
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
        for name in sorted(files):
            yield Path(here) / name


def _examples_in(files: Iterable[Path], root: Path, scripts: bool) -> tuple[list[ExampleSpec], list[ExampleSpec]]:
    """The test files among ``files``, and the scripts there that the docs run."""
    from jaxlsp.discovery.commands import documented_command
    from jaxlsp.recipes.examples import example_kind

    tests: list[ExampleSpec] = []
    found: list[ExampleSpec] = []
    for path in dict.fromkeys(files):
        if path.suffix != ".py":
            continue
        text = Path(os.path.relpath(path, root)).as_posix()
        if _is_test_file(path):
            tests.append({"kind": "test", "path": str(path), "text": text, "tests": [str(path)]})
        elif scripts and example_kind(path) == "script":
            command = documented_command(path, root)
            if command is not None:
                argv = list(command.argv)
                shown = " ".join([text, *argv])
                found.append({"kind": "script", "path": str(path), "text": shown, "argv": argv})
    return tests, found


def find_examples(
    paths: list[Path], root: Path, *, scripts: bool = True, graph: ImportGraph | None = None
) -> list[ExampleSpec]:
    """The examples to run for ``paths`` (the root when empty), each once. A folder: the test files
    under it, then the scripts there that the docs run. A file: itself when it is one, then the
    examples under the root whose imports reach it, nearest first (:mod:`.importers`).
    ``scripts=False``: test files only (what runs on opening a file)."""
    out: list[ExampleSpec] = []
    everything: list[ExampleSpec] | None = None
    for given in paths or [root]:
        given = given.resolve()
        if given.is_dir():
            tests, found = _examples_in(_walk(given), root, scripts)
            out += tests + found
            continue
        tests, found = _examples_in([given], root, scripts)
        out += tests + found
        if everything is None:
            every_test, every_script = _examples_in(_walk(root), root, scripts)
            everything = every_test + every_script
        graph = graph or ImportGraph(root)
        out += graph.reaching(given, everything)
    unique = {(e["kind"], e["path"], e["text"]): e for e in reversed(out)}  # the first of each kept
    return list(reversed(unique.values()))[:MAX_EXAMPLES]


def request_for(example: ExampleSpec, root: Path, idle: float, deadline: float) -> dict[str, Any]:
    """The worker request of a learning run of ``example`` (no target, no graph)."""
    return {
        "target": {"path": str(example["path"]), "name": ""},
        "profile": {
            "name": None,
            "device": "cpu",
            "seed": 0,
            "x64": False,
            "inputs": {},
            "load": "module",
            "example": dict(example),
        },
        "workspaceRoot": str(root),
        "offline": True,
        "signatures": True,
        "learn": {"idle": idle, "deadline": deadline},
        "transport": "packed",
    }


class _Streamed:
    """The records one running example sends (``CaptureOptions.on_learned``, heard on the event
    loop), kept one batch after another in order by ``keep``; :meth:`close` waits for those heard."""

    def __init__(self, keep: Callable[[list[dict[str, Any]]], Awaitable[None]]) -> None:
        self.keep = keep
        self.tail: asyncio.Future[None] | None = None

    def heard(self, records: list[dict[str, Any]]) -> None:
        import asyncio

        records = [r for r in records if r.get("path") and r.get("name")]
        if records:
            self.tail = asyncio.ensure_future(self._after(self.tail, records))

    async def _after(self, before: asyncio.Future[None] | None, records: list[dict[str, Any]]) -> None:
        import asyncio

        if before is not None:
            await asyncio.gather(before, return_exceptions=True)  # a batch that failed to keep: the result has it
        await self.keep(records)

    async def close(self) -> None:
        import asyncio

        if self.tail is not None:
            await asyncio.gather(self.tail, return_exceptions=True)


def learn(root: Path, examples: list[ExampleSpec], python: str, **options: Any) -> LearnReport:
    """:func:`learn_async` for callers without an event loop (the CLI). Ctrl-C kills the workers."""
    import asyncio

    return asyncio.run(learn_async(root, examples, python, **options))


def _relative_target(path: str, name: str, root: Path) -> str:
    return f"{Path(os.path.relpath(path, root)).as_posix()}::{name}"


def absolute_targets(targets: Iterable[str], root: Path) -> set[tuple[str, str]]:
    """``targets`` ("path::Name", relative to ``root``, as a report lists them) as (absolute path, name)."""
    return {(str(root / path), name) for path, _, name in (t.rpartition("::") for t in targets)}


def _key(python: str, record: dict[str, Any]) -> str:
    return SignatureStore.key(python, str(record.get("path")), str(record.get("name")))


def _unspelled(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls a learning run could not spell (``learn.unspelled``), each target's first."""
    found = dict(result.get("learn") or {}).get("unspelled") or []
    return [r for r in found if isinstance(r, dict) and r.get("path") and r.get("name")]


def _hashes(paths: Iterable[Path | str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in paths:
        digest = sha256_of(str(path))
        if digest is not None:
            out[str(path)] = digest
    return out


def example_limit(example_timeout: float, budget: float, examples: int, side_by_side: int) -> float:
    """The seconds each of ``examples`` may run, ``side_by_side`` at once: ``example_timeout``, or
    its share of the budget when that is more. The limit keeps one slow example from taking the
    others' time; where the budget holds fewer rounds of them than it has room for, stopping one at
    ``example_timeout`` only leaves the budget unused (jax-resnet: one test file of 26 ResNet inits
    stopped at 120 s of a 900 s budget, with 5 of the 14 targets its tests call learned)."""
    rounds = max(1, math.ceil(examples / max(1, side_by_side)))
    return max(example_timeout, budget / rounds)


async def learn_async(
    root: Path,
    examples: list[ExampleSpec],
    python: str,
    *,
    example_timeout: float | None = None,
    budget: float = BUDGET,
    idle: float = IDLE,
    store: SignatureStore | None = None,
    cache: ExampleCache | None = None,
    graph: ImportGraph | None = None,
    jobs: int | None = None,
    progress: Callable[[int, int, int, ExampleOutcome], None] | None = None,
    new_inputs: Callable[[set[tuple[str, str]]], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    run: Callable[[dict[str, Any], str, CaptureOptions], Awaitable[Any]] | None = None,
) -> LearnReport:
    """Run the examples, up to ``jobs`` side by side (the machine's cores), each in its own
    worker at low priority; ``progress(done, total, targets learned, outcome)`` after each one.
    What an example records is kept as it runs (the worker sends it at once). ``new_inputs(targets)``
    (each an absolute path and a name) whenever the stores may give those targets new inputs: a
    running example's records teach them, an example ends having recorded calls of them (its later
    calls of a target may change its inputs: another batch size is a symbolic dimension; the
    examples kept to replay are the fallback of a learned call that fails at a value check), or
    cached examples taught them.
    With a ``cache``, an example whose loaded sources are unchanged since it taught what the store
    still holds is not run (outcome ``cached``), and each run is kept there. The answer comes within
    ``budget`` seconds: an example still running then is stopped (what it delivered by then is
    kept) and the report says ``stopped: "out of time"``. Cancelling the task kills the workers."""
    import asyncio

    from jaxlsp.capture.launch.client import run_capture

    runner = run or (lambda request, exe, options: run_capture(request, exe, options))
    store = store or SignatureStore(root)
    replays = ReplayStore.beside(store)
    started = time.monotonic()
    ends = started + budget
    report = LearnReport()
    learned: set[str] = set()
    outcomes: dict[int, ExampleOutcome] = {}
    cut: set[int] = set()  # examples the budget's end stopped (not their own time limit)
    total = len(examples)

    def finish(index: int, outcome: ExampleOutcome) -> None:
        outcomes[index] = outcome
        if progress is not None:
            progress(len(outcomes), total, len(learned), outcome)

    def prepare() -> tuple[dict[int, CachedExample], dict[int, dict[str, str]]]:
        """The cached examples, and the hashes of what each other one will load (before it runs)."""
        hits: dict[int, CachedExample] = {}
        loads: dict[int, dict[str, str]] = {}
        if cache is None:
            return hits, loads
        held = {SignatureStore.key(s.python, s.path, s.name) for s in store.all(python)} | replays.keys(python)
        walk = graph or ImportGraph(root)
        for index, example in enumerate(examples):
            hit = cache.fresh(python, str(example["text"]), held)
            if hit is not None and hit.deadline is not None and hit.deadline < (example_timeout or EXAMPLE_TIMEOUT):
                hit = None  # stopped at a shorter limit than this run gives it: it may teach more now
            if hit is not None:
                hits[index] = hit
            else:
                loads[index] = _hashes(walk.sources(example))
        return hits, loads

    def told(targets: Iterable[str]) -> None:
        """``targets`` ("path::Name", relative to the root) may have new inputs."""
        if new_inputs is None:
            return
        absolute = absolute_targets(targets, root)
        if absolute:
            new_inputs(absolute)

    hits, loads = await asyncio.to_thread(prepare)
    for index, hit in sorted(hits.items()):
        learned.update(hit.targets)
        text = str(examples[index]["text"])
        finish(index, ExampleOutcome(text, "cached", f"{text} not run: nothing it loads changed", hit.learned, 0.0))
    told(learned)

    async def keep_streamed(records: list[dict[str, Any]], example: ExampleSpec) -> None:
        """Records a running example sent: kept now, with the test that made each call to replay
        (a learned call that fails at a value check replays it at once, not when the file ends),
        and the targets they teach said at once."""

        def keep() -> None:
            store.add(records, python, str(example["text"]))
            replays.add(records, python, example)

        await asyncio.to_thread(keep)
        new = {_relative_target(str(r.get("path")), str(r.get("name")), root) for r in records} - learned
        learned.update(new)
        told(new)

    async def one(index: int, example: ExampleSpec, slots: asyncio.Semaphore) -> None:
        async with slots:
            left = ends - time.monotonic()
            if (cancelled is not None and cancelled()) or left <= 1.0:
                return  # never started: the report says why the run ended early
            limit = min(own_limit, left)
            t0 = time.monotonic()
            streamed = _Streamed(lambda records: keep_streamed(records, example))
            options = CaptureOptions(timeout=limit, example_timeout=limit, on_learned=streamed.heard)
            try:
                outcome = await runner(request_for(example, root, idle, limit), python, options)
            except asyncio.CancelledError:
                text = str(example["text"])
                cut.add(index)
                finish(index, ExampleOutcome(text, "timeout", f"{text} stopped: out of time", 0, time.monotonic() - t0))
                raise
            finally:
                await streamed.close()
            seconds = time.monotonic() - t0
        result = getattr(outcome, "result", {}) or {}
        records = list(result.get("signatures") or [])
        kept_count = store.add(records, python, str(example["text"])) if records else 0
        # every target keeps the example that reached it, to replay: the one way in for a call no
        # recipe can spell, the fallback of a spelled one that fails at a value check (learnedretry.py)
        spelled = {_key(python, r) for r in records}
        unspelled = [r for r in _unspelled(result) if _key(python, r) not in spelled]
        reached = [*records, *unspelled]
        replayed = set(replays.add(reached, python, example)) - spelled if reached else set()
        records += [r for r in unspelled if _key(python, r) in replayed]
        kept_count += len(replayed)
        taught = sorted({_relative_target(str(r["path"]), str(r["name"]), root) for r in records})
        # an example's end re-traces on all it kept: its later calls of a target it taught early
        # (another batch size: a symbolic dimension) and the examples kept to replay, which a
        # learned call failing at a value check falls back to, change targets' inputs too
        told(taught)
        learned.update(taught)
        if result.get("ok"):
            ended = dict(result.get("learn") or {})
            how, message = str(ended.get("outcome", "finished")), str(ended.get("message", ""))
        else:
            error = dict(result.get("error") or {})
            how = "timeout" if error.get("kind") == "timeout" else "error"
            message = str(error.get("message", "the run failed")).splitlines()[0] if error else "the run failed"
        if limit < own_limit and (how == "timeout" or "deadline" in message):
            cut.add(index)
        own_deadline = index not in cut and limit >= own_limit
        if cache is not None and kept(how, message, own_deadline):
            sources = dict(loads.get(index, {}))
            for record in records:
                sources.update({str(k): str(v) for k, v in dict(record.get("sources") or {}).items()})
                sources.update(_hashes([str(record["path"])]))
            keys = [_key(python, r) for r in records]
            stopped_at = limit if "deadline" in message else None
            entry = CachedExample(how, message, kept_count, taught, keys, sources, stopped_at)
            cache.put(python, str(example["text"]), entry)
        finish(index, ExampleOutcome(str(example["text"]), how, message, kept_count, seconds))

    pending = [i for i in range(total) if i not in hits]
    side_by_side = max(1, min(jobs or os.cpu_count() or 1, len(pending) or 1))
    # a limit the caller gave holds; the default grows to the budget's share
    own_limit = example_timeout or example_limit(EXAMPLE_TIMEOUT, budget, len(pending), side_by_side)
    slots = asyncio.Semaphore(side_by_side)
    tasks = [asyncio.create_task(one(i, examples[i], slots)) for i in pending]
    try:
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=max(0.0, ends - time.monotonic()))
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for task in tasks:
            failed = task.exception() if task.done() and not task.cancelled() else None
            if failed is not None:
                raise failed
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    report.examples = [outcomes[i] for i in sorted(outcomes)]
    unfinished = [i for i in pending if i not in outcomes]
    if unfinished and cancelled is not None and cancelled():
        report.stopped = "cancelled"
    elif unfinished or cut:
        report.stopped = "out of time"
    report.targets = sorted(learned)
    report.seconds = time.monotonic() - started
    return report
