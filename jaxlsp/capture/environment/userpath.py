"""Where the user's own Python finds JAX: ``PYTHONPATH`` and the user site, for an isolated worker.

Every process in the user's interpreter starts with ``-I`` (:mod:`.staging`), which keeps
``PYTHONPATH``, the user site and the current folder off ``sys.path``. That isolation matters for
the current folder (the workspace) and for the server's own packages, but JAX often lives exactly
where ``-I`` hides it: on a TPU VM image's or a cluster module's ``PYTHONPATH``, or in the user
site after ``pip install --user "jax[tpu]"``. So the client computes the part of the user's own
path that the interpreter would use when the user runs it, and passes it in one variable
(:data:`ENV_NAME`, JSON); :data:`APPLY` (run by the worker's bootstrap and the environment probe)
puts it where Python would: ``PYTHONPATH`` entries after the stage and before the standard
library, the user site (with its ``.pth`` files) before site-packages, and only when that
interpreter enables a user site (not in a venv without system site packages, not under
``PYTHONNOUSERSITE``).

Kept off, whatever ``PYTHONPATH`` says (docs/security.md): relative and empty entries (they name
the current folder, a workspace's), entries inside a workspace folder this process captures in
(:func:`add_workspace`; the worker drops them again against its request's root), the folder
jaxlsp's own package is imported from, and the server's site-packages and the folders its own
dependencies (pygls, lsprotocol, libcst, tomlkit, cattrs) were imported from. ``PYTHONPATH`` is
read from this process's environment (the CLI's shell; the environment the editor started the
server in), never from a workspace's files or settings.
"""

from __future__ import annotations

import json
import os
import site
import sys
import sysconfig
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

import jaxlsp

ENV_NAME = "JAXLSP_USER_PATH"
SERVER_PACKAGES = ("pygls", "lsprotocol", "libcst", "tomlkit", "cattrs", "jaxlsp")

_lock = threading.Lock()
_workspaces: set[str] = set()


def add_workspace(folder: str | os.PathLike[str]) -> None:
    """Remember a workspace folder: no ``PYTHONPATH`` entry inside it reaches a capture."""
    with _lock:
        _workspaces.add(os.path.realpath(folder))


def workspaces() -> list[str]:
    with _lock:
        return sorted(_workspaces)


def _inside(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def server_folders() -> set[str]:
    """Real paths of the folders the server's own code comes from (never on the capture path)."""
    found = {os.path.realpath(Path(jaxlsp.__file__).resolve().parent.parent)}
    with_site = [*getattr(site, "getsitepackages", list)(), *(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]
    found.update(os.path.realpath(p) for p in with_site)
    for name in SERVER_PACKAGES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if isinstance(path, str):  # a package's folder's parent: the sys.path entry it came from
            found.add(os.path.realpath(Path(path).parent.parent))
    return found


def entries(environ: Mapping[str, str] | None = None, folders: Iterable[str] | None = None) -> list[str]:
    """The ``PYTHONPATH`` entries of ``environ`` (default: this process's) a capture may use."""
    source = os.environ if environ is None else environ
    excluded = server_folders()
    spaces = [os.path.realpath(f) for f in (workspaces() if folders is None else folders)]
    out: list[str] = []
    for entry in source.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue  # "" and relative entries are the current folder's: a workspace's
        real = os.path.realpath(entry)
        if real in excluded or any(_inside(real, w) for w in spaces):
            continue
        out.append(os.path.normpath(entry))
    return list(dict.fromkeys(out))


def environment(environ: Mapping[str, str] | None = None, folders: Iterable[str] | None = None) -> dict[str, str]:
    """``{ENV_NAME: JSON}`` for a process in the user's interpreter: the entries, whether a user
    site may be added, and ``PYTHONUSERBASE`` when the user set one (outside any workspace)."""
    source = os.environ if environ is None else environ
    config: dict[str, object] = {"path": entries(source, folders), "userSite": not source.get("PYTHONNOUSERSITE")}
    base = source.get("PYTHONUSERBASE")
    spaces = [os.path.realpath(f) for f in (workspaces() if folders is None else folders)]
    if base and os.path.isabs(base) and not any(_inside(os.path.realpath(base), w) for w in spaces):
        config["userBase"] = base
    return {ENV_NAME: json.dumps(config)}


#: Applies :data:`ENV_NAME` in the user's interpreter (any Python >= 3.8, stdlib only): defines and
#: calls ``_jaxlsp_user_path(start)``, ``start`` being where ``PYTHONPATH`` entries go (after the
#: stage). Never fails the process: a broken value leaves the isolated path as it was.
APPLY = """\
def _jaxlsp_user_path(start):
    import json, os, sys
    try:
        config = json.loads(os.environ.get("JAXLSP_USER_PATH") or "{}")
    except ValueError:
        return
    path = [p for p in config.get("path") or [] if isinstance(p, str) and p not in sys.path]
    sys.path[start:start] = path
    if not config.get("userSite"):
        return
    if hasattr(os, "getuid") and os.getuid() != os.geteuid():
        return  # site.py's rule: no user site for a set-uid process
    if sys.prefix != sys.base_prefix:  # a venv: a user site only with its system site packages
        system = "false"
        try:
            with open(os.path.join(sys.prefix, "pyvenv.cfg"), encoding="utf-8") as f:
                for line in f:
                    key, sep, value = line.partition("=")
                    if sep and key.strip().lower() == "include-system-site-packages":
                        system = value.strip().lower()
        except OSError:
            return
        if system != "true":
            return
    import site, sysconfig
    try:
        base = config.get("userBase") or site.getuserbase()
        try:
            scheme = sysconfig.get_preferred_scheme("user")
        except AttributeError:
            scheme = os.name + "_user"
        user_site = sysconfig.get_path("purelib", scheme, vars={"userbase": base})
    except Exception:
        return
    if not user_site or not os.path.isdir(user_site) or user_site in sys.path:
        return
    before = len(sys.path)
    site.addsitedir(user_site)  # with its .pth files, as site.py would
    added = sys.path[before:]
    del sys.path[before:]
    system_sites = set(site.getsitepackages()) if hasattr(site, "getsitepackages") else set()
    at = next((i for i, p in enumerate(sys.path) if p in system_sites), len(sys.path))
    sys.path[at:at] = added  # before site-packages, as site.py orders them
"""
