"""The supervisor's marks on a live trace's phases (jaxlsp/capture/launch/supervise.py): the moment the
result arrived is marked however the child's exit and the result's end reach the loop, so that
the live log splits that span into the worker's phases (import, make_jaxpr, ...) every time."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from jaxlsp.capture.launch import phases
from jaxlsp.capture.launch.client import PopenChild
from jaxlsp.capture.launch.options import CaptureOptions, Launch
from jaxlsp.capture.launch.supervise import CaptureOutcome, Pipes, supervise
from tests.deadlines import scaled

# writes its result and closes the pipe, as the worker does, then runs ``{then}`` and exits
WRITES_THEN = "import os, sys; fd = int(sys.argv[1]); os.write(fd, b'{{\"ok\": false}}'); os.close(fd); {then}"


async def _supervised(then: str, exited_first: bool) -> tuple[CaptureOutcome, phases.Phases]:
    """A child that writes a result and runs ``then``, supervised on a live trace's phases;
    ``exited_first``: the supervisor starts only once the child has exited (not reaped), with
    everything it wrote waiting in the pipes."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITES_THEN.format(then=then), str(res_w)],
        stdout=out_w,
        stderr=err_w,
        pass_fds=(res_w,),
        start_new_session=True,
    )
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    if exited_first:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    timing = phases.Phases(saved=time.monotonic())
    token = phases.CURRENT.set(timing)
    try:
        outcome = await supervise(
            PopenChild(proc),
            Pipes(stdout=out_r, stderr=err_r, result=res_r),
            CaptureOptions(),
            Launch(sys.executable, "cold", time.monotonic(), scaled(60.0), None),
        )
    finally:
        phases.CURRENT.reset(token)
    return outcome, timing


async def test_a_child_that_exited_before_the_loop_heard_of_its_result_still_marks_the_result() -> None:
    # A loaded machine: the server's loop hears the exit and the result's end in one wait. The
    # live log then named no import or make_jaxpr (a KeyError in test_live under three spinners).
    outcome, timing = await _supervised("print('bye')", exited_first=True)
    assert outcome.stdout.strip() == "bye"
    names = [name for name, _ in timing.marks]
    assert "result" in names, names
    assert names.index("result") < names.index("reap"), names
    assert "import" in dict(timing.spans())


async def test_the_result_is_marked_once_when_it_arrives_first() -> None:
    # The usual order (the result's end read, then the exit half a second later): one mark, before the reap.
    _, timing = await _supervised("import time; time.sleep(0.5)", exited_first=False)
    names = [name for name, _ in timing.marks]
    assert names.count("result") == 1 and names.index("result") < names.index("reap"), names
