"""Traced code cannot reach into the server (issue 25): as the same user, a target in a trusted
workspace tried to read ``/proc/<server>/environ`` and to write an LSP frame into
``/proc/<server>/fd/3``, the server's protocol output.

The server (and the warm spare) must not be dumpable, so every ``/proc/<pid>`` file that needs
ptrace access is closed to the user's other processes, and no worker may hold a descriptor of the
server's protocol streams. Root bypasses dumpability (CAP_SYS_PTRACE), and CI runs as root, so the
test runs the server as ``nobody`` itself (``setpriv``), with a home and XDG folders it can write,
and the traced target (a process of that same user) records what it could open.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deadlines import scaled
from tests.robustness.helpers import IN_CI, Peer

USER, GROUP = "nobody", "nogroup"

# Runs at import in the capture worker (cold or forked from the spare): walks up its ancestors and
# tries, for each, what issue 25's probe did; then lists its own descriptors.
PROBE = """import errno, json, os
import jax.numpy as jnp


def _parent(pid):
    raw = open(f"/proc/{pid}/stat", "rb").read()
    return int(raw[raw.rfind(b")") + 2 :].split()[1])


def _try(path, flags=os.O_RDONLY):
    try:
        os.close(os.open(path, flags | os.O_NONBLOCK))
        return "opened"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


def _probe(pid):
    uid = None
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            uid = int(line.split()[1])
    try:
        fds = sorted(int(n) for n in os.listdir(f"/proc/{pid}/fd"))
        listed = "listed"
    except OSError as exc:
        fds, listed = list(range(16)), errno.errorcode.get(exc.errno, str(exc.errno))
    return {
        "pid": pid,
        "uid": uid,
        "environ": _try(f"/proc/{pid}/environ"),
        "fd_list": listed,
        "fds": {str(n): _try(f"/proc/{pid}/fd/{n}", os.O_WRONLY) for n in fds},
    }


ancestors, pid = [], os.getpid()
while (pid := _parent(pid)) > 1:
    ancestors.append(_probe(pid))
mine = {}
for name in os.listdir("/proc/self/fd"):
    try:
        mine[name] = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        pass
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe-%d.json" % os.getpid())
json.dump({"uid": os.getuid(), "ancestors": ancestors, "fds": mine}, open(out, "w"))


def f(x):
    return jnp.sin(x)
"""

DENIED = {"EACCES", "EPERM"}


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    for folder, dirs, files in os.walk(path):
        os.chown(folder, uid, gid)
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


@pytest.fixture
def unprivileged() -> Iterator[tuple[tuple[str, ...], Path, dict[str, str]]]:
    """The ``setpriv`` prefix, a workspace and an environment for a server run as ``nobody``
    (``JAXLSP_TEST_PYTHON`` names the interpreter the server is to trace with)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("dumpability and /proc are Linux's")
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        if IN_CI:
            pytest.fail("CI runs as root with util-linux: the test must run the server as another user")
        pytest.skip("needs root (to start the server as another user) and setpriv")
    import grp
    import pwd

    uid, gid = pwd.getpwnam(USER).pw_uid, grp.getgrnam(GROUP).gr_gid
    # Not under pytest's tmp_path: its folders are root's alone (0700); and /tmp by name, not the
    # temp folder Python cached, which an earlier test in this worker may have pointed into one.
    base = Path(tempfile.mkdtemp(prefix="jaxlsp-isolation-", dir="/tmp"))
    base.chmod(0o755)
    home, root = base / "home", base / "ws"
    for folder in (home, home / ".config", home / ".cache", root):
        folder.mkdir(parents=True)
    prefix = (setpriv, f"--reuid={USER}", f"--regid={GROUP}", "--clear-groups")
    python = _interpreter_for(prefix, base)
    (root / "probe.py").write_text(PROBE)
    (root / "jaxlsp.toml").write_text(
        'version = 1\n[profiles.f]\ntarget = "probe.py::f"\ninputs.args = [{ kind = "array", shape = [3] }]\n'
    )
    _chown_tree(base, uid, gid)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "USER": USER,
        "LOGNAME": USER,
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "TMPDIR": str(base),
        "JAX_PLATFORMS": "cpu",
        "JAXLSP_SERVER_SECRET": "the server's own secret",
        "JAXLSP_TEST_PYTHON": str(python),
    }
    try:
        yield prefix, root, env
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _runs_jax(prefix: tuple[str, ...], python: str) -> bool:
    probe = "import os, sys; os.stat(sys.executable); import jax"
    done = subprocess.run([*prefix, python, "-I", "-c", probe], capture_output=True, cwd="/", timeout=scaled(120))
    return done.returncode == 0


def _interpreter_for(prefix: tuple[str, ...], base: Path) -> Path:
    """An interpreter ``nobody`` can stat and run, with the suite's packages: the suite's own, or
    (where it sits under a folder only root may search, as pyenv under /root does) a venv made
    from a system interpreter of the same version, reading the suite's site-packages."""
    if _runs_jax(prefix, sys.executable):
        return Path(sys.executable)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if not os.access(candidate, os.X_OK):
            continue
        venv = base / "venv"
        subprocess.run([candidate, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=scaled(60))
        site = next(venv.glob("lib/python*/site-packages"))
        suite = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
        (site / "jaxlsp-suite.pth").write_text("\n".join(suite) + "\n")
        for path in (base, venv):
            path.chmod(0o755)
        if _runs_jax(prefix, str(venv / "bin" / "python")):
            return venv / "bin" / "python"
    message = f"no interpreter with jax that {USER} can run (the suite's is {sys.executable})"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def _pipe_inodes(peer: Peer) -> set[str]:
    """``pipe:[inode]`` of the server's stdin, stdout and stderr (the test holds the other ends)."""
    names = set()
    for stream in (peer.proc.stdin, peer.proc.stdout, peer.proc.stderr):
        assert stream is not None
        info = os.fstat(stream.fileno())
        assert stat.S_ISFIFO(info.st_mode)
        names.add(f"pipe:[{info.st_ino}]")
    return names


def test_traced_code_cannot_reach_into_the_server(
    peer_factory: Any, unprivileged: tuple[tuple[str, ...], Path, dict[str, str]]
) -> None:
    pytest.importorskip("jax")
    prefix, root, env = unprivileged
    peer: Peer = peer_factory(env=env, prefix=prefix, cwd=Path(__file__).resolve().parents[2])
    peer.initialize(root, options={"trusted": True, "liveShapes": False, "python": env["JAXLSP_TEST_PYTHON"]})
    uri = peer.open(root / "probe.py")
    # Twice: the first capture may run cold while the spare warms up, a later one through it.
    for _ in range(2):
        result = peer.call(
            "jaxlsp/trace", {"textDocument": {"uri": uri}, "name": "f", "profile": "f"}, timeout=scaled(180)
        )
        assert result["traceId"], result
    server, protocol = peer.proc.pid, _pipe_inodes(peer)
    import pwd

    nobody = pwd.getpwnam(USER).pw_uid
    probes = [json.loads(p.read_text()) for p in sorted(root.glob("probe-*.json"))]
    assert probes, "the target did not run"
    reached: list[str] = []
    for probe in probes:
        assert probe["uid"] == nobody, probe
        ours = [a for a in probe["ancestors"] if a["uid"] == nobody]  # the server, the spare
        assert server in [a["pid"] for a in ours], probe["ancestors"]
        for ancestor in ours:
            where = f"/proc/{ancestor['pid']}"
            if ancestor["environ"] not in DENIED:
                reached.append(f"{where}/environ: {ancestor['environ']}")
            if ancestor["fd_list"] not in DENIED:
                reached.append(f"{where}/fd: {ancestor['fd_list']}")
            reached += [f"{where}/fd/{n}: {how}" for n, how in ancestor["fds"].items() if how not in DENIED]
        held = sorted(f"fd {n} -> {link}" for n, link in probe["fds"].items() if link in protocol)
        reached += [f"the worker holds the server's protocol stream: {h}" for h in held]
    assert reached == [], "traced code reached into the server:\n" + "\n".join(reached)
