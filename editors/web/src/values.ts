/** A values run in the viewer (docs/graph-format.md "Statistics", "Execution"): overlay modes that
 * colour boxes by a statistic of what they compute, the statistics and histogram of a node's
 * values in the details, and which boxes never ran (a cond branch not taken). Plain data and
 * small DOM builders; main.ts calls them. */

import type { Model } from "./model";
import type { GStats } from "./types";
import type { Item } from "./view";

export type Overlay = "none" | "absmax" | "std" | "nonfinite" | "grad";

export const OVERLAYS: { mode: Overlay; label: string }[] = [
  { mode: "none", label: "no overlay" },
  { mode: "absmax", label: "|x| max" },
  { mode: "std", label: "std" },
  { mode: "nonfinite", label: "NaN / Inf count" },
  { mode: "grad", label: "gradient norm of its weights" },
];

const SVG = "http://www.w3.org/2000/svg";

/** The figure one value gives an overlay (null: none, e.g. a key, or a value that never ran). */
function figure(stats: GStats | undefined, mode: Overlay): number | null {
  if (!stats) return null;
  if (mode === "absmax") {
    if (stats.min === null || stats.max === null) return stats.nan + stats.posInf + stats.negInf ? Infinity : null;
    return Math.max(Math.abs(num(stats.min)), Math.abs(num(stats.max)));
  }
  if (mode === "std") return stats.std === null ? null : num(stats.std);
  if (mode === "nonfinite") return stats.nan + stats.posInf + stats.negInf;
  return null;
}

/** A number of the graph file, where a non-finite one is ``{"float": "inf"}``. */
export function num(x: number | { float: string } | null | undefined): number {
  if (x === null || x === undefined) return NaN;
  if (typeof x === "number") return x;
  return x.float === "inf" ? Infinity : x.float === "-inf" ? -Infinity : NaN;
}

/** Per overlay mode, each node's and group's figure (the largest inside a group; counts add up),
 * computed once per graph and mode. */
export class Overlays {
  private readonly cache = new Map<Overlay, Map<string, number>>();
  private gradByValue: Map<string, number> | null = null;

  constructor(private readonly model: Model) {}

  get hasValues(): boolean {
    return !!this.model.graph.execution;
  }

  get hasGradients(): boolean {
    return !!this.model.graph.execution?.gradients;
  }

  /** The gradient norm of each parameter input, by its value id. */
  private gradients(): Map<string, number> {
    if (this.gradByValue) return this.gradByValue;
    const norms = new Map<string, number>();
    const byLabel = new Map<string, number>();
    for (const p of this.model.graph.execution?.gradients?.parameters ?? []) byLabel.set(p.label, num(p.norm));
    for (const port of this.model.graph.inputs) {
      const n = byLabel.get(port.label);
      if (n !== undefined) norms.set(port.value, n);
    }
    this.gradByValue = norms;
    return norms;
  }

  figures(mode: Overlay): Map<string, number> {
    const found = this.cache.get(mode);
    if (found) return found;
    const out = new Map<string, number>();
    const sum = mode === "nonfinite";
    const grads = mode === "grad" ? this.gradients() : null;
    for (const n of this.model.graph.nodes) {
      let v: number | null = null;
      const ids = grads ? n.inputs : n.outputs;
      for (const id of ids) {
        const f = grads ? grads.get(id) ?? null : figure(this.model.values.get(id)?.stats, mode);
        if (f === null || Number.isNaN(f)) continue;
        v = v === null ? f : sum ? v + f : Math.max(v, f);
      }
      if (v === null) continue;
      out.set(n.id, v);
      for (const g of this.model.ancestors(n.id)) {
        const before = out.get(g);
        out.set(g, before === undefined ? v : sum ? before + v : Math.max(before, v));
      }
    }
    this.cache.set(mode, out);
    return out;
  }

  /** The figure of a box: a node's, a group's, a roll-up's members' together. */
  of(item: Item, mode: Overlay): number | null {
    if (mode === "none") return null;
    const figures = this.figures(mode);
    if (item.kind === "rollup" && item.members) {
      let v: number | null = null;
      for (const m of item.members) {
        const f = figures.get(m);
        if (f === undefined) continue;
        v = v === null ? f : mode === "nonfinite" ? v + f : Math.max(v, f);
      }
      return v;
    }
    if (item.kind === "node" || item.kind === "group" || item.kind === "container") return figures.get(item.ref) ?? null;
    return null;
  }

  /** The range the colours span: every finite figure of the mode (a log scale when it spans
   * more than a decade). */
  range(mode: Overlay): { lo: number; hi: number; log: boolean } {
    let lo = Infinity;
    let hi = -Infinity;
    for (const [id, v] of this.figures(mode)) {
      if (!this.model.nodes.has(id) || !Number.isFinite(v)) continue;
      if (mode !== "nonfinite" && v <= 0) continue;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    if (!Number.isFinite(lo)) return { lo: 0, hi: 1, log: false };
    const log = mode !== "nonfinite" && lo > 0 && hi / lo > 10;
    return { lo, hi, log };
  }

  /** The fill of a box with figure ``v``: cool and pale for small, warm and strong for large; a
   * count of NaN or Inf above zero, or an infinite figure, is red. */
  colour(v: number, mode: Overlay): string {
    if (!Number.isFinite(v)) return "hsl(0, 85%, 55%)";
    if (mode === "nonfinite") return v > 0 ? "hsl(0, 85%, 55%)" : "hsl(140, 40%, 72%)";
    const { lo, hi, log } = this.range(mode);
    let t = 0;
    if (v > 0 && hi > lo) t = log ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : (v - lo) / (hi - lo);
    t = Math.min(1, Math.max(0, t));
    return `hsl(${Math.round(210 - 200 * t)}, ${Math.round(55 + 30 * t)}%, ${Math.round(82 - 30 * t)}%)`;
  }

  /** Whether a box stands only for nodes that never ran (a cond branch not taken). */
  unrun(item: Item): boolean {
    const execution = this.model.graph.execution;
    if (!execution) return false;
    if (item.kind === "node") {
      const n = this.model.nodes.get(item.ref);
      return !!n && n.outputs.length > 0 && n.outputs.every((v) => this.model.values.get(v)?.stats === undefined) && !ran(this.model, n.id);
    }
    if (item.kind === "group" || item.kind === "container") {
      const g = this.model.groups.get(item.ref);
      return !!g && (g.kind === "cond_branch" || g.kind === "while_body" || g.kind === "scan") && !(g.id in execution.executed);
    }
    return false;
  }

  /** The overlay's legend: its name and range. */
  legend(mode: Overlay): string {
    if (mode === "none") return "";
    const label = OVERLAYS.find((o) => o.mode === mode)?.label ?? mode;
    if (mode === "nonfinite") {
      let total = 0;
      for (const [id, v] of this.figures(mode)) if (this.model.nodes.has(id)) total += v;
      return `overlay ${label}: ${total.toLocaleString()} non-finite elements in all (red: some)`;
    }
    const { lo, hi, log } = this.range(mode);
    return `overlay ${label}: ${short(lo)} (blue) to ${short(hi)} (red)${log ? ", log scale" : ""}`;
  }
}

/** A node whose every output lacks statistics may still have run (keys): it ran unless a group
 * around it is a region that never did. */
function ran(model: Model, nodeId: string): boolean {
  const executed = model.graph.execution?.executed ?? {};
  for (const g of model.ancestors(nodeId)) {
    const kind = model.groups.get(g)?.kind;
    if ((kind === "cond_branch" || kind === "while_body" || kind === "scan") && !(g in executed)) return false;
  }
  return true;
}

/** Six significant digits, as the CLI and hover write figures. */
export function short(x: number | { float: string } | null | undefined): string {
  const v = num(x);
  if (x === null || x === undefined) return "none";
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  return Number(v.toPrecision(6)).toString();
}

/** The statistics of one value as rows, and its histogram as a small SVG (32 bars). */
function el(tag: string, cls: string, text?: string): HTMLElement {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function statsBlock(title: string, stats: GStats): HTMLElement {
  const box = el("div", "jx-stats");
  box.append(el("h4", "", title));
  const rows: [string, string][] = [
    ["min / max", `${short(stats.min)} / ${short(stats.max)}`],
    ["mean / std", `${short(stats.mean)} / ${short(stats.std)}`],
    ["mean |x|", short(stats.meanAbs)],
    ["NaN / +Inf / -Inf", `${stats.nan} / ${stats.posInf} / ${stats.negInf}`],
    ["zeros", `${(num(stats.zeros) * 100).toFixed(1)}%`],
    ["elements", stats.count.toLocaleString() + (stats.iterations ? ` over ${stats.iterations} iterations` : "")],
  ];
  if (stats.firstNonFiniteIteration) rows.push(["first non-finite", `iteration ${stats.firstNonFiniteIteration.join(", ")}`]);
  for (const [k, v] of rows) {
    const r = el("div", "jx-row");
    r.append(el("span", "jx-key", k), el("span", "jx-val", v));
    box.append(r);
  }
  const h = stats.histogram;
  if (h) {
    const top = Math.max(1, ...h.counts);
    const chart = document.createElementNS(SVG, "svg");
    chart.setAttribute("class", "jx-hist");
    chart.setAttribute("viewBox", "0 0 128 40");
    chart.setAttribute("preserveAspectRatio", "none");
    h.counts.forEach((c, i) => {
      const bar = document.createElementNS(SVG, "rect");
      const height = c ? Math.max(1, (38 * c) / top) : 0;
      bar.setAttribute("x", String(i * 4));
      bar.setAttribute("y", String(40 - height));
      bar.setAttribute("width", "3.4");
      bar.setAttribute("height", String(height));
      bar.setAttribute("data-count", String(c));
      const tip = document.createElementNS(SVG, "title");
      const lo = num(h.lo) + ((num(h.hi) - num(h.lo)) * i) / 32;
      const hi = num(h.lo) + ((num(h.hi) - num(h.lo)) * (i + 1)) / 32;
      tip.textContent = `${short(lo)} to ${short(hi)}: ${c}`;
      bar.append(tip);
      chart.append(bar);
    });
    box.append(chart);
    const note = [`${short(h.lo)}`, `${short(h.hi)}`].join(" … ");
    const flags = [h.sampled ? "sampled" : "", h.approximate ? "approximate" : ""].filter(Boolean).join(", ");
    box.append(el("div", "jx-hist-axis", flags ? `${note} (${flags})` : note));
  }
  return box;
}
