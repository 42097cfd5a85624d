"""Costs: XLA's figures for each equation, rolled up through regions into nodes, groups, modules
and the whole program; the per-module table ``jaxlsp trace --costs`` prints and ``jaxlsp/costs``
returns.

Stdlib only, Python >= 3.10: the capture worker calls :func:`annotate` on the graph it builds, with
the figures it measured for each equation lowered alone (``jaxlsp.worker.program.costs``); readers
roll them up from the graph alone.

How a node counts (its ``costs``, docs/graph-format.md):

- an ordinary equation has XLA's figures for one execution of it;
- a call-like equation (``jit``, ``remat``, ``custom_jvp_call``, ``custom_vjp_call``) has its
  body's sum; ``cond`` its most expensive branch (``branch`` says which); ``scan`` its body times
  ``length`` (``trips``); ``while`` its body times the trip count when the loop has the pattern of
  a counted loop, else once (``tripsStatic: false``);
- ``runs`` is how many times the totals count a node: 1 at the top level, multiplied by the trips
  of each loop around it, 0 inside a branch that is not the most expensive one;
- another primitive with bodies (``reduce``, ``scatter``'s combiner, ``sort``'s comparator,
  ``custom_linear_solve``, ``shard_map``) is measured whole, like an ordinary equation; the nodes
  of its bodies carry no costs.

The program's total is the sum over measured equations of figures times runs. XLA's own
whole-program analysis counts each loop body once: :func:`body_once` is that sum with every
counted equation taken once, for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaxlsp.graph.model import Graph, Node

FIGURES = ("flops", "bytes", "transcendentals")
# Equations whose figures are their bodies' (the body runs in their place, as it stands).
CALLS = frozenset(
    {
        "jit",
        "pjit",
        "closed_call",
        "core_call",
        "remat2",
        "checkpoint",
        "remat",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
    }
)
CONTROL = frozenset({"cond", "while", "scan"})
ROLLED_UP = CALLS | CONTROL


@dataclass
class Figures:
    flops: int = 0
    bytes: int = 0
    transcendentals: int = 0

    def add(self, other: Figures, times: int = 1) -> None:
        self.flops += other.flops * times
        self.bytes += other.bytes * times
        self.transcendentals += other.transcendentals * times

    def times(self, n: int) -> Figures:
        return Figures(self.flops * n, self.bytes * n, self.transcendentals * n)

    def json(self) -> dict[str, int]:
        return {"flops": self.flops, "bytes": self.bytes, "transcendentals": self.transcendentals}


def figures_of(costs: dict[str, Any] | None) -> Figures:
    if not costs:
        return Figures()
    return Figures(int(costs.get("flops", 0)), int(costs.get("bytes", 0)), int(costs.get("transcendentals", 0)))


def is_backward(node: Node) -> bool:
    """Whether ``node`` belongs to the backward pass of a gradient: JAX's name stack puts the
    transposed equations under ``transpose(...)``. Their ``scope`` is the forward module they
    differentiate."""
    return "transpose" in node.transforms


# --------------------------------------------------------------------------------------------
# Regions


@dataclass
class Regions:
    """Where each node sits among the graph's sub-programs.

    ``region[i]`` is the group id of node i's innermost region (a group owned by an equation:
    ``group.node``), None at the top level; ``owned[node_id]`` the region group ids of that
    equation, in the order they were made (cond branches in branch order; while: cond, then body);
    ``members[region]`` node indices directly in it, in order; ``depth[i]`` how many regions
    enclose node i.
    """

    region: list[str | None]
    owned: dict[str, list[str]]
    members: dict[str | None, list[int]]
    depth: list[int]
    kinds: dict[str, str]


def regions(graph: Graph) -> Regions:
    groups = {g.id: g for g in graph.groups}
    nearest: dict[str, str | None] = {}

    def region_of(gid: str | None) -> str | None:
        seen: list[str] = []
        found: str | None = None
        while gid is not None:
            if gid in nearest:
                found = nearest[gid]
                break
            group = groups.get(gid)
            if group is None:
                break
            seen.append(gid)
            if group.node is not None:
                found = gid
                break
            gid = group.parent
        for s in seen:
            nearest[s] = found
        return found

    owned: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for g in graph.groups:
        kinds[g.id] = g.kind
        if g.node is not None and g.kind not in ("cond", "while"):  # containers of branches / cond+body
            owned.setdefault(g.node, []).append(g.id)
    by_id = {n.id: i for i, n in enumerate(graph.nodes)}
    owner_of = {gid: by_id.get(groups[gid].node or "") for gids in owned.values() for gid in gids}
    region = [region_of(_outside_own(groups, n)) for n in graph.nodes]
    members: dict[str | None, list[int]] = {}
    for i, r in enumerate(region):
        members.setdefault(r, []).append(i)
    depth = [0] * len(graph.nodes)
    for i in range(len(graph.nodes)):
        d, r, guard = 0, region[i], 0
        while r is not None and guard < 10_000:
            d += 1
            guard += 1
            owner = owner_of.get(r)
            r = region[owner] if owner is not None else None
        depth[i] = d
    return Regions(region, owned, members, depth, kinds)


def _outside_own(groups: dict[str, Any], node: Node) -> str | None:
    """The group around ``node`` outside the regions it owns itself: an equation with bodies sits
    inside the outermost of them (docs/graph-format.md), but runs in the program around them."""
    gid = node.group
    guard = 0
    while gid is not None and gid in groups and groups[gid].node == node.id and guard < 10_000:
        gid = groups[gid].parent
        guard += 1
    return gid


def measured(graph: Graph, where: Regions | None = None) -> list[int]:
    """Indices of the nodes XLA measures one by one: every equation that is not rolled up from its
    bodies, unless it sits inside the body of one that is measured whole."""
    where = where or regions(graph)
    counted = _counted(graph, where)
    return [i for i, n in enumerate(graph.nodes) if n.primitive not in ROLLED_UP and counted[i]]


def _counted(graph: Graph, where: Regions) -> list[bool]:
    """For each node, whether every equation around it is rolled up from its bodies."""
    owners = _owner_index(graph, where)
    memo: dict[str | None, bool] = {None: True}

    def region_ok(r: str | None) -> bool:
        found = memo.get(r)
        if found is not None:
            return found
        assert r is not None
        memo[r] = False  # a cycle in a malformed graph counts nothing
        owner = owners.get(r)
        ok = owner is not None and graph.nodes[owner].primitive in ROLLED_UP and region_ok(where.region[owner])
        memo[r] = ok
        return ok

    return [region_ok(r) for r in where.region]


def _owner_index(graph: Graph, where: Regions) -> dict[str, int]:
    by_id = {n.id: i for i, n in enumerate(graph.nodes)}
    return {gid: by_id[owner] for owner, gids in where.owned.items() if owner in by_id for gid in gids}


# --------------------------------------------------------------------------------------------
# Annotation (in the worker, or on any graph whose measured nodes have figures)


def annotate(
    graph: Graph, leaf: dict[int, Figures | str], summary: dict[str, Any], trips: dict[int, int] | None = None
) -> None:
    """Fill every counted node's ``costs`` from ``leaf`` (node index -> XLA's figures, or why there
    are none) and set ``graph.costs`` to ``summary`` (how they were measured). ``trips`` gives the
    trip count of each ``while`` node (by index) that is a counted loop; the others count once."""
    where = regions(graph)
    trip_counts = {graph.nodes[i].id: n for i, n in (trips or {}).items()}
    owners = _owner_index(graph, where)
    nodes = graph.nodes
    own: dict[int, Figures] = {}
    extra: dict[int, dict[str, Any]] = {}
    factor: dict[str, int] = {}  # region -> how often it runs per execution of its owner
    counted = _counted(graph, where)
    for i in sorted(range(len(nodes)), key=lambda k: -where.depth[k]):  # bodies before their owners
        if not counted[i]:
            continue
        node = nodes[i]
        if node.primitive not in ROLLED_UP:
            got = leaf.get(i)
            if isinstance(got, Figures):
                own[i] = got
            else:
                own[i] = Figures()
                extra[i] = {"unknown": got or "not measured"}
            continue
        bodies = [(gid, _region_sum(where, gid, own)) for gid in where.owned.get(node.id, [])]
        own[i], extra[i] = _roll_up(graph, node, bodies, factor, trip_counts)
    runs: dict[int, int] = {}
    for i in sorted(range(len(nodes)), key=lambda k: where.depth[k]):  # owners before their bodies
        if not counted[i]:
            continue
        r = where.region[i]
        if r is None:
            runs[i] = 1
        else:
            owner = owners.get(r)
            runs[i] = (runs.get(owner, 0) if owner is not None else 0) * factor.get(r, 1)
    for i, node in enumerate(nodes):
        if not counted[i]:
            node.costs = None
            continue
        node.costs = {**own[i].json(), "runs": runs.get(i, 0), **extra.get(i, {})}
    graph.costs = summary


def _region_sum(where: Regions, gid: str, own: dict[int, Figures]) -> Figures:
    total = Figures()
    for i in where.members.get(gid, []):
        got = own.get(i)
        if got is not None:
            total.add(got)
    return total


def _roll_up(
    graph: Graph, node: Node, bodies: list[tuple[str, Figures]], factor: dict[str, int], static: dict[str, int]
) -> tuple[Figures, dict[str, Any]]:
    prim = node.primitive
    if prim == "cond":
        if not bodies:
            return Figures(), {}
        best = max(range(len(bodies)), key=lambda b: (bodies[b][1].flops, bodies[b][1].bytes, -b))
        for b, (gid, _) in enumerate(bodies):
            factor[gid] = 1 if b == best else 0
        return bodies[best][1], {"branch": best}
    if prim == "scan":
        length = node.params.get("length")
        trips = length if isinstance(length, int) and not isinstance(length, bool) and length >= 0 else 1
        total = Figures()
        for gid, body in bodies:
            factor[gid] = trips
            total.add(body, trips)
        return total, {"trips": trips, "tripsStatic": isinstance(length, int)}
    if prim == "while":
        known = static.get(node.id)
        total = Figures()
        for gid, body in bodies:
            # the condition runs once more than the body when the count is known
            times = (known + 1 if graph_kind(graph, gid) == "while_cond" else known) if known is not None else 1
            factor[gid] = times
            total.add(body, times)
        return total, {"trips": known if known is not None else 1, "tripsStatic": known is not None}
    total = Figures()
    for gid, body in bodies:
        factor[gid] = 1
        total.add(body)
    return total, {}


def graph_kind(graph: Graph, gid: str) -> str | None:
    return next((g.kind for g in graph.groups if g.id == gid), None)


# --------------------------------------------------------------------------------------------
# Roll-ups for readers


def has_costs(graph: Graph) -> bool:
    return graph.costs is not None or any(n.costs is not None for n in graph.nodes)


def leaves(graph: Graph) -> list[Node]:
    """The measured equations (costs present and not rolled up from bodies)."""
    return [n for n in graph.nodes if n.costs is not None and n.primitive not in ROLLED_UP]


def total(graph: Graph) -> Figures:
    """The program's figures: every measured equation times its runs."""
    out = Figures()
    for n in leaves(graph):
        assert n.costs is not None
        out.add(figures_of(n.costs), int(n.costs.get("runs", 1)))
    return out


def body_once(graph: Graph) -> Figures:
    """As XLA's whole-program analysis counts: each counted equation once (loop bodies once, the
    most expensive branch of a cond)."""
    out = Figures()
    for n in leaves(graph):
        assert n.costs is not None
        if int(n.costs.get("runs", 1)) > 0:
            out.add(figures_of(n.costs))
    return out


def group_totals(graph: Graph) -> dict[str, Figures]:
    """Every group's figures: the measured equations anywhere inside it, times their runs."""
    parents = {g.id: g.parent for g in graph.groups}
    out: dict[str, Figures] = {}
    for n in leaves(graph):
        assert n.costs is not None
        fig = figures_of(n.costs)
        runs = int(n.costs.get("runs", 1))
        gid = n.group
        guard = 0
        while gid is not None and guard < 10_000:
            out.setdefault(gid, Figures()).add(fig, runs)
            gid = parents.get(gid)
            guard += 1
    return out


@dataclass
class ModuleRow:
    """One module (a scope path; ``""`` is what lies outside every module): its figures include its
    submodules', as flax's ``tabulate`` counts."""

    scope: str
    params: int = 0
    param_bytes: int = 0
    figures: Figures = field(default_factory=Figures)
    forward: Figures = field(default_factory=Figures)
    backward: Figures = field(default_factory=Figures)
    ops: int = 0

    def json(self, total_flops: int) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "params": self.params,
            "paramBytes": self.param_bytes,
            **self.figures.json(),
            "share": (self.figures.flops / total_flops) if total_flops else 0.0,
            "forward": self.forward.json(),
            "backward": self.backward.json(),
            "ops": self.ops,
        }


@dataclass
class CostTable:
    rows: list[ModuleRow]
    total: Figures
    body_once: Figures
    gradient: bool  # the graph has a backward pass: rows split forward / backward
    measured: bool  # the graph carries XLA figures
    unknown: int  # measured equations XLA gave no figures for
    notes: list[str]

    def json(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "gradient": self.gradient,
            "total": self.total.json(),
            "bodyOnce": self.body_once.json(),
            "unknown": self.unknown,
            "modules": [r.json(self.total.flops) for r in self.rows],
            "notes": list(self.notes),
        }


def _prefixes(scope: str) -> list[str]:
    if not scope:
        return [""]
    parts = scope.split("/")
    return ["/".join(parts[: k + 1]) for k in range(len(parts))]


def module_params(graph: Graph) -> dict[str, tuple[int, int]]:
    """Parameter elements and bytes by the module that uses them: the deepest scope shared by a
    parameter's forward consumers (a shared embedding counts once, at the common ancestor)."""
    from jaxlsp.graph.report import itemsize, num_elements

    values = {v.id: v for v in graph.values}
    consumers: dict[str, list[str]] = {}
    for n in graph.nodes:
        if is_backward(n):
            continue
        for v in n.inputs:
            consumers.setdefault(v, []).append(n.scope)
    out: dict[str, tuple[int, int]] = {}
    for port in graph.inputs:
        if port.role != "parameter":
            continue
        value = values.get(port.value)
        if value is None:
            continue
        size = num_elements(value)
        if size is None:
            continue
        scope = common_scope(consumers.get(port.value, []))
        elements, nbytes = out.get(scope, (0, 0))
        out[scope] = (elements + size, nbytes + size * (itemsize(value.dtype) or 0))
    return out


def common_scope(scopes: list[str]) -> str:
    """The longest module path all of ``scopes`` lie in (``""``: none, or no scopes)."""
    if not scopes:
        return ""
    parts = scopes[0].split("/") if scopes[0] else []
    for s in scopes[1:]:
        other = s.split("/") if s else []
        k = 0
        while k < min(len(parts), len(other)) and parts[k] == other[k]:
            k += 1
        parts = parts[:k]
    return "/".join(parts)


def table(graph: Graph) -> CostTable:
    """One row per module (every scope that has equations or parameters, and its ancestors),
    sorted by FLOPs, largest first (then by scope)."""
    rows: dict[str, ModuleRow] = {}

    def row(scope: str) -> ModuleRow:
        found = rows.get(scope)
        if found is None:
            found = rows[scope] = ModuleRow(scope)
        return found

    gradient = any(is_backward(n) for n in graph.nodes)
    unknown = 0
    for n in graph.nodes:
        if n.primitive in ROLLED_UP:
            continue
        for scope in _prefixes(n.scope):
            row(scope).ops += 1
        if n.costs is None:
            continue
        if "unknown" in n.costs:
            unknown += 1
        fig = figures_of(n.costs).times(int(n.costs.get("runs", 1)))
        backward = is_backward(n)
        for scope in _prefixes(n.scope):
            r = row(scope)
            r.figures.add(fig)
            (r.backward if backward else r.forward).add(fig)
    for scope, (elements, nbytes) in module_params(graph).items():
        for prefix in _prefixes(scope):
            r = row(prefix)
            r.params += elements
            r.param_bytes += nbytes
    measured = has_costs(graph)
    ordered = sorted(rows.values(), key=lambda r: (-r.figures.flops, -r.params, r.scope))
    notes: list[str] = []
    loops = [n for n in graph.nodes if n.costs is not None and n.costs.get("tripsStatic") is False]
    if loops:
        notes.append(f"{len(loops)} while loop(s) with no static trip count: their bodies are counted once")
    conds = [n for n in graph.nodes if n.costs is not None and "branch" in n.costs]
    if conds:
        notes.append(f"{len(conds)} cond(s): only the most expensive branch is counted")
    if unknown:
        notes.append(f"{unknown} equation(s) XLA gave no figures for are counted as 0")
    return CostTable(ordered, total(graph), body_once(graph), gradient, measured, unknown, notes)


# --------------------------------------------------------------------------------------------
# Text


def _share(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def render_table(t: CostTable, limit: int = 40) -> str:
    """The module table: scope, ``params``, ``FLOPs`` (an integer), ``bytes``, share of the total
    FLOPs, and for gradients the forward and backward FLOPs."""
    if not t.measured:
        return (
            "costs: this graph carries no XLA figures: trace with costs to measure them "
            "(jaxlsp trace --costs; jaxlsp/trace with costs: true)"
        )
    head = ["module", "params", "FLOPs", "bytes", "share"]
    if t.gradient:
        head += ["fwd FLOPs", "bwd FLOPs"]
    body: list[list[str]] = []
    for r in t.rows[:limit]:
        cells = [
            r.scope or "(outside modules)",
            str(r.params),
            str(r.figures.flops),
            str(r.figures.bytes),
            _share(r.figures.flops, t.total.flops),
        ]
        if t.gradient:
            cells += [str(r.forward.flops), str(r.backward.flops)]
        body.append(cells)
    widths = [max(len(line[k]) for line in [head, *body]) for k in range(len(head))]
    lines = []
    for cells in [head, *body]:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        lines.append("  ".join([first, *rest]).rstrip())
    if len(t.rows) > limit:
        lines.append(f"... and {len(t.rows) - limit} more modules")
    lines.append(
        f"total: {t.total.flops} FLOPs, {t.total.bytes} bytes accessed, {t.total.transcendentals} transcendentals"
        + (f" (loop bodies once: {t.body_once.flops} FLOPs)" if t.body_once.flops != t.total.flops else "")
    )
    lines.extend(f"note: {n}" for n in t.notes)
    return "\n".join(lines)
