"""``jaxlsp learn`` and ``jaxlsp.learnShapes``: run the workspace's own examples once each and keep
the call signatures of every target they reach (issue 46).

The examples are the workspace's test files (pytest's names: ``test_*.py``, ``*_test.py``), each
run as ``python -m pytest FILE`` would, and the scripts its README or docs run with their
arguments (``discovery/commands.py``). Each runs in the capture sandbox of the chosen interpreter
(offline, the memory cap, its own deadline), with the signature hooks in every workspace file
(``worker/examples/learning.py``), and is stopped once it has nothing new to teach. What they
recorded goes to the per-user store (:mod:`.signatures`); a target then traces, and shows live
shapes, on the call it was reached with. Nothing here runs unless someone asked: the CLI command,
or the LSP command in a trusted folder.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxlsp.capture.inputs.signatures import SignatureStore
from jaxlsp.capture.launch.options import CaptureOptions
from jaxlsp.worker.protocol import ExampleSpec

EXAMPLE_TIMEOUT = 120.0  # seconds one example may run (it is stopped sooner once idle)
BUDGET = 900.0  # seconds for the whole run
IDLE = 20.0  # seconds without a new signature after which an example is stopped (a compile can take 10)
MAX_EXAMPLES = 200
_SKIP = frozenset({".venv", "venv", "node_modules", "build", "dist", "__pycache__", "site-packages", ".git"})


@dataclass
class ExampleOutcome:
    text: str  # as the user would type it, relative to the root
    outcome: str  # finished | stopped | failed | exited | timeout | error
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
        return [e for e in self.examples if e.outcome not in ("finished", "stopped")]

    def json(self) -> dict[str, Any]:
        return {
            "learned": len(self.targets),
            "targets": self.targets,
            "examples": [e.__dict__ for e in self.examples],
            "failures": [f"{e.text}: {e.message}" for e in self.failures],
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


def find_examples(paths: list[Path], root: Path) -> list[ExampleSpec]:
    """The test files under ``paths`` (files or folders; the root when empty), then the scripts
    there that the docs run, each once, in that order."""
    from jaxlsp.discovery.commands import documented_command
    from jaxlsp.recipes.examples import example_kind

    files: list[Path] = []
    for given in paths or [root]:
        given = given.resolve()
        files.extend(_walk(given) if given.is_dir() else [given])
    tests: list[ExampleSpec] = []
    scripts: list[ExampleSpec] = []
    for path in dict.fromkeys(files):
        if path.suffix != ".py":
            continue
        text = Path(os.path.relpath(path, root)).as_posix()
        if _is_test_file(path):
            tests.append({"kind": "test", "path": str(path), "text": text, "tests": [str(path)]})
        elif example_kind(path) == "script":
            command = documented_command(path, root)
            if command is not None:
                argv = list(command.argv)
                shown = " ".join([text, *argv])
                scripts.append({"kind": "script", "path": str(path), "text": shown, "argv": argv})
    return (tests + scripts)[:MAX_EXAMPLES]


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


def learn(root: Path, examples: list[ExampleSpec], python: str, **options: Any) -> LearnReport:
    """:func:`learn_async` for callers without an event loop (the CLI). Ctrl-C kills the worker."""
    import asyncio

    return asyncio.run(learn_async(root, examples, python, **options))


async def learn_async(
    root: Path,
    examples: list[ExampleSpec],
    python: str,
    *,
    example_timeout: float = EXAMPLE_TIMEOUT,
    budget: float = BUDGET,
    idle: float = IDLE,
    store: SignatureStore | None = None,
    progress: Callable[[int, int, int, ExampleOutcome], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    run: Callable[[dict[str, Any], str, CaptureOptions], Awaitable[Any]] | None = None,
) -> LearnReport:
    """Run each example once, one after the other; ``progress(done, total, targets learned,
    outcome)`` after each one. Cancelling the task kills the running example's worker."""
    from jaxlsp.capture.launch.client import run_capture

    runner = run or (lambda request, exe, options: run_capture(request, exe, options))
    store = store or SignatureStore(root)
    report = LearnReport()
    started = time.monotonic()
    learned: set[str] = set()
    for done, example in enumerate(examples):
        left = budget - (time.monotonic() - started)
        if cancelled is not None and cancelled():
            report.stopped = "cancelled"
            break
        if left <= 1.0:
            report.stopped = "out of time"
            break
        limit = min(example_timeout, left)
        t0 = time.monotonic()
        options = CaptureOptions(timeout=limit, example_timeout=limit)
        outcome = await runner(request_for(example, root, idle, limit), python, options)
        result = getattr(outcome, "result", {}) or {}
        records = list(result.get("signatures") or [])
        kept = store.add(records, python, str(example["text"])) if records else 0
        for record in records:
            learned.add(f"{Path(os.path.relpath(str(record['path']), root)).as_posix()}::{record['name']}")
        if result.get("ok"):
            ended = dict(result.get("learn") or {})
            how, message = str(ended.get("outcome", "finished")), str(ended.get("message", ""))
        else:
            error = dict(result.get("error") or {})
            how = "timeout" if error.get("kind") == "timeout" else "error"
            message = str(error.get("message", "the run failed")).splitlines()[0] if error else "the run failed"
        finished = ExampleOutcome(str(example["text"]), how, message, kept, time.monotonic() - t0)
        report.examples.append(finished)
        if progress is not None:
            progress(done + 1, len(examples), len(learned), finished)
    report.targets = sorted(learned)
    report.seconds = time.monotonic() - started
    return report
