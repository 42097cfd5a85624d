/**
 * Which entrypoint "Trace graph" means (plain logic, no JupyterLab: tested with node --test).
 *
 * `jaxlsp/discover` on a notebook lists every cell's entrypoints, each with its `cell` (the index
 * in the notebook's cells, markdown counted, as JupyterLab counts them) and ranges within it.
 */

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface Entrypoint {
  name: string;
  kind: string;
  range: Range;
  bodyRange: Range;
  cell?: number;
}

/** The innermost entrypoint around `line` of cell `cell`, else the first one of that cell. */
export function targetAt(entrypoints: readonly Entrypoint[], cell: number, line: number): Entrypoint | undefined {
  const inCell = entrypoints.filter((e) => e.cell === cell);
  const around = inCell
    .filter((e) => e.bodyRange.start.line <= line && line <= e.bodyRange.end.line)
    .sort((a, b) => a.bodyRange.end.line - a.bodyRange.start.line - (b.bodyRange.end.line - b.bodyRange.start.line));
  return around[0] ?? inCell[0];
}

/** What a `jaxlsp/trace` answered: a graph, or the inputs its profile lacks. */
export interface TraceResult {
  traceId: string;
  summary: { ops: number; outputs: string[] };
}

export interface NeedsInput {
  needsInput: { message?: string; path?: string }[];
  proposal: string;
}

export function isTrace(result: TraceResult | NeedsInput): result is TraceResult {
  return typeof (result as TraceResult).traceId === "string";
}

/** One line for the user: `MLP · 1,234 ops · f32[8,10]`. */
export function describe(name: string, result: TraceResult): string {
  const outputs = result.summary.outputs.slice(0, 2).join(", ");
  return `${name} · ${result.summary.ops.toLocaleString("en-US")} ops${outputs ? ` · ${outputs}` : ""}`;
}
