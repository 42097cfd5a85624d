"""Live shapes run only what the user chose (issue 45 item 4), over stdio on
``tests/workspaces/lsp_live_chosen``: a recipe shipped with the repository whose ``from`` runs
``train.py`` (it writes ``checkpoints/ckpt-PID``), a script whose top level trains with no
``__main__`` guard (it writes ``TRAINED``), and a static call site handing the target a class a
test module defines (importing that module writes ``SIDE``). Each file counts what really ran.
Each target still gets live shapes where its inputs are otherwise known, and once the user has
traced it, live traces may run what that trace ran.

Real captures (JAX on CPU); the per-user record of what a trace ran lives under the server's
``XDG_CONFIG_HOME``, never in the workspace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp

from tests.server.conftest import SERVER_ENV, JaxClient, copy_workspace, initialize_params
from tests.server.test_live import CONFIG, TRACE_WAIT, hover, line_of, save, settled


@pytest_lsp.fixture(config=CONFIG, params=["visual-studio-code"])
async def live(lsp: JaxClient, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    root = copy_workspace("lsp_live_chosen", tmp_path)
    lsp.client_name = request.param
    lsp.workspace = root
    params = initialize_params(request.param, root)
    params.initialization_options = {"jaxlsp": {"trusted": True}}
    lsp.initialize_result = await lsp.within(lsp.initialize_session(params))
    yield
    await lsp.finish()


def checkpoints(client: JaxClient) -> list[str]:
    folder = client.workspace / "checkpoints"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def trained(client: JaxClient) -> int:
    log = client.workspace / "TRAINED"
    return len(log.read_text().split()) if log.exists() else 0


async def trace(client: JaxClient, rel: str, name: str) -> dict[str, Any]:
    params = {"textDocument": {"uri": client.uri(rel)}, "name": name}
    return dict(await client.within(client.protocol.send_request_async("jaxlsp/trace", params), TRACE_WAIT))


async def next_state(client: JaxClient, name: str, seen: int) -> dict[str, Any]:
    """``name``'s first settled live state in a ``jaxlsp/liveStatus`` after the ``seen`` first ones
    (a not-live state carries no trace id to tell it from the one before)."""

    def found() -> dict[str, Any] | None:
        for status in client.live[seen:]:  # type: ignore[attr-defined]
            for target in status["targets"]:
                if target["name"] == name and target["state"] in ("fresh", "failed", "notLive"):
                    return dict(target)
        return None

    await client.wait_until(lambda: found() is not None, TRACE_WAIT)
    result = found()
    assert result is not None
    return result


def jaxlsp_diagnostics(client: JaxClient, uri: str) -> list[Any]:
    return [d for d in client.diagnostics.get(uri, []) if d.source == "jaxlsp"]


async def test_a_shipped_recipe_runs_its_example_live_only_after_the_user_traced_with_it(live: JaxClient) -> None:
    client = live
    uri = client.open("model.py")
    why = await settled(client, "layer", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive" and "train.py --steps 1000" in why["reason"], why
    assert checkpoints(client) == []  # opening model.py ran nothing
    assert not jaxlsp_diagnostics(client, uri)

    picked = await trace(client, "model.py", "layer")  # the user's own trace runs the recipe's example
    assert picked["summary"]["outputs"] == ["f32[2,16]"] and len(checkpoints(client)) == 1
    store = Path(SERVER_ENV["XDG_CONFIG_HOME"]) / "jaxlsp" / "chosen.json"
    assert str(client.workspace / "model.py") in store.read_text()  # recorded outside the workspace
    assert not list(client.workspace.rglob("chosen.json"))

    text = (client.workspace / "model.py").read_text()
    seen = len(client.live)  # type: ignore[attr-defined]
    save(client, "model.py", text.replace("jnp.tanh(h)", "jnp.tanh(h) * 2.0"))
    done = await next_state(client, "layer", seen)
    assert done["state"] == "fresh", done  # now the user's choice: live traces run it too
    assert len(checkpoints(client)) == 2
    assert "f32[2,16]" in await hover(client, "model.py", line_of(client, "model.py", "h = x @"))


async def test_a_script_whose_top_level_trains_is_traced_live_from_its_definitions_only(live: JaxClient) -> None:
    client = live
    uri = client.open("script.py")
    first = await settled(client, "step", ("fresh", "failed", "notLive"))
    assert first["state"] == "fresh", first
    assert "f32[4,3]" in await hover(
        client, "script.py", line_of(client, "script.py", "h = x @ jnp.ones((x.shape[-1], 3))")
    )
    # ``widened`` reads HIDDEN, which only running the top level sets; its shipped profile says
    # load = "module", which is the repository's choice, not the user's: not live, no diagnostic
    why = await settled(client, "widened", ("notLive", "fresh", "failed"))
    assert why["state"] == "notLive" and "top level" in why["reason"], why
    assert not jaxlsp_diagnostics(client, uri)
    assert trained(client) == 0

    text = (client.workspace / "script.py").read_text()
    save(client, "script.py", text.replace("x.shape[-1], 3))", "x.shape[-1], 5))"))  # an edit: again
    again = await settled(client, "step", ("fresh", "failed", "notLive"), after=first["traceId"])
    assert again["state"] == "fresh", again
    assert "f32[4,5]" in await hover(
        client, "script.py", line_of(client, "script.py", "h = x @ jnp.ones((x.shape[-1], 5))")
    )
    assert trained(client) == 0

    picked = await trace(client, "script.py", "widened")  # the user's trace imports the file whole
    assert picked["summary"]["outputs"] == ["f32[4,3]"] and trained(client) == 1
    seen = len(client.live)  # type: ignore[attr-defined]
    save(client, "script.py", (client.workspace / "script.py").read_text().replace("jnp.tanh(h)", "jnp.tanh(h) + 1.0"))
    done = await next_state(client, "widened", seen)
    assert done["state"] == "fresh", done
    assert trained(client) >= 2  # the user chose to run its top level: live traces may now


async def test_a_static_site_naming_a_test_modules_class_is_not_used_live(live: JaxClient) -> None:
    client = live
    client.open("blocks.py")
    done = await settled(client, "apply", ("fresh", "failed", "notLive"))
    assert done["state"] == "fresh", done  # from scripts/run_blocks.py's site: jnp.tanh, f32[2,4]
    assert "f32[2,4]" in await hover(client, "blocks.py", line_of(client, "blocks.py", "y = block(x)"))
    assert not (client.workspace / "SIDE").exists()  # tests/test_blocks.py was not imported

    picked = await trace(client, "blocks.py", "apply")  # the user's trace takes the test's site
    assert picked["summary"]["outputs"] == ["f32[10]"] and (client.workspace / "SIDE").exists()


def test_the_record_of_what_the_user_ran_is_keyed_by_real_paths(tmp_path: Path) -> None:
    from jaxlsp.trust_store import ChoiceStore

    store = ChoiceStore(tmp_path / "config" / "chosen.json")
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text("")
    (project / "link.py").symlink_to(project / "model.py")
    example = {"kind": "script", "path": str(project / "train.py"), "argv": ["--steps", "1000"], "text": "train.py"}
    assert not store.ran_example(project / "model.py", "layer", example) and not store.ran_module(project / "model.py")
    store.record(project / "link.py", "layer", module=False, example=example)
    assert store.ran_example(project / "model.py", "layer", example)  # the same file, whatever its name
    assert not store.ran_example(project / "model.py", "layer", {**example, "argv": ["--steps", "1"]})
    assert not store.ran_example(project / "model.py", "other", example)
    assert not store.ran_module(project / "model.py")
    store.record(project / "model.py", "layer", module=True, example=None)
    assert store.ran_module(project / "link.py")
    assert set(json.loads(store.path.read_text())) == {"examples", "modules"}
