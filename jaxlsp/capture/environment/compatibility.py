"""The capture environment's compatibility check: can this interpreter trace this target?

A small stdlib-only probe runs in the selected interpreter (``python -I -c PROBE``: isolated from
the current directory, with its own site-packages and, as a capture gets them, the user's
``PYTHONPATH`` and user site less anything a workspace controls (:mod:`.userpath`); that is what
is checked). It reads versions with ``importlib.metadata`` and finds accelerator plugins by
their distributions and ``jax_plugins`` entries, without importing jax or initialising XLA. The
probe's findings are cached per interpreter, keyed by its path and mtime, and re-used while the
site-packages folders it reported are unchanged (an install changes them); ``refresh`` re-runs it.

The verdict (:func:`evaluate`) is pure: Python and jax / jaxlib versions against the supported
range, flax or equinox when the target's kind needs them, and the backends the requested device
needs (``cuda:N`` without a CUDA jaxlib, ``tpu``/``tpu:N`` without libtpu, are refused before
any user import, never run on the CPU; an unknown device is refused too).
Each problem names its fix; fixable ones carry the requirements to install (:mod:`.install`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from jaxlsp.capture.environment import allowed_env, routes, userpath
from jaxlsp.capture.environment.routes import Selection
from jaxlsp.worker.protocol import DEVICE_CHOICES, device_platform

MIN_PYTHON = (3, 10)  # the worker's floor (DESIGN: any interpreter with Python >= 3.10)
# The supported range; README.md lists the tested versions (constraints.txt pins them).
MINIMUM = {"jax": "0.4.30", "jaxlib": "0.4.30", "flax": "0.10", "equinox": "0.11"}
TESTED = {"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "equinox": "0.13.8"}
NEEDS_BY_KIND = {"linen": ("flax",), "nnx": ("flax",), "equinox": ("equinox",)}
KIND_NAMES = {"linen": "Flax Linen", "nnx": "Flax NNX", "equinox": "Equinox"}
PROBE_TIMEOUT = 30.0
PATH_FIXABLE = ("jax", "jaxlib", "flax", "equinox")  # what another interpreter on PATH may have

Severity = Literal["error", "warning"]

PROBE = (
    userpath.APPLY
    + r"""
try:
    _jaxlsp_user_path(0)
except Exception:
    pass
import json, os, platform, re, sys
out = {"python": platform.python_version(), "pythonInfo": list(sys.version_info[:3]),
       "executable": sys.executable, "prefix": sys.prefix, "basePrefix": sys.base_prefix,
       "packages": {}, "plugins": [], "jaxPlugins": [], "siteDirs": []}
try:
    from importlib import metadata
    found, folders = {}, {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if name:
            key = re.sub(r"[-_.]+", "-", name).lower()
            if key not in found:
                found[key] = dist.version
                try:
                    folders[key] = dist.locate_file("")
                except Exception:
                    pass
    out["packages"] = {k: found.get(k) for k in ("jax", "jaxlib", "flax", "equinox", "pip")}
    out["plugins"] = sorted(f"{k}=={v}" for k, v in found.items()
                            if k.startswith(("jax-cuda", "jax-rocm", "libtpu", "jax-metal")))
    out["sources"] = {k: str(v) for k, v in folders.items() if k in out["packages"]}
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
try:
    import site, sysconfig
    config = json.loads(os.environ.get("JAXLSP_USER_PATH") or "{}")
    out["userPath"] = [p for p in config.get("path") or [] if isinstance(p, str)]
    try:
        scheme = sysconfig.get_preferred_scheme("user")
    except AttributeError:
        scheme = os.name + "_user"
    base = config.get("userBase") or site.getuserbase()
    out["userSite"] = sysconfig.get_path("purelib", scheme, vars={"userbase": base})
except Exception:
    pass
try:
    import importlib.util, pkgutil
    spec = importlib.util.find_spec("jax_plugins")
    if spec is not None and spec.submodule_search_locations:
        out["jaxPlugins"] = sorted(m.name for m in pkgutil.iter_modules(list(spec.submodule_search_locations)))
except Exception:
    pass
try:
    import site
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
except Exception:
    dirs = []
dirs += [p for p in sys.path if p.endswith("-packages")]
dirs += json.loads(os.environ.get("JAXLSP_USER_PATH") or "{}").get("path") or []
out["siteDirs"] = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
sys.stdout.write("\n" + sys.argv[1] + json.dumps(out) + "\n")
"""
)


@dataclass(frozen=True)
class Problem:
    """One thing that stops (``error``) or may upset (``warning``) a capture, and how to fix it."""

    message: str
    fix: str
    severity: Severity = "error"
    package: str | None = None
    requirement: str | None = None  # what to install (pip form, e.g. ``flax>=0.10``), when that fixes it

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"severity": self.severity, "message": self.message, "fix": self.fix}
        if self.package:
            out["package"] = self.package
        if self.requirement:
            out["requirement"] = self.requirement
        return out


@dataclass(frozen=True)
class Probe:
    """What the probe found in one interpreter (cached)."""

    python: str  # as selected
    version: str | None  # Python's version, None when the probe failed
    version_info: tuple[int, ...]
    prefix: str
    packages: dict[str, str | None]
    plugins: list[str]  # accelerator plugin distributions, ``name==version``
    jax_plugins: list[str]  # modules under the ``jax_plugins`` namespace
    site_dirs: list[str]
    error: str | None = None  # why the probe failed
    took: float = 0.0  # seconds
    sources: dict[str, str] = field(default_factory=dict)  # package -> the folder it is imported from
    user_path: list[str] = field(default_factory=list)  # the user's PYTHONPATH entries it was given
    user_site: str | None = None  # the user site it would add (when enabled)

    def source(self, package: str) -> str | None:
        """Where ``package`` comes from, in words: ``PYTHONPATH /opt/x``, ``the user site
        /home/u/.local/lib/python3.11/site-packages``, ``its environment /p/.venv/lib/...``."""
        folder = self.sources.get(package)
        if not folder:
            return None
        real = os.path.realpath(folder)
        if any(os.path.realpath(p) == real for p in self.user_path):
            return f"PYTHONPATH {folder}"
        if self.user_site and os.path.realpath(self.user_site) == real:
            return f"the user site {folder}"
        if self.prefix and _inside(real, os.path.realpath(self.prefix)):
            return f"its environment {folder}"
        return folder

    def sourced(self, packages: list[str] | tuple[str, ...]) -> str:
        """``jax 0.10.2 from PYTHONPATH /opt/x, flax 0.12.8 from the user site ...`` (those installed)."""
        said = []
        for package in packages:
            version = self.packages.get(package)
            if version:
                where = self.source(package)
                said.append(f"{package} {version}" + (f" from {where}" if where else ""))
        return ", ".join(said)

    @property
    def backends(self) -> list[str]:
        """The jax backends this environment's packages provide (without initialising any)."""
        if not self.packages.get("jaxlib"):
            return []
        found = ["cpu"]
        names = " ".join([*self.plugins, *self.jax_plugins, self.packages.get("jaxlib") or ""]).lower()
        for backend, markers in (
            ("cuda", ("cuda",)),
            ("rocm", ("rocm",)),
            ("tpu", ("libtpu", "tpu")),
            ("metal", ("metal",)),
        ):
            if any(m in names for m in markers):
                found.append(backend)
        return found


@dataclass
class Report:
    """The verdict on one interpreter for one target kind and device."""

    selection: Selection
    probe: Probe
    needs: list[str]  # packages the target's kind needs besides jax
    device: str
    problems: list[Problem] = field(default_factory=list)
    cached: bool = False
    kind: str | None = None  # the target's kind the check was for

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def requirements(self) -> list[str]:
        """What installing would fix, in order, once each."""
        return list(dict.fromkeys(p.requirement for p in self.errors if p.requirement))

    def message(self, what: str = "capture") -> str:
        """One clear message: the interpreter and route, what is wrong, and the fix."""
        where = self.selection.describe()
        if self.ok:
            versions = ", ".join(f"{k} {v}" for k, v in self.probe.packages.items() if v and k != "pip")
            warn = "".join(f" Note: {p.message} ({p.fix})." for p in self.problems)
            return (
                f"The {what} environment {where} is ready: Python {self.probe.version}, {versions or 'no jax'}; "
                f"backends: {', '.join(self.probe.backends) or 'none'}.{warn}"
            )
        issues = "; ".join(p.message for p in self.errors)
        fixes = " ".join(dict.fromkeys(p.fix for p in self.errors))
        return f"The {what} environment {where} cannot trace: {issues}. Fix: {fixes}"

    def to_json(self) -> dict[str, Any]:
        return {
            "python": self.selection.python,
            "route": self.selection.route,
            "ok": self.ok,
            "pythonVersion": self.probe.version,
            "packages": dict(self.probe.packages),
            "backends": self.probe.backends,
            "plugins": list(self.probe.plugins),
            "device": self.device,
            "needs": list(self.needs),
            "problems": [p.to_json() for p in self.problems],
            "message": self.message(),
            "cached": self.cached,
        }


def needs_for(kind: str | None) -> list[str]:
    return list(NEEDS_BY_KIND.get(kind or "", ()))


def usable(probe: Probe, packages: list[str] | tuple[str, ...]) -> bool:
    """Whether ``probe`` found each of ``packages`` at its supported minimum or newer."""
    for package in packages:
        have = probe.packages.get(package)
        if not have or version_tuple(have) < version_tuple(MINIMUM.get(package, "0")):
            return False
    return True


def _inside(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def version_tuple(text: str) -> tuple[int, ...]:
    """The leading release numbers of a version (``0.4.30+cuda12`` -> ``(0, 4, 30)``)."""
    parts: list[int] = []
    for piece in re.split(r"[.+]", text):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if match.end() != len(piece):
            break
    return tuple(parts)


def nvidia_driver() -> str | None:
    """Where this machine shows an NVIDIA driver, else None (no GPU to run CUDA on)."""
    for path in ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0"):
        if os.path.exists(path):
            return path
    return None


def evaluate(
    selection: Selection, probe: Probe, needs: list[str], device: str, driver: str | None = None
) -> list[Problem]:
    """The problems of ``probe`` for a target needing ``needs`` on ``device`` (pure)."""
    py = selection.python
    if probe.error is not None or probe.version is None:
        return [
            Problem(
                f"{py} could not be checked ({probe.error or 'no answer'})",
                "select a working Python >= 3.10 (setting jaxlsp.python, or --python)",
            )
        ]
    problems: list[Problem] = []
    if tuple(probe.version_info[:2]) < MIN_PYTHON:
        problems.append(
            Problem(
                f"Python {probe.version} is older than the supported 3.10",
                "select a Python >= 3.10 environment with jax (setting jaxlsp.python, or --python)",
                package="python",
            )
        )
    jax_spec = f"jax[cpu]>={MINIMUM['jax']}"
    for package in ("jax", "jaxlib", *needs):
        have = probe.packages.get(package)
        floor = MINIMUM[package]
        spec = jax_spec if package in ("jax", "jaxlib") else f"{package}>={floor}"
        why = f" ({KIND_NAMES[k]} targets need it)" if (k := _kind_needing(package)) else ""
        if have is None:
            problems.append(
                Problem(f"{package} is not installed{why}", f"install {spec}", package=package, requirement=spec)
            )
        elif version_tuple(have) < version_tuple(floor):
            problems.append(
                Problem(
                    f"{package} {have} is older than the supported {floor}",
                    f"install {spec}",
                    package=package,
                    requirement=spec,
                )
            )
        elif package in TESTED and version_tuple(have)[:2] > version_tuple(TESTED[package])[:2]:
            problems.append(
                Problem(
                    f"{package} {have} is newer than the tested {TESTED[package]}",
                    "tracing may still work; report what breaks",
                    severity="warning",
                    package=package,
                )
            )
    parsed = device_platform(device)
    if parsed is None:
        problems.append(Problem(f"unknown device {device!r}", f"name one of {DEVICE_CHOICES}", package="device"))
    elif parsed[0] == "cuda" and probe.packages.get("jaxlib"):
        problems.extend(_cuda_problems(selection, probe, device, driver))
    elif parsed[0] == "tpu" and probe.packages.get("jaxlib"):
        problems.extend(_tpu_problems(selection, probe, device))
    return problems


def _kind_needing(package: str) -> str | None:
    return next((k for k, needs in NEEDS_BY_KIND.items() if package in needs), None)


def _cuda_problems(selection: Selection, probe: Probe, device: str, driver: str | None) -> list[Problem]:
    never = "nothing was imported, and a capture never falls back to the CPU"
    cpu_fix = 'trace on the CPU instead (device = "cpu" in the profile, the setting jaxlsp.device, or --device cpu)'
    if "cuda" not in probe.backends:
        have = ", ".join(probe.backends) or "none"
        if driver is None:
            return [
                Problem(
                    f"device {device} needs a CUDA build of jaxlib, but {selection.python} has only the backends "
                    f"[{have}] and this machine shows no NVIDIA driver; {never}",
                    cpu_fix + ", or trace on a machine with an NVIDIA GPU",
                    package="jaxlib",
                )
            ]
        spec = f"jax[cuda12]>={MINIMUM['jax']}"
        return [
            Problem(
                f"device {device} needs a CUDA build of jaxlib, but {selection.python} has only the backends "
                f"[{have}]; {never}",
                f"install {spec}, or {cpu_fix}",
                package="jaxlib",
                requirement=spec,
            )
        ]
    if driver is None:
        return [
            Problem(
                f"device {device}: jaxlib has CUDA support but this machine shows no NVIDIA driver; {never}",
                cpu_fix,
                package="jaxlib",
            )
        ]
    return []


def _tpu_problems(selection: Selection, probe: Probe, device: str) -> list[Problem]:
    """``tpu``/``tpu:N`` needs JAX's TPU backend (libtpu) in the interpreter; refused before any
    user import, never traced on the CPU instead."""
    if "tpu" in probe.backends:
        return []
    have = ", ".join(probe.backends) or "none"
    # No install is offered: jax[tpu] is a pip route only (conda-forge has no libtpu), and it
    # helps only on a machine with a chip; the fix names the command instead.
    return [
        Problem(
            f"device {device} needs JAX's TPU backend (libtpu), but {selection.python} has only the backends "
            f"[{have}]; nothing was imported, and a capture never falls back to the CPU",
            'pip install "jax[tpu]" in that interpreter (it brings libtpu), or trace on the CPU instead '
            '(device = "cpu" in the profile, the setting jaxlsp.device, or --device cpu)',
            package="jaxlib",
        )
    ]


def run_probe(python: str, timeout: float = PROBE_TIMEOUT) -> Probe:
    """Run the probe in ``python`` (a subprocess; call only once the workspace is trusted)."""
    t0 = time.perf_counter()
    env = allowed_env.base_environment()
    mark = f"jaxlsp-probe-{secrets.token_hex(8)} "  # a .pth file printing to stdout cannot fake the answer
    try:
        done = subprocess.run(
            [python, "-I", "-c", PROBE, mark],
            capture_output=True,
            timeout=timeout,
            env=env,
            cwd=os.path.expanduser("~") if os.path.isdir(os.path.expanduser("~")) else "/",
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return _failed(python, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    took = time.perf_counter() - t0
    text = done.stdout.decode("utf-8", "replace")
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith(mark)), None)
    if line is None:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return _failed(python, f"exit status {done.returncode}: {err[-1] if err else 'no output'}", took)
    try:
        data = json.loads(line[len(mark) :])
    except ValueError as exc:
        return _failed(python, f"unreadable answer: {exc}", took)
    packages = {str(k): (str(v) if v else None) for k, v in dict(data.get("packages") or {}).items()}
    user_site = data.get("userSite")
    return Probe(
        python=python,
        sources={str(k): str(v) for k, v in dict(data.get("sources") or {}).items()},
        user_path=[str(p) for p in data.get("userPath") or []],
        user_site=str(user_site) if user_site else None,
        version=str(data.get("python")),
        version_info=tuple(int(x) for x in data.get("pythonInfo") or ()),
        prefix=str(data.get("prefix", "")),
        packages=packages,
        plugins=[str(p) for p in data.get("plugins") or []],
        jax_plugins=[str(p) for p in data.get("jaxPlugins") or []],
        site_dirs=[str(d) for d in data.get("siteDirs") or []],
        error=str(data["error"]) if data.get("error") else None,
        took=took,
    )


def _failed(python: str, why: str, took: float) -> Probe:
    return Probe(python, None, (), "", {}, [], [], [], error=why, took=took)


DISK_ENTRIES = 32  # interpreters remembered on disk


def disk_cache_path() -> Path:
    """Probes outlive the process here, in the user's cache (never in a workspace), so a CLI
    ``jaxlsp trace`` does not pay the probe (0.1 s) each time."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxlsp" / "environments.json"


class EnvironmentCache:
    """Probes by interpreter: keyed by path and mtime, valid while its site-packages are unchanged;
    kept in memory and in :func:`disk_cache_path`."""

    def __init__(self, disk: bool = True) -> None:
        self._probes: dict[tuple[str, int], tuple[Probe, dict[str, int]]] = {}
        self._lock = threading.Lock()
        self.disk = disk
        self.runs = 0  # probes actually run (tests read it)

    def _disk_load(self) -> dict[str, Any]:
        try:
            data = json.loads(disk_cache_path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _disk_get(self, key: tuple[str, int]) -> tuple[Probe, dict[str, int]] | None:
        entry = self._disk_load().get(f"{key[0]}\0{key[1]}") if self.disk else None
        if not isinstance(entry, dict):
            return None
        try:
            fields = dict(entry["probe"])
            fields["version_info"] = tuple(fields["version_info"])
            if "sources" not in fields:
                return None  # written before probes said where packages come from: probe again
            return Probe(**fields), {str(k): int(v) for k, v in dict(entry["stamps"]).items()}
        except (TypeError, KeyError, ValueError):
            return None  # absent, or written by another version: probe again

    def _disk_put(self, key: tuple[str, int], probe: Probe, stamps: dict[str, int]) -> None:
        if not self.disk:
            return
        path = disk_cache_path()
        data = self._disk_load()
        data.pop(f"{key[0]}\0{key[1]}", None)
        data[f"{key[0]}\0{key[1]}"] = {"probe": dataclasses.asdict(probe), "stamps": stamps}
        for old in list(data)[:-DISK_ENTRIES]:
            del data[old]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs the next probe

    @staticmethod
    def _key(python: str) -> tuple[str, int]:
        # The user's path (PYTHONPATH, the user site) is part of what the probe saw: another
        # shell's PYTHONPATH is another environment.
        where = hashlib.sha256(userpath.environment()[userpath.ENV_NAME].encode()).hexdigest()[:16]
        try:
            return f"{python}\0{where}", os.stat(python).st_mtime_ns
        except OSError:
            return f"{python}\0{where}", -1

    @staticmethod
    def _stamps(dirs: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in dirs:
            try:
                out[d] = os.stat(d).st_mtime_ns
            except OSError:
                out[d] = -1
        return out

    def probe(self, python: str, refresh: bool = False, counted: bool = True) -> tuple[Probe, bool]:
        """The probe of ``python`` and whether it came from the cache (``counted``: a probe run
        for the selected interpreter, not for a look at ``PATH``, counts in :attr:`runs`)."""
        key = self._key(python)
        with self._lock:
            held = self._probes.get(key)
        if held is None and not refresh:
            held = self._disk_get(key)
        if held is not None and not refresh and self._stamps(list(held[1])) == held[1]:
            with self._lock:
                self._probes[key] = held
            return held[0], True
        found = run_probe(python)
        self.runs += counted
        if found.error is None:
            stamps = self._stamps(found.site_dirs)
            with self._lock:
                self._probes[key] = (found, stamps)
            self._disk_put(key, found, stamps)
        return found, False

    def forget(self, python: str) -> None:
        with self._lock:
            for key in [k for k in self._probes if k[0].split("\0", 1)[0] == python]:
                del self._probes[key]
        if self.disk:
            data = self._disk_load()
            stale = [k for k in data if k.split("\0", 1)[0] == python]
            if stale:
                for k in stale:
                    del data[k]
                with contextlib.suppress(OSError):
                    disk_cache_path().write_text(json.dumps(data), encoding="utf-8")

    def check(self, selection: Selection, kind: str | None, device: str | None, refresh: bool = False) -> Report:
        """The verdict for a target of ``kind`` on ``device`` in the selected interpreter."""
        probe, cached = self.probe(selection.python, refresh)
        needs = needs_for(kind)
        dev = device or "cpu"
        problems = evaluate(selection, probe, needs, dev, nvidia_driver())
        if any(p.severity == "error" and p.package in PATH_FIXABLE for p in problems):
            problems = self._named_on_path(selection, problems)
        return Report(selection, probe, needs, dev, problems, cached, kind)

    def _named_on_path(self, selection: Selection, problems: list[Problem]) -> list[Problem]:
        """A missing package that the ``python3`` or ``python`` on ``PATH`` has is answered by
        naming that interpreter, never by an install (it runs them: the check is past trust)."""
        others: list[tuple[str, Probe]] = []
        for _, candidate in routes.path_candidates(os.environ, [Path(w) for w in userpath.workspaces()]):
            if candidate != selection.python:
                found, _ = self.probe(candidate, counted=False)
                if found.error is None:
                    others.append((candidate, found))
        chosen: dict[int, tuple[str, Probe]] = {}  # problem's index -> the interpreter that has its package
        for i, problem in enumerate(problems):
            package = problem.package or ""
            if problem.severity == "error" and package in PATH_FIXABLE:
                has = next(((py, found) for py, found in others if usable(found, (package,))), None)
                if has is not None:
                    chosen[i] = has
        # One fix per interpreter, naming every missing package it has (the message joins equal fixes).
        named: dict[str, list[str]] = {}
        for i, (python, _) in chosen.items():
            named.setdefault(python, []).append(problems[i].package or "")
        out = []
        for i, problem in enumerate(problems):
            if i not in chosen:
                out.append(problem)
                continue
            python, found = chosen[i]
            fix = (
                f"{python} (first on PATH) has {found.sourced(named[python])}: trace with --python {python} "
                "(or the setting jaxlsp.python)"
            )
            out.append(dataclasses.replace(problem, fix=fix, requirement=None))
        return out


# One per process: the server and the CLI share the same rules and keys.
CACHE = EnvironmentCache()


def own_prefix() -> Path:
    return Path(sys.prefix).resolve()
