"""What a traced line produced, where the user reads code: hover (the operations at the line with
their output types, marked stale after edits; it also highlights them in open viewer pages) and
inlay hints (the type each assignment line binds, off unless ``inlayHints`` is set)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types

from jaxlsp.graph.compiled import at_line
from jaxlsp.graph.costs import ROLLED_UP, is_backward
from jaxlsp.graph.diff import GraphDiff
from jaxlsp.graph.report import merge_stats, shape_str, stats_text
from jaxlsp.graph.shardings import constraint_spec, map_specs
from jaxlsp.graph.store import Trace
from jaxlsp.graph.timing import hover_line
from jaxlsp.live.dims import label, names_at
from jaxlsp.offloop import off_loop
from jaxlsp.server.features import unshaped
from jaxlsp.server.features.documents import Documents
from jaxlsp.server.features.navigation import traced_cell
from jaxlsp.server.features.viewer import Viewer
from jaxlsp.server.host import Host

HOVER_LINES = 12
SMALL = 500  # operations at a line summed up in the loop; more, in a graph thread
_SYMBOL = re.compile(r"[A-Za-z_]\w*")  # a symbol in a dimension as JAX prints it (``2*batch``)
_ASSIGNMENT = re.compile(r"\s*[A-Za-z_][\w.,\s\[\]]*(?::[^=]+)?=(?!=)")


class Hover:
    def __init__(self, ls: Host, viewer: Viewer, documents: Documents | None = None) -> None:
        self.ls = ls
        self.viewer = viewer
        self.documents = documents
        self.trees = unshaped.Trees()

    def register(self, server: Host) -> None:
        @server.feature(types.TEXT_DOCUMENT_HOVER)
        async def hover(ls: Host, params: types.HoverParams) -> types.Hover | None:
            ls.hovered(params.text_document.uri, params.position.line)
            found = self.viewer.navigation.at(params.text_document.uri, params.position.line)
            if found is None:  # a body line of a target says why it has no shape (issue 46.5)
                why = await self.no_shape(params.text_document.uri, params.position.line)
                if why is None:
                    return None
                return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=why))
            trace, nodes = found
            self.viewer.highlight(trace.id, nodes)
            return types.Hover(
                contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=await self.text(trace, nodes))
            )

        @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
        def inlay_hint(ls: Host, params: types.InlayHintParams) -> list[types.InlayHint]:
            for hear in ls.shown_listeners:  # asked for the visible range of a shown document
                hear(params.text_document.uri)
            return self.inlay_hints(params.text_document.uri, params.range.start.line, params.range.end.line)

    async def no_shape(self, uri: str, line: int) -> str | None:
        """One line on why the 0-based ``line`` of a target's body has no shape, and what would
        give it one (features/unshaped.py); None outside every target, on a comment, a blank
        line, a docstring, a ``def`` line, and in a notebook."""
        view = self.ls.view(uri)
        if view is None or view.cells is not None or not view.lines[line : line + 1]:
            text = None
        else:
            text = view.lines[line].strip()
        if view is None or not text or text.startswith("#"):
            return None
        session = self.ls.session
        found = await self.documents.discover(view.path) if self.documents is not None else session.discover(view.path)
        entry = unshaped.innermost_entry(found.entrypoints, line) if found is not None else None
        if entry is None:
            return None
        tree = self.trees.parse("\n".join(view.lines))
        where = unshaped.place(tree, entry, line + 1) if tree is not None else None
        if where is None:
            return None
        key = str(view.path.resolve())
        covered: frozenset[int] = frozenset()
        stale = False
        for trace in session.graphs.covering(key):
            lines = trace.lines_with_nodes(key)
            if any(entry.line <= n <= entry.end_line for n in lines):
                covered |= lines
                stale = stale or bool(trace.stale_sources(lambda p: session.index.text(Path(p))))
        return unshaped.no_shape(entry, where, covered, stale, self.ls.live_state(uri, entry.name))

    def inlay_hints(self, uri: str, first: int, last: int) -> list[types.InlayHint]:
        """The type of the value each assignment line binds, from the freshest trace covering it."""
        view = self.ls.view(uri)
        if view is None or not self.ls.session.options.inlay_hints:
            return []
        key = str(view.path.resolve())
        traces = self.ls.session.graphs.covering(key)
        if not traces:
            return []
        lines = view.lines
        hints = []
        for line in range(first, min(last, len(lines) - 1) + 1):
            text = lines[line].rstrip("\r\n")
            where = view.frame_at(line)
            if where is None or not _ASSIGNMENT.match(text):
                continue
            cell = traced_cell(traces[0], uri, where[0])
            nodes = [
                n
                for n in traces[0].nodes_at(key, where[1], cell)
                if n.frames and traces[0].frame_path(n.frames[0]) == key
            ]
            if not nodes:
                continue
            last_node = max(nodes, key=lambda n: int(n.id[1:]) if n.id[1:].isdigit() else 0)
            types_ = [shape_str(v) for o in last_node.outputs if (v := traces[0].value(o)) is not None]
            if not types_:
                continue
            position = self.ls.workspace.position_codec.position_to_client_units(lines, types.Position(line, len(text)))
            hints.append(
                types.InlayHint(
                    position=position, label=": " + ", ".join(types_), kind=types.InlayHintKind.Type, padding_left=True
                )
            )
        return hints

    def costs(self, nodes: Sequence[Any]) -> list[str]:
        """XLA's figures of the line's equations, times how often each runs (loops)."""
        measured = [n for n in nodes if n.costs is not None and n.primitive not in ROLLED_UP]
        if not measured:
            return []
        flops = sum(int(n.costs["flops"]) * int(n.costs["runs"]) for n in measured)
        moved = sum(int(n.costs["bytes"]) * int(n.costs["runs"]) for n in measured)
        backward = sum(int(n.costs["flops"]) * int(n.costs["runs"]) for n in measured if is_backward(n))
        split = f" ({backward:,} in the backward pass)" if backward else ""
        return ["", f"costs: {flops:,} FLOPs{split}, {moved:,} bytes accessed"]

    def changes(self, found: GraphDiff | None, nodes: Sequence[Any]) -> list[str]:
        """What changed at this line since the target's previous trace (the diff's summary else)."""
        if found is None or found.same:
            return []
        ids = {n.id for n in nodes}
        here = [c.describe() for c in found.changed if c.after.id in ids]
        added = [n for n in found.added if n.id in ids]
        if not here and not added:
            return ["", f"since the last trace: {found.summary()}"]
        lines = ["", "changed here since the last trace:"]
        lines += [f"- `{text}`" for text in here[:HOVER_LINES]]
        if added:
            lines.append(f"- {len(added)} new op{'s' if len(added) != 1 else ''}: `{added[0].primitive}`")
        return lines

    async def text(self, trace: Trace, nodes: Sequence[Any]) -> str:
        """Operations at the line with their output types, aggregated over repeated calls, and
        after a values run their statistics (over all those calls) beside each type."""
        stale = trace.stale_sources(lambda p: self.ls.session.index.text(Path(p)))
        meta = trace.meta
        state = (
            "**stale**: re-trace to update (changed: " + ", ".join(Path(p).name for p in stale) + ")"
            if stale
            else "fresh"
        )
        head = [f"**jaxlsp** · `{meta.get('name')}` · profile `{meta.get('profile')}` · {state}", ""]
        # The rest depends on the trace alone: made once per line, off the loop (a loop's line can
        # hold 60,000 operations, a fifth of a second to sum up), until a values run adds statistics.
        key = ("hover", nodes[0].id, nodes[-1].id, len(nodes)) if nodes else ("hover",)
        body: list[str] | None = trace.memo.get(key)
        if body is None:
            changes = self.ls.session.graphs.changes(trace)  # made with the trace, off the loop too
            if len(nodes) > SMALL:
                body = await off_loop(self._body, trace, nodes, changes)
            else:
                body = self._body(trace, nodes, changes)
            trace.remember(key, body)
        learned = await self.learned_sizes(trace, nodes)
        # No footer: a trace id or a method name means nothing to the reader, and a link would
        # need a trusted command URI that not every editor renders.
        return "\n".join(head + body + learned)

    async def learned_sizes(self, trace: Trace, nodes: Sequence[Any]) -> list[str]:
        """``batch = 3, 5 in the learned calls``: the sizes each symbolic dimension at the line
        had in the calls it was learned from (issue 56.5), when the trace's inputs came from them."""
        symbolic = [str(s) for s in (trace.info.profile.get("symbolic") or [])]
        if not symbolic:
            return []
        shown = {str(d) for n in nodes for v in n.outputs if (value := trace.value(v)) is not None for d in value.shape}
        here = [s for s in symbolic if any(s in _SYMBOL.findall(d) for d in shown)]
        if not here:
            return []
        sizes: dict[str, list[int]] | None = trace.memo.get(("learned-sizes",))
        if sizes is None:
            sizes = await off_loop(self._learned_sizes, trace)
            trace.remember(("learned-sizes",), sizes)
        said = [f"{s} = {', '.join(map(str, sizes[s]))}" for s in here if sizes.get(s)]
        return ["", "; ".join(said) + " in the learned calls"] if said else []

    def _learned_sizes(self, trace: Trace) -> dict[str, list[int]]:
        from jaxlsp.capture.inputs.signatures import SignatureStore

        target = trace.info.target
        python = trace.meta.get("interpreter")
        if not isinstance(python, str) or not target.get("path") or not target.get("name"):
            return {}
        path = Path(trace.resolve(str(target["path"])))
        try:
            found = SignatureStore(self.ls.session.folder_of(path)).lookup(python, path, str(target["name"]))
        except OSError:
            return {}
        return dict(found.sizes) if found is not None else {}

    def _body(self, trace: Trace, nodes: Sequence[Any], changes: GraphDiff | None) -> list[str]:
        counts: Counter[tuple[str, str]] = Counter()
        stats: dict[tuple[str, str], list[list[dict[str, Any]]]] = {}
        contracts = trace.contracts
        for n in nodes:
            values = [value for v in n.outputs if (value := trace.value(v)) is not None]
            named = names_at(contracts, n.source.path, n.source.line) if contracts and n.source else {}
            outs = ", ".join(_with_names(shape_str(value), value.shape, named) for value in values)
            # a reshard or with_sharding_constraint says the sharding it asks for, a shard_map its specs
            said = constraint_spec(n.primitive, n.params) or map_specs(n.primitive, n.params)
            primitive = f"{n.primitive}({said})" if said else n.primitive
            counts[(primitive, outs)] += 1
            for i, value in enumerate(values):
                if value.stats is not None:
                    per_output = stats.setdefault((primitive, outs), [[] for _ in values])
                    if i < len(per_output):
                        per_output[i].append(value.stats)
        lines: list[str] = []
        for (primitive, outs), count in counts.most_common(HOVER_LINES):
            times = f" \u00d7{count}" if count > 1 else ""  # the multiplication sign: "x12"
            found = stats.get((primitive, outs))
            if found:
                types_ = outs.split(", ") if outs else []
                outs = ", ".join(
                    f"{t} · {stats_text(merge_stats(items))}" if items else t
                    for t, items in zip(types_, found, strict=False)
                )
            lines.append(f"- `{primitive}` → `{outs}`{times}")
        if len(counts) > HOVER_LINES:
            lines.append(f"- … {len(counts) - HOVER_LINES} more")
        first = (trace.execution or {}).get("firstNonFinite")
        if first and any(n.id == first.get("node") for n in nodes):
            lines += ["", f"**{first.get('message')}**"]
        scopes = sorted({n.scope for n in nodes if n.scope})
        if scopes:
            lines += ["", "scope: " + ", ".join(f"`{s}`" for s in scopes[:4])]
        measured = hover_line(trace.time, [n.id for n in nodes])
        if measured:
            lines += ["", measured]
        lines += at_line(trace.info.compiled, nodes)  # on the pod (or devices) it was compiled for
        lines += self.costs(nodes) + self.changes(changes, nodes)
        return lines


def _with_names(text: str, shape: Any, named: dict[int, str]) -> str:
    """``f32[8,128]  batch x 128`` where the line's jaxtyping annotations named a size."""
    said = label(tuple(shape), named) if named else None
    return f"{text}  {said}" if said else text
