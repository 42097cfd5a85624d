"""Forked captures with and without the jaxtyping contract check, interleaved (benchmarks/live.py).

Run in the capture interpreter as ``python forked_captures.py REQUESTS.json PAIRS``, where the
file maps a label to a worker request (jaxlsp.capture.engine.prepare's). This process plays the
warm spare (jaxlsp/worker/process/forkserver.py): it imports what the spare imports, runs the
worker's ``warm()``, and forks one child per capture, which runs ``capture(request,
jax_ready=True)`` as the spare's child does (the modules it had before, the installed ones it
imported after, the result as JSON down a pipe). First one capture of each request teaches it
the installed modules captures import (beartype for the check, optax...), which it then imports
as the spare's learned preload does; that capture is not timed.

Then, per request, ``PAIRS`` pairs of captures, one with the check (``on``) and one without
(``off``: the worker's ``_contracts`` answers None in that child, as for a workspace that never
imported jaxtyping), their order alternating from one pair to the next, so that the machine's
slow spells hit both sides alike. Each capture is timed from the fork to its whole result read
here, and by the CPU time the child used (user + system: what the check costs, which the other
sessions' load on a shared machine moves far less than the wall time). Prints one JSON object:
label -> ``{"on": [seconds...], "off": [...], "cpu": {"on": [...], "off": [...]}, "phases":
{"on": {phase: [seconds...]}, "off": {...}}}`` (phases: the worker's own timings, wall).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True


def _preload(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # what the spare could not import is left out, as the spare leaves it
            continue


def _child(request: dict[str, Any], checked: bool, out: int) -> None:
    from jaxlsp.worker.process import main as worker
    from jaxlsp.worker.process.forkserver import installed_imports

    before = set(sys.modules)
    if not checked:
        worker._contracts = lambda request, workspace: None
    result: dict[str, Any] = dict(worker.capture(dict(request), jax_ready=True))
    learned = installed_imports(before, str(request.get("workspaceRoot") or ""))
    data = json.dumps(
        {"ok": result["ok"], "error": result.get("error"), "timings": result.get("timings"), "imported": learned}
    )
    os.write(out, data.encode())


def once(request: dict[str, Any], checked: bool) -> tuple[float, float, dict[str, Any]]:
    """One forked capture: seconds from the fork to its result read, the child's CPU seconds
    (user + system), and what it reported."""
    read, write = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read)
            _child(request, checked, write)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    took = time.perf_counter() - started
    usage = os.wait4(pid, 0)[2]
    if not chunks:
        raise SystemExit(f"the forked capture of {request['target']['name']} died")
    report: dict[str, Any] = json.loads(b"".join(chunks))
    if not report["ok"]:
        raise SystemExit(f"the capture of {request['target']['name']} failed: {report['error']}")
    return took, usage.ru_utime + usage.ru_stime, report


def main() -> None:
    requests: dict[str, dict[str, Any]] = json.loads(Path(sys.argv[1]).read_text())
    pairs = int(sys.argv[2])
    from jaxlsp.capture.launch.spare import DEFAULT_PRELOAD

    _preload(list(DEFAULT_PRELOAD))
    from jaxlsp.worker.process import main as worker

    worker.warm()
    learned: list[str] = []
    for request in requests.values():
        learned += once(request, True)[2].get("imported") or []
    _preload(learned)
    worker.warm()  # as the spare after a preload: the new modules' paths remembered
    out: dict[str, Any] = {}
    for label, request in requests.items():
        once(request, True)  # this request's first fork after the preload, untimed
        runs: dict[str, Any] = {"on": [], "off": [], "cpu": {"on": [], "off": []}, "phases": {"on": {}, "off": {}}}
        for pair in range(pairs):
            for checked in (True, False) if pair % 2 else (False, True):
                side = "on" if checked else "off"
                took, cpu, report = once(request, checked)
                runs[side].append(took)
                runs["cpu"][side].append(cpu)
                for phase, seconds in (report.get("timings") or {}).items():
                    runs["phases"][side].setdefault(phase, []).append(seconds)
        out[label] = runs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
