/** What is visible for one expansion state: a tree of items (nodes, collapsed groups, expanded
 * groups holding their children, "×N" roll-ups, port bundles) and the edges between them. */

import { Model, constraintSpec, mapSpecs, typeStr } from "./model";

export type ItemKind = "node" | "group" | "container" | "rollup" | "ports" | "outputs";

/** A weight (or state, or constant) drawn inside the card of the box that uses it. */
export interface ParamLine {
  value: string;
  name: string;
  type: string;
  role: string;
}

export interface Item {
  id: string;
  kind: ItemKind;
  /** The node or group id this item stands for (the first member for a roll-up). */
  ref: string;
  members?: string[];
  title: string;
  sub: string;
  parent: Item | null;
  children: Item[];
  /** Weights, state and constants this box uses (first use first); the first MAX_PARAMS are drawn inside it. */
  params: ParamLine[];
  /** Program order within the parent. */
  order: number;
  width: number;
  height: number;
}

export interface Edge {
  id: string;
  source: string;
  target: string;
  label: string;
  value: string;
}

export interface View {
  root: Item;
  items: Map<string, Item>;
  edges: Edge[];
  /** Visible item standing for each node id (computed lazily). */
  repOf(nodeId: string): string | null;
}

export interface State {
  expanded: Set<string>;
  /** Roll-ups opened by the user: "<container>|<first member>". */
  unrolled: Set<string>;
}

const CHAR = 7.6; // px per character of a 13 px title
const MONO = 6.4; // px per character of an 11 px monospace parameter line
export const HEADER = 26;
export const PARAM_LINE = 15;
/** Parameter lines a card shows; the rest are counted on one more line. */
export const MAX_PARAMS = 4;
/** Input roles drawn inside the cards that use them instead of as boxes with edges (Netron's way):
 * weights reach almost every box, and their edges would hide the data flow. */
export const INSIDE_ROLES = new Set(["parameter", "state", "constant"]);

/** The y of the first parameter line in a box (below the title and the subtitle). */
export function paramsTop(item: Item): number {
  return item.kind === "node" ? 42 : 50;
}

function size(item: Item): void {
  const toggle = item.kind === "group" || item.kind === "rollup" ? 28 : 0; // room for the "+" left of the title
  let width = Math.ceil(Math.max(item.title.length, item.sub.length * 0.85) * CHAR) + 24 + toggle;
  for (const p of item.params.slice(0, MAX_PARAMS)) width = Math.max(width, Math.ceil((p.name.length + p.type.length + 1) * MONO) + 20);
  item.width = Math.min(380, Math.max(item.kind === "node" ? 80 : 120, width));
  const lines = Math.min(item.params.length, MAX_PARAMS) + (item.params.length > MAX_PARAMS ? 1 : 0);
  item.height = (item.kind === "node" ? 42 : 50) + (lines ? lines * PARAM_LINE + 4 : 0);
}

/** ``params/Block_0/Dense_0/kernel`` shown in the card of ``Block_0`` as ``Dense_0/kernel``: the
 * path below the card's own module, else without its collection (``params``, ``batch_stats``). */
export function paramName(label: string, owner: string): string {
  const parts = label.split("/").filter((p) => p !== "");
  const at = owner ? parts.lastIndexOf(owner) : -1;
  if (at >= 0 && at < parts.length - 1) return parts.slice(at + 1).join("/");
  return parts.length > 1 ? parts.slice(1).join("/") : label;
}

export function rollupKey(container: string | null, first: string): string {
  return `${container ?? ""}|${first}`;
}

/** "Block_0", "Block_1"... → "Block_*": the labels' common prefix and suffix around a star. */
function pattern(labels: string[]): string {
  let pre = labels[0];
  let suf = labels[0];
  for (const l of labels) {
    while (!l.startsWith(pre)) pre = pre.slice(0, -1);
    while (!l.endsWith(suf)) suf = suf.slice(1);
  }
  if (pre.length + suf.length >= labels[0].length) return labels[0];
  return `${pre}*${suf}`;
}

export function buildView(model: Model, state: State): View {
  const items = new Map<string, Item>();
  const groupRep = new Map<string, string>();
  const root: Item = {
    id: "root", kind: "container", ref: "", title: "", sub: "", parent: null, children: [], params: [],
    order: 0, width: 0, height: 0,
  };

  const make = (id: string, kind: ItemKind, ref: string, title: string, sub: string, parent: Item): Item => {
    const item: Item = {
      id, kind, ref, title, sub, parent, children: [], params: [], order: parent.children.length, width: 0, height: 0,
    };
    parent.children.push(item);
    items.set(id, item);
    if (kind !== "container") size(item);
    return item;
  };

  // Graph inputs, one box per role (inputs, keys); weights, state and constants go inside cards.
  for (const role of model.roles) {
    if (INSIDE_ROLES.has(role)) continue;
    const ports = model.graph.inputs.filter((p) => p.role === role);
    const name = role === "parameter" ? "parameters" : role === "input" ? "inputs" : role;
    const sub = ports.length === 1 ? typeStr(model.values.get(ports[0].value)) : `${ports.length} arrays`;
    make(`in:${role}`, "ports", role, `${name} ×${ports.length}`, sub, root);
  }

  const fill = (container: string | null, parent: Item): void => {
    const kids = model.children.get(container) ?? [];
    // Runs of consecutive sibling groups with one signature roll up (Block_0 … Block_11).
    const runOf = new Map<string, string[]>();
    for (let i = 0; i < kids.length; ) {
      let j = i + 1;
      if (kids[i].kind === "group") {
        const sig = model.signature.get(kids[i].id)!;
        while (j < kids.length && kids[j].kind === "group" && model.signature.get(kids[j].id) === sig) j++;
        if (j - i > 1) {
          const run = kids.slice(i, j).map((c) => c.id);
          if (!state.unrolled.has(rollupKey(container, run[0]))) for (const m of run) runOf.set(m, run);
        }
      }
      i = j;
    }
    for (const c of kids) {
      if (c.kind === "node") {
        const n = model.nodes.get(c.id)!;
        const spec = constraintSpec(n); // reshard, with_sharding_constraint: the sharding it asks for
        make(n.id, "node", n.id, n.primitive, spec ? `${model.outputTypes(n)} · ${spec}` : model.outputTypes(n), parent);
        continue;
      }
      const g = model.groups.get(c.id)!;
      const members = runOf.get(g.id);
      if (members) {
        if (members[0] !== g.id) continue;
        const labels = members.map((m) => model.groups.get(m)!.label);
        const id = `r:${g.id}`;
        const item = make(id, "rollup", g.id, `${pattern(labels)} ×${members.length}`, `${g.kind} · ${model.counts.get(g.id) ?? 0} ops each`, parent);
        item.members = members;
        for (const m of members) groupRep.set(m, id);
        continue;
      }
      const specs = mapSpecs(g.node ? model.nodes.get(g.node) : undefined); // a shard_map's in/out specs
      const kind = specs ? `${g.kind} · in ${specs.inSpecs} → out ${specs.outSpecs}` : g.kind;
      if (state.expanded.has(g.id)) {
        const item = make(g.id, "container", g.id, g.label || g.kind, kind, parent);
        fill(g.id, item);
      } else {
        make(g.id, "group", g.id, g.label || g.kind, `${kind} · ${model.counts.get(g.id) ?? 0} ops`, parent);
        groupRep.set(g.id, g.id);
      }
    }
  };
  fill(null, root);
  if (model.graph.outputs.length) {
    make("out", "outputs", "", `outputs ×${model.graph.outputs.length}`,
      model.graph.outputs.length === 1 ? typeStr(model.values.get(model.graph.outputs[0].value)) : `${model.graph.outputs.length} arrays`, root);
  }

  // The box standing for a group's contents: its outermost enclosing group that is drawn closed
  // (or rolled up), memoised per group so that 200,000 nodes cost one lookup each.
  const groupBox = new Map<string, string | null>();
  const boxOfGroup = (gid: string): string | null => {
    const hit = groupBox.get(gid);
    if (hit !== undefined) return hit;
    let rep: string | null = null;
    for (const g of model.chain(gid)) {
      const r = groupRep.get(g);
      if (r !== undefined) {
        rep = r;
        break;
      }
    }
    groupBox.set(gid, rep);
    return rep;
  };
  const repOf = (nodeId: string): string | null => {
    const n = model.nodes.get(nodeId);
    const g = n ? model.groupOfNode(n) : null;
    const rep = g === null ? null : boxOfGroup(g);
    return rep ?? (items.has(nodeId) ? nodeId : null);
  };

  const edges: Edge[] = [];
  const seen = new Map<string, Edge & { count: number }>();
  const add = (source: string | null, target: string | null, value: string): void => {
    if (source === null || target === null || source === target) return;
    const key = `${source}>${target}`;
    const found = seen.get(key);
    if (found) {
      found.count++;
      found.label = `${model.typeOf(found.value)} +${found.count - 1}`;
      return;
    }
    const edge = { id: `e${edges.length}`, source, target, label: model.typeOf(value), value, count: 1 };
    seen.set(key, edge);
    edges.push(edge);
  };
  const from = (vid: string): string | null => {
    const v = model.values.get(vid);
    if (v?.producer) return repOf(v.producer);
    const port = model.portOf.get(vid);
    return port && !INSIDE_ROLES.has(port.port.role) ? `in:${port.port.role}` : null;
  };
  // Each weight is listed in the card of every box that uses it (a roll-up: its first member's).
  const owned = new Map<string, Set<string>>();
  for (const n of model.graph.nodes) {
    const target = repOf(n.id);
    for (const vid of n.inputs) {
      const port = model.portOf.get(vid);
      if (port && INSIDE_ROLES.has(port.port.role)) {
        if (target === null) continue;
        const item = items.get(target)!;
        if (item.kind === "rollup" && !model.within(model.groupOfNode(n), item.ref)) continue;
        let set = owned.get(target);
        if (!set) owned.set(target, (set = new Set()));
        set.add(vid);
        continue;
      }
      add(from(vid), target, vid);
    }
  }
  for (const p of model.graph.outputs) add(from(p.value), "out", p.value);
  for (const [id, values] of owned) {
    const item = items.get(id)!;
    // Named from the card's own module: a node's is the open group around it.
    const group = item.kind === "node" ? (item.parent?.kind === "container" ? item.parent.ref : "") : item.ref;
    const owner = model.groups.get(group)?.label ?? "";
    const lines = [...values].map((vid) => {
      const port = model.portOf.get(vid)!.port;
      return { value: vid, name: paramName(port.label, owner), type: typeStr(model.values.get(vid)), role: port.role };
    });
    item.params = lines;
    size(item);
  }
  return { root, items, edges, repOf };
}

/** Every item under ``item`` (not itself), depth first. */
export function* descendants(item: Item): Generator<Item> {
  for (const c of item.children) {
    yield c;
    yield* descendants(c);
  }
}
