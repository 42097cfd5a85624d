"""Every fixed wait in the tests follows the machine (issue 25): it is written ``scaled(seconds)``
(``tests/deadlines.py``), and the factor can be raised from the environment.

The scan below is what keeps it so: a new ``timeout=10`` or ``asyncio.wait_for(x, 10)`` fails here
with its file and line. A time limit that a test expects to fire (a capture's ``timeout`` of 1 s
whose point is to run out) is not a wait: the line above it says ``# limit under test``. The VS
Code and browser page helpers scale inside (``# scaled inside`` above them, in
``tests/clients/vscode/conftest.py`` and ``tests/viewer/conftest.py``), so the page waits in
``tests/clients/vscode/test_*.py`` stay plain numbers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests import deadlines

TESTS = Path(__file__).resolve().parent
NUMBER = r"\d+(?:\.\d+)?"
FIXED_WAITS = [
    re.compile(rf"\btimeout=(?:{NUMBER})(?=[,)\s])"),
    re.compile(rf"\btimeout: float = {NUMBER}[,)]"),
    re.compile(rf"asyncio\.wait_for\(.*, {NUMBER}\)"),
    re.compile(rf"time\.monotonic\(\) \+ {NUMBER}\b"),
    re.compile(rf"^\s*[A-Z_]*TIMEOUT = {NUMBER}\b"),
]
SCALED_INSIDE = ("clients/vscode/test_",)


def test_no_fixed_wait_is_left_unscaled() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith("workspaces/") or rel in ("deadlines.py", "test_deadlines.py"):
            continue
        if rel.startswith(SCALED_INSIDE):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            above = lines[number - 2] if number > 1 else ""
            if above.strip().startswith(("# limit under test", "# scaled inside")):
                continue
            if any(pattern.search(line) for pattern in FIXED_WAITS):
                found.append(f"tests/{rel}:{number}: {line.strip()}")
    assert found == [], "fixed waits (write scaled(seconds), from tests.deadlines):\n" + "\n".join(found)


def _factor(env_value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != deadlines.ENV}
    if env_value is not None:
        env[deadlines.ENV] = env_value
    code = "from tests import deadlines; print(deadlines.FACTOR, deadlines.MEASURED)"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=deadlines.scaled(60),
        check=False,
    )


def test_the_factor_is_measured_and_multiplied_by_the_environment() -> None:
    plain = _factor(None)
    assert plain.returncode == 0, plain.stderr
    factor, measured = map(float, plain.stdout.split())
    assert factor == measured and 1.0 <= measured <= deadlines.MAX_FACTOR
    tenfold = _factor("10")
    assert tenfold.returncode == 0, tenfold.stderr
    factor, measured = map(float, tenfold.stdout.split())
    assert factor == measured * 10


def test_a_bad_factor_is_named() -> None:
    for value in ("fast", "0", "-2"):
        done = _factor(value)
        assert done.returncode != 0
        assert f"{deadlines.ENV}={value!r}" in done.stderr, done.stderr
