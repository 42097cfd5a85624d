/** An index over one graph: the group tree, each group's items in program order, structural
 * signatures for roll-up, value types, and search. Plain data, no DOM. */

import type { GGroup, GMesh, GNode, GSharding, GValue, Graph, Port } from "./types";

const SHORT: Record<string, string> = {
  float32: "f32", float64: "f64", float16: "f16", bfloat16: "bf16",
  int8: "i8", int16: "i16", int32: "i32", int64: "i64",
  uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
  bool: "bool", complex64: "c64", complex128: "c128",
};

/** ``f32[4,128]``; a sharded value as jax prints its type: ``f32[8@x,64]``, ``f32[2,4]{V:x}``. */
export function typeStr(v: GValue | undefined): string {
  if (!v) return "?";
  if (!v.sharding) return `${SHORT[v.dtype] ?? v.dtype}[${v.shape.join(",")}]`;
  return `${SHORT[v.dtype] ?? v.dtype}[${dimsStr(v.shape, v.sharding)}]${setsStr(v.sharding)}`;
}

const axesStr = (axes: string[]): string => (axes.length === 1 ? axes[0] : `(${axes.join(",")})`);

function dimsStr(shape: (number | string)[], sharding: GSharding): string {
  return shape.map((d, i) => {
    const axes = sharding.spec[i];
    return axes && axes.length ? `${d}@${axesStr(axes)}` : `${d}`;
  }).join(",");
}

function setsStr(sharding: GSharding): string {
  const parts: string[] = [];
  for (const [key, letter] of [["varying", "V"], ["unreduced", "U"], ["reduced", "R"]] as const) {
    const axes = sharding[key];
    if (axes && axes.length) parts.push(`${letter}:${axesStr(axes)}`);
  }
  return parts.length ? `{${parts.join(", ")}}` : "";
}

/** ``x: 4, y: 2 (Explicit)``: the mesh's axes and sizes, and their types. */
export function meshStr(mesh: GMesh): string {
  const types = new Set(mesh.axisTypes);
  if (types.size <= 1) {
    const axes = mesh.axisNames.map((n, i) => `${n}: ${mesh.axisSizes[i]}`).join(", ");
    return mesh.axisTypes.length ? `${axes} (${mesh.axisTypes[0]})` : axes;
  }
  return mesh.axisNames.map((n, i) => `${n}: ${mesh.axisSizes[i]} (${mesh.axisTypes[i]})`).join(", ");
}

const CONSTRAINTS: Record<string, string> = { reshard: "dst_sharding", sharding_constraint: "sharding" };

/** The spec a ``reshard`` moves its operand to, or a ``with_sharding_constraint`` asks for
 * (``P('x', None)``); null for other nodes. */
export function constraintSpec(n: GNode): string | null {
  const key = CONSTRAINTS[n.primitive];
  const target = key ? n.params[key] : undefined;
  const spec = target && typeof target === "object" ? (target as { spec?: unknown }).spec : undefined;
  return typeof spec === "string" ? spec : null;
}

/** A ``shard_map``'s specs, ``in P('x', None) → out P('x', None)``; null for other nodes. */
export function mapSpecs(n: GNode | undefined): { inSpecs: string; outSpecs: string } | null {
  if (!n || n.primitive !== "shard_map") return null;
  const ins = n.params.in_specs, outs = n.params.out_specs;
  if (!Array.isArray(ins) || !Array.isArray(outs)) return null;
  return { inSpecs: ins.map(String).join(", ") || "()", outSpecs: outs.map(String).join(", ") || "()" };
}

/** A child of a group (or of the top level), in program order. */
export type Child = { kind: "node"; id: string } | { kind: "group"; id: string };

export class Model {
  readonly nodes = new Map<string, GNode>();
  readonly values = new Map<string, GValue>();
  readonly groups = new Map<string, GGroup>();
  /** Items directly inside a group (key null: the top level), program order. */
  readonly children = new Map<string | null, Child[]>();
  /** Nodes anywhere inside each group. */
  readonly counts = new Map<string, number>();
  readonly signature = new Map<string, string>();
  readonly order = new Map<string, number>();
  /** Graph input ports by value id. */
  readonly portOf = new Map<string, { port: Port; index: number }>();
  readonly roles: string[] = [];
  /** Each group's chain of enclosing groups, outermost first, itself last (memoised: a 200,000-op
   * graph asks for a node's chain once per node, in every view). */
  private readonly chains = new Map<string, readonly string[]>();
  private readonly types = new Map<string, string>();

  constructor(readonly graph: Graph) {
    for (const v of graph.values) this.values.set(v.id, v);
    for (const g of graph.groups) this.groups.set(g.id, g);
    graph.nodes.forEach((n, i) => {
      this.nodes.set(n.id, n);
      this.order.set(n.id, i);
    });
    this.buildChildren();
    this.buildSignatures();
    graph.inputs.forEach((port, index) => {
      if (!this.portOf.has(port.value)) this.portOf.set(port.value, { port, index });
      if (!this.roles.includes(port.role)) this.roles.push(port.role);
    });
  }

  /** The parent of a group, or null when it is missing or the tree is broken there. */
  parentOf(gid: string): string | null {
    const p = this.groups.get(gid)?.parent ?? null;
    return p !== null && this.groups.has(p) ? p : null;
  }

  groupOfNode(n: GNode): string | null {
    return n.group !== null && this.groups.has(n.group) ? n.group : null;
  }

  /** The chain of groups around a node or group, outermost first (a new array: callers may change it). */
  ancestors(id: string): string[] {
    const g = this.nodes.has(id) ? this.groupOfNode(this.nodes.get(id)!) : this.parentOf(id);
    return g === null ? [] : [...this.chain(g)];
  }

  /** ``gid`` and the groups around it, outermost first (shared: do not change it). A broken tree
   * (a parent cycle) ends where it would repeat, as seen from ``gid``. */
  chain(gid: string): readonly string[] {
    const done = this.chains.get(gid);
    if (done) return done;
    const up: string[] = [];
    const seen = new Set<string>();
    let g: string | null = gid;
    while (g !== null && !seen.has(g)) {
      const known = this.chains.get(g);
      // A known chain can be reused only when it repeats none of the groups already walked.
      if (known && !known.some((k) => seen.has(k))) {
        const out = [...known, ...up.reverse()];
        this.chains.set(gid, out);
        return out;
      }
      seen.add(g);
      up.push(g);
      g = this.parentOf(g);
    }
    const out = up.reverse();
    this.chains.set(gid, out);
    return out;
  }

  /** Whether ``gid`` is ``outer`` or inside it. */
  within(gid: string | null, outer: string): boolean {
    return gid !== null && this.chain(gid).includes(outer);
  }

  private buildChildren(): void {
    const placed = new Set<string>();
    this.children.set(null, []);
    for (const g of this.groups.keys()) this.children.set(g, []);
    for (const n of this.graph.nodes) {
      let g = this.groupOfNode(n);
      this.children.get(g)!.push({ kind: "node", id: n.id });
      // Each enclosing group appears in its parent where its first node does.
      const seen = new Set<string>();
      while (g !== null && !seen.has(g)) {
        seen.add(g);
        this.counts.set(g, (this.counts.get(g) ?? 0) + 1);
        const parent = this.parentOf(g);
        if (!placed.has(g)) {
          placed.add(g);
          this.children.get(parent)!.push({ kind: "group", id: g });
        }
        g = parent;
      }
    }
    // Empty groups still show (a region whose body has no equations).
    for (const g of this.groups.keys()) {
      if (!placed.has(g)) this.children.get(this.parentOf(g))!.push({ kind: "group", id: g });
    }
  }

  /** Same kind and, recursively, the same primitives (with output types) and sub-structures in the
   * same order. Two 32-bit hashes over interned tokens, not the structure's text: a 200,000-op
   * graph's text would be built once per level of nesting. */
  private buildSignatures(): void {
    const tokens = new Map<string, number>();
    const token = (text: string): number => {
      let t = tokens.get(text);
      if (t === undefined) tokens.set(text, (t = tokens.size + 1));
      return t;
    };
    const visiting = new Set<string>();
    const sig = (gid: string): string => {
      const done = this.signature.get(gid);
      if (done !== undefined) return done;
      if (visiting.has(gid)) return "cycle";
      visiting.add(gid);
      const kids = this.children.get(gid) ?? [];
      let h1 = Math.imul(0x811c9dc5 ^ token(this.groups.get(gid)!.kind), 16777619);
      let h2 = 0x01000193 ^ kids.length;
      for (const c of kids) {
        // Output types too: Dense(256→1024) and Dense(1024→256) are not repeats of one block.
        const n = c.kind === "node" ? this.nodes.get(c.id)! : null;
        const t = n ? token(`${n.primitive}:${this.outputTypes(n)}`) : token(`(${sig(c.id)})`);
        h1 = Math.imul(h1 ^ t, 16777619);
        h2 = Math.imul(h2 + t, 2246822519) ^ (h2 >>> 13);
      }
      const h = `${(h1 >>> 0).toString(36)}${(h2 >>> 0).toString(36)}:${kids.length}`;
      this.signature.set(gid, h);
      return h;
    };
    for (const g of this.groups.keys()) sig(g);
  }

  outputTypes(n: GNode): string {
    return n.outputs.map((o) => this.typeOf(o)).join(", ");
  }

  /** ``f32[4,128]`` of a value id (memoised). */
  typeOf(vid: string): string {
    let t = this.types.get(vid);
    if (t === undefined) this.types.set(vid, (t = typeStr(this.values.get(vid))));
    return t;
  }

  /** Nodes and groups matching ``query`` (primitive, scope, group label, or a type like f32[4). */
  search(query: string, limit = 200): { id: string; kind: "node" | "group"; text: string }[] {
    const q = query.trim().toLowerCase();
    if (!q) return [];
    const found: { id: string; kind: "node" | "group"; text: string }[] = [];
    for (const g of this.graph.groups) {
      if (g.label.toLowerCase().includes(q) || g.kind.toLowerCase() === q) {
        found.push({ id: g.id, kind: "group", text: `${g.kind}: ${g.label}` });
        if (found.length >= limit) return found;
      }
    }
    for (const n of this.graph.nodes) {
      const types = this.outputTypes(n);
      if (
        n.primitive.toLowerCase().includes(q) ||
        n.scope.toLowerCase().includes(q) ||
        types.toLowerCase().includes(q)
      ) {
        found.push({ id: n.id, kind: "node", text: `${n.primitive} → ${types}${n.scope ? "  " + n.scope : ""}` });
        if (found.length >= limit) break;
      }
    }
    return found;
  }
}
