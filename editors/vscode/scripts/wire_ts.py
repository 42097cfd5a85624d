"""Generate editors/vscode/src/wire.generated.ts from jaxlsp/server/wire.py.

    python editors/vscode/scripts/wire_ts.py          # write the file
    python editors/vscode/scripts/wire_ts.py --check  # exit 1 when the committed file differs

wire.py's TypedDicts become TypeScript interfaces (``NotRequired`` keys optional), its ``Literal``
aliases become type aliases, so the extension can never drift from the server's wire types (a
hand copy did: no ``bodyRange``, ``kind: string``). Read with ``ast``, nothing imported: alias
names survive, and the script needs no installed jaxlsp. tests/server/test_wire_ts.py runs --check.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "jaxlsp" / "server" / "wire.py"
TARGET = ROOT / "editors" / "vscode" / "src" / "wire.generated.ts"
NAMES = {"str": "string", "int": "number", "float": "number", "bool": "boolean", "Any": "unknown", "object": "unknown"}


def ts(node: ast.expr) -> str:
    """A TypeScript type for an annotation (``NotRequired`` is handled by the caller)."""
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "null"
        if isinstance(node.value, str):  # a literal in Literal[...]
            return '"' + node.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return str(node.value).lower()
    if isinstance(node, ast.Name):
        return NAMES.get(node.id, node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return f"{ts(node.left)} | {ts(node.right)}"
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        head = node.value.id
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Literal":
            return " | ".join(ts(a) for a in args)
        if head == "list":
            inner = ts(args[0])
            return f"({inner})[]" if "|" in inner else f"{inner}[]"
        if head == "dict":
            return f"Record<{ts(args[0])}, {ts(args[1])}>"
        if head in ("NotRequired", "Annotated", "Final"):
            return ts(args[0])  # Annotated's size bounds are checked by the server
    raise SystemExit(f"wire_ts.py: no TypeScript for {ast.unparse(node)} in {SOURCE.name}")


def comment(text: str | None, indent: str = "") -> list[str]:
    if not text:
        return []
    lines = [line.strip().replace("``", "`") for line in text.strip().splitlines()]
    return [f"{indent}/**", *[f"{indent} * {line}".rstrip() for line in lines], f"{indent} */"]


def render() -> str:
    module = ast.parse(SOURCE.read_text(encoding="utf-8"))
    out = [
        "// Generated from jaxlsp/server/wire.py by editors/vscode/scripts/wire_ts.py: do not edit.",
        "// Run `python editors/vscode/scripts/wire_ts.py` after changing wire.py (a test checks it).",
        "",
    ]
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            aliased = isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
            if aliased and value.value.id in ("Literal", "Annotated"):  # type: ignore[union-attr]
                out += [f"export type {stmt.targets[0].id} = {ts(value)};", ""]
        # `METHOD: Final = "jaxlsp/..."`: the method and command names, as constants.
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.value, ast.Constant):
            if isinstance(stmt.value.value, str):
                out += [f"export const {stmt.target.id} = {ts(stmt.value)};", ""]
        if isinstance(stmt, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in stmt.bases):
            out += comment(ast.get_docstring(stmt))
            out.append(f"export interface {stmt.name} {{")
            for item in stmt.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    ann = item.annotation
                    optional = isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name)
                    optional = optional and ann.value.id == "NotRequired"  # type: ignore[union-attr]
                    out.append(f"  {item.target.id}{'?' if optional else ''}: {ts(ann)};")
            out += ["}", ""]
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET.relative_to(ROOT)} is out of date with jaxlsp/server/wire.py: run python {Path(__file__).relative_to(ROOT)}")
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
