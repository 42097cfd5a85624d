"""Freshness audit (issue 45): what the server shows as fresh is what a cold ``jaxlsp trace`` of
the same text gives, after every kind of edit that reuse could miss.

A scripted series of edits on Linen, NNX and Equinox targets (:func:`series`: 36 by default,
twelve kinds on each framework): constructor reads of a file, a directory and an environment
variable; a module in a folder beside the workspace (``sys.path.insert``); the recipe
(``jaxlsp.toml``); an installed package changed on disk (in the recipe's own interpreter, a venv
outside the workspace); a library with module-level state; comment, blank-line and formatting
edits; an edit inside the traced function and one outside it. One ``jaxlsp serve`` over stdio,
the folder trusted, live shapes on. After each edit the changed files are reported as an editor
would (``didChange`` + ``didSave`` for a document, ``workspace/didChangeWatchedFiles`` for a
Python file changed on disk) and the target's file is saved; once the live queue is quiet:

- **live**: the target's ``jaxlsp/liveStatus`` and a hover in its body. When the status is
  ``fresh`` and the hover does not say **stale**, its newest graph is *shown as fresh*; that
  graph (``jaxlsp/export``) is compared with the cold one;
- **explicit**: ``jaxlsp/trace`` (clicking the lens), its graph compared the same way;
- **cold**: ``python -m jaxlsp trace FILE::NAME --profile P -o cold.json`` in a fresh process
  with the server's environment.

Two graphs agree when ``jaxlsp diff`` finds them the same (:func:`jaxlsp.graph.diff.diff`: every
node's types and params) and their inputs' and outputs' shapes are equal. A live or explicit
graph that differs from the cold one is a **mismatch**; the figure is 0 mismatches. Each
re-trace is counted as *reused* when the server's log line for it (``live NAME fresh in ...``,
``trace NAME traced in ...``, jaxlsp/capture/launch/phases.py) names something it took from an earlier
trace (a moved graph, a held init) and as *rebuilt* otherwise; the report lists both per kind.

``--quick``: the kinds :data:`QUICK` on the Linen and NNX targets. ``--kinds A,B``: only those.
Exit status 1 when any mismatch is found. tests/live/test_freshness_audit.py runs a small series
of the kinds that already agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

from server_memory import Peer  # noqa: E402

FRAMEWORKS = ("linen", "nnx", "eqx")
#: each kind's target reads one thing in its constructor (``base``: a constant)
READS = {
    "base": "WIDTH",
    "file": 'int((HERE / "data" / "{fw}_width.txt").read_text())',
    "dir": 'len(os.listdir(HERE / "classes_{fw}"))',
    "env": 'int(os.environ.get("AUDIT_WIDTH", "3"))',
    "sibling": "helper_{fw}.WIDTH",
    "package": "auditpkg_{fw}.WIDTH",
    "state": "auditstate_{fw}.width()",
}
IMPORTS = {
    "sibling": 'sys.path.insert(0, str(HERE.parent / "Hlib"))\nimport helper_{fw}  # noqa: E402\n',
    "package": "import auditpkg_{fw}\n",
    "state": "import auditstate_{fw}\n",
}
#: kinds whose edit is of the base target's own text
CODE_KINDS = ("comment", "blank-line", "formatting", "inside", "outside", "config")
KINDS = (*CODE_KINDS, "file", "dir", "env", "sibling", "package", "state")
#: what ``--quick`` runs
QUICK = ("comment", "formatting", "inside", "outside", "file", "config")
SERVER_ENV = {"AUDIT_WIDTH": "6"}  # the server's (and the cold trace's) environment adds this

HEADER = '''"""An audited {fw} target: its width is {read}."""

import json  # noqa: F401
import os  # noqa: F401
import sys  # noqa: F401
from pathlib import Path

import jax
import jax.numpy as jnp
{framework}
HERE = Path(__file__).resolve().parent
{imports}
WIDTH = 5
'''
BODIES = {
    "linen": (
        "import flax.linen as nn\n",
        """

class {cls}(nn.Module):
    def setup(self):
        self.dense = nn.Dense({read})

    def __call__(self, x):
        h = self.dense(x)
        return jnp.tanh(h) * 2.0
""",
    ),
    "nnx": (
        "from flax import nnx\n",
        """

class {cls}(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.dense = nnx.Linear(4, {read}, rngs=rngs)

    def __call__(self, x):
        h = self.dense(x)
        return jnp.tanh(h) * 2.0
""",
    ),
    "eqx": (
        "import equinox as eqx\n",
        """

class {cls}(eqx.Module):
    dense: eqx.nn.Linear

    def __init__(self, *, key: jax.Array):
        self.dense = eqx.nn.Linear(4, {read}, key=key)

    def __call__(self, x):
        h = jax.vmap(self.dense)(x)
        return jnp.tanh(h) * 2.0
""",
    ),
}
INPUT = {"linen": [2, 4], "nnx": [2, 4], "eqx": [2, 4]}


def cls_name(fw: str, read: str) -> str:
    return f"{fw.capitalize()}{read.capitalize()}"


def target_file(fw: str, read: str) -> str:
    return f"{fw}_{read}.py"


def source(fw: str, read: str) -> str:
    spelled = READS[read].format(fw=fw)
    framework, body = BODIES[fw]
    head = HEADER.format(fw=fw, read=spelled, framework=framework, imports=IMPORTS.get(read, "").format(fw=fw))
    return head + body.format(cls=cls_name(fw, read), read=spelled)


def profile(fw: str, read: str, shape: list[int] | None = None, env: bool = False) -> str:
    name = f"{fw}_{read}"
    extra = 'env = ["AUDIT_WIDTH"]\n' if env else ""
    return (
        f'\n[profiles.{name}]\ntarget = "{target_file(fw, read)}::{cls_name(fw, read)}"\n'
        f'python = "../venv/bin/python"\n{extra}'
        f'inputs.args = [{{ kind = "array", shape = {shape or INPUT[fw]} }}]\n'
    )


class Expiring(Protocol):
    """A wait's deadline (tests pass tests/deadlines.py's Deadline, which follows the machine)."""

    def expired(self) -> bool: ...


class Plain:
    """A deadline of ``seconds`` of wall time."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def run_within(args: list[str], seconds: float, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(args, timeout=seconds, **kwargs)


@dataclass
class Layout:
    """The audit's folders: the workspace, a folder beside it (``Hlib``), the recipe's venv with
    the installed packages, and the recipe's profiles (rewritten by the config and env edits)."""

    base: Path
    profiles: dict[str, str] = field(default_factory=dict)

    @property
    def ws(self) -> Path:
        return self.base / "ws"

    @property
    def hlib(self) -> Path:
        return self.base / "Hlib"

    @property
    def venv(self) -> Path:
        return self.base / "venv"

    @property
    def site(self) -> Path:
        return next((self.venv / "lib").glob("python3*/site-packages"))

    def recipe(self) -> str:
        return "version = 1\n" + "".join(self.profiles.values())

    def write_recipe(self) -> Path:
        path = self.ws / "jaxlsp.toml"
        path.write_text(self.recipe(), encoding="utf-8")
        return path


def build(base: Path, frameworks: tuple[str, ...] = FRAMEWORKS) -> Layout:
    """The workspace, the sibling folder and the venv (this interpreter's packages through a
    ``.pth``; the audited packages its own), every target and its profile."""
    layout = Layout(base)
    layout.ws.mkdir(parents=True)
    (layout.ws / "data").mkdir()
    layout.hlib.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(layout.venv)], check=True)
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (layout.site / "audit_parent.pth").write_text("\n".join(ours) + "\n", encoding="utf-8")
    for fw in frameworks:
        (layout.ws / "data" / f"{fw}_width.txt").write_text("3\n", encoding="utf-8")
        (layout.ws / f"classes_{fw}").mkdir()
        for name in ("a.txt", "b.txt"):
            (layout.ws / f"classes_{fw}" / name).write_text(name, encoding="utf-8")
        (layout.hlib / f"helper_{fw}.py").write_text("WIDTH = 16\n", encoding="utf-8")
        package = layout.site / f"auditpkg_{fw}"
        package.mkdir()
        (package / "__init__.py").write_text("WIDTH = 16\n", encoding="utf-8")
        # module-level state: the first call in a process gives 5, every later one 3
        (layout.site / f"auditstate_{fw}.py").write_text(
            "CALLS = [0]\n\n\ndef width():\n    CALLS[0] += 1\n    return 5 if CALLS[0] == 1 else 3\n",
            encoding="utf-8",
        )
        for read in READS:
            (layout.ws / target_file(fw, read)).write_text(source(fw, read), encoding="utf-8")
            layout.profiles[f"{fw}_{read}"] = profile(fw, read)
    layout.write_recipe()
    return layout


@dataclass
class Change:
    """What an edit changed: documents the editor saves (path -> new text), Python files changed
    on disk that a file watcher reports, and the target it audits."""

    saved: dict[Path, str] = field(default_factory=dict)
    watched: list[Path] = field(default_factory=list)


@dataclass
class Edit:
    kind: str
    fw: str
    read: str  # the target: fw_read.py::FwRead
    apply: Callable[[Layout], Change]

    @property
    def label(self) -> str:
        return f"{self.kind} ({cls_name(self.fw, self.read)})"


def _text_edit(fw: str, change: Callable[[str], str], read: str = "base") -> Callable[[Layout], Change]:
    def apply(layout: Layout) -> Change:
        path = layout.ws / target_file(fw, read)
        return Change(saved={path: change(path.read_text(encoding="utf-8"))})

    return apply


def _file_edit(fw: str) -> Callable[[Layout], Change]:
    def apply(layout: Layout) -> Change:
        path = layout.ws / "data" / f"{fw}_width.txt"
        return Change(saved={path: f"{int(path.read_text()) + 2}\n"})

    return apply


def _dir_edit(fw: str) -> Callable[[Layout], Change]:
    def apply(layout: Layout) -> Change:
        folder = layout.ws / f"classes_{fw}"
        (folder / f"c{len(list(folder.iterdir()))}.txt").write_text("new", encoding="utf-8")
        return Change()

    return apply


def _config_edit(fw: str, *, env: bool = False) -> Callable[[Layout], Change]:
    def apply(layout: Layout) -> Change:
        if env:
            layout.profiles[f"{fw}_env"] = profile(fw, "env", env=True)
        else:
            layout.profiles[f"{fw}_base"] = profile(fw, "base", [3, 4])
        return Change(saved={layout.ws / "jaxlsp.toml": layout.recipe()})

    return apply


def _outside_edit(fw: str, read: str) -> Callable[[Layout], Change]:
    """A Python file outside the workspace (beside it, or an installed package) changed on disk."""

    def apply(layout: Layout) -> Change:
        path = layout.hlib / f"helper_{fw}.py" if read == "sibling" else layout.site / f"auditpkg_{fw}" / "__init__.py"
        path.write_text("WIDTH = 32\n", encoding="utf-8")
        return Change(watched=[path])

    return apply


def _add_comment(text: str) -> str:
    return text.replace("    def __call__", "    # the forward pass (a comment)\n    def __call__", 1)


def _add_blank_lines(text: str) -> str:
    return text.replace("\nclass ", "\n\n\n# blank lines above\nclass ", 1)


def _reformat(text: str) -> str:
    return text.replace(
        "return jnp.tanh(h) * 2.0", "return (\n            jnp.tanh(h)\n            * 2.0\n        )", 1
    )


def _inside(text: str) -> str:
    first = next(line for line in text.splitlines(keepends=True) if line.strip().startswith("h = "))
    return text.replace(first, first + "        h = jnp.concatenate([h, h], axis=-1)\n", 1)


def _outside(text: str) -> str:
    return text.replace("WIDTH = 5\n", "WIDTH = 9\n", 1)


def _state(text: str) -> str:  # any edit that makes a capture: the library's state is what counts
    return text.replace("* 2.0", "* 3.0", 1)


def series(frameworks: tuple[str, ...] = FRAMEWORKS, kinds: tuple[str, ...] = KINDS) -> list[Edit]:
    """The scripted edits, each framework's in the same order of kinds."""
    makers: dict[str, Callable[[str], Edit]] = {
        "comment": lambda fw: Edit("comment", fw, "base", _text_edit(fw, _add_comment)),
        "blank-line": lambda fw: Edit("blank-line", fw, "base", _text_edit(fw, _add_blank_lines)),
        "formatting": lambda fw: Edit("formatting", fw, "base", _text_edit(fw, _reformat)),
        "inside": lambda fw: Edit("inside", fw, "base", _text_edit(fw, _inside)),
        "outside": lambda fw: Edit("outside", fw, "base", _text_edit(fw, _outside)),
        "config": lambda fw: Edit("config", fw, "base", _config_edit(fw)),
        "file": lambda fw: Edit("file", fw, "file", _file_edit(fw)),
        "dir": lambda fw: Edit("dir", fw, "dir", _dir_edit(fw)),
        "env": lambda fw: Edit("env", fw, "env", _config_edit(fw, env=True)),
        "sibling": lambda fw: Edit("sibling", fw, "sibling", _outside_edit(fw, "sibling")),
        "package": lambda fw: Edit("package", fw, "package", _outside_edit(fw, "package")),
        "state": lambda fw: Edit("state", fw, "state", _text_edit(fw, _state, "state")),
    }
    return [makers[kind](fw) for fw in frameworks for kind in kinds]


def _ports(graph: dict[str, Any]) -> list[tuple[str, list[Any], str]]:
    """Each input and output: its label, shape and dtype."""
    values = {v["id"]: v for v in graph["values"]}
    return [
        (str(port["label"]), list(values[port["value"]]["shape"]), str(values[port["value"]]["dtype"]))
        for side in ("inputs", "outputs")
        for port in graph[side]
    ]


def outputs(graph: dict[str, Any]) -> str:
    """The outputs' shapes, as hover shows them (``f32[2,5]``)."""
    shapes = [shape for label, shape, _ in _ports(graph) if label.startswith("out")]
    return ", ".join("[" + ",".join(str(d) for d in s) + "]" for s in shapes)


@dataclass
class Shot:
    """A graph file read: the graph (what ``jaxlsp diff`` compares) and its expanded JSON."""

    graph: Any
    data: dict[str, Any]


def agree(a: Shot, b: Shot) -> bool:
    """``jaxlsp diff A B`` would exit 0 (the same nodes, types and params) and the inputs' and
    outputs' shapes are equal."""
    from jaxlsp.graph.diff import diff

    return diff(a.graph, b.graph).same and _ports(a.data) == _ports(b.data)


def read_graph(path: Path) -> Shot:
    from jaxlsp.graph import io

    graph = io.read(str(path))
    return Shot(graph, io.to_json(graph))


class Session:
    """``jaxlsp serve`` on the audit's workspace: what it says of each target, and its log."""

    def __init__(self, layout: Layout, env: dict[str, str]) -> None:
        self.layout = layout
        self.peer = Peer.__new__(Peer)  # Peer's framing, with the audit's environment
        self.peer.next_id = 0
        self.peer.proc = subprocess.Popen(
            [sys.executable, "-m", "jaxlsp", "serve"],
            cwd=layout.ws,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.states: dict[str, dict[str, Any]] = {}
        self.logs: list[str] = []
        self.versions: dict[str, int] = {}
        caps = {
            "textDocument": {"hover": {}, "synchronization": {"didSave": True}},
            "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}},
        }
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": layout.ws.as_uri(),
                "workspaceFolders": [{"uri": layout.ws.as_uri(), "name": "ws"}],
                "capabilities": caps,
                "initializationOptions": {"jaxlsp": {"trusted": True}},
            },
        )
        self.peer.send({"method": "initialized", "params": {}})

    def take(self, message: dict[str, Any]) -> None:
        self.peer.answer(message)
        method = message.get("method")
        params = message.get("params") or {}
        if method == "jaxlsp/liveStatus":
            for target in params["targets"]:
                self.states[f"{target['uri']}::{target['name']}"] = target
        elif method == "window/logMessage":
            self.logs.append(str(params.get("message", "")))

    def request(self, method: str, params: Any) -> Any:
        self.peer.next_id += 1
        ident = self.peer.next_id
        self.peer.send({"id": ident, "method": method, "params": params})
        while True:
            message = self.peer.receive()
            if message.get("id") == ident and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result")
            self.take(message)

    def open(self, path: Path) -> None:
        uri = path.as_uri()
        if uri in self.versions:
            return
        self.versions[uri] = 1
        document = {"uri": uri, "languageId": "python", "version": 1, "text": path.read_text(encoding="utf-8")}
        self.peer.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})

    def save(self, path: Path, text: str | None = None) -> None:
        """``text`` written and saved as an editor does (``None``: saved as it is)."""
        self.open(path)
        uri = path.as_uri()
        if text is not None:
            path.write_text(text, encoding="utf-8")
            self.versions[uri] += 1
            change = {"textDocument": {"uri": uri, "version": self.versions[uri]}, "contentChanges": [{"text": text}]}
            self.peer.send({"method": "textDocument/didChange", "params": change})
        self.peer.send({"method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})

    def watched(self, paths: list[Path]) -> None:
        if paths:
            changes = [{"uri": p.as_uri(), "type": 2} for p in paths]
            self.peer.send({"method": "workspace/didChangeWatchedFiles", "params": {"changes": changes}})

    def settle(self, quiet: float, deadline: Expiring) -> None:
        """Until no target is queued or tracing, ``quiet`` seconds after the last change (a burst
        of saves waits 0.4 s before its traces start), polled by a round-trip."""
        start = time.monotonic()
        uri = (self.layout.ws / "jaxlsp.toml").as_uri()
        while not deadline.expired():
            self.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
            busy = any(s["state"] in ("queued", "tracing") for s in self.states.values())
            if not busy and time.monotonic() - start >= quiet:
                return
            time.sleep(0.1)
        raise TimeoutError("the live queue did not settle")

    def trace(self, path: Path, name: str, profile: str) -> Any:
        """An explicit ``jaxlsp/trace``: its result, or the error's message (a failed trace)."""
        try:
            return self.request(
                "jaxlsp/trace", {"textDocument": {"uri": path.as_uri()}, "name": name, "profile": profile}
            )
        except RuntimeError as failed:
            return str(failed)

    def export(self, trace: str) -> Shot:
        found = self.request("jaxlsp/export", {"traceId": trace, "format": "json"})
        path = Path(found["uri"].removeprefix("file://"))
        return read_graph(path)

    def hover(self, path: Path) -> str:
        """The hover on the target's first line in its call (``h = ...``, which every edit keeps
        on one line: a line without an equation of the newest graph shows an older one's)."""
        lines = path.read_text(encoding="utf-8").splitlines()
        line = next(i for i, text in enumerate(lines) if text.strip().startswith("h = "))
        column = len(lines[line]) - len(lines[line].lstrip()) + 1
        shown = self.request(
            "textDocument/hover",
            {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": column}},
        )
        return json.dumps(shown, ensure_ascii=False)

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.peer.send({"method": "exit", "params": None})
            self.peer.proc.wait(timeout=60)
        except Exception:  # a server that will not stop is killed below
            pass
        finally:
            if self.peer.proc.poll() is None:
                self.peer.proc.kill()
                self.peer.proc.wait()


@dataclass
class Row:
    """One edit's outcome: what each side gave (the outputs' shapes, or why none)."""

    edit: Edit
    cold: str = ""
    live: str = ""  # "" when nothing was shown as fresh
    live_state: str = ""
    explicit: str = ""
    live_agrees: bool | None = None  # None: nothing shown as fresh to compare
    explicit_agrees: bool | None = None
    live_reused: bool = False
    explicit_reused: bool = False
    live_traced: bool = False

    @property
    def mismatch(self) -> bool:
        return self.live_agrees is False or self.explicit_agrees is False


def cold_trace(
    layout: Layout, edit: Edit, out: Path, env: dict[str, str], run: Callable[..., subprocess.CompletedProcess[Any]]
) -> Shot | str:
    """A fresh ``jaxlsp trace`` of the target; its graph, or why it failed."""
    spec = f"{target_file(edit.fw, edit.read)}::{cls_name(edit.fw, edit.read)}"
    done = run(
        [sys.executable, "-m", "jaxlsp", "trace", spec, "--profile", f"{edit.fw}_{edit.read}", "-o", str(out)],
        600,
        cwd=layout.ws,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    return read_graph(out)


def _reused(lines: list[str], kind: str, name: str) -> tuple[bool, bool]:
    """Whether a ``kind`` log line of ``name`` came, and whether any said it reused something."""
    mine = [line for line in lines if line.startswith(f"{kind} {name} ")]
    return bool(mine), any(" moved " in line or " reused " in line for line in mine)


def audit(
    layout: Layout,
    edits: list[Edit],
    *,
    deadline: Callable[[float], Expiring] = Plain,
    run: Callable[..., subprocess.CompletedProcess[Any]] = run_within,
    say: Callable[[str], None] = print,
) -> list[Row]:
    """Run ``edits`` on a fresh server over ``layout``: one :class:`Row` each. ``deadline``
    makes each wait's deadline and ``run`` runs the cold trace within one (seconds on the
    reference machine: tests pass tests/deadlines.py's, which follow the machine)."""
    env = {**os.environ, **SERVER_ENV}
    env.pop("PYTHONPATH", None)
    session = Session(layout, env)
    rows: list[Row] = []
    cold_dir = layout.base / "cold"
    cold_dir.mkdir(exist_ok=True)
    try:
        session.request("jaxlsp/discover", {"textDocument": {"uri": (layout.ws / "jaxlsp.toml").as_uri()}})
        opened: set[str] = set()
        for index, edit in enumerate(edits):
            path = layout.ws / target_file(edit.fw, edit.read)
            name = cls_name(edit.fw, edit.read)
            key = f"{path.as_uri()}::{name}"
            if key not in opened:  # opened (a live trace) and traced once explicitly, as a user does
                opened.add(key)
                session.open(path)
                session.settle(1.5, deadline(600))
                session.request(
                    "jaxlsp/trace",
                    {"textDocument": {"uri": path.as_uri()}, "name": name, "profile": f"{edit.fw}_{edit.read}"},
                )
            row = Row(edit)
            change = edit.apply(layout)
            mark = len(session.logs)
            for saved, text in change.saved.items():
                session.save(saved, text)
            session.watched(change.watched)
            if path not in change.saved:
                session.save(path)  # the user saves the file they are in
            session.settle(2.0, deadline(600))
            row.live_traced, row.live_reused = _reused(session.logs[mark:], "live", name)
            state = session.states.get(key, {})
            row.live_state = str(state.get("state", "none"))
            hover = session.hover(path)
            shown = row.live_state == "fresh" and "stale" not in hover and state.get("traceId")
            live_graph = session.export(str(state["traceId"])) if shown else None
            mark = len(session.logs)
            result = session.request(
                "jaxlsp/trace",
                {"textDocument": {"uri": path.as_uri()}, "name": name, "profile": f"{edit.fw}_{edit.read}"},
            )
            _, row.explicit_reused = _reused(session.logs[mark:], "trace", name)
            explicit_graph = (
                session.export(str(result["traceId"])) if isinstance(result, dict) and "traceId" in result else None
            )
            cold = cold_trace(layout, edit, cold_dir / f"{index}.json", env, run)
            row.cold = cold if isinstance(cold, str) else outputs(cold.data)
            if live_graph is not None:
                row.live = outputs(live_graph.data)
                row.live_agrees = isinstance(cold, Shot) and agree(cold, live_graph)
            if explicit_graph is not None:
                row.explicit = outputs(explicit_graph.data)
                row.explicit_agrees = isinstance(cold, Shot) and agree(cold, explicit_graph)
            else:
                row.explicit = f"no trace: {str(result)[:200]}"
                row.explicit_agrees = isinstance(cold, str)  # both failed: they agree
            rows.append(row)
            flag = "MISMATCH" if row.mismatch else "ok"
            say(
                f"  {index + 1:>2}. {edit.label:<28} cold {row.cold:<14} live[{row.live_state}] {row.live or '-':<14}"
                f"{' reused' if row.live_reused else ''} explicit {row.explicit:<14}"
                f"{' reused' if row.explicit_reused else ''}  {flag}"
            )
    finally:
        session.close()
    return rows


def report(rows: list[Row]) -> str:
    """Per kind: edits, mismatches, and the re-traces (live and explicit) that reused something
    or rebuilt."""
    lines = [f"{'kind':<12} {'edits':>5} {'mismatch':>8} {'live reused':>11} {'live rebuilt':>12} "
             f"{'explicit reused':>15} {'explicit rebuilt':>16}"]  # fmt: skip
    for kind in dict.fromkeys(row.edit.kind for row in rows):
        mine = [r for r in rows if r.edit.kind == kind]
        traced = [r for r in mine if r.live_traced]
        lines.append(
            f"{kind:<12} {len(mine):>5} {sum(r.mismatch for r in mine):>8} "
            f"{sum(r.live_reused for r in traced):>11} {sum(not r.live_reused for r in traced):>12} "
            f"{sum(r.explicit_reused for r in mine):>15} {sum(not r.explicit_reused for r in mine):>16}"
        )
    bad = [r for r in rows if r.mismatch]
    lines.append(f"mismatches: {len(bad)} of {len(rows)} edits")
    for r in bad:
        lines.append(f"  {r.edit.label}: cold {r.cold}; shown fresh {r.live or '-'}; explicit {r.explicit}")
    return "\n".join(lines)


@contextmanager
def workspace(frameworks: tuple[str, ...] = FRAMEWORKS) -> Iterator[Layout]:
    base = Path(tempfile.mkdtemp(prefix="jaxlsp-freshness-"))
    try:
        yield build(base, frameworks)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)} on Linen and NNX")
    parser.add_argument("--kinds", help=f"comma-separated kinds of {', '.join(KINDS)}")
    args = parser.parse_args()
    kinds = tuple(args.kinds.split(",")) if args.kinds else QUICK if args.quick else KINDS
    frameworks = ("linen", "nnx") if args.quick else FRAMEWORKS
    edits = series(frameworks, kinds)
    started = time.perf_counter()
    with workspace(frameworks) as layout:
        rows = audit(layout, edits)
    print(report(rows))
    print(f"{len(rows)} edits in {time.perf_counter() - started:.0f} s")
    return 1 if any(r.mismatch for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
