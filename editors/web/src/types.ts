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
}

export interface GValue {
  id: string;
  shape: (number | string)[];
  dtype: string;
  weakType: boolean;
  producer: string | null;
  kind: string;
  literal?: unknown;
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
}

export type Mode = "http" | "webview" | "static";

export interface Config {
  mode: Mode;
  token?: string;
  traceId?: string;
  graph?: Graph;
}
