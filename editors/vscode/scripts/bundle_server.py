"""Put the server inside the VS Code extension, as the Python tools extensions (Ruff, Pylint, Mypy)
do: jaxlsp and its dependencies go to ``editors/vscode/bundled/libs``, which the ``.vsix`` carries
and ``bundled/tool/server.py`` puts first on ``sys.path``. The user installs nothing but the
extension; the server runs in a Python >= 3.11 found outside the workspace, and captures still run
in the workspace's own interpreter (which needs only JAX).

    python editors/vscode/scripts/bundle_server.py [--target linux-x64] [--cache build/vscode-wheels]

What goes in:
- jaxlsp itself, built as a wheel from a copy of this working tree (pyproject.toml, README.md,
  jaxlsp/): setuptools' in-tree ``build/lib`` keeps modules deleted since, a copy never does;
- the pure-Python dependencies at the versions the tests run (constraints.txt): pygls,
  lsprotocol, cattrs, attrs, tomlkit, typing_extensions;
- libcst, which is compiled: one package folder with the native module of every CPython the server
  may meet (3.11 to 3.14) side by side (``native.cpython-3XX-<platform>.so``), each Python loads
  its own; its ``tests`` folders are left out, and so is PyYAML (only libcst's own command line
  tool imports it).

A ``--target`` is a VS Code platform (``vsce package --target``); wheels for another platform are
downloaded with pip's ``--platform``, so every target is built on one Linux machine. The
registry is the only network used. ``bundled/libs/BUNDLE.json`` records the target, the Pythons
and the versions (the extension and the tests read it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXTENSION = ROOT / "editors" / "vscode"
OUT = EXTENSION / "bundled" / "libs"

# VS Code's platform names -> pip's platform tags for libcst's wheels (several: pip matches exactly).
# No darwin-x64: libcst 1.9.0 publishes no wheel for Intel macOS (checked against the index).
TARGETS: dict[str, tuple[str, ...]] = {
    "linux-x64": ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"),
    "linux-arm64": ("manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"),
    "alpine-x64": ("musllinux_1_2_x86_64",),
    "darwin-arm64": ("macosx_11_0_arm64",),
    "win32-x64": ("win_amd64",),
}
PYTHONS = ("3.11", "3.12", "3.13", "3.14")
PURE = ("pygls", "lsprotocol", "cattrs", "attrs", "tomlkit", "typing_extensions")
COMPILED = "libcst"


def pins() -> dict[str, str]:
    """``name -> version`` from constraints.txt (names normalized to underscores)."""
    out: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if match:
            out[match.group(1).lower().replace("-", "_")] = match.group(2)
    return out


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


def unpack(wheel: Path, out: Path, keep: str | None = None) -> None:
    """A wheel's files into ``out`` (only names matching ``keep`` when given), never tests."""
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if "/tests/" in name or name.endswith("/"):
                continue
            if keep is not None and not re.fullmatch(keep, name):
                continue
            archive.extract(name, out)


def jaxlsp_wheel(folder: Path) -> Path:
    source = folder / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "jaxlsp", source / "jaxlsp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip("wheel", "--no-deps", "-w", str(folder), str(source))
    (wheel,) = folder.glob("jaxlsp-*.whl")
    return wheel


def download(name: str, version: str, dest: Path, *extra: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    pattern = f"{name}-{version}-*.whl"
    before = set(dest.glob(pattern))
    pip("download", "--no-deps", "--only-binary=:all:", "-d", str(dest), *extra, f"{name}=={version}")
    found = sorted(set(dest.glob(pattern)) - before) or sorted(before)
    if not found:
        raise SystemExit(f"bundle_server: pip found no wheel {pattern} ({' '.join(extra)})")
    return found[-1]


def compiled_wheel(name: str, version: str, target: str, python: str, cache: Path) -> Path:
    tag = python.replace(".", "")
    dest = cache / target / f"cp{tag}"
    platforms = [arg for platform in TARGETS[target] for arg in ("--platform", platform)]
    existing = [w for w in dest.glob(f"{name}-{version}-cp{tag}-cp{tag}-*.whl")] if dest.is_dir() else []
    if existing:
        return existing[0]
    abi = ("--python-version", python, "--implementation", "cp", "--abi", f"cp{tag}")
    return download(name, version, dest, *platforms, *abi)


def bundle(target: str, cache: Path, out: Path = OUT) -> dict[str, object]:
    versions = pins()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        own = jaxlsp_wheel(Path(tmp))
        unpack(own, out)
    for name in PURE:
        unpack(download(name, versions[name], cache / "pure"), out)
    pythons: list[str] = []
    for index, python in enumerate(PYTHONS):
        wheel = compiled_wheel(COMPILED, versions[COMPILED], target, python, cache)
        # The first wheel gives the package; the others only their native module (the Python
        # sources are the same in every wheel of one version).
        unpack(wheel, out, None if index == 0 else rf"{COMPILED}/native\..*")
        pythons.append(python)
    for cached in out.rglob("__pycache__"):
        shutil.rmtree(cached)
    record: dict[str, object] = {
        "target": target,
        "pythons": pythons,
        "packages": {"jaxlsp": own.name.split("-")[1], **{name: versions[name] for name in (*PURE, COMPILED)}},
    }
    (out / "BUNDLE.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--target", default="linux-x64", choices=sorted(TARGETS))
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "vscode-wheels")
    args = parser.parse_args(argv)
    record = bundle(args.target, args.cache)
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    pythons = ", ".join(PYTHONS)
    print(f"bundled {record['packages']} for {args.target} (CPython {pythons}): {size / 1e6:.1f} MB in {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
