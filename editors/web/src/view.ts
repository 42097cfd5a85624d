/** What is visible for one expansion state: a tree of items (nodes, collapsed groups, expanded
 * groups holding their children, "×N" roll-ups, port bundles) and the edges between them. */

import { Model, typeStr } from "./model";

export type ItemKind = "node" | "group" | "container" | "rollup" | "ports" | "outputs";

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

const CHAR = 7.2;
const MAX_FANOUT = 6;
export const HEADER = 26;

function size(item: Item): void {
  const text = Math.max(item.title.length, item.sub.length);
  const toggle = item.kind === "group" || item.kind === "rollup" ? 28 : 0; // room for the "+" left of the title
  item.width = Math.min(340, Math.max(item.kind === "node" ? 70 : 110, Math.ceil(text * CHAR) + 22 + toggle));
  item.height = item.kind === "node" ? 38 : 46;
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
    id: "root", kind: "container", ref: "", title: "", sub: "", parent: null, children: [], order: 0, width: 0, height: 0,
  };

  const make = (id: string, kind: ItemKind, ref: string, title: string, sub: string, parent: Item): Item => {
    const item: Item = { id, kind, ref, title, sub, parent, children: [], order: parent.children.length, width: 0, height: 0 };
    parent.children.push(item);
    items.set(id, item);
    if (kind !== "container") size(item);
    return item;
  };

  // Graph inputs, one box per role (parameters, inputs, state, keys, constants).
  for (const role of model.roles) {
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
        make(n.id, "node", n.id, n.primitive, model.outputTypes(n), parent);
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
      if (state.expanded.has(g.id)) {
        const item = make(g.id, "container", g.id, g.label || g.kind, g.kind, parent);
        fill(g.id, item);
      } else {
        make(g.id, "group", g.id, g.label || g.kind, `${g.kind} · ${model.counts.get(g.id) ?? 0} ops`, parent);
        groupRep.set(g.id, g.id);
      }
    }
  };
  fill(null, root);
  if (model.graph.outputs.length) {
    make("out", "outputs", "", `outputs ×${model.graph.outputs.length}`,
      model.graph.outputs.length === 1 ? typeStr(model.values.get(model.graph.outputs[0].value)) : `${model.graph.outputs.length} arrays`, root);
  }

  const repCache = new Map<string, string | null>();
  const repOf = (nodeId: string): string | null => {
    const hit = repCache.get(nodeId);
    if (hit !== undefined) return hit;
    let rep: string | null = items.has(nodeId) ? nodeId : null;
    for (const g of model.ancestors(nodeId)) {
      const r = groupRep.get(g);
      if (r !== undefined) {
        rep = r;
        break;
      }
    }
    repCache.set(nodeId, rep);
    return rep;
  };

  const edges: Edge[] = [];
  const seen = new Map<string, Edge & { count: number }>();
  const add = (source: string | null, target: string | null, value: string): void => {
    if (source === null || target === null || source === target) return;
    const key = `${source}>${target}`;
    const found = seen.get(key);
    if (found) {
      found.count++;
      found.label = `${typeStr(model.values.get(found.value))} +${found.count - 1}`;
      return;
    }
    const edge = { id: `e${edges.length}`, source, target, label: typeStr(model.values.get(value)), value, count: 1 };
    seen.set(key, edge);
    edges.push(edge);
  };
  const from = (vid: string): string | null => {
    const v = model.values.get(vid);
    if (v?.producer) return repOf(v.producer);
    const port = model.portOf.get(vid);
    return port ? `in:${port.port.role}` : null;
  };
  for (const n of model.graph.nodes) {
    const target = repOf(n.id);
    for (const vid of n.inputs) add(from(vid), target, vid);
  }
  for (const p of model.graph.outputs) add(from(p.value), "out", p.value);
  // Weights feed almost every box: past a handful, their edges would hide the data flow (and
  // slow the layout), so the parameters box says how many boxes it feeds instead.
  const fanout = new Map<string, number>();
  for (const e of edges) if (e.source.startsWith("in:")) fanout.set(e.source, (fanout.get(e.source) ?? 0) + 1);
  const hidden = new Set<string>();
  for (const role of ["parameter", "state", "constant"]) {
    const n = fanout.get(`in:${role}`) ?? 0;
    const box = items.get(`in:${role}`);
    if (n > MAX_FANOUT && box) {
      hidden.add(box.id);
      box.sub = `${box.sub} → ${n} boxes`;
      size(box);
    }
  }
  const shown = hidden.size ? edges.filter((e) => !hidden.has(e.source)) : edges;
  return { root, items, edges: shown, repOf };
}

/** Every item under ``item`` (not itself), depth first. */
export function* descendants(item: Item): Generator<Item> {
  for (const c of item.children) {
    yield c;
    yield* descendants(c);
  }
}
