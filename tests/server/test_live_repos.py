"""Live shapes on the layouts of real repositories (issue 27, /work/repos/LIVE_NOTE.md), over stdio
on ``tests/workspaces/lsp_live_repos``: a call site that downloads a checkpoint never feeds a live
trace (bonsai), nor does a capture that wants the network, and a call site in a test file
imports beside it (equimo) when the user's trace uses it.

Real captures (JAX on CPU); ``hub.py``'s ``from_pretrained`` writes a line to ``DOWNLOADS`` each
time it runs, which counts what really ran.

Then ``benchmarks/live_repos.py``'s issue 56 figures, on ``tests/workspaces/live_repos_figures``
with the benchmark's own client and a real ``jaxlsp serve``: the lines of fresh targets that hold
a JAX operation, the dimensions shown symbolically, the seconds from opening a file with learn on
open to its called targets fresh, and the repository's own pytest beside the learn.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.deadlines import scaled
from tests.server.conftest import JaxClient, copy_workspace, trusted_session
from tests.server.test_live import CONFIG, TRACE_WAIT, hover, line_of, save, settled

live = trusted_session("lsp_live_repos", "live", CONFIG, {"trusted": True})  # live shapes on


def downloads(client: JaxClient) -> list[str]:
    log = client.workspace / "DOWNLOADS"
    return log.read_text().split() if log.exists() else []


async def test_a_call_site_that_downloads_a_checkpoint_is_not_used_by_a_live_trace(live: JaxClient) -> None:
    """bonsai's models/dinov3: opening modeling.py traced ``forward`` with run_model.py's
    ``Dinov3ViTModel.from_pretrained(...)``, a Hub download on every open."""
    client = live
    uri = client.open("hub.py")
    why = await settled(client, "forward", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive", why
    assert "Model.from_pretrained(...)" in why["reason"] and "scripts/run_model.py:11" in why["reason"], why
    assert downloads(client) == []  # nothing ran
    assert not [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]

    # The user's own trace may use the site; then saves re-trace it live.
    params = {"textDocument": {"uri": uri}, "name": "forward"}
    picked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    assert picked["summary"]["outputs"] == ["f32[2,3]"] and downloads(client) == ["org/tiny-pretrained"]
    text = (client.workspace / "hub.py").read_text()
    save(client, "hub.py", text.replace("jnp.tanh(y)", "jnp.tanh(y) * 2.0"))
    await settled(client, "forward", after=picked["traceId"])


async def test_a_live_trace_that_wants_the_network_is_refused_and_not_live(live: JaxClient) -> None:
    """What no name shows: ``Store.open(...)`` connects to a server. The live capture refuses the
    connection at once (no DNS, no timeout) and the target is not live, with why; no diagnostic."""
    client = live
    uri = client.open("remote.py")
    why = await settled(client, "predict", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive", why
    assert "needs the network (it tried to reach tiny.weights.invalid:443)" in why["reason"], why
    assert not [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]


async def test_a_call_site_in_a_test_file_imports_the_modules_beside_it(live: JaxClient) -> None:
    """equimo's tests/test_generic.py hands BlockChunk a class of its own (``ref =
    "test_generic:_SimpleBlock"``), and tests/finetune's tests import their sibling fixtures.py:
    pytest puts the test file's folder on sys.path, and the trace must too. Building those inputs
    imports the test module, which ``chunked.py`` does not import: the user's trace does that, a
    live one does not until then (issue 45 item 4)."""
    client = live
    uri = client.open("chunked.py")
    why = await settled(client, "apply", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive" and "test_chunk:_block" in why["reason"], why
    params = {"textDocument": {"uri": uri}, "name": "apply"}
    picked = await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT)
    assert picked["summary"]["outputs"] == ["f32[10]"], picked
    assert "f32[3,10]" in await hover(client, "chunked.py", line_of(client, "chunked.py", "y = block(x)"))


def live_repos() -> ModuleType:
    """``benchmarks/live_repos.py`` (a script, not a package)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "live_repos.py"
    spec = importlib.util.spec_from_file_location("live_repos", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def figures_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the servers' trust store: the test's
    return copy_workspace("live_repos_figures", tmp_path).resolve()


def test_the_lines_holding_a_jax_operation_and_the_symbolic_dimensions_are_counted(figures_repo: Path) -> None:
    """``dists.py`` opened with nothing learned: both annotated targets are fresh with ``n``, ``m``,
    ``d`` symbolic. Of their five body lines four hold a JAX operation (a node's source frame
    points there); ``distances = pairwise(x, y)`` holds none of its own (its nodes' innermost
    frame is in ``pairwise``) though its hover shows a shape."""
    bench = live_repos()
    path = str(figures_repo / "tinyops" / "dists.py")
    targets = [t for t in bench.discover(figures_repo) if t["path"] == path]
    assert sorted(t["name"] for t in targets) == ["pairwise", "total"]
    texts = {path: Path(path).read_text().splitlines()}
    bodies = {path: bench.code_lines("\n".join(texts[path]))}
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as cache:
        client = bench.start(figures_repo, Path(cache), Path(cwd))
        try:
            client.open(path, "\n".join(texts[path]))
            bench.wait_settled(client, figures_repo, scaled(TRACE_WAIT), "open")
            snap = bench.snapshot(client, targets, texts, bodies)
            assert {name: t["state"] for (_, name), t in snap[0].items()} == {"pairwise": "fresh", "total": "fresh"}
            ops = bench.operation_figures(client, figures_repo, targets, snap)
        finally:
            client.close()
    assert sum(snap[1].values()) == 5, snap[1]  # every body line shows a shape (symbolic ones count)
    assert (ops["fresh_op_lines"], ops["fresh_op_lines_with_shape"], ops["graphs"]) == (4, 4, 2), ops
    assert set(ops["symbolic_names"]) == {"n", "m", "d"} and ops["symbolic_dims"] > 0, ops
    assert ops["symbolic_hover_lines"] == 4, ops  # the last line's sum is f32[]


def test_a_failed_targets_hover_and_an_untaken_branch_show_no_shape(figures_repo: Path) -> None:
    """``checked.py``: ``roots``'s trace fails and its hover quotes JAX's "traced array with shape
    bool[]", which is no shape of the line; ``clipped``'s untaken branch says so, not that the file
    changed (the benchmark opens a file as an editor does, final newline and all)."""
    bench = live_repos()
    path = str(figures_repo / "tinyops" / "checked.py")
    targets = [t for t in bench.discover(figures_repo) if t["path"] == path]
    texts = {path: Path(path).read_text().splitlines()}
    bodies = {path: bench.code_lines("\n".join(texts[path]))}
    branch = next(i for i, line in enumerate(texts[path]) if "jnp.tanh(x)" in line)
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as cache:
        client = bench.start(figures_repo, Path(cache), Path(cwd))
        try:
            client.open(path)
            bench.wait_settled(client, figures_repo, scaled(TRACE_WAIT), "open")
            snap = bench.snapshot(client, targets, texts, bodies)
            untaken = client.request(
                "textDocument/hover",
                {"textDocument": {"uri": Path(path).as_uri()}, "position": {"line": branch, "character": 8}},
            )
        finally:
            client.close()
    states = {name: t["state"] for (_, name), t in snap[0].items()}
    assert states == {"roots": "failed", "clipped": "fresh"}, snap[0]
    shown = {line for (_, line), has in snap[1].items() if has}
    roots_lines = {line for line in range(len(texts[path])) if 8 <= line <= 11}
    assert not shown & roots_lines, shown  # the failure's "shape bool[]" is not a shape
    assert "branch was not taken" in untaken["contents"]["value"], untaken


def test_opening_a_file_with_learn_on_open_is_timed_to_its_called_targets_fresh(figures_repo: Path) -> None:
    """``ops.py``'s ``scale`` is called only by a test, on an input no static call site spells:
    opened alone with learn on open, it turns fresh once that test has run in the background."""
    bench = live_repos()
    path = str(figures_repo / "tinyops" / "ops.py")
    opened = bench.open_learn(figures_repo, [path], {path: {"scale"}}, scaled(TRACE_WAIT))
    [file] = opened["files"]
    assert file["file"] == "tinyops/ops.py" and file["fresh"] == 1 and file["seconds"] is not None, opened
    # the summary may come after the target is fresh: a running example's calls are kept as it runs
    assert file["learn"] is None or file["learn"].startswith("jaxlsp: learned the inputs of 1 targets"), opened
    assert file["first_fresh"] == {"scale": file["seconds"]} and file["seconds_learnable"] == file["seconds"], opened
    assert opened["median_seconds"] == file["seconds"] and opened["not_fresh"] == 0, opened
    assert opened["median_seconds_learnable"] == file["seconds"], opened


def test_the_repositorys_own_pytest_runs_the_test_files_a_folder_learn_runs(figures_repo: Path) -> None:
    """The bar's other side: ``python -m pytest`` over the same test files, in the same interpreter."""
    ran = live_repos().own_pytest(figures_repo, scaled(TRACE_WAIT))
    assert (ran["files"], ran["scripts_not_run"], ran["exit"]) == (1, 0, 0), ran
    assert "1 passed" in ran["last_line"] and ran["wall_seconds"] > 0, ran
