/** The canonical graph JSON (docs/graph-format.md) and the viewer's boot configuration. */

export interface Frame {
  path: string;
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
  function?: string | null;
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
  execution?: Execution;
}

export type Mode = "http" | "webview" | "static";

export interface Config {
  mode: Mode;
  token?: string;
  traceId?: string;
  graph?: Graph;
  /** The node to select and bring into view once the graph is shown (``&node=`` of the page). */
  nodeId?: string;
}
