"""A TPU another program holds (issue 55.5): jaxlsp's cause comes first, and libtpu's advice to
remove its lock file (which breaks the program holding the chip) is never passed on as a fix."""

from __future__ import annotations

import pytest

from jaxlsp.worker.tracing import devices

# libtpu's words when a second process opens the chip (shared/notes/tpu.md; the quote)
HELD = (
    "Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU topology. The TPU is already in use "
    "by process with pid 4242. Not attempting to load libtpu.so in this process. Internal error when accessing "
    'libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".'
)


@pytest.mark.parametrize("advice", ['Run "$ sudo rm /tmp/libtpu_lockfile".', "Run `sudo rm -f /tmp/libtpu_lockfile`"])
def test_a_held_chip_says_jaxlsps_cause_first_and_never_the_lock_file_advice(advice: str) -> None:
    text = HELD.replace('Run "$ sudo rm /tmp/libtpu_lockfile".', advice)
    said = devices._unavailable("tpu", "tpu", RuntimeError(text))
    assert said.startswith("device tpu is held by another program (process 4242): one process at a time can hold")
    assert "trace on the CPU (--device cpu)" in said
    assert "libtpu said: RuntimeError: Unable to initialize backend 'tpu'" in said  # its own cause stays
    assert "sudo" not in said and "rm /tmp" not in said and "rm -f" not in said
    assert said.index("held by another program") < said.index("libtpu said")


def test_other_failures_keep_jaxs_words_as_they_were() -> None:
    said = devices._unavailable("tpu:1", "tpu", RuntimeError("no TPU devices found"))
    assert said == "device tpu:1 is unavailable: RuntimeError: no TPU devices found"
    assert not devices.held_chip("cpu", "lockfile")
