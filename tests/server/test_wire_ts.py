"""The VS Code extension's wire types are generated from ``jaxlsp/server/wire.py``
(``editors/vscode/scripts/wire_ts.py``): a change to wire.py without regenerating, or a hand
copy of a server type in ``wire.ts``, fails here (a hand copy had drifted: no ``bodyRange``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "editors" / "vscode" / "scripts" / "wire_ts.py"
GENERATED = ROOT / "editors" / "vscode" / "src" / "wire.generated.ts"
HAND = ROOT / "editors" / "vscode" / "src" / "wire.ts"


def test_the_generated_wire_types_are_up_to_date() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_generated_file_has_every_server_type() -> None:
    text = GENERATED.read_text(encoding="utf-8")
    for name in ("EntrypointItem", "TraceParams", "TraceResult", "NeedsInputResult", "NodesAtResult", "LensData"):
        assert f"export interface {name} {{" in text, name
    # The fields the hand copy had lost, and the literal kinds it had widened to string.
    item = text.split("export interface EntrypointItem {", 1)[1].split("}", 1)[0]
    assert "bodyRange: Range;" in item and "fields: SetupField[];" in item and "kind: EntrypointKind;" in item
    assert 'export type EntrypointKind = "function" | "linen" | "nnx" | "equinox";' in text
    assert "errors?: Record<string, string>;" in text


def test_wire_ts_declares_no_server_type_by_hand() -> None:
    generated = set(re.findall(r"^export (?:interface|type) (\w+)", GENERATED.read_text(encoding="utf-8"), re.M))
    hand = set(re.findall(r"^export (?:interface|type) (\w+)", HAND.read_text(encoding="utf-8"), re.M))
    assert not hand & generated, f"wire.ts redeclares server types: {sorted(hand & generated)}"
