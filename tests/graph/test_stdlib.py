"""jaxlsp.graph runs in the user's interpreter: stdlib only, Python >= 3.10 syntax, no other jaxlsp package."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.deadlines import scaled

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "jaxlsp" / "graph"

PROBE = """
import sys
root = sys.argv[1]
before = set(sys.modules)  # what the interpreter loaded at startup (site, .pth hooks)

class Blocker:
    blocked = []
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top != "jaxlsp":
            self.blocked.append(name)
            raise ImportError("blocked non-stdlib import: " + name)
        return None

sys.meta_path.insert(0, Blocker())
sys.path.insert(0, root)
import json
from jaxlsp.graph import export, html_page, io, model, report, validate
from jaxlsp.graph.model import Coverage, Frame, Graph, Group, Node, Port, Value

g = Graph(
    target={"path": "m.py", "name": "f", "kind": "function"}, profile={"name": None},
    versions={"jax": None, "jaxlib": None, "flax": None, "equinox": None, "python": "3"},
    coverage=Coverage(), sources={}, inputs=[Port("v0", "args/0", "parameter")],
    outputs=[Port("v1", "out", "output")],
    nodes=[Node("n0", "sin", {"x": float("inf")}, ["v0"], ["v1"], "", "g0", Frame("m.py", 1, 0, 1, 3), [])],
    values=[Value("v0", [2], "float32"), Value("v1", [2], "float32", producer="n0")],
    groups=[Group("g0", "jit", None, "jit(f)", None)],
)
assert validate.check(g) == []
assert io.loads(io.dumps(g)) == g
report.render_summary(g); export.to_dot(g); export.to_html(g); validate.load_schema()
others = sorted(m for m in sys.modules if m.startswith("jaxlsp") and m not in ("jaxlsp", "jaxlsp.graph")
                and not m.startswith("jaxlsp.graph."))
print(json.dumps({"blocked": Blocker.blocked, "others": others,
                  "nonstdlib": sorted({m.split(".")[0] for m in set(sys.modules) - before}
                                     - set(sys.stdlib_module_names) - {"jaxlsp"})}))
"""


def test_graph_modules_import_only_the_stdlib() -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-c", PROBE, str(ROOT)], capture_output=True, text=True, timeout=scaled(120), check=False
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    # copy.py probes Jython's ``org.python.core`` and falls back when the import fails.
    assert set(result.pop("blocked")) <= {"org", "org.python", "org.python.core"}
    assert result == {"others": [], "nonstdlib": []}


# Names that exist only from Python 3.11 on (the worker supports 3.10).
PY311 = re.compile(
    r"\b(tomllib|StrEnum|ExceptionGroup|TaskGroup|NotRequired|Required|Self|LiteralString|assert_never|"
    r"reveal_type|file_digest|datetime\.UTC|except\*)\b"
)


def test_graph_modules_are_python_310_syntax() -> None:
    files = sorted(GRAPH.glob("*.py"))
    assert {f.name for f in files} >= {"model.py", "io.py", "validate.py", "report.py", "export.py"}
    for path in files:
        text = path.read_text(encoding="utf-8")
        ast.parse(text, filename=str(path), feature_version=(3, 10))
        assert not PY311.search(text), f"{path.name} uses a Python 3.11+ name: {PY311.search(text)}"
