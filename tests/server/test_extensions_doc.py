"""The docs track the code: LSP wire types, the discover example, the discovery rules."""

from __future__ import annotations

import hashlib
import json
import re
import typing
from pathlib import Path

from pygls.workspace.position_codec import PositionCodec

from jaxlsp.discovery import Classifier, WorkspaceIndex
from jaxlsp.server import wire
from jaxlsp.server.convert import entry_json

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "lsp-extensions.md").read_text()


def test_extensions_doc_carries_the_hash_of_the_wire_types() -> None:
    digest = hashlib.sha256((ROOT / "jaxlsp" / "server" / "wire.py").read_bytes()).hexdigest()
    match = re.search(r"wire\.py sha256: ([0-9a-f]{64})", DOC)
    assert match, "docs/lsp-extensions.md lost its wire.py hash line"
    assert match.group(1) == digest, "jaxlsp/server/wire.py changed: update docs/lsp-extensions.md, then its hash"


def _interfaces() -> dict[str, str]:
    return dict(re.findall(r"interface (\w+) \{(.*?)\n\}", DOC, re.S))


def test_every_wire_type_and_key_is_documented() -> None:
    documented = _interfaces()
    for name, value in vars(wire).items():
        if not (isinstance(value, type) and typing.is_typeddict(value)) or name in ("Position", "Range"):
            continue
        if name in ("TextDocumentIdentifier", "Location"):
            continue  # standard LSP types
        assert name in documented, f"interface {name} is missing from docs/lsp-extensions.md"
        for key in typing.get_type_hints(value):
            assert re.search(rf"\b{key}\??:", documented[name]), f"{name}.{key} is not documented"


def test_discover_example_matches_the_server_output() -> None:
    example = re.search(r'\{"jsonrpc": "2.0", "id": 3, "result": (.*?)\}\n```', DOC, re.S)
    assert example
    documented = json.loads(example.group(1))
    path = ROOT / "examples" / "nnx_cnn.py"
    found = Classifier(WorkspaceIndex([ROOT])).discover(path)
    lines = path.read_text().splitlines()
    actual = [entry_json(e, lines, PositionCodec()) for e in found.entrypoints if e.name == "CNN"]
    assert documented["entrypoints"] == actual
