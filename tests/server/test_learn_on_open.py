"""Learning on open, once chosen (issue 56): with ``jaxlsp.learn.onOpen`` on, or ``"ask"`` answered
"Learn on open" once for the folder, opening a file whose targets have no learned call runs the
test files that import it in the background (tests/workspaces/learn_reach: never the unrelated one
that sleeps ten minutes), and its targets turn live with no command; a save runs again the test
files that load the saved file. The answer is kept per user; nothing runs in an untrusted folder."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from jaxlsp.server.session import Options
from jaxlsp.trust_store import LearnOnOpenStore
from tests.deadlines import scaled
from tests.server.conftest import SERVER_ENV, JaxClient, trusted_session
from tests.server.test_live import CONFIG, TRACE_WAIT, hover, line_of, save, settled


def on_open_session(name: str, trusted: bool, on_open: Any) -> Any:
    return trusted_session("learn_reach", name, CONFIG, {"trusted": trusted, "learn": {"onOpen": on_open}})


chosen = on_open_session("chosen", trusted=True, on_open=True)
asking = on_open_session("asking", trusted=True, on_open="ask")


def _summaries(client: JaxClient) -> list[str]:
    return [m.message for m in client.log_messages if m.message.startswith("jaxlsp: learned the inputs")]


async def test_opening_a_file_learns_from_the_tests_that_import_it_and_a_save_from_those_that_load_it(
    chosen: JaxClient,
) -> None:
    client = chosen
    client.open("pkg/layers.py")
    assert (await settled(client, "dense"))["state"] == "fresh"  # no command, no click
    assert client.trust_prompts == []  # the setting is the choice: nothing asked
    await client.wait_until(lambda: len(_summaries(client)) == 1, TRACE_WAIT)
    assert "from 2 examples" in _summaries(client)[0]  # test_layers and test_blocks, not test_slow

    blocks = client.workspace / "pkg" / "blocks.py"
    client.open("pkg/blocks.py")
    save(client, "pkg/blocks.py", blocks.read_text().replace("+ x", "- x"))
    await client.wait_until(lambda: len(_summaries(client)) == 2, TRACE_WAIT)
    assert "from 1 examples" in _summaries(client)[1]  # test_blocks alone loads it


async def test_asked_once_and_the_answer_is_kept_for_the_folder(asking: JaxClient) -> None:
    client = asking
    client.trust_answer = "Learn on open"
    client.open("pkg/layers.py")
    await client.wait_until(lambda: len(client.trust_prompts) == 1, TRACE_WAIT)
    assert "by running the test files that import them" in client.trust_prompts[0]
    assert (await settled(client, "dense"))["state"] == "fresh"
    kept = json.loads((Path(SERVER_ENV["XDG_CONFIG_HOME"]) / "jaxlsp" / "learn-on-open.json").read_text())
    assert kept["folders"][str(client.workspace)] is True
    await client.wait_until(lambda: len(_summaries(client)) == 1, TRACE_WAIT)
    client.open("pkg/heads.py")  # another file with a target not learned yet: learned, not asked again
    await client.wait_until(lambda: len(_summaries(client)) == 2, TRACE_WAIT)
    assert "from 1 examples" in _summaries(client)[1]
    assert len(client.trust_prompts) == 1


def test_the_setting_and_the_answer_kept_for_a_folder_and_those_below(tmp_path: Path) -> None:
    assert Options.parse({"jaxlsp": {}}).learn_on_open == "off"  # nothing learns unasked by default
    assert Options.parse({"jaxlsp": {"learn": {"onOpen": True}}}).learn_on_open == "on"
    assert Options.parse({"jaxlsp": {"learn": {"onOpen": "ask"}}}).learn_on_open == "ask"
    assert Options.parse({"jaxlsp": {"learn": {"onOpen": "sometimes"}}}).learn_on_open == "off"
    store = LearnOnOpenStore(tmp_path / "config" / "learn-on-open.json")
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    assert store.choice(repo / "sub") is None
    store.set(repo, True)
    assert store.choice(repo / "sub") is True
    store.set(repo / "sub", False)
    assert (store.choice(repo / "sub"), store.choice(repo)) == (False, True)


early = trusted_session("learn_open_early", "early", CONFIG, {"trusted": True, "learn": {"onOpen": True}})


async def test_an_opened_files_targets_turn_live_from_the_first_test_that_teaches_them(early: JaxClient) -> None:
    """tests/workspaces/learn_open_early: ``dense``'s inputs come from fixtures (no call site spells
    them); test_fast.py teaches them in seconds, while test_slow.py, which imports the file too,
    sleeps until its time limit ends the learn. The target is live before that."""
    client = early
    client.open("pkg/layers.py")
    assert (await settled(client, "dense"))["state"] == "fresh"
    assert _summaries(client) == []  # the learn is still running: test_slow.py has not ended


# Appended to a test file of a workspace's copy: that file runs on until the test driving the
# editor writes ``release``, so what the editor shows before then came while the file still ran.
HELD = """

def test_held_until_the_editor_releases_it():
    import time
    from pathlib import Path

    release = Path(__file__).resolve().parents[1] / "release"
    waited = time.monotonic()
    while not release.exists() and time.monotonic() - waited < 600:
        time.sleep(0.1)
"""


def hold(client: JaxClient, test_file: str) -> None:
    with (client.workspace / test_file).open("a") as out:
        out.write(HELD)


streaming = trusted_session("learn_open_early", "streaming", CONFIG, {"trusted": True, "learn": {"onOpen": True}})


async def test_a_target_turns_live_from_its_first_call_while_its_test_file_still_runs(streaming: JaxClient) -> None:
    """tests/workspaces/learn_open_early with ``tests/test_fast.py`` held: its first test calls
    ``dense``, and the file then runs on. The call the worker recorded reaches the store as it is
    made (a ``#learned`` line on the result pipe), so ``dense`` is live while the file runs, not
    after it ends."""
    client = streaming
    hold(client, "tests/test_fast.py")
    client.open("pkg/layers.py")
    assert (await settled(client, "dense"))["state"] == "fresh"
    assert _summaries(client) == []  # the learn is still running: test_fast.py has not ended
    (client.workspace / "release").write_text("")


checked_on_open = trusted_session(
    "learned_checked",
    "checked_on_open",
    CONFIG,
    {"trusted": True, "learn": {"onOpen": True}},
    ("__pycache__", "README.md"),
)


async def test_a_learned_call_that_fails_replays_its_test_while_the_test_file_still_runs(
    checked_on_open: JaxClient,
) -> None:
    """tests/workspaces/learned_checked with its test file held: ``Linear``'s learned call arrives
    while the file runs, and a trace on it fails at the constructor's value check. The test that
    made the call came with the call, so the trace replays it at once: ``Linear`` is fresh before
    its test file ends."""
    client = checked_on_open
    hold(client, "tests/test_spline.py")
    client.open("checked/spline.py")
    assert (await settled(client, "Linear"))["state"] == "fresh"
    assert _summaries(client) == []  # the test file still runs: it waits for the release
    (client.workspace / "release").write_text("")


sizes = trusted_session("learn_open_sizes", "sizes", CONFIG, {"trusted": True, "learn": {"onOpen": True}})


async def test_a_later_call_with_another_batch_size_makes_the_batch_a_symbol(sizes: JaxClient) -> None:
    """tests/workspaces/learn_open_sizes: two test files call ``dense``, one with batch 3, the
    other with batch 5 once the first trace is shown (it waits for ``release``). The second call
    teaches no new target; when its file ends, what is open is traced again on both calls, so the
    batch is a symbol rather than the first call's size."""
    client = sizes
    client.open("pkg/layers.py")
    first = await settled(client, "dense")
    line = line_of(client, "pkg/layers.py", "return jnp.tanh")
    (client.workspace / "release").write_text("")
    symbolic = re.compile(r"f32\[[A-Za-z_][\w.]*,4\]")
    deadline = time.monotonic() + scaled(TRACE_WAIT)
    text = await hover(client, "pkg/layers.py", line)
    while not symbolic.search(text):
        assert time.monotonic() < deadline, text  # one call's sizes only
        first = await settled(client, "dense", after=first.get("traceId"))
        text = await hover(client, "pkg/layers.py", line)
