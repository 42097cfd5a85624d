"""``jaxlsp env --topology v5e:4x4``: can the capture interpreter compile for that TPU pod (issue 49)?

It can when its jax imports, libtpu is installed beside it, and libtpu describes the topology
(``jax.experimental.topologies.get_topology_desc``), which also shows that the two match: a libtpu
of another release than jax's fails there. The fix is the install that brings the libtpu jax was
released with, ``pip install "jax[tpu]==<its jax version>"``, through the reviewed install path
(capture/environment/install.py: pip or conda for the interpreter's own environment). The probe runs in the
interpreter, isolated, on the CPU backend (libtpu is asked only for the topology, never for a chip).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from jaxlsp.capture.environment.install import plan_install
from jaxlsp.capture.environment.interpreters import Selection

TIMEOUT = 120.0  # importing jax and libtpu, cold, on a loaded machine

_PROBE = r"""
import json, sys, importlib.util
out = {}
try:
    import jax
    out["jax"] = jax.__version__
except Exception as exc:
    out["error"] = f"jax does not import: {type(exc).__name__}: {exc}"
    print(json.dumps(out)); sys.exit(0)
spec = importlib.util.find_spec("libtpu")
if spec is None:
    print(json.dumps(out)); sys.exit(0)
try:
    from importlib.metadata import version
    out["libtpu"] = version("libtpu")
except Exception:
    out["libtpu"] = "unknown"
try:
    from jax.experimental import topologies
    try:
        found = topologies.get_topology_desc(topology_name=sys.argv[1], platform="tpu")
    except Exception as first:  # smaller than a host (v5e:1x1): a host of its own size
        if "chips_per_host_bounds" not in str(first):
            raise
        dims = [int(d) for d in sys.argv[1].split(":")[-1].split("x")]
        bounds = tuple((dims + [1, 1, 1])[:3])
        found = topologies.get_topology_desc(topology_name=sys.argv[1], platform="tpu", chips_per_host_bounds=bounds)
    out["devices"] = len(found.devices)
    out["kind"] = str(found.devices[0].device_kind)
except Exception as exc:
    text = str(exc).strip().splitlines()
    out["error"] = f"{type(exc).__name__}: {text[0] if text else ''}"
print(json.dumps(out))
"""


@dataclass
class PodCheck:
    """What the interpreter said about compiling for ``topology``."""

    python: str
    topology: str
    jax: str | None = None
    libtpu: str | None = None
    devices: int | None = None
    kind: str | None = None
    error: str | None = None
    install: str | None = None  # the command that fixes it, as the user pastes it

    @property
    def ok(self) -> bool:
        return self.devices is not None and self.error is None

    def message(self) -> str:
        if self.ok:
            return (
                f"topology {self.topology}: ready, {self.devices} {self.kind} device(s) "
                f"(jax {self.jax}, libtpu {self.libtpu}) in {self.python}"
            )
        fix = f"; fix: {self.install}" if self.install else ""
        if self.jax is None:
            return f"topology {self.topology}: cannot compile for it: {self.error}{fix}"
        if self.libtpu is None:
            why = f"libtpu is not installed in {self.python} (jax {self.jax})"
        else:
            why = f"libtpu {self.libtpu} could not describe it with jax {self.jax}: {self.error}"
        return f"topology {self.topology}: cannot compile for it: {why}{fix}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topology": self.topology, "ready": self.ok, "python": self.python}
        for key in ("jax", "libtpu", "devices", "kind", "error"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.install:
            out["install"] = self.install
        out["message"] = self.message()
        return out


def check_pod(python: str, topology: str, route: str = "env --topology") -> PodCheck:
    """Ask ``python`` whether it can compile for ``topology``; the fix when it cannot."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env["JAX_PLATFORMS"] = "cpu"  # the topology only: libtpu never looks for a chip
    check = PodCheck(python, topology)
    try:
        done = subprocess.run(
            [python, "-I", "-c", _PROBE, topology],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env,
            cwd=os.path.expanduser("~") if os.path.isdir(os.path.expanduser("~")) else "/",
            check=False,
        )
        said = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        check.error = f"the interpreter could not be asked: {type(exc).__name__}: {exc}"
        return check
    if not said:
        check.error = f"the interpreter said nothing (exit {done.returncode}): {done.stderr.strip()[-300:]}"
        return check
    check.jax = said.get("jax")
    check.libtpu = said.get("libtpu")
    check.devices = said.get("devices")
    check.kind = said.get("kind")
    check.error = said.get("error")
    if check.jax is None and check.error is None:
        check.error = "jax is not installed"
    if not check.ok and check.jax is not None and not _unknown_name(check.error):
        plan = plan_install(Selection(python, route), [f"jax[tpu]=={check.jax}"])
        check.install = plan.text
    return check


def _unknown_name(error: str | None) -> bool:
    """libtpu refused the name itself: no install fixes that."""
    if error is None:
        return False
    return ("topology" in error.lower() and "invalid" in error.lower()) or "divisible" in error
