"""Stage the worker's code for the user's interpreter, and check that interpreter.

The capture worker runs in the user's interpreter, which must see only our stdlib-only code and
never the server's site-packages (pygls, lsprotocol, libcst, or this very package with all its
dependencies). :func:`stage` copies exactly

- ``jaxlsp/__init__.py`` and ``jaxlsp/capture/__init__.py`` (trivial package markers),
- the packages that :data:`jaxlsp.worker.STAGED_PACKAGES` names: ``jaxlsp/worker/``
  (the worker and the warm spare's fork server) and ``jaxlsp/graph/`` (``*.py`` and ``*.json`` only)

into a private folder named after the hash of their contents, under the per-user cache
(``$XDG_CACHE_HOME/jaxlsp`` or ``~/.cache/jaxlsp``; ``~/Library/Caches/jaxlsp`` on macOS) or, when
that is unusable, a fresh private temporary folder. An unchanged tree reuses its folder.

The worker then starts as ``[python, "-I", "-B", "-c", BOOTSTRAP, stage, memory, result_fd]``:
``-I`` keeps ``PYTHONPATH``, ``PYTHONHOME``, the user site and the current directory off
``sys.path``; the user's own ``PYTHONPATH`` and user site then come back, less anything a workspace
controls, through :mod:`.userpath` (JAX often lives there); ``-B`` writes no bytecode for the
user's modules (an edit of equal size within the same second must never load stale code).
BOOTSTRAP puts the staging folder at ``sys.path[0]``,
applies the memory cap and calls the worker's ``main()``.

The staged modules' bytecode is cached inside the stage (``__pycache__`` beside each file, one
per interpreter version, written by the worker's own interpreter the first time it imports the
module): checked-hash pycs (PEP 552), loaded only when the header's hash is the hash of the
staged source as it is now, so an edited, damaged or foreign stage file is compiled afresh, and an
unreadable or corrupt pyc is ignored and rewritten. It saves every cold capture compiling the
worker's ~14,000 lines (0.2-0.4 s). The user's modules are never written (``-B`` holds for them).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jaxlsp
from jaxlsp.capture.environment import allowed_env, userpath
from jaxlsp.worker import STAGED_PACKAGES

MIN_PYTHON = (3, 10)
WORKER_MODULE = "jaxlsp.worker.process.main"
STAGED_SUFFIXES = (".py", ".json")
STALE_AFTER = 7 * 24 * 3600.0  # seconds; older unused stages are removed when a new one is made

#: Shared start of both bootstraps (any Python >= 3.10): argv[1] is the stage. Puts the stage first
#: on ``sys.path`` and guards the ``jaxlsp`` namespace, so that only staged modules import even in an
#: interpreter where the whole server is installed (an editable install's finder would otherwise
#: serve ``jaxlsp.discovery`` and friends from the checkout). Staged modules load through
#: ``_StagedLoader``: their bytecode cached in the stage as checked-hash pycs (the module docstring).
PROLOGUE = (
    """\
import os, sys
sys.dont_write_bytecode = True
stage = sys.argv.pop(1)
sys.path.insert(0, stage)
"""
    + userpath.APPLY
    + """\
try:
    _jaxlsp_user_path(1)
except Exception:
    pass
del _jaxlsp_user_path
from importlib.machinery import PathFinder, SourceFileLoader
class _StagedLoader(SourceFileLoader):
    def get_code(self, fullname):
        import marshal
        from importlib.util import MAGIC_NUMBER, cache_from_source, source_hash
        path = self.get_filename(fullname)
        source = self.get_data(path)
        try:
            cached = cache_from_source(path)
            head = MAGIC_NUMBER + bytes((3, 0, 0, 0)) + source_hash(source)  # PEP 552: checked hash
        except Exception:
            return self.source_to_code(source, path)
        try:
            with open(cached, "rb") as f:
                data = f.read()
            if data[:16] == head:
                code = marshal.loads(memoryview(data)[16:])
                if type(code) is type(_StagedLoader.get_code.__code__):
                    return code
        except Exception:
            pass
        code = self.source_to_code(source, path)
        tmp = "%s.%d.tmp" % (cached, os.getpid())
        try:
            os.makedirs(os.path.dirname(cached), mode=0o700, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(head + marshal.dumps(code))
            os.replace(tmp, cached)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return code
class _OnlyStaged:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "jaxlsp" and not name.startswith("jaxlsp."):
            return None
        spec = PathFinder.find_spec(name, [stage] if name == "jaxlsp" else path, target)
        if spec is None:
            raise ModuleNotFoundError("No module named %r (only the capture worker is staged)" % name, name=name)
        if type(spec.loader) is SourceFileLoader:
            spec.loader = _StagedLoader(spec.loader.name, spec.loader.path)
        return spec
sys.meta_path.insert(0, _OnlyStaged)
"""
)

#: The cold worker: argv = [stage, memory bytes (0: none), result fd, worker module, preload].
#: Applies the memory cap (soft RLIMIT_AS, before anything heavy is imported) and calls the
#: worker's ``main()``. A worker that cannot even be imported is reported on the result fd as an
#: ``internal`` error. ``preload`` (comma-separated, maybe empty) names installed modules to
#: import before the request is read (an early worker, capture/launch/early.py): a failure there is left
#: to the capture to report, and ``main(early=...)`` hears how long they took.
BOOTSTRAP = (
    PROLOGUE
    + """\
memory, fd, module = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
preload = [name for name in sys.argv[4].split(",") if name] if len(sys.argv) > 4 else []
del sys.argv[1:]
import faulthandler, signal
faulthandler.enable()  # a segfault in user code prints the Python stack (with the user's line) on stderr
faulthandler.register(signal.SIGUSR1, all_threads=True)  # at the deadline: where it is (supervise.py)
try:  # orphans of user code come back to this leader; whichever way it exits, it kills them first
    from jaxlsp.worker.containment import kill_orphans, set_subreaper
    if set_subreaper():
        def _exit(code, _leader=os.getpid(), _exit=os._exit):
            if os.getpid() == _leader:
                kill_orphans(set())
            _exit(code)
        os._exit = _exit
except Exception:
    pass
if memory > 0:
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (memory if hard == resource.RLIM_INFINITY else min(memory, hard), hard))
    except (ImportError, ValueError, OSError):
        pass
try:
    import importlib
    main = importlib.import_module(module).main
except BaseException as exc:
    import json, traceback
    message = "The capture worker could not be loaded: %s: %s" % (type(exc).__name__, exc)
    error = {"kind": "internal", "message": message, "traceback": traceback.format_exc()}
    os.write(fd, json.dumps({"ok": False, "error": error}).encode())
    sys.exit(70)
if preload:
    import time
    started = time.perf_counter()
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    main(early=time.perf_counter() - started)
else:
    main()
"""
)

#: The warm spare: argv = [stage, JSON config]; see :mod:`jaxlsp.worker.process.forkserver`.
SPARE_BOOTSTRAP = PROLOGUE + "from jaxlsp.worker.process.forkserver import serve\nserve()\n"


class RefusedError(Exception):
    """The interpreter or platform cannot run the worker; the message says why, for the user."""


@dataclass(frozen=True)
class Stage:
    """A staged copy of the worker: ``path`` goes first on the worker's ``sys.path``."""

    path: Path
    digest: str
    worker_module: str = WORKER_MODULE


def check_platform() -> None:
    """Refuse platforms without POSIX process groups, fork and resource limits."""
    if sys.platform == "win32":
        raise RefusedError(
            "Tracing is not supported on Windows yet: the capture worker needs POSIX process groups, "
            "fork and resource limits (Linux and macOS are supported)."
        )


def _sources(package_root: Path) -> dict[str, Path]:
    """Relative path (posix) -> file, of everything the worker may import from us."""
    files = {
        "jaxlsp/__init__.py": package_root / "__init__.py",
        "jaxlsp/capture/__init__.py": package_root / "capture" / "__init__.py",
    }
    for sub in map(Path, STAGED_PACKAGES):
        base = package_root / sub
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            for name in filenames:
                if name.endswith(STAGED_SUFFIXES) and not name.startswith("."):
                    path = Path(dirpath) / name
                    files["jaxlsp/" + path.relative_to(package_root).as_posix()] = path
    return files


def default_cache_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "jaxlsp"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "jaxlsp"


def _private_dir(path: Path) -> bool:
    """Create ``path`` (mode 0700) if needed; True when it is ours and writable only by us."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError:
        return False
    import stat

    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


_lock = threading.Lock()
_memo: dict[tuple[object, ...], Stage] = {}
_fallback_root: Path | None = None


def stage(
    *,
    extra: Mapping[str, Path] | None = None,
    worker_module: str = WORKER_MODULE,
    cache_dir: Path | None = None,
    package_root: Path | None = None,
) -> Stage:
    """Stage the worker (plus ``extra`` files, ``relative path -> file``, for tests) and return it.

    Cheap when nothing changed: the file list's sizes and mtimes are remembered, so an unchanged
    tree costs one directory walk and a few ``stat`` calls.
    """
    check_platform()
    root = package_root or Path(jaxlsp.__file__).resolve().parent
    files = dict(_sources(root))
    files.update(extra or {})
    stats = tuple(sorted((rel, st.st_size, st.st_mtime_ns) for rel, st in ((r, p.stat()) for r, p in files.items())))
    key = (str(cache_dir), str(root), worker_module, stats)
    with _lock:
        cached = _memo.get(key)
        if cached is not None and cached.path.is_dir():
            return cached
        contents = {rel: files[rel].read_bytes() for rel in sorted(files)}
        digest = hashlib.sha256()
        for rel, data in contents.items():
            digest.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
        name = digest.hexdigest()[:24]
        made = Stage(_materialise(name, contents, cache_dir), name, worker_module)
        _memo[key] = made
        return made


def _materialise(name: str, contents: Mapping[str, bytes], cache_dir: Path | None) -> Path:
    global _fallback_root
    base = cache_dir if cache_dir is not None else default_cache_dir()
    if not _private_dir(base):
        if _fallback_root is None or not _fallback_root.is_dir():
            _fallback_root = Path(tempfile.mkdtemp(prefix="jaxlsp-stage-"))
        base = _fallback_root
    base = base / "stage"
    if not _private_dir(base):
        base = Path(tempfile.mkdtemp(prefix="jaxlsp-stage-"))
    final = base / name
    if final.is_dir() and _intact(final, contents):
        with contextlib.suppress(OSError):
            os.utime(final)  # in use: keeps it from being swept
        return final
    _sweep(base, keep=name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=base))
    for rel, data in contents.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    try:
        os.rename(tmp, final)
    except OSError:  # another server staged the same tree meanwhile, or a damaged copy is in the way
        if final.is_dir() and _intact(final, contents):
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    return final


def _sweep(base: Path, keep: str) -> None:
    """Remove stages unused for :data:`STALE_AFTER` (another server may still use a recent one)."""
    cutoff = time.time() - STALE_AFTER
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            with contextlib.suppress(OSError):
                if entry.name != keep and entry.is_dir(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)


def _intact(folder: Path, contents: Mapping[str, bytes]) -> bool:
    try:
        return all((folder / rel).read_bytes() == data for rel, data in contents.items())
    except OSError:
        return False


def worker_command(
    python: str, staged: Stage, *, memory_bytes: int | None, result_fd: int, preload: Sequence[str] = ()
) -> list[str]:
    """The argv that runs the worker's ``main()`` in ``python`` (``preload``: BOOTSTRAP's)."""
    argv = [
        python,
        "-I",
        "-B",
        "-c",
        BOOTSTRAP,
        str(staged.path),
        str(memory_bytes or 0),
        str(result_fd),
        staged.worker_module,
    ]
    return [*argv, ",".join(preload)] if preload else argv


# -- the interpreter ---------------------------------------------------------------------------------

_PROBE = "import sys; sys.stdout.write('%d %d %s' % (sys.version_info[0], sys.version_info[1], sys.platform))"
_checked: dict[tuple[str, int, int], tuple[int, int]] = {}


def resolve_interpreter(python: str) -> str:
    """An absolute path for ``python`` (a bare name is looked up on ``PATH``), symlinks kept."""
    expanded = os.path.expanduser(python)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        return os.path.abspath(expanded)
    found = shutil.which(expanded)
    if found is None:
        raise RefusedError(f"The Python interpreter {python!r} was not found on PATH.")
    return os.path.abspath(found)


def check_interpreter(python: str, *, timeout: float = 30) -> tuple[int, int]:
    """The interpreter's ``(major, minor)``; :class:`RefusedError` when it cannot run the worker.

    The answer is remembered per path, size and mtime. The path is used as given, never resolved:
    a virtual environment's ``bin/python`` is often a symlink to the base interpreter and only
    the link's location makes it the environment's.
    """
    check_platform()
    path = resolve_interpreter(python)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise RefusedError(f"The Python interpreter {python!r} was not found ({exc.strerror}).") from None
    if not os.access(path, os.X_OK) or not os.path.isfile(path):
        raise RefusedError(f"{python!r} is not an executable Python interpreter.")
    key = (path, st.st_size, st.st_mtime_ns)
    if key in _checked:
        return _checked[key]
    try:
        # -E -s rather than -I: an old interpreter must answer too, so that it can be named.
        done = subprocess.run(
            [path, "-E", "-s", "-c", _PROBE],
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
            env=allowed_env.base_environment(),
            check=False,
        )
        major, minor, _ = done.stdout.decode(errors="replace").split(" ", 2)
        version = (int(major), int(minor))
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise RefusedError(f"{python!r} did not run as a Python interpreter ({exc}).") from None
    if version < MIN_PYTHON:
        raise RefusedError(
            f"The interpreter {python!r} is Python {version[0]}.{version[1]}; tracing needs Python "
            f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer (with jax installed). Choose another interpreter."
        )
    _checked[key] = version
    return version
