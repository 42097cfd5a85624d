"""What the warm spare does before it forks (jaxlsp/worker/process/warm.py ``warm``): a capture
forked after it imports none of the worker's own modules. The spare runs with ``-B``, so each
module a capture imports late is compiled from source in every capture (the compact result form,
jaxlsp.graph.compact, was 10-30 ms of each one's ``json`` phase)."""

from __future__ import annotations

import pytest

from tests.worker.conftest import array, in_fresh_python, request

pytest.importorskip("jax")

FORKED = """
import json, os, sys
import jax, jax.numpy
from jaxlsp.worker.process import main as worker

worker.warm()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    before = set(sys.modules)
    result = worker.capture(json.loads(sys.argv[1]), jax_ready=True)
    new = sorted(m for m in sys.modules if m not in before and m.startswith("jaxlsp"))
    os.write(write, json.dumps({"ok": result["ok"], "imported": new}).encode())
    os._exit(0)
os.close(write)
print(os.read(read, 1 << 16).decode())
os.waitpid(pid, 0)
"""


def test_a_capture_forked_after_the_warm_up_imports_nothing_of_the_workers_own() -> None:
    found = in_fresh_python(FORKED, request("funcs.py", "double", array(3, 4)))
    assert found == {"ok": True, "imported": []}
