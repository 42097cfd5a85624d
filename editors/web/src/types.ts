/** The canonical graph JSON (docs/graph-format.md) and the viewer's boot configuration. */

export interface Frame {
  path: string;
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
  function?: string | null;
  /** In a notebook: the cell's index in its cells; lines count within that cell. */
  cell?: number | null;
}

/** `path:line`, or in a notebook `path:cell N:line`. */
export function frameWhere(f: { path: string; line: number; cell?: number | null }, path: string = f.path): string {
  return `${path}:${typeof f.cell === "number" ? `cell ${f.cell}:` : ""}${f.line}`;
}

export interface GNode {
  id: string;
  primitive: string;
  params: Record<string, unknown>;
  inputs: string[];
  outputs: string[];
  scope: string;
  group: string | null;
  source: Frame | null;
  frames: Frame[];
  transforms: string[];
  /** XLA's figures for one execution and how often the totals count it (docs/graph-format.md#costs). */
  costs?: NodeCosts;
}

export interface NodeCosts {
  flops: number;
  bytes: number;
  transcendentals: number;
  runs: number;
  trips?: number;
  tripsStatic?: boolean;
  branch?: number;
  unknown?: string;
}

/** A number of the graph file: a non-finite one is ``{"float": "nan" | "inf" | "-inf"}``. */
export type GNumber = number | { float: string };

/** A value's statistics from a values run (docs/graph-format.md "Statistics"). */
export interface GStats {
  count: number;
  finite: number;
  nan: number;
  posInf: number;
  negInf: number;
  zeros: GNumber;
  min: GNumber | null;
  max: GNumber | null;
  mean: GNumber | null;
  std: GNumber | null;
  meanAbs: GNumber | null;
  histogram: { lo: GNumber; hi: GNumber; counts: number[]; approximate?: boolean; sampled?: boolean } | null;
  iterations?: number;
  firstNonFiniteIteration?: number[];
}

export interface GValue {
  id: string;
  shape: (number | string)[];
  dtype: string;
  weakType: boolean;
  producer: string | null;
  kind: string;
  literal?: unknown;
  stats?: GStats;
  /** How the value is split over the mesh (docs/graph-format.md#shardings); absent when split over none. */
  sharding?: GSharding;
}

/** A value's sharding: one ``spec`` entry per dimension (null, or the mesh axes it is split over). */
export interface GSharding {
  spec: (string[] | null)[];
  varying?: string[];
  unreduced?: string[];
  reduced?: string[];
}

/** The mesh the values' shardings name. */
export interface GMesh {
  axisNames: string[];
  axisSizes: number[];
  axisTypes: string[];
}

/** What a values run found (docs/graph-format.md "Execution"). */
export interface Execution {
  device: string;
  seconds: GNumber;
  validation: { status: "verified" | "partial" | "mismatch"; mismatch?: { message?: string }; message?: string; partialCount?: number };
  executed: Record<string, number>;
  firstNonFinite?: { node: string; value: string; primitive: string; kind: string; message: string };
  gradients?: { parameters: { label: string; value: string; norm: GNumber; zero: boolean }[]; zero: string[] };
}

export interface GGroup {
  id: string;
  kind: string;
  parent: string | null;
  label: string;
  node?: string | null;
}

export interface Port {
  value: string;
  label: string;
  role: string;
}

export interface Graph {
  format: string;
  version: number;
  target: { path?: string; name?: string; kind?: string };
  profile: { name?: string | null };
  coverage: { complete: boolean; opaque: { node: string; reason: string }[]; notes: string[] };
  sources: Record<string, string>;
  inputs: Port[];
  outputs: Port[];
  nodes: GNode[];
  values: GValue[];
  groups: GGroup[];
  costs?: Record<string, unknown>;
  execution?: Execution;
  mesh?: GMesh;
  time?: TimeSection;
}

/** An HLO instruction that ran, in a timed graph (docs/graph-format.md#time). */
export interface TimedOp {
  name: string;
  opcode: string;
  seconds: number;
  count: number;
  nodes: string[];
}

/** Measured device time (``jaxlsp trace --time``): seconds per step and per device. */
export interface TimeSection {
  /** cpu, tpu, cuda: on an accelerator shares read of ``busy`` first. */
  platform?: string;
  device: string;
  repeat: number;
  step: number;
  busy: number;
  attributed: number;
  nodes: Record<string, number>;
  ops: TimedOp[];
  notes: string[];
}

/** What the server derives from a graph (jaxlsp/costs' answer, docs/lsp-extensions.md): the
 * viewer's costs, memory and precision overlays use it when it comes (the bridge's /analysis, a
 * static page's embedded copy). */
export interface Analysis {
  measured: boolean;
  gradient: boolean;
  total: { flops: number; bytes: number; transcendentals: number };
  memory: { peakBytes: number; node: string | null; live: string[]; byModule: { scope: string; bytes: number }[]; inputBytes: number };
  residuals: { values: string[]; bytes: number } | null;
}

/** What changed from a base graph (jaxlsp/diff's answer): node ids of this graph, removed ones of the base. */
export interface DiffInfo {
  same: boolean;
  summary: string;
  counts: { added: number; removed: number; changed: number; matched: number };
  added: { id: string; primitive: string; scope: string }[];
  removed: { id: string; primitive: string; scope: string }[];
  changed: { id: string; baseId: string; primitive: string; scope: string; text: string; fields: { field: string; before: string; after: string }[] }[];
  base?: string;
}

export type Mode = "http" | "webview" | "static";

export interface Config {
  mode: Mode;
  token?: string;
  traceId?: string;
  graph?: Graph;
  /** Static pages: the graph's analysis and, for `jaxlsp diff --html`, the changes from its base. */
  analysis?: Analysis;
  diff?: DiffInfo;
  /** The node to select and bring into view once the graph is shown (``&node=`` of the page). */
  nodeId?: string;
}
