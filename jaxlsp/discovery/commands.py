"""How the workspace says to run a script: its command line in the docs beside it (read, never run).

Flax's examples, like most absl and argparse programs, need flags to run at all
(``python main.py --workdir=/tmp/mnist --config=configs/default.py``), and their READMEs say which.
:func:`documented_command` finds such a line for a script in the README, Markdown, reStructuredText
and shell files of the script's folder and of each folder above it up to the project root, and
returns its arguments, so that a run learning a target's inputs runs the script as its README
does. ``$HOME`` and ``~`` are expanded as a shell would; a command with other shell syntax the
arguments would need a shell for (``$VAR``, backquotes, globs) is not taken.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

MAX_DOCS = 40  # files read per folder
MAX_BYTES = 256 * 1024  # a larger doc is not read
_DOC = re.compile(r"(?i)^(readme.*|.*\.(md|rst|txt|sh)|makefile)$")
_PYTHON = re.compile(r"(?:^|[\s`'\"(;&|>$])python(?:3(?:\.\d+)?)?\s+(?:-u\s+)?(\S+\.py)\b([^\n]*)")
_STOP = re.compile(r"\s(?:\||&&|;|>|<|2>|#)")  # the command ends at a pipe, a redirection, a comment
_SHELL = re.compile(r"[$`*?{}~]")
_HOME = re.compile(r"(^|[\s=])(?:\$HOME|\$\{HOME\}|~)(?=/|\s|$)")


@dataclass(frozen=True)
class Command:
    """A documented command line for a script: its arguments and where it is written."""

    argv: tuple[str, ...]
    doc: Path
    line: int  # 1-based

    def where(self, root: Path) -> str:
        try:
            shown = self.doc.relative_to(root).as_posix()
        except ValueError:
            shown = str(self.doc)
        return f"{shown}:{self.line}"


def documented_command(script: Path, root: Path) -> Command | None:
    """The first command line in the docs from ``script``'s folder up to ``root`` that runs
    ``script`` with arguments; None if there is none."""
    script = script.resolve()
    root = root.resolve()
    folder = script.parent
    while True:
        for doc in _docs(folder):
            found = _in_doc(doc, script, root, _stamp(doc))
            if found is not None:
                return found
        if folder == root or root not in folder.parents:
            return None
        folder = folder.parent


def _docs(folder: Path) -> list[Path]:
    try:
        names = sorted(p for p in folder.iterdir() if _DOC.match(p.name) and p.is_file())
    except OSError:
        return []
    readmes = [p for p in names if p.name.lower().startswith("readme")]
    return (readmes + [p for p in names if p not in readmes])[:MAX_DOCS]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _in_doc(doc: Path, script: Path, root: Path, stamp: tuple[int, int]) -> Command | None:
    if not 0 < stamp[1] <= MAX_BYTES:
        return None
    try:
        text = doc.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    text = re.sub(r"\\\n\s*", " ", text)  # a shell line continued with a backslash
    lines = text.split("\n")
    for n, line in enumerate(lines):
        for found in _PYTHON.finditer(line):
            path, rest = found.group(1), found.group(2)
            if not _names(path, doc.parent, script, root):
                continue
            stop = _STOP.search(" " + rest)
            rest = rest[: stop.start() - 1] if stop else rest
            rest = rest.strip().rstrip("`").strip()
            rest = _HOME.sub(lambda m: m.group(1) + str(Path.home()), rest)  # as a shell expands it
            if not rest or _SHELL.search(rest):
                continue
            try:
                argv = tuple(shlex.split(rest))
            except ValueError:
                continue
            if argv:
                return Command(argv, doc, n + 1)
    return None


def _names(written: str, folder: Path, script: Path, root: Path) -> bool:
    """Whether ``written`` (a path in a doc of ``folder``) is ``script``: relative to the doc's
    folder, to the root or to the script's own folder (READMEs say ``python main.py`` meaning
    the one beside them)."""
    written = written.strip("`'\"")
    if Path(written).name != script.name:
        return False
    for base in (folder, root, script.parent):
        try:
            if (base / written).resolve() == script:
                return True
        except OSError:
            continue
    return False


_POSITIONAL = re.compile(r"""\.add_argument\(\s*['"]([A-Za-z_][\w]*)['"]\s*(?P<rest>[,)][^\n]*)""")
_OPTIONAL_POSITIONAL = re.compile(r"""nargs\s*=\s*['"][?*]['"]|default\s*=""")
# Subcommands made required, in the call or after it (``subparsers.required = True``).
_SUBCOMMAND = re.compile(
    r"""add_subparsers\([^)]*required\s*=\s*True"""
    r"""|add_subparsers\(.*\n(?:.*\n){0,5}?\s*\w+\.required\s*=\s*True"""
)
_REQUIRED = re.compile(
    r"""\.add_argument\(\s*['"](-[-\w]+)['"][^\n]*required\s*=\s*True"""
    r"""|mark_flags?_as_required\(\s*\[?\s*['"]([\w-]+)['"]"""
    r"""|\bsys\.argv\[\s*(1)\s*\]"""
)


def needs_arguments(path: Path) -> str | None:
    """What ``path`` requires on its command line, when it cannot run without arguments (an
    argparse positional or ``required=True`` option, an absl flag marked required, a read of
    ``sys.argv[1]``, a required subcommand), read from its source: ``size``, ``--config``, ``a
    command``; else None. Run with no
    arguments such a script exits with its usage (status 2) and never reaches a target."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES]
    except OSError:
        return None
    names: list[str] = []
    for found in _POSITIONAL.finditer(text):
        if _OPTIONAL_POSITIONAL.search(found.group("rest")) is None:
            names.append(found.group(1))
    for found in _REQUIRED.finditer(text):
        option, flag, _ = found.groups()
        names.append(option or flag or "sys.argv[1]")
    if _SUBCOMMAND.search(text) is not None:  # bonsai's ``python -m bonsai`` needs ``ls`` or ``run``
        names.append("a command")
    return ", ".join(dict.fromkeys(names)) or None
