"""Exports of a graph: Graphviz DOT and one self-contained offline HTML file.

Stdlib only, Python >= 3.10. The HTML is the graph viewer (``jaxlsp/viewer``, static mode) with
the graph's JSON form embedded in a ``<script type="application/json">`` element with ``<``, ``>``,
``&``, U+2028 and U+2029 written as ``\\uXXXX`` escapes, so no string in the data can close the
element; the viewer builds every element from data with ``textContent``, and the page's
Content-Security-Policy forbids any network access.
"""

from __future__ import annotations

import html
from pathlib import Path

from jaxlsp.graph import html_page, slices
from jaxlsp.graph.io import to_compact
from jaxlsp.graph.model import Graph, Group, Node
from jaxlsp.graph.report import shape_str
from jaxlsp.graph.shardings import constraint_spec, map_specs

# --------------------------------------------------------------------------------------------
# DOT


def _dot_str(text: str) -> str:
    """A double-quoted DOT string; newlines become centred line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def _node_id(node_id: str) -> str:
    return _dot_str(f"n:{node_id}")


def to_dot(graph: Graph) -> str:
    """Graphviz source: groups as nested clusters, nodes labelled by primitive, edges by shape/dtype.

    Graph inputs and outputs are ellipses (``in:N`` / ``out:N``); literals and constants draw no
    edge. A loop body's parameters (its carry) come from the node owning the loop, so a scan or
    while body is connected. A group whose parent is missing (or part of a cycle) is drawn at the
    top level.
    """
    values = {v.id: v for v in graph.values}
    groups = {g.id: g for g in graph.groups}
    child_groups: dict[str | None, list[Group]] = {}
    for g in graph.groups:
        parent = g.parent if g.parent in groups else None
        child_groups.setdefault(parent, []).append(g)
    child_nodes: dict[str | None, list[Node]] = {}
    node_of = {n.id: n for n in graph.nodes}
    for n in graph.nodes:
        child_nodes.setdefault(n.group if n.group in groups else None, []).append(n)

    lines = [
        'digraph "jaxlsp" {',
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=10];',
        '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    emitted: set[str] = set()

    def emit(parent: str | None, indent: str) -> None:
        for n in child_nodes.get(parent, ()):
            tip = " ".join(x for x in (n.scope, f"{n.source.path}:{n.source.line}" if n.source else "") if x)
            spec = constraint_spec(n.primitive, n.params)  # reshard, with_sharding_constraint: where to
            attrs = f"label={_dot_str(n.primitive if spec is None else n.primitive + chr(10) + spec)}"
            if tip:
                attrs += f", tooltip={_dot_str(tip)}"
            lines.append(f"{indent}{_node_id(n.id)} [{attrs}];")
        for g in child_groups.get(parent, ()):
            if g.id in emitted:
                continue
            emitted.add(g.id)
            lines.append(f"{indent}subgraph {_dot_str('cluster_' + g.id)} {{")
            label = f"{g.kind}: {g.label}" if g.label else g.kind
            owner = node_of.get(g.node) if g.node is not None else None
            specs = map_specs(owner.primitive, owner.params) if owner is not None else None
            lines.append(f"{indent}  label={_dot_str(label if specs is None else label + chr(10) + specs)};")
            emit(g.id, indent + "  ")
            lines.append(f"{indent}}}")

    emit(None, "  ")
    # Groups never reached from the top (a cycle of parents): draw them at the top level.
    for g in graph.groups:
        if g.id not in emitted:
            child_groups.setdefault(None, []).append(g)
    child_nodes.pop(None, None)
    emit(None, "  ")

    port_of: dict[str, str] = {}
    for i, port in enumerate(graph.inputs):
        value = values.get(port.value)
        label = f"{port.label}\n{shape_str(value)}" if value else port.label
        lines.append(f"  {_dot_str(f'in:{i}')} [shape=ellipse, label={_dot_str(label)}];")
        port_of.setdefault(port.value, f"in:{i}")
    for i, port in enumerate(graph.outputs):
        value = values.get(port.value)
        label = f"{port.label}\n{shape_str(value)}" if value else port.label
        lines.append(f"  {_dot_str(f'out:{i}')} [shape=ellipse, label={_dot_str(label)}];")

    seen: set[tuple[str, str, str]] = set()

    def edge(src: str, dst: str, vid: str) -> None:
        if (src, dst, vid) in seen:
            return
        seen.add((src, dst, vid))
        value = values.get(vid)
        label = shape_str(value) if value else vid
        lines.append(f"  {src} -> {dst} [label={_dot_str(label)}];")

    nodes = {n.id for n in graph.nodes}

    def owner(gid: str | None) -> str | None:
        """The equation owning the innermost region around ``gid`` (a loop body's scan/while)."""
        seen: set[str] = set()
        while gid is not None and gid in groups and gid not in seen:
            seen.add(gid)
            found = groups[gid].node
            if found is not None and found in nodes:
                return found
            gid = groups[gid].parent
        return None

    for n in graph.nodes:
        for vid in n.inputs:
            value = values.get(vid)
            if value is not None and value.producer is not None:
                edge(_node_id(value.producer), _node_id(n.id), vid)
            elif vid in port_of:
                edge(_dot_str(port_of[vid]), _node_id(n.id), vid)
            elif value is not None and value.kind == "var":
                # A region's own parameter (a scan or while body's carry, a shard_map body's shard):
                # the loop feeds it, so it is drawn coming from the node that owns the region.
                source = owner(n.group)
                if source is not None and source != n.id:
                    edge(_node_id(source), _node_id(n.id), vid)
    for i, port in enumerate(graph.outputs):
        value = values.get(port.value)
        if value is not None and value.producer is not None:
            edge(_node_id(value.producer), _dot_str(f"out:{i}"), port.value)
        elif port.value in port_of:
            edge(_dot_str(port_of[port.value]), _dot_str(f"out:{i}"), port.value)
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# HTML


def _script_json(data: object) -> str:
    """JSON text that is safe inside a ``<script>`` element: ``</script>``, ``<!--`` cannot occur.
    Built in slices (a node at a time), so a thread exporting a big graph lets the server's loop run."""
    return "".join(_script_safe(piece) for piece in slices.iter_dumps(data, depth=2))


def _script_safe(text: str) -> str:
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _viewer_asset(name: str) -> str:
    """A built viewer asset, read by path: importing ``jaxlsp.viewer`` would tie this stdlib-only
    package to the rest of jaxlsp (the capture worker ships ``jaxlsp.graph`` alone, without it)."""
    path = Path(__file__).resolve().parent.parent / "viewer" / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise FileNotFoundError(f"the HTML export needs the built viewer ({path}): {e.strerror}") from e


def _data_element(element_id: str, data: object) -> str:
    return f'<script type="application/json" id="{element_id}">{_script_json(data)}</script>\n'


def _graph_script(graph: Graph) -> str:
    """The graph's JSON for the page, in the compact form (version 2: the viewer expands the rows
    itself; a 200,000-equation page is 9 MB instead of 87 MB and reads in a tenth of the time),
    its dicts let go of a piece at a time (``slices.release``: freed at once, a 60,000-equation
    graph's held the GIL 0.6 s in the exporting thread)."""
    data = to_compact(graph)
    text = _script_json(data)
    slices.release(data)
    return text


def to_html(graph: Graph, base: Graph | None = None) -> str:
    """One self-contained offline HTML page: the graph viewer (static mode) with the graph inlined,
    its analysis (costs by module, memory, precision: the overlays) and, given a ``base`` graph,
    what changed from it (the diff mode)."""
    from jaxlsp.graph.analysis import analysis_json
    from jaxlsp.graph.diff import diff

    extra = [_data_element("analysis-data", analysis_json(graph))]
    if base is not None:
        extra.append(_data_element("diff-data", diff(base, graph).json()))
    target = graph.target
    title = html.escape(f"{target.get('path', '?')}::{target.get('name', '?')}")
    script = _viewer_asset("viewer.js")
    style = _viewer_asset("viewer.css")
    return "".join(
        [
            html_page.HEAD.replace("$TITLE", title, 1),
            "<style>\n",
            style,
            "</style>\n",
            '<script type="application/json" id="graph-data">',
            _graph_script(graph),
            "</script>\n",
            *extra,
            html_page.BOOT,
            "<script>\n",
            script,
            "\n</script>\n</head>\n<body></body>\n</html>\n",
        ]
    )
