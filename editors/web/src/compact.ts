/** The compact graph form (docs/graph-format.md "Compact form (version 2)") expanded into the
 * version 1 objects the viewer works on. A 50,000-equation graph is 1.8 MB compact against 34 MB
 * expanded: reading the small one and making the rows here is what lets a big graph paint early.
 * Strictness stays the server's (it wrote the file); a broken column is an Error naming it. */

import type { Frame, GNode, GValue, Graph } from "./types";

type Json = unknown;

interface Columns {
  count: number;
  ids: number[] | null;
  extra?: Record<string, [number, Json][]>;
  [column: string]: Json;
}

interface Tables {
  strings: string[];
  frames: number[];
  stacks: number[][];
  params: Record<string, unknown>[];
  shapes: (number | string)[][];
  transforms: string[][];
}

const KINDS = ["var", "literal", "const"];

function column(c: Columns, name: string, where: string): Json[] {
  const col = c[name];
  if (!Array.isArray(col) || col.length !== c.count) {
    throw new Error(`${where}.${name}: expected ${c.count} entries`);
  }
  return col;
}

function at<T>(table: T[], index: Json, where: string): T {
  if (typeof index !== "number" || index < 0 || index >= table.length) {
    throw new Error(`${where}: expected an index from 0 to ${table.length - 1}, got ${JSON.stringify(index)}`);
  }
  return table[index];
}

/** ``graph`` itself when it is version 1; else its rows made from the columns. */
export function expandGraph(graph: Graph): Graph {
  const raw = graph as unknown as Record<string, Json>;
  if (raw.version !== 2) return graph;
  const t = raw.tables as Tables;
  const nodesIn = raw.nodes as Columns;
  const valuesIn = raw.values as Columns;
  const groups = graph.groups;
  const s = t.strings;

  const frameCache = new Map<number, Frame>();
  const frame = (index: number, where: string): Frame => {
    const hit = frameCache.get(index);
    if (hit) return hit;
    const base = index * 8;
    if (!Number.isInteger(index) || index < 0 || base + 8 > t.frames.length) {
      throw new Error(`${where}: no frame ${index}`);
    }
    const f = t.frames;
    const out: Frame = {
      path: at(s, f[base], `${where}.path`),
      line: f[base + 1],
      column: f[base + 2],
      endLine: f[base + 3],
      endColumn: f[base + 4],
    };
    if (f[base + 5] >= 0) out.function = s[f[base + 5]];
    if (f[base + 7] >= 0) out.cell = f[base + 7];
    frameCache.set(index, out);
    return out;
  };
  const stackCache = new Map<number, Frame[]>();
  const stack = (index: Json, where: string): Frame[] => {
    const hit = stackCache.get(index as number);
    if (hit) return hit;
    const out = at(t.stacks, index, where).map((fi) => frame(fi, where));
    stackCache.set(index as number, out);
    return out;
  };

  const valueCount = valuesIn.count;
  const valueId = (i: number): string => (valuesIn.ids === null ? `v${i}` : at(s, valuesIn.ids[i], `values.ids[${i}]`));
  const nodeId = (i: number): string => (nodesIn.ids === null ? `n${i}` : at(s, nodesIn.ids[i], `nodes.ids[${i}]`));

  const primitive = column(nodesIn, "primitive", "nodes");
  const params = column(nodesIn, "params", "nodes");
  const scope = column(nodesIn, "scope", "nodes");
  const group = column(nodesIn, "group", "nodes");
  const source = column(nodesIn, "source", "nodes");
  const frames = column(nodesIn, "frames", "nodes");
  const transforms = column(nodesIn, "transforms", "nodes");
  const inputs = column(nodesIn, "inputs", "nodes");
  const outputs = column(nodesIn, "outputs", "nodes");
  const refs = nodesIn.refs as Json[];
  const producerOf = new Array<number>(valueCount).fill(-1);

  const nodes: GNode[] = new Array(nodesIn.count);
  let r = 0;
  let prev = 0;
  const ref = (where: string): string => {
    const e = refs[r++];
    if (typeof e === "string") return e;
    if (typeof e !== "number") throw new Error(`${where}: nodes.refs[${r - 1}] is not a value reference`);
    prev += e;
    if (prev < 0 || prev >= valueCount) throw new Error(`${where}: nodes.refs[${r - 1}] names no value (${prev})`);
    return valueId(prev);
  };
  for (let i = 0; i < nodesIn.count; i++) {
    const where = `nodes[${i}]`;
    const ins: string[] = [];
    for (let k = 0; k < (inputs[i] as number); k++) ins.push(ref(where));
    const outs: string[] = [];
    for (let k = 0; k < (outputs[i] as number); k++) {
      const before = r;
      const id = ref(where);
      const e = refs[before];
      if (typeof e === "number" && producerOf[prev] === -1) producerOf[prev] = i;
      outs.push(id);
    }
    const g = group[i];
    nodes[i] = {
      id: nodeId(i),
      primitive: at(s, primitive[i], `${where}.primitive`),
      params: at(t.params, params[i], `${where}.params`),
      inputs: ins,
      outputs: outs,
      scope: at(s, scope[i], `${where}.scope`),
      group: typeof g === "string" ? g : g === -1 ? null : at(groups, g, `${where}.group`).id,
      source: source[i] === -1 ? null : frame(source[i] as number, `${where}.source`),
      frames: stack(frames[i], `${where}.frames`),
      transforms: at(t.transforms, transforms[i], `${where}.transforms`),
    };
  }
  for (const [member, rows] of Object.entries(nodesIn.extra ?? {})) {
    for (const [row, v] of rows) (at(nodes, row, `nodes.extra.${member}`) as unknown as Record<string, Json>)[member] = v;
  }

  const shape = column(valuesIn, "shape", "values");
  const dtype = column(valuesIn, "dtype", "values");
  const flags = column(valuesIn, "flags", "values");
  const values: GValue[] = new Array(valueCount);
  for (let i = 0; i < valueCount; i++) {
    const where = `values[${i}]`;
    const f = flags[i] as number;
    const p = producerOf[i];
    values[i] = {
      id: valueId(i),
      shape: at(t.shapes, shape[i], `${where}.shape`),
      dtype: at(s, dtype[i], `${where}.dtype`),
      weakType: (f & 1) === 1,
      producer: p === -1 ? null : nodes[p].id,
      kind: at(KINDS, f >> 1, `${where}.flags`),
    };
  }
  for (const [member, rows] of Object.entries(valuesIn.extra ?? {})) {
    for (const [row, v] of rows) {
      const value = at(values, row, `values.extra.${member}`) as unknown as Record<string, Json>;
      if (member === "producer") value.producer = typeof v === "number" ? at(nodes, v, `values[${row}].producer`).id : v;
      else value[member] = v;
    }
  }
  const out: Record<string, Json> = { ...raw, version: 1, nodes, values };
  delete out.tables;
  return out as unknown as Graph;
}
