"""DOT and HTML exports: structure and escaping (the HTML page runs in a browser in tests/viewer)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jaxlsp.graph import io
from jaxlsp.graph.export import to_dot, to_html
from jaxlsp.graph.model import Graph
from jaxlsp.viewer import asset
from tests.graph.test_samples import small_graph

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
    assert json.loads(embedded) == io.to_compact(graph)  # the compact form: the viewer expands it
    assert io.from_json(json.loads(embedded)) == graph


def _outside_scripts(page: str) -> str:
    return re.sub(r"<script[^>]*>.*?</script>", "<script></script>", page, flags=re.S)


def test_html_is_safe_against_markup_in_data() -> None:
    page = to_html(_evil_graph())
    # The graph data, its analysis, the boot line and the viewer bundle: nothing in the data opens
    # or ends one.
    assert page.count("</script>") == 4
    assert "<script>alert" not in page and "<b>&amp;</b>" not in page
    assert "<title>jaxlsp graph: model.py::MLP&lt;script&gt;</title>" in page
    assert "<script>\n" + asset("viewer.js").decode() + "\n</script>" in page


def test_html_is_offline() -> None:
    page = to_html(small_graph())
    markup = _outside_scripts(page)
    assert "://" not in markup
    assert not re.search(r"\b(src|href|action)\s*=", markup, re.I)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp and "default-src 'none'" in csp.group(1)
    assert "connect-src" not in csp.group(1) and "worker-src blob:" in csp.group(1)


def test_html_boots_the_viewer_in_static_mode() -> None:
    page = to_html(small_graph())
    assert 'mode: "static", graph: data("graph-data"), analysis: data("analysis-data"), diff: data("diff-data")' in page
    assert page.index('id="graph-data"') < page.index("window.JAXLSP_VIEWER") < page.index(asset("viewer.js").decode())
    assert page.index('id="analysis-data"') < page.index("window.JAXLSP_VIEWER") and 'id="diff-data"' not in page
    analysis = json.loads(re.search(r'id="analysis-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert analysis["memory"]["peakBytes"] >= 0 and analysis["measured"] is False
    changed = small_graph()
    changed.values[4].shape = ["b", 8]
    with_diff = to_html(changed, base=small_graph())
    found = json.loads(re.search(r'id="diff-data">(.*?)</script>', with_diff, re.S).group(1))  # type: ignore[union-attr]
    assert found["changed"][0]["id"] == "n0" and not found["same"]
    assert "<style>\n" + asset("viewer.css").decode() in page


# The page in a real browser (expand, search, banners, the ELK worker under this CSP):
# tests/viewer/test_viewer.py.
