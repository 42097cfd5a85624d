"""Lenses, resolve, code actions, ``jaxlsp/discover`` and edits, with VS Code's and Neovim's capabilities.

The fixture workspace is ``tests/workspaces/lsp_basic``: ``mixed.py`` mixes module classes, JAX
functions, plain classes and JAX-free functions; ``sub.py`` derives ``pkg.base.Base`` (a Linen
module) once through the package's ``__init__.py`` re-export and once directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from jaxlsp.server.features.lenses import lens_figures
from tests.server.expected import MIXED_LENSES

if TYPE_CHECKING:
    from conftest import JaxClient

MIXED_KINDS = {
    "Dense": "linen",
    "scale": "function",
    "Block": "nnx",
    "norm": "function",
    "Head": "equinox",
    "power": "function",
    "Tower": "linen",
    "Tower.Layer": "linen",
}
SUB_LENSES = [("ViaPackage", 4), ("ViaModule", 8)]
BASE_LINE = 3  # "class Base(nn.Module):" in pkg/base.py
BASE_SOURCE = (
    "import flax.linen as nn\n"
    "\n"
    "\n"
    "class Base(nn.Module):\n"
    "    width: int = 4\n"
    "\n"
    "    def __call__(self, x):\n"
    "        return x\n"
)


def client_units(text: str, encoding: str) -> int:
    """The length of ``text`` in the negotiated position encoding's units."""
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def trace_command(uri: str, name: str) -> tuple[str, str, list[object]]:
    """What a lens or code action must run, as (title, command, arguments)."""
    return ("Trace graph", "jaxlsp.traceGraph", [{"uri": uri, "name": name}])


def command_of(command: types.Command | None) -> tuple[str, str, list[object]] | None:
    if command is None:
        return None
    return (command.title, command.command, list(command.arguments or []))


# -- lenses ------------------------------------------------------------------------------------
async def test_lenses_name_exactly_the_entrypoints(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    lenses = await client.lenses(uri)

    assert [(lens.data["name"], lens.range.start.line) for lens in lenses] == MIXED_LENSES
    lines = [lens.range.start.line for lens in lenses]
    assert len(lines) == len(set(lines)), "at most one lens per line"
    for lens in lenses:
        name = lens.data["name"]
        assert lens.data == {"uri": uri, "name": name, "kind": MIXED_KINDS[name]}
        assert lens.command is None, "commands are filled in by codeLens/resolve"
        assert lens.range.end.line == lens.range.start.line
    # class keywords: a top-level class at column 0, the nested Tower.Layer at column 4
    assert {lens.data["name"]: lens.range.start.character for lens in lenses}["Tower.Layer"] == 4
    assert {lens.data["name"]: lens.range.start.character for lens in lenses}["Dense"] == 0

    # A file with no entrypoint (a package __init__ that only re-exports) gets no lens.
    assert await client.lenses(client.open("pkg/__init__.py")) == []


async def test_lens_ranges_use_the_negotiated_position_encoding(client: JaxClient) -> None:
    assert client.initialize_result is not None
    encoding = client.initialize_result.capabilities.position_encoding or types.PositionEncodingKind.Utf16
    expected = {"visual-studio-code": types.PositionEncodingKind.Utf16, "neovim": types.PositionEncodingKind.Utf8}
    assert encoding == expected[client.client_name]

    uri = client.open("mixed.py")
    norm_line = (client.workspace / "mixed.py").read_text(encoding="utf-8").splitlines()[54]
    assert norm_line.startswith("def norm(x):") and not norm_line.isascii()
    lens = next(lens for lens in await client.lenses(uri) if lens.data["name"] == "norm")
    assert lens.range.end.character == client_units(norm_line, encoding)


async def test_resolve_fills_the_trace_command(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    for lens in await client.lenses(uri):
        resolved = await client.within(client.code_lens_resolve_async(lens))
        assert command_of(resolved.command) == trace_command(uri, lens.data["name"])
        assert resolved.range == lens.range
    # A lens without jaxlsp's data is returned as it came.
    bare = types.CodeLens(range=types.Range(types.Position(0, 0), types.Position(0, 1)))
    resolved = await client.within(client.code_lens_resolve_async(bare))
    assert resolved.command is None


# -- code actions ------------------------------------------------------------------------------
# (line, character) -> the entrypoint whose action is offered there, or None for no action.
ACTION_CASES: dict[str, tuple[int, int, str | None]] = {
    "class line": (12, 0, "Dense"),
    "class line, mid": (12, 10, "Dense"),
    "method body": (18, 12, "Dense"),
    "def line": (28, 4, "scale"),
    "decorator line": (27, 0, "scale"),
    "nnx body": (50, 8, "Block"),
    "equinox body": (67, 8, "Head"),
    "nested class line": (88, 4, "Tower.Layer"),
    "nested body (innermost wins)": (92, 12, "Tower.Layer"),
    "outer body after the nested class": (95, 8, "Tower"),
    "module docstring": (0, 0, None),
    "import": (7, 0, None),
    "plain class": (21, 0, None),
    "JAX-free function": (35, 4, None),
    "variable class": (41, 4, None),
    "blank line between entrypoints": (57, 0, None),
    "dataclass": (60, 4, None),
    "string mentioning jax": (76, 10, None),
    "driver body": (82, 8, None),
}


async def test_code_actions(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    found: dict[str, str | None] = {}
    for case, (line, character, expected) in ACTION_CASES.items():
        actions = await client.actions(uri, line, character)
        if not actions:
            found[case] = None
            continue
        # "Trace graph", "Trace with values" and "Trace compiled" on every entrypoint
        action, values, compiled = actions
        assert isinstance(action, types.CodeAction) and isinstance(values, types.CodeAction), case
        assert action.title == f"Trace graph: {expected}", case
        assert values.title == f"Trace with values: {expected}", case
        assert compiled.title == f"Trace compiled: {expected}", case
        name = action.command.arguments[0]["name"] if action.command and action.command.arguments else None
        assert command_of(action.command) == trace_command(uri, str(name)), case
        assert command_of(values.command) == (
            "Trace with values",
            "jaxlsp.traceWithValues",
            [{"uri": uri, "name": name}],
        )
        assert command_of(compiled.command) == ("Trace compiled", "jaxlsp.traceCompiled", [{"uri": uri, "name": name}])
        found[case] = name
    assert found == {case: expected for case, (_, _, expected) in ACTION_CASES.items()}


async def test_code_action_for_a_range_over_a_body(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    actions = await client.actions(uri, 16, 0, end=(18, 20))
    assert [a.title for a in actions] == ["Trace graph: Dense", "Trace with values: Dense", "Trace compiled: Dense"]
    # A range that reaches from a plain class into a def line touches that def line.
    actions = await client.actions(uri, 22, 0, end=(28, 0))
    assert [a.title for a in actions] == ["Trace graph: scale", "Trace with values: scale", "Trace compiled: scale"]


# -- jaxlsp/discover ---------------------------------------------------------------------------
def _range(line: int, start: int, end_line: int, end: int) -> dict[str, dict[str, int]]:
    return {"start": {"line": line, "character": start}, "end": {"line": end_line, "character": end}}


async def test_discover_request(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    lines = (client.workspace / "mixed.py").read_text(encoding="utf-8").splitlines()
    result = await client.request("jaxlsp/discover", {"textDocument": {"uri": uri}})

    assert set(result) == {"entrypoints", "drivers"}
    entries = {e["name"]: e for e in result["entrypoints"]}
    assert [(e["name"], e["range"]["start"]["line"]) for e in result["entrypoints"]] == MIXED_LENSES
    assert {name: e["kind"] for name, e in entries.items()} == MIXED_KINDS
    for e in result["entrypoints"]:
        assert set(e) == {"name", "kind", "range", "bodyRange", "decorators", "fields", "reason"}
        assert isinstance(e["reason"], str) and e["reason"], "discovery explains every choice"

    dense = entries["Dense"]
    assert dense["range"] == _range(12, 0, 12, len(lines[12]))
    assert dense["bodyRange"] == _range(12, 0, 18, len(lines[18]))
    assert dense["decorators"] == []
    # The wording of ``reason`` is discovery's to choose; it must name what decided.
    assert "linen" in dense["reason"]
    assert dense["fields"] == [
        {"name": "features", "annotation": "int", "default": "8", "kind": "field"},
        {"name": "use_bias", "annotation": "bool", "default": "True", "kind": "field"},
    ]

    block = entries["Block"]
    assert "nnx" in block["reason"]
    assert block["fields"] == [
        {"name": "width", "annotation": "int", "default": None, "kind": "positional"},
        {"name": "rngs", "annotation": "nnx.Rngs", "default": None, "kind": "keywordOnly"},
    ]

    scale = entries["scale"]
    assert scale["bodyRange"]["start"]["line"] == 27, "a function's body range includes its decorators"
    assert scale["decorators"] == ["jax.jit"]
    assert "jit" in scale["reason"]
    assert entries["power"]["decorators"] == ["partial(jax.jit, static_argnums=1)"]
    assert "sqrt" in entries["norm"]["reason"]
    assert entries["Head"]["fields"] == [
        {"name": "weight", "annotation": "jax.Array", "default": None, "kind": "field"}
    ]
    assert entries["Tower.Layer"]["range"]["start"] == {"line": 88, "character": 4}

    assert [(d["name"], d["kind"], d["range"]["start"]["line"]) for d in result["drivers"]] == [
        ("keys", "function", 79)
    ]


async def test_discover_sees_unsaved_edits(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    client.edit(uri, (27, 0), (28, 0), "")  # drop scale's @jax.jit: it no longer computes with JAX
    result = await client.request("jaxlsp/discover", {"textDocument": {"uri": uri}})
    names = [e["name"] for e in result["entrypoints"]]
    assert "scale" not in names
    assert names == [n for n, _ in MIXED_LENSES if n != "scale"]


# -- edits -------------------------------------------------------------------------------------
async def test_incremental_edits_add_and_remove_entrypoints(client: JaxClient) -> None:
    uri = client.open("mixed.py")
    assert await client.lens_names(uri) == MIXED_LENSES

    # Append a JAX function after the last line (the file ends with a newline: line 96 is empty).
    client.edit(uri, (96, 0), (96, 0), "\n\n@jax.jit\ndef added(x):\n    return jnp.cos(x)\n")
    assert await client.lens_names(uri) == [*MIXED_LENSES, ("added", 99)]

    # Remove scale's decorator line: scale loses its lens, everything below moves up a line.
    client.edit(uri, (27, 0), (28, 0), "")
    shifted = [(n, line - 1 if line > 27 else line) for n, line in [*MIXED_LENSES, ("added", 99)] if n != "scale"]
    assert await client.lens_names(uri) == shifted

    # Make Dense a plain class (replace "nn.Module" in "class Dense(nn.Module):").
    client.edit(uri, (12, 12), (12, 21), "object")
    assert await client.lens_names(uri) == shifted[1:]
    assert await client.actions(uri, 12, 0) == []

    # And back: the lens returns, and a code action finds the new function at its new line.
    client.edit(uri, (12, 12), (12, 18), "nn.Module")
    assert await client.lens_names(uri) == shifted
    assert [a.title for a in await client.actions(uri, 98, 4)] == [
        "Trace graph: added",
        "Trace with values: added",
        "Trace compiled: added",
    ]

    # Turn a JAX-free function into a JAX one within its body.
    client.edit(uri, (35, 17), (35, 18), "jnp.sum(i)")  # "total += i" -> "total += jnp.sum(i)"
    names = await client.lens_names(uri)
    assert ("helper", 31) in names


# -- cross-file --------------------------------------------------------------------------------
async def _settle(client: JaxClient) -> int:
    """Wait for the initial index; return how many lens refreshes the client has seen so far."""
    await client.wait_indexed()
    if client.refresh_support:
        await client.wait_for_refreshes(1)  # the one that follows indexing
    return client.refreshes


async def _expect_refresh(client: JaxClient, seen: int) -> int:
    """For a client with refreshSupport, wait for one more ``workspace/codeLens/refresh``."""
    if client.refresh_support:
        await client.wait_for_refreshes(seen + 1)
        return client.refreshes
    return seen


def _assert_refresh_policy(client: JaxClient) -> None:
    if not client.refresh_support:
        assert client.refreshes == 0, "workspace/codeLens/refresh sent to a client without refreshSupport"


async def test_base_class_edit_in_open_document_changes_subclass_lenses(client: JaxClient) -> None:
    seen = await _settle(client)
    sub = client.open("sub.py")
    assert await client.lens_names(sub) == SUB_LENSES

    base = client.open("pkg/base.py")
    client.edit(base, (BASE_LINE, 11), (BASE_LINE, 20), "object")  # class Base(object):
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == []
    assert await client.actions(sub, 5, 4) == []

    client.edit(base, (BASE_LINE, 11), (BASE_LINE, 17), "nn.Module")
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == SUB_LENSES
    assert [a.title for a in await client.actions(sub, 5, 4)] == [
        "Trace graph: ViaPackage",
        "Trace with values: ViaPackage",
        "Trace compiled: ViaPackage",
    ]
    _assert_refresh_policy(client)


async def test_base_class_change_on_disk_changes_subclass_lenses(client: JaxClient) -> None:
    seen = await _settle(client)
    sub = client.open("sub.py")
    assert await client.lens_names(sub) == SUB_LENSES

    base_path = client.workspace / "pkg" / "base.py"
    assert base_path.read_text(encoding="utf-8") == BASE_SOURCE
    base_path.write_text(BASE_SOURCE.replace("class Base(nn.Module):", "class Base:"), encoding="utf-8")
    _announce(client, base_path, types.FileChangeType.Changed)
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == []

    base_path.write_text(BASE_SOURCE, encoding="utf-8")
    _announce(client, base_path, types.FileChangeType.Changed)
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == SUB_LENSES
    _assert_refresh_policy(client)


async def test_disk_change_without_a_file_watcher_is_seen_at_the_next_lens_request(client: JaxClient) -> None:
    """Clients that register no watcher (Neovim on Linux, Helix, eglot) announce nothing: the
    server re-stats the files it read before answering lenses."""
    await _settle(client)
    sub = client.open("sub.py")
    assert await client.lens_names(sub) == SUB_LENSES
    base_path = client.workspace / "pkg" / "base.py"
    base_path.write_text(BASE_SOURCE.replace("class Base(nn.Module):", "class Base:") + "\n", encoding="utf-8")
    if client.registrations:  # this client watches files: the server may rely on its events
        _announce(client, base_path, types.FileChangeType.Changed)
    assert await client.lens_names(sub) == []


async def test_re_export_edit_changes_only_the_subclass_that_uses_it(client: JaxClient) -> None:
    seen = await _settle(client)
    sub = client.open("sub.py")
    init = client.open("pkg/__init__.py")
    client.edit(init, (0, 0), (1, 0), "")  # drop "from .base import Base"
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == [("ViaModule", 8)]

    client.edit(init, (0, 0), (0, 0), "from .base import Base\n")
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == SUB_LENSES
    _assert_refresh_policy(client)


async def test_deleting_the_base_file_on_disk_removes_subclass_lenses(client: JaxClient) -> None:
    seen = await _settle(client)
    sub = client.open("sub.py")
    assert await client.lens_names(sub) == SUB_LENSES

    base_path = client.workspace / "pkg" / "base.py"
    base_path.unlink()
    _announce(client, base_path, types.FileChangeType.Deleted)
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == []

    base_path.write_text(BASE_SOURCE, encoding="utf-8")
    _announce(client, base_path, types.FileChangeType.Created)
    seen = await _expect_refresh(client, seen)
    assert await client.lens_names(sub) == SUB_LENSES
    _assert_refresh_policy(client)


def _announce(client: JaxClient, path: Path, kind: types.FileChangeType) -> None:
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=path.as_uri(), type=kind)])
    )


# The lens title's figures: the first outputs' types, and "+N" when some are left out (issue 16).
def test_lens_figures_say_how_many_outputs_are_left_out() -> None:
    assert lens_figures(3, []) == "3 ops"
    assert lens_figures(1234, ["f32[2]"]) == "1,234 ops · f32[2]"
    assert lens_figures(64, ["f32[4,10]", "f32[32]"]) == "64 ops · f32[4,10], f32[32]"
    assert lens_figures(64, ["f32[4,10]", "f32[32]", "f32[32]"]) == "64 ops · f32[4,10], f32[32] +1"
    assert lens_figures(9, [f"f32[{i}]" for i in range(12)]) == "9 ops · f32[0], f32[1] +10"
