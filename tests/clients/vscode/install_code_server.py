"""Install code-server (real VS Code in the browser) from the npm registry, for the VS Code tests.

    python tests/clients/vscode/install_code_server.py VERSION TARGET

installs ``code-server@VERSION`` into ``TARGET/node_modules`` once; a later run finds the stamp
``TARGET/.installed`` and returns at once (``make test`` calls it every time). What it takes, on
Node 20 (4.100.3 is the newest code-server that runs on it), as root, with no network but the
package registries:

- its postinstall builds native modules (node-pty, kerberos, spdlog, ...): a C++ tool chain
  (``build-essential``), ``libkrb5-dev``, and Node's headers (``npm_config_nodedir=/usr`` when
  the distribution ships them in ``/usr/include/node``: node-gyp would download them otherwise);
- npm refuses lifecycle scripts as root unless ``npm_config_unsafe_perm=true``;
- ``@vscode/ripgrep`` downloads its binary from GitHub (unreachable here): its download cache
  (``$TMPDIR/vscode-ripgrep-cache-<package version>/ripgrep-<tag>-<target>.tar.gz``) is filled
  beforehand with Debian's ``rg`` (ripgrep 13, the same major version as its tag).

Exit status 0 when installed; 1 with one paragraph saying what is missing.
"""

from __future__ import annotations

import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

RIPGREP_TARGETS = {"x86_64": "x86_64-unknown-linux-musl", "aarch64": "aarch64-unknown-linux-musl"}


def fail(message: str) -> None:
    print(f"install_code_server: {message}", file=sys.stderr)
    raise SystemExit(1)


def npm_env(tmpdir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "npm_config_yes": "true",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        "npm_config_update_notifier": "false",
        "npm_config_loglevel": "error",
    }
    if os.geteuid() == 0:
        env["npm_config_unsafe_perm"] = "true"
    if Path("/usr/include/node/node.h").is_file():
        env["npm_config_nodedir"] = "/usr"
    return env


def packed(spec: str, into: Path, env: dict[str, str]) -> tarfile.TarFile:
    """``npm pack SPEC`` (fetched through npm's cache) opened as a tar file."""
    out = subprocess.run(
        ["npm", "pack", "--json", spec], cwd=into, env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        fail(f"npm pack {spec} failed: {out.stderr.strip()[-800:]}")
    name = json.loads(out.stdout)[0]["filename"]
    return tarfile.open(into / name)


def member_text(tar: tarfile.TarFile, name: str) -> str | None:
    try:
        handle = tar.extractfile(name)
    except KeyError:
        return None
    return handle.read().decode() if handle else None


def ripgrep_versions(tar: tarfile.TarFile) -> set[str]:
    """The ``@vscode/ripgrep`` versions code-server's shrinkwraps pin."""
    found = set()
    for lock in ("package/lib/vscode/npm-shrinkwrap.json", "package/lib/vscode/extensions/npm-shrinkwrap.json"):
        text = member_text(tar, lock)
        if text is None:
            continue
        packages = json.loads(text).get("packages", {})
        for path, meta in packages.items():
            if path.endswith("node_modules/@vscode/ripgrep") and "version" in meta:
                found.add(meta["version"])
    return found


def seed_ripgrep(version: str, tmpdir: Path, work: Path, env: dict[str, str]) -> None:
    """Put Debian's ``rg`` where ``@vscode/ripgrep@version``'s postinstall looks before downloading."""
    rg = shutil.which("rg")
    if rg is None:
        fail("ripgrep (rg) is not installed: apt-get install ripgrep (make system-deps does)")
    target = RIPGREP_TARGETS.get(platform.machine())
    if target is None:
        fail(f"no ripgrep target known for {platform.machine()}")
    with packed(f"@vscode/ripgrep@{version}", work, env) as tar:
        script = member_text(tar, "package/lib/postinstall.js") or ""
    tag = re.search(r"const VERSION = '([^']+)'", script)
    if tag is None:
        fail(f"@vscode/ripgrep@{version}: no VERSION in lib/postinstall.js")
    assert tag is not None
    cache = tmpdir / f"vscode-ripgrep-cache-{version}"
    cache.mkdir(parents=True, exist_ok=True)
    data = Path(rg).read_bytes()
    with tarfile.open(cache / f"ripgrep-{tag.group(1)}-{target}.tar.gz", "w:gz") as out:
        info = tarfile.TarInfo("rg")
        info.size = len(data)
        info.mode = 0o755
        out.addfile(info, io.BytesIO(data))


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: install_code_server.py VERSION TARGET")
    version, target = sys.argv[1], Path(sys.argv[2]).resolve()
    stamp = target / ".installed"
    entry = target / "node_modules" / "code-server" / "out" / "node" / "entry.js"
    if stamp.is_file() and stamp.read_text().strip() == version and entry.is_file():
        return
    for tool, package in (("npm", "nodejs/npm"), ("g++", "build-essential"), ("make", "make")):
        if shutil.which(tool) is None:
            fail(f"{tool} is missing (Debian {package})")
    if not Path("/usr/include/krb5.h").is_file() and shutil.which("krb5-config") is None:
        fail("the Kerberos headers are missing: apt-get install libkrb5-dev (code-server builds kerberos.node)")
    node_major = subprocess.run(["node", "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True)
    if node_major.stdout.strip() != "20":
        fail(f"code-server {version} needs Node 20, found {node_major.stdout.strip() or 'none'}")
    started = time.monotonic()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="code-server-install-") as scratch:
        tmpdir = Path(scratch) / "tmp"
        work = Path(scratch) / "work"
        tmpdir.mkdir()
        work.mkdir()
        env = npm_env(tmpdir)
        with packed(f"code-server@{version}", work, env) as tar:
            versions = ripgrep_versions(tar)
        if not versions:
            fail(f"code-server@{version} pins no @vscode/ripgrep: this installer does not know it")
        for rg_version in sorted(versions):
            seed_ripgrep(rg_version, tmpdir, work, env)
        (target / "package.json").write_text(json.dumps({"name": "jaxlsp-code-server", "private": True}))
        out = subprocess.run(
            ["npm", "install", "--no-save", "--omit=dev", f"code-server@{version}"],
            cwd=target,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0 or not entry.is_file():
            (target / "install.log").write_text(out.stdout + out.stderr)
            fail(
                f"npm install code-server@{version} failed (exit {out.returncode}); the end of its log "
                f"({target / 'install.log'}):\n{(out.stdout + out.stderr)[-2500:]}"
            )
    stamp.write_text(f"{version}\n")
    print(f"installed code-server {version} in {target} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
