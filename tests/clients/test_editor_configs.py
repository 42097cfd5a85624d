"""The Helix, Sublime Text and Zed configurations under ``editors/``, and the snippets in their pages.

None of these editors can be installed here, so each file is parsed as the editor would (TOML,
JSON), checked for the names the editor keys on (language ids, selectors, session names), and its
command is started for real: an LSP ``initialize`` with the snippet's initialization options must
succeed, and every server command a snippet calls must be one the server advertises. Each page's
fenced TOML/JSON blocks must parse, and each configuration file must appear in its page verbatim,
so the docs cannot drift from the files.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.trust_store import TrustStore
from tests import deadlines

REPO = Path(__file__).resolve().parents[2]
EDITORS = REPO / "editors"
EXTENSIONS_DOC = (REPO / "docs" / "lsp-extensions.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
HANDSHAKE = 60  # seconds on the reference machine for one server handshake: a deadline, not a pace


def _fenced(page: Path) -> list[tuple[str, str]]:
    """``(language, text)`` of every fenced block in a Markdown page."""
    found = re.findall(r"^( *)```(\w*)\n(.*?)^ *```", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [(language, textwrap.dedent(text) if indent else text) for indent, language, text in found]


def _message(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_messages(data: bytes) -> list[dict[str, Any]]:
    out = []
    while data:
        header, _, rest = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", header).group(1))  # type: ignore[union-attr]
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


def handshake(command: list[str], options: Any, root: Path, tmp: Path) -> dict[str, Any]:
    """Start ``command`` (resolved on the venv's PATH) and run initialize / shutdown / exit."""
    exe = BIN / command[0] if (BIN / command[0]).exists() else Path(command[0])
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "processId": None,
                "rootUri": root.as_uri(),
                "capabilities": {},
                "initializationOptions": options,
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            },
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_CACHE_HOME": str(tmp / "cache")}
    proc = deadlines.run(
        [str(exe), *command[1:]],
        HANDSHAKE,
        input=b"".join(_message(r) for r in requests),
        capture_output=True,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    answers = {m.get("id"): m for m in _read_messages(proc.stdout) if "id" in m}
    assert "result" in answers[1], answers
    result: dict[str, Any] = answers[1]["result"]
    return result


def _check_options(options: Any) -> None:
    """Initialization options: only documented keys, and never blanket trust in a file."""
    assert set(options) == {"jaxlsp"}, options
    for key in options["jaxlsp"]:
        assert f"`{key}" in EXTENSIONS_DOC, f"{key} is not a documented initialization option"
    assert "trusted" not in options["jaxlsp"], "a configuration file must not trust every folder"


# -- Helix ------------------------------------------------------------------------------------


def test_helix_languages_toml(tmp_path: Path) -> None:
    config = tomllib.loads((EDITORS / "helix" / "languages.toml").read_text(encoding="utf-8"))
    server = config["language-server"]["jaxlsp"]
    assert [server["command"], *server["args"]] == ["jaxlsp", "serve"]
    python = [lang for lang in config["language"] if lang["name"] == "python"]
    assert len(python) == 1 and "jaxlsp" in python[0]["language-servers"]
    # Helix sends `config` as initializationOptions.
    options = server["config"]
    _check_options(options)
    result = handshake([server["command"], *server["args"]], options, tmp_path, tmp_path)
    assert result["capabilities"]["codeActionProvider"], "Helix reaches tracing through code actions"


# -- Sublime Text (LSP package) -----------------------------------------------------------------


def test_sublime_settings_commands_and_keymap(tmp_path: Path) -> None:
    settings = json.loads((EDITORS / "sublime" / "LSP.sublime-settings").read_text(encoding="utf-8"))
    client = settings["clients"]["jaxlsp"]
    assert client["command"] == ["jaxlsp", "serve"] and client["selector"] == "source.python"
    assert client["enabled"] is True
    _check_options(client["initializationOptions"])
    result = handshake(client["command"], client["initializationOptions"], tmp_path, tmp_path)
    advertised = result["capabilities"]["experimental"]["jaxlsp"]["commands"]

    # Palette entries: lsp_execute names the client's session and a command the server runs.
    entries = json.loads((EDITORS / "sublime" / "Default.sublime-commands").read_text(encoding="utf-8"))
    executes = [e["args"] for e in entries if e["command"] == "lsp_execute"]
    assert executes
    for args in executes:
        assert args["session_name"] in settings["clients"], args
        assert args["command_name"] in advertised, args
    assert any(e["command"] == "lsp_code_actions" for e in entries)

    keymap = json.loads((EDITORS / "sublime" / "Default.sublime-keymap").read_text(encoding="utf-8"))
    assert all(binding["keys"] and binding["command"] for binding in keymap)


# -- Zed ----------------------------------------------------------------------------------------


def test_zed_settings_and_extension(tmp_path: Path) -> None:
    settings = json.loads((EDITORS / "zed" / "settings.json").read_text(encoding="utf-8"))
    server = settings["lsp"]["jaxlsp"]
    command = [server["binary"]["path"], *server["binary"]["arguments"]]
    assert command == ["jaxlsp", "serve"]
    assert "jaxlsp" in settings["languages"]["Python"]["language_servers"]
    _check_options(server["initialization_options"])
    handshake(command, server["initialization_options"], tmp_path, tmp_path)

    # The extension registers the server under the same name, for Zed's "Python" language.
    extension = tomllib.loads((EDITORS / "zed" / "extension" / "extension.toml").read_text(encoding="utf-8"))
    assert extension["language_servers"]["jaxlsp"]["languages"] == ["Python"]
    assert extension["id"] == "jaxlsp" and extension["schema_version"] == 1
    cargo = tomllib.loads((EDITORS / "zed" / "extension" / "Cargo.toml").read_text(encoding="utf-8"))
    assert cargo["lib"]["crate-type"] == ["cdylib"] and "zed_extension_api" in cargo["dependencies"]
    source = (EDITORS / "zed" / "extension" / "src" / "lib.rs").read_text(encoding="utf-8")
    assert 'for_worktree("jaxlsp"' in source and 'which("jaxlsp")' in source and '"serve"' in source


# -- The pages ------------------------------------------------------------------------------------

PAGES = ["nvim", "emacs", "helix", "sublime", "zed"]
FILES = {
    "helix": ["languages.toml"],
    "sublime": ["LSP.sublime-settings", "Default.sublime-commands", "Default.sublime-keymap"],
    "zed": ["settings.json", "extension/extension.toml", "extension/Cargo.toml"],
}


@pytest.mark.parametrize("editor", PAGES)
def test_page_snippets_parse(editor: str) -> None:
    page = EDITORS / editor / "README.md"
    blocks = _fenced(page)
    assert blocks, f"{page} has no snippets"
    for language, text in blocks:
        if language == "toml":
            tomllib.loads(text)
        elif language == "json":
            json.loads(text)
    for name in FILES.get(editor, []):
        content = (EDITORS / editor / name).read_text(encoding="utf-8")
        assert any(text == content for _, text in blocks), f"{page} does not show {name} as it is"


def test_documented_trust_store_is_what_the_server_reads(tmp_path: Path) -> None:
    """The trusted.json example in the Helix page (editors that cannot ask) really trusts."""
    (example,) = [json.loads(text) for lang, text in _fenced(EDITORS / "helix" / "README.md") if '"folders"' in text]
    home = tmp_path / "home"
    folders = [f.replace("/home/you", str(home)) for f in example["folders"]]
    store_path = tmp_path / "config" / "jaxlsp" / "trusted.json"
    store_path.parent.mkdir(parents=True)
    store_path.write_text(json.dumps({"folders": folders}))
    store = TrustStore(store_path)
    assert store.is_trusted(Path(folders[0]) / "project")
    assert not store.is_trusted(home / "elsewhere")
