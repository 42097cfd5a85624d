"""DOT and HTML exports: structure, escaping, and the HTML page's script run under node with a tiny DOM."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.export import to_dot, to_html
from jaxlsp.graph.model import Graph
from tests.unit.test_graph_samples import chain_graph, small_graph

EVIL = "</script><script>alert(1)</script><!--"

# --------------------------------------------------------------------------------------------
# DOT


def _dot_tokens(text: str) -> list[str]:
    """Quoted strings, braces, brackets and bare words of a DOT text."""
    return re.findall(r'"(?:[^"\\]|\\.)*"|[{}\[\];=,]|->|[^\s{}\[\];=,"]+', text)


def _clusters(text: str) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """Parse a DOT text: ``{cluster: parent cluster}``, ``{node statement id: cluster}``; asserts balanced braces."""
    tokens = _dot_tokens(text)
    stack: list[str | None] = []
    parents: dict[str, str | None] = {}
    placed: dict[str, str | None] = {}
    i = 0
    pending: str | None = None
    while i < len(tokens):
        tok = tokens[i]
        if tok == "subgraph":
            pending = json.loads(tokens[i + 1])
            i += 2
            continue
        if tok == "{":
            if pending is not None:
                parents[pending] = next((s for s in reversed(stack) if s is not None), None)
            stack.append(pending)
            pending = None
        elif tok == "}":
            assert stack, "unbalanced '}'"
            stack.pop()
        elif tok.startswith('"n:') and tokens[i + 1] == "[" and tokens[i - 1] != "->":
            placed[json.loads(tok)] = next((s for s in reversed(stack) if s is not None), None)
        i += 1
    assert stack == [], "unbalanced '{'"
    return parents, placed


def test_dot_nests_groups_as_clusters() -> None:
    graph = small_graph()
    text = to_dot(graph)
    assert text.startswith('digraph "jaxlsp" {')
    parents, placed = _clusters(text)
    assert parents == {"cluster_g0": None, "cluster_g1": "cluster_g0", "cluster_g2": None, "cluster_g3": "cluster_g0"}
    assert placed == {f"n:{n.id}": (f"cluster_{n.group}" if n.group else None) for n in graph.nodes}
    assert 'label="module: Dense_0"' in text and 'label="scan: scan (length 12)"' in text
    assert '"n:n0" [label="dot_general", tooltip="Model/Dense_0 model.py:5"];' in text


def test_dot_edges_carry_shapes() -> None:
    text = to_dot(small_graph())
    edges = set(re.findall(r'^  ("[^"]+" -> "[^"]+") \[label="([^"]*)"\];$', text, re.M))
    assert edges == {
        ('"in:2" -> "n:n0"', "f32[b,3]"),
        ('"in:0" -> "n:n0"', "f32[3,4]"),
        ('"n:n0" -> "n:n1"', "f32[b,4]"),
        ('"in:1" -> "n:n1"', "f32[4]"),
        ('"n:n1" -> "n:n2"', "f32[b,4]"),
        ('"n:n1" -> "n:n3"', "f32[b,4]"),
        ('"n:n2" -> "n:n4"', "f32[b,4]"),
        ('"n:n4" -> "n:n5"', "f32[b,4]"),
        ('"n:n4" -> "n:n6"', "f32[b,4]"),
        ('"n:n4" -> "out:0"', "f32[b,4]"),
        ('"n:n5" -> "out:1"', "f32[b,4]"),
    }
    assert '"in:0" [shape=ellipse, label="params/Dense_0/kernel\\nf32[3,4]"];' in text


def test_dot_escapes_labels_and_survives_broken_groups() -> None:
    graph = small_graph()
    graph.groups[1].label = 'say "hi"\\ \n{x}'
    graph.groups[0].parent = "g3"  # a cycle g0 <-> g3: still drawn once each
    text = to_dot(graph)
    assert 'label="module: say \\"hi\\"\\\\ \\n{x}";' in text
    parents, placed = _clusters(text)
    assert set(parents) == {"cluster_g0", "cluster_g1", "cluster_g2", "cluster_g3"}
    assert len(placed) == len(graph.nodes)
    assert text.count('subgraph "cluster_') == 4


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz is not installed")
def test_graphviz_accepts_the_dot(tmp_path: Path) -> None:
    graph = small_graph()
    graph.groups[1].label = EVIL + ' "quoted" \\'
    subprocess.run(["dot", "-Tsvg", "-o", str(tmp_path / "g.svg")], input=to_dot(graph), text=True, check=True)


# --------------------------------------------------------------------------------------------
# HTML: static checks

_DATA = re.compile(r'<script type="application/json" id="graph-data">(.*?)</script>', re.S)
_CODE = re.compile(r"<script>\n(.*?)</script>", re.S)


def _evil_graph() -> Graph:
    graph = small_graph()
    graph.groups[1].label = EVIL
    graph.nodes[1].scope = "Model/<b>&amp;</b>"
    graph.target["name"] = "MLP<script>"
    graph.nodes[0].params["note"] = "\u2028\u2029 & <!-- -->"
    return graph


def test_html_embeds_the_escaped_json() -> None:
    graph = _evil_graph()
    page = to_html(graph)
    match = _DATA.search(page)
    assert match
    embedded = match.group(1)
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert "\u2028" not in embedded and "\u2029" not in embedded
    assert json.loads(embedded) == io.to_json(graph)
    assert io.from_json(json.loads(embedded)) == graph


def test_html_is_safe_against_markup_in_data() -> None:
    page = to_html(_evil_graph())
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<script>alert" not in page and "<b>&amp;</b>" not in page
    assert "<title>jaxlsp graph: model.py::MLP&lt;script&gt;</title>" in page
    assert "<h1>model.py::MLP&lt;script&gt;</h1>" in page
    code = _CODE.search(page)
    assert code and "innerHTML" not in code.group(1) and "eval(" not in code.group(1)


def test_html_is_offline() -> None:
    page = to_html(small_graph())
    assert "://" not in page
    assert not re.search(r"\b(src|href|action)\s*=", page, re.I)
    assert not re.search(r"@import|url\(|fetch\(|XMLHttpRequest|WebSocket", page)
    # The only "http" is the Content-Security-Policy that forbids every network request.
    assert [m.start() for m in re.finditer("http", page)] == [page.index('http-equiv="Content-Security-Policy"')]
    assert "default-src 'none'" in page


def test_html_carries_the_summary_and_the_banner() -> None:
    page = to_html(small_graph())
    assert "Static export." in page and "language\nserver" in page
    assert "16 parameters (64 B)" in page and "f32[b,4]" in page


# --------------------------------------------------------------------------------------------
# HTML: the page's script, run under node with a minimal DOM

NODE = shutil.which("node")

DRIVER = r"""
const fs = require("fs");
const vm = require("vm");
class El {
  constructor(tag) { this.tagName = tag; this.children = []; this.parentNode = null; this._text = "";
    this.listeners = {}; this.className = ""; this.hidden = false; this.open = false; this.title = ""; this.value = ""; }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(""); }
  set textContent(v) { this.children.forEach((c) => { c.parentNode = null; }); this.children = []; this._text = String(v); }
  appendChild(c) { if (c.parentNode) c.parentNode.removeChild(c); c.parentNode = this; this.children.push(c); return c; }
  removeChild(c) { const i = this.children.indexOf(c); if (i < 0) throw new Error("not a child");
    this.children.splice(i, 1); c.parentNode = null; return c; }
  insertBefore(c, ref) { if (ref === null) return this.appendChild(c); const i = this.children.indexOf(ref);
    if (i < 0) throw new Error("not a child"); c.parentNode = this; this.children.splice(i, 0, c); return c; }
  get nextSibling() { if (!this.parentNode) return null; const s = this.parentNode.children;
    return s[s.indexOf(this) + 1] || null; }
  addEventListener(t, f) { (this.listeners[t] = this.listeners[t] || []).push(f); }
  fire(t) { (this.listeners[t] || []).forEach((f) => f({ type: t, target: this })); }
}
const ids = {};
for (const id of ["tree", "results", "count", "search"]) ids[id] = new El("div");
ids["graph-data"] = new El("script");
ids["graph-data"].textContent = fs.readFileSync(process.argv[2], "utf8");
globalThis.window = globalThis;
globalThis.document = { getElementById: (id) => ids[id] || null, createElement: (t) => new El(t),
  createTextNode: (t) => { const e = new El("#text"); e._text = String(t); return e; } };
const t0 = performance.now();
vm.runInThisContext(fs.readFileSync(process.argv[3], "utf8"));
const report = { initMs: performance.now() - t0, top: ids.tree.children.length };
const actions = JSON.parse(process.argv[4]);

function label(e) { return e.tagName === "details" ? e.children[0].textContent : e.textContent; }
function dump(e, depth, out) {
  for (const c of e.children) {
    if (c.tagName === "#text" || c.tagName === "summary") continue;
    if (c.hidden) continue;
    if (c.className === "children") { dump(c, depth, out); continue; }
    out.push("  ".repeat(depth) + c.tagName + ": " + label(c));
    if (c.tagName === "details") dump(c, depth + 1, out);
  }
  return out;
}
function openAll(e) {
  let opened = 0;
  for (const c of e.children.slice()) {
    if (c.tagName === "details" && !c.open) { c.open = true; c.fire("toggle"); opened++; }
    opened += openAll(c);
  }
  return opened;
}
for (const a of actions) {
  const t = performance.now();
  if (a.do === "openAll") { while (openAll(ids.tree) > 0) {} report.tree = dump(ids.tree, 0, []); }
  if (a.do === "openFirst") { const d = ids.tree.children.find((c) => c.tagName === "details");
    d.open = true; d.fire("toggle"); report.first = dump(d, 0, []); }
  if (a.do === "more") { const b = ids.tree.children.find((c) => c.tagName === "button"); b.fire("click");
    report.afterMore = ids.tree.children.length; }
  if (a.do === "click") { const rows = []; (function walk(e) { for (const c of e.children) { if (c.className === "node") rows.push(c); walk(c); } })(ids.tree);
    rows[a.index].fire("click"); report.detail = rows[a.index].nextSibling.textContent; }
  if (a.do === "search") { ids.search.value = a.q; window.jaxlspGraph.runSearch();
    report[a.key] = { count: ids.count.textContent, rows: ids.results.children.map((c) => c.textContent),
      treeHidden: ids.tree.hidden }; }
  report[(a.key || a.do) + "Ms"] = performance.now() - t;
}
report.treeTop = dump(ids.tree, 0, []).filter((l) => !l.startsWith(" ")).slice(0, 5);
console.log(JSON.stringify(report));
"""


def run_page(tmp_path: Path, graph: Graph, actions: list[dict[str, Any]]) -> dict[str, Any]:
    page = to_html(graph)
    data, code = _DATA.search(page), _CODE.search(page)
    assert data and code
    (tmp_path / "data.json").write_text(data.group(1), encoding="utf-8")
    (tmp_path / "page.js").write_text(code.group(1), encoding="utf-8")
    (tmp_path / "driver.js").write_text(DRIVER, encoding="utf-8")
    assert NODE
    out = subprocess.run(
        [
            NODE,
            str(tmp_path / "driver.js"),
            str(tmp_path / "data.json"),
            str(tmp_path / "page.js"),
            json.dumps(actions),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return report


needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


@needs_node
def test_page_script_renders_the_group_tree(tmp_path: Path) -> None:
    report = run_page(tmp_path, _evil_graph(), [{"do": "openAll"}, {"do": "click", "index": 0}])
    # Markup in labels is text; Model holds Dense_0 (n0, n1), n4, n5 and the scan body n6 after
    # its owner n5; jit(relu) sits right after its owner n2 at the top level. Literals show their value.
    assert report["tree"] == [
        "details: moduleModel  5 ops",
        "  details: module" + EVIL + "  2 ops",
        "    div: dot_general (f32[b,3], f32[3,4]) \u2192 f32[b,4]Model/Dense_0model.py:5",
        "    div: add (f32[b,4], f32[4]) \u2192 f32[b,4]Model/<b>&amp;</b>model.py:5",
        "  div: mul (f32[b,4], f32[4]) \u2192 f32[b,4]Modelmodel.py:7",
        "  div: scan (f32[b,4]) \u2192 f32[b,4]Model",
        "  details: scanscan (length 12)  1 op",
        "    div: tanh (f32[b,4]) \u2192 f32[b,4]Model",
        "div: jit (f32[b,4]) \u2192 f32[b,4]model.py:5",
        "details: jitjit(relu)  1 op",
        "  div: max (f32[b,4], 0:f32[]) \u2192 f32[b,4]",
    ]
    assert "frames (innermost first):\n  model.py:5:9  MLP.__call__\n  train.py:10:5  main" in report["detail"]
    assert '"note": "\u2028\u2029 & <!-- -->"' in report["detail"]


@needs_node
def test_page_script_searches_by_op_scope_and_shape(tmp_path: Path) -> None:
    actions = [
        {"do": "search", "q": "dot_general", "key": "op"},
        {"do": "search", "q": "model/dense_0", "key": "scope"},
        {"do": "search", "q": "f32[4]", "key": "shape"},
        {"do": "search", "q": "Model   f32[b,4]  mul", "key": "and"},
        {"do": "search", "q": "  ", "key": "clear"},
    ]
    report = run_page(tmp_path, small_graph(), actions)
    assert report["op"]["count"] == "1 of 7 ops match" and report["op"]["treeHidden"] is True
    assert report["op"]["rows"] == [
        "dot_general (f32[b,3], f32[3,4]) \u2192 f32[b,4]Model/Dense_0  in Model \u203a Dense_0model.py:5"
    ]
    assert [r.split(" ")[0] for r in report["scope"]["rows"]] == ["dot_general", "add"]
    assert [r.split(" ")[0] for r in report["shape"]["rows"]] == ["add", "mul"]
    assert [r.split(" ")[0] for r in report["and"]["rows"]] == ["mul"]
    assert report["clear"] == {"count": "7 ops", "rows": [], "treeHidden": False}


@needs_node
def test_page_script_is_fast_on_20000_nodes(tmp_path: Path) -> None:
    flat = run_page(tmp_path, chain_graph(20_000), [{"do": "more"}, {"do": "search", "q": "m.py:19999", "key": "find"}])
    assert flat["top"] == 301  # 300 rows and a "show more" button
    assert flat["afterMore"] == 601
    assert flat["find"]["rows"] == ["sin (f32[4,128]) \u2192 f32[4,128]m.py:19999"]
    assert flat["initMs"] < 1000 and flat["findMs"] < 1000

    grouped = run_page(
        tmp_path,
        chain_graph(20_000, group_every=1000),
        [{"do": "openFirst"}, {"do": "search", "q": "sin", "key": "all"}],
    )
    assert grouped["top"] == 20
    assert grouped["treeTop"][0] == "details: moduleBlock_0  1,000 ops"
    assert len(grouped["first"]) == 301
    assert grouped["all"]["count"] == "20,000 of 20,000 ops match"
    assert len(grouped["all"]["rows"]) == 501  # capped, with a "refine the filter" line
    assert grouped["initMs"] < 1000 and grouped["openFirstMs"] < 1000 and grouped["allMs"] < 1500
