"""An NNX or Equinox model's abstract init kept from one capture to the next
(jaxlsp/worker/reuse/initsnap.py): reused after an edit the constructor never ran, run again
after any other; either way the graph is the one a capture without a snapshot makes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import array, request

pytest.importorskip("flax")

NNX_MODEL = """\
import jax.numpy as jnp
from flax import nnx

WIDTH = 8


def widened(d):
    return d * 2


def finish(x):
    return x


class Block(nnx.Module):
    def __init__(self, d, *, rngs):
        self.lin = nnx.Linear(d, widened(d), rngs=rngs)

    def __call__(self, x):
        return finish(nnx.relu(self.lin(x)))


class Model(nnx.Module):
    def __init__(self, *, rngs):
        self.block = Block(WIDTH, rngs=rngs)
        self.head = nnx.Linear(widened(WIDTH), 3, rngs=rngs)

    def __call__(self, x):
        return self.head(self.block(x))
"""

EQX_MODEL = """\
import equinox as eqx
import jax


class Model(eqx.Module):
    lin: eqx.nn.Linear

    def __init__(self, key):
        self.lin = eqx.nn.Linear(8, 4, key=key)

    def __call__(self, x):
        return jax.nn.relu(self.lin(x))
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    path, modules = list(sys.path), set(sys.modules)
    yield tmp_path
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if str(getattr(sys.modules.get(name), "__file__", "") or "").startswith(str(tmp_path)):
            del sys.modules[name]


def _capture(
    root: Path, snapshot: Any = None, snapshots: bool = True, shape: tuple[int, ...] = (2, 8), only: bool = False
) -> Any:
    """A capture as a warm spare's fork makes it (``jax_ready``: snapshots used), the workspace's
    modules imported anew as in a fresh fork; ``only``: the server's background request for a
    snapshot."""
    from jaxlsp.worker.process.main import capture

    for module in [
        m for m, mod in sys.modules.items() if str(getattr(mod, "__file__", "") or "").startswith(str(root))
    ]:
        del sys.modules[module]
    req = request("model.py", "Model", array(*shape), workspace=root)
    if snapshot is not None:
        req["structureHint"] = snapshot
    if only:
        req["snapshotOnly"] = True
    result = capture(req, jax_ready=snapshots)
    assert result["ok"], result.get("error")
    return result


def _snapshot(root: Path, shape: tuple[int, ...] = (2, 8)) -> Any:
    """What the server asks for after a capture that ran the constructor: its snapshot, no graph."""
    made = _capture(root, shape=shape, only=True)
    assert "graph" not in made
    return made.get("structure")


def _edited(root: Path, old: str, new: str) -> None:
    path = root / "model.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


EDITS: dict[str, tuple[str, str, bool]] = {
    # edit: (old, new, whether the last init still holds)
    "forward pass": ("return finish(nnx.relu(self.lin(x)))", "return finish(nnx.relu(self.lin(x)) * 2.0)", True),
    "a helper only the forward pass calls": (
        "def finish(x):\n    return x",
        "def finish(x):\n    return x - 1.0",
        True,
    ),
    "a comment and blank lines": ("WIDTH = 8\n", "WIDTH = 8  # the width\n\n\n", True),
    "a helper the constructor calls": ("return d * 2", "return d * 3", False),
    "a module constant": ("WIDTH = 8", "WIDTH = 16", False),
    "a new method": (
        "    def __call__(self, x):\n        return self.head",
        "    def extra(self):\n        return 1\n\n    def __call__(self, x):\n        return self.head",
        False,
    ),
    "the constructor": ("self.head = nnx.Linear(widened(WIDTH), 3", "self.head = nnx.Linear(widened(WIDTH), 5", False),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_nnx_init_is_kept_across_an_edit_it_never_ran(workspace: Path, edit: str) -> None:
    (workspace / "model.py").write_text(NNX_MODEL)
    first = _capture(workspace)
    assert first.get("snapshotWanted") is True and first.get("structure") is None  # asked for, not made
    snapshot = _snapshot(workspace)
    assert snapshot is not None and snapshot["files"], "no snapshot made"
    ran = {q for f in snapshot["files"].values() for q in f["ran"]}
    assert {"Model.__init__", "Block.__init__", "widened"} <= ran and "finish" not in ran

    old, new, holds = EDITS[edit]
    _edited(workspace, old, new)
    shape = (2, 16 if edit == "a module constant" else 8)
    again = _capture(workspace, snapshot, shape=shape)
    fresh = _capture(workspace, snapshots=False, shape=shape)
    assert again.get("hint") == ("held" if holds else "stale")
    assert again["graph"] == fresh["graph"]  # the same program as the constructor run again gives
    if holds:
        assert again["structure"] == snapshot and "snapshotWanted" not in again  # carried on
    else:
        assert again.get("structure") is None and again.get("snapshotWanted") is True  # to be made anew


def test_a_background_snapshot_leaves_the_calling_process_at_its_priority(workspace: Path) -> None:
    """The server's background snapshot runs at a lower priority in the fork server's child, which
    exits after it; an in-process capture must not lower the priority of the process that called it
    (a test worker stayed niced for the rest of the suite)."""
    (workspace / "model.py").write_text(NNX_MODEL)
    before = os.nice(0)
    assert _snapshot(workspace) is not None
    assert os.nice(0) == before


def test_an_equinox_init_is_kept_across_an_edit_of_its_call(workspace: Path) -> None:
    pytest.importorskip("equinox")
    (workspace / "model.py").write_text(EQX_MODEL)
    snapshot = _snapshot(workspace, shape=(8,))
    assert snapshot is not None
    _edited(workspace, "return jax.nn.relu(self.lin(x))", "return jax.nn.gelu(self.lin(x))")
    again = _capture(workspace, snapshot, shape=(8,))
    fresh = _capture(workspace, snapshots=False, shape=(8,))
    assert again.get("hint") == "held"
    assert again["graph"] == fresh["graph"]
    assert any(n["primitive"] in ("tanh", "erf", "pjit", "jit") for n in again["graph"]["nodes"])


def test_a_constructor_that_reads_a_file_keeps_no_snapshot(workspace: Path) -> None:
    (workspace / "width.txt").write_text("8")
    reading = NNX_MODEL.replace("WIDTH = 8", "from pathlib import Path\n\nWIDTH = 8").replace(
        "self.block = Block(WIDTH, rngs=rngs)",
        "self.block = Block(int((Path(__file__).parent / 'width.txt').read_text()), rngs=rngs)",
    )
    (workspace / "model.py").write_text(reading)
    assert _snapshot(workspace) is None  # what the file says may change: run each time


def test_a_module_that_reads_a_file_at_import_keeps_no_snapshot(workspace: Path) -> None:
    (workspace / "width.json").write_text("8")
    reading = NNX_MODEL.replace(
        "WIDTH = 8",
        "import json\nfrom pathlib import Path\n\nWIDTH = json.loads((Path(__file__).parent / 'width.json').read_text())",
    )
    (workspace / "model.py").write_text(reading)
    assert _snapshot(workspace) is None  # the file, not the code, may change the next model


def test_a_cli_capture_neither_uses_nor_asks_for_one(workspace: Path) -> None:
    (workspace / "model.py").write_text(NNX_MODEL)
    snapshot = _snapshot(workspace)
    cold = _capture(workspace, snapshot, snapshots=False)
    assert cold.get("structure") is None and "snapshotWanted" not in cold and cold.get("hint") == "stale"


@pytest.mark.parametrize(
    ("source", "executed", "same_as"),
    [
        ("def f():\n    return 1\n", set(), "def f():\n    return 2  # edited\n"),
        ("class C:\n    def m(self):\n        return 1\n", set(), "class C:\n    def m(self):\n\n        return 3\n"),
        ("if True:\n    def f():\n        return 1\n", set(), "if True:\n    def f():\n        return 9\n"),
    ],
)
def test_the_fingerprint_leaves_out_only_functions_that_did_not_run(
    source: str, executed: set[str], same_as: str
) -> None:
    from jaxlsp.worker.reuse.initsnap import fingerprint

    assert fingerprint(source, executed) == fingerprint(same_as, executed)
    ran: Callable[[str], set[str]] = lambda text: {"f", "C.m"}  # noqa: E731
    assert fingerprint(source, ran(source)) != fingerprint(same_as, ran(same_as))
    assert fingerprint("def f(:\n", set()) is None


def test_an_edit_outside_the_workspace_to_code_the_constructor_ran_runs_it_again(workspace: Path) -> None:
    """A model that imports from a folder beside the workspace: that code is the user's too."""
    beside = workspace.parent / f"{workspace.name}-lib"
    beside.mkdir()
    (beside / "widths.py").write_text("def widened(d):\n    return d * 2\n")
    ws = workspace / "ws"
    ws.mkdir()
    model = NNX_MODEL.replace(
        "WIDTH = 8",
        f"import sys\n\nsys.path.insert(0, {str(beside)!r})\nfrom widths import widened  # noqa: E402\n\nWIDTH = 8",
    ).replace("def widened(d):\n    return d * 2\n", "")
    (ws / "model.py").write_text(model)
    try:
        snapshot = _snapshot(ws)
        assert any(path.endswith("widths.py") for path in snapshot["files"])
        (beside / "widths.py").write_text("def widened(d):\n    return d * 3\n")
        sys.modules.pop("widths", None)
        again = _capture(ws, snapshot)
        sys.modules.pop("widths", None)
        fresh = _capture(ws, snapshots=False)
        assert again.get("hint") == "stale" and again["graph"] == fresh["graph"]
    finally:
        sys.modules.pop("widths", None)


def test_an_edit_to_a_function_a_module_runs_at_import_runs_the_constructor_again(workspace: Path) -> None:
    """A width a module computes at import is the model's too: the recording starts before it."""
    model = NNX_MODEL.replace("WIDTH = 8", "def width_at_import():\n    return 8\n\n\nWIDTH = width_at_import()")
    (workspace / "model.py").write_text(model)
    snapshot = _snapshot(workspace)
    assert "width_at_import" in {q for f in snapshot["files"].values() for q in f["ran"]}
    _edited(workspace, "    return 8\n", "    return 16\n")
    again = _capture(workspace, snapshot, shape=(2, 16))
    fresh = _capture(workspace, snapshots=False, shape=(2, 16))
    assert again.get("hint") == "stale" and again["graph"] == fresh["graph"]


#: constructors whose model depends on more than their source (issue 45): (the files the workspace
#: holds, the line that reads them in place of ``WIDTH``)
READS: dict[str, tuple[dict[str, str], str]] = {
    "a folder's listing": ({"classes/a.txt": "", "classes/b.txt": ""}, "len(os.listdir(HERE / 'classes'))"),
    "a folder's scan": ({"classes/a.txt": "", "classes/b.txt": ""}, "len(list(os.scandir(HERE / 'classes')))"),
    "a glob": ({"classes/a.txt": "", "classes/b.txt": ""}, "len(list((HERE / 'classes').glob('*.txt')))"),
    "a file's size": ({"blob.bin": "xx"}, "os.path.getsize(HERE / 'blob.bin')"),
    "a file's existence": ({"flag": ""}, "2 if os.path.exists(HERE / 'flag') else 3"),
    "Python source run as text": ({"cfg.py": "N = 5\n"}, "_run(HERE / 'cfg.py')"),
    "a process's output": ({}, "len(subprocess.run(['true'], capture_output=True).stdout) + 2"),
}

READING_MODEL = """\
import os
import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def _run(path):
    scope = {}
    exec(open(path).read(), scope)
    return scope["N"]


"""


@pytest.mark.parametrize("read", sorted(READS))
def test_a_constructor_that_reads_what_is_not_its_source_keeps_no_snapshot(workspace: Path, read: str) -> None:
    """A listing, a size, an existence, a ``.py`` file read as text, a process: what the next
    capture's constructor would read may differ while every source file stays the same."""
    files, expression = READS[read]
    for name, text in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)
    model = READING_MODEL + NNX_MODEL.replace(
        "self.block = Block(WIDTH, rngs=rngs)", f"self.block = Block({expression}, rngs=rngs)"
    ).replace("self.head = nnx.Linear(widened(WIDTH), 3", f"self.head = nnx.Linear(widened({expression}), 3")
    (workspace / "model.py").write_text(model)
    assert _snapshot(workspace) is None


def test_a_snapshot_holds_only_under_the_environment_it_was_made_in(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A width from an environment variable: no hook sees ``getenv``, so the variables are part
    of the snapshot's key; another value runs the constructor again."""
    model = NNX_MODEL.replace("WIDTH = 8", "import os\n\nWIDTH = 8").replace(
        "nnx.Linear(widened(WIDTH), 3", "nnx.Linear(widened(WIDTH), int(os.environ['JAXLSP_TEST_W'])"
    )
    (workspace / "model.py").write_text(model)
    monkeypatch.setenv("JAXLSP_TEST_W", "3")
    snapshot = _snapshot(workspace)
    assert snapshot is not None
    assert _capture(workspace, snapshot).get("hint") == "held"  # the same variables: the same model
    monkeypatch.setenv("JAXLSP_TEST_W", "5")
    again = _capture(workspace, snapshot)
    fresh = _capture(workspace, snapshots=False)
    assert again.get("hint") == "stale" and again["graph"] == fresh["graph"]
    assert [
        v["shape"] for v in fresh["graph"]["values"] if v["id"] in {o["value"] for o in fresh["graph"]["outputs"]}
    ] == [[2, 5]]
