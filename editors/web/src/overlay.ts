/** Overlays on the graph: costs (FLOPs, bytes), precision, forward / backward, memory at the peak
 * and the changes since a base graph; and the figures the details panel shows for each box. Plain
 * data, no DOM: ``main.ts`` draws the marks.
 *
 * Shades (FLOPs, bytes, memory) are relative to the largest closed box drawn; an open group shows
 * its figure in its header. Costs come from the graph's per-node ``costs`` (docs/graph-format.md#costs): a box's figure is
 * the sum over the measured equations inside it of their figures times their runs, as the server's
 * module table counts them. Memory needs the server's analysis (the bridge's /analysis, a static
 * page's embedded copy); the changes need a diff (the bridge's /diff, ``jaxlsp diff --html``). */

import type { Model } from "./model";
import type { Analysis, DiffInfo, GNode, TimedOp, TimeSection } from "./types";

export type OverlayMode = "none" | "flops" | "bytes" | "time" | "precision" | "pass" | "memory" | "diff";

export const MODES: { mode: OverlayMode; label: string }[] = [
  { mode: "none", label: "No overlay" },
  { mode: "flops", label: "FLOPs" },
  { mode: "bytes", label: "Bytes" },
  { mode: "time", label: "Measured time" },
  { mode: "precision", label: "Precision" },
  { mode: "pass", label: "Forward / backward" },
  { mode: "memory", label: "Memory peak" },
  { mode: "diff", label: "Changes" },
];

/** Equations whose figures are their bodies' (jaxlsp/graph/costs.py ROLLED_UP). */
const ROLLED_UP = new Set([
  "jit", "pjit", "closed_call", "core_call", "remat2", "checkpoint", "remat",
  "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "cond", "while", "scan",
]);
const PRODUCTS = new Set(["dot_general", "conv_general_dilated", "ragged_dot", "ragged_dot_general"]);
const WIDTH: Record<string, number> = { float16: 16, bfloat16: 16, float32: 32, float64: 64 };
const SHORT: Record<string, string> = { float16: "f16", bfloat16: "bf16", float32: "f32", float64: "f64" };

/** How one box is marked: a class, a heat (0 to 1) for a shade, a badge, and for the forward /
 * backward overlay the forward share of the box's work (a split bar). */
export interface Mark {
  cls?: string;
  heat?: number;
  badge?: string;
  split?: number;
}

export interface Section {
  title: string;
  rows: [string, string][];
}

interface Sums {
  flops: number;
  bytes: number;
  transcendentals: number;
  fwdOps: number;
  bwdOps: number;
  fwdFlops: number;
  bwdFlops: number;
  up: number;
  down: number;
  products: number;
  added: number;
  changed: number;
  liveBytes: number;
  seconds: number;
  peak: boolean;
}

const empty = (): Sums => ({
  flops: 0, bytes: 0, transcendentals: 0, fwdOps: 0, bwdOps: 0, fwdFlops: 0, bwdFlops: 0,
  up: 0, down: 0, products: 0, added: 0, changed: 0, liveBytes: 0, seconds: 0, peak: false,
});

/** "12.4 ms", "830 µs", "1.25 s" (jaxlsp/graph/timing.py's duration). */
export function duration(seconds: number): string {
  if (seconds >= 1) return `${seconds.toFixed(2)} s`;
  if (seconds >= 1e-3) return `${(seconds * 1e3).toFixed(1)} ms`;
  return `${Math.round(seconds * 1e6)} \u00b5s`;
}

export function isBackward(n: GNode): boolean {
  return n.transforms.includes("transpose");
}

/** "1.2 G", "345 M", "12 k", "512". */
export function human(n: number): string {
  const units: [number, string][] = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) if (n >= size) return `${(n / size).toFixed(n / size >= 100 ? 0 : 1)} ${unit}`;
  return String(Math.round(n));
}

export class Overlay {
  /** Per group id: the sums over every node inside it. */
  private readonly groups = new Map<string, Sums>();
  private readonly nodeSums = new Map<string, Sums>();
  readonly hasCosts: boolean;
  /** The measured time (a timed trace), and each node's HLO instructions that ran. */
  readonly time: TimeSection | null;
  private readonly instructions = new Map<string, TimedOp[]>();
  readonly gradient: boolean;
  private readonly total: Sums = empty();
  private summed = false;
  private readonly changed = new Map<string, DiffInfo["changed"][number]>();
  private readonly added = new Set<string>();
  private readonly live = new Map<string, number>(); // producer node -> bytes live at the peak

  constructor(
    readonly model: Model,
    readonly analysis: Analysis | null = null,
    readonly diff: DiffInfo | null = null,
  ) {
    this.hasCosts = model.graph.nodes.some((n) => n.costs !== undefined);
    this.time = model.graph.time ?? null;
    for (const op of this.time?.ops ?? []) {
      for (const id of op.nodes) {
        let ops = this.instructions.get(id);
        if (!ops) this.instructions.set(id, (ops = []));
        ops.push(op);
      }
    }
    this.gradient = model.graph.nodes.some(isBackward);
    for (const c of diff?.changed ?? []) this.changed.set(c.id, c);
    for (const a of diff?.added ?? []) this.added.add(a.id);
    if (analysis) {
      for (const v of analysis.memory.live) {
        const value = model.values.get(v);
        if (value?.producer) this.live.set(value.producer, (this.live.get(value.producer) ?? 0) + bytesOf(value.shape, value.dtype));
      }
    }
  }

  /** The per-node and per-group sums, made when first asked for: a graph opened without an
   * overlay never pays for them. Each node adds to its own group, then each group to its parent,
   * children first: one pass, whatever the nesting. */
  private ensure(): void {
    if (this.summed) return;
    this.summed = true;
    const model = this.model;
    for (const n of model.graph.nodes) {
      const s = this.sumsOf(n);
      this.nodeSums.set(n.id, s);
      // a call's body counts itself; only the marks of the call itself stay (and its own measured
      // time: a loop's overhead, which no body node has)
      const counted = ROLLED_UP.has(n.primitive)
        ? { ...empty(), added: s.added, changed: s.changed, peak: s.peak, seconds: s.seconds }
        : s;
      this.addTo(this.total, counted);
      const g = model.groupOfNode(n);
      if (g !== null) this.addTo(this.sumFor(g), counted);
    }
    const done = new Set<string>();
    // The group tree from the top, children before parents; a group outside it (a broken parent
    // chain) adds its own nodes to each group of its chain, as that chain reads from it.
    const post: string[] = [];
    const walk = (g: string): void => {
      if (done.has(g)) return;
      done.add(g);
      for (const c of model.children.get(g) ?? []) if (c.kind === "group") walk(c.id);
      post.push(g);
    };
    for (const c of model.children.get(null) ?? []) if (c.kind === "group") walk(c.id);
    for (const g of post) {
      const p = model.parentOf(g);
      if (p !== null && this.groups.has(g)) this.addTo(this.sumFor(p), this.groups.get(g)!);
    }
    const outside = [...this.groups].filter(([g]) => !done.has(g)).map(([g, mine]): [string, Sums] => [g, { ...mine }]);
    for (const [g, mine] of outside) for (const outer of model.chain(g).slice(0, -1)) this.addTo(this.sumFor(outer), mine);
  }

  private sumFor(g: string): Sums {
    let s = this.groups.get(g);
    if (!s) this.groups.set(g, (s = empty()));
    return s;
  }

  private addTo(into: Sums, s: Sums): void {
    for (const k of Object.keys(s) as (keyof Sums)[]) {
      if (k === "peak") into.peak = into.peak || s.peak;
      else into[k] += s[k];
    }
  }

  private sumsOf(n: GNode): Sums {
    const s = empty();
    const c = n.costs;
    const back = isBackward(n);
    if (c && !ROLLED_UP.has(n.primitive)) {
      s.flops = c.flops * c.runs;
      s.bytes = c.bytes * c.runs;
      s.transcendentals = c.transcendentals * c.runs;
    }
    if (!ROLLED_UP.has(n.primitive)) {
      if (back) { s.bwdOps = 1; s.bwdFlops = s.flops; } else { s.fwdOps = 1; s.fwdFlops = s.flops; }
    }
    const conv = this.conversion(n);
    if (conv === "up") s.up = 1;
    if (conv === "down") s.down = 1;
    if (PRODUCTS.has(n.primitive)) s.products = 1;
    if (this.added.has(n.id)) s.added = 1;
    if (this.changed.has(n.id)) s.changed = 1;
    s.liveBytes = this.live.get(n.id) ?? 0;
    s.seconds = this.time?.nodes[n.id] ?? 0;
    s.peak = this.analysis?.memory.node === n.id;
    return s;
  }

  /** "up" for a float conversion to a wider float (bf16 -> f32), "down" for a narrower one. */
  conversion(n: GNode): "up" | "down" | null {
    if (n.primitive !== "convert_element_type" || !n.inputs.length || !n.outputs.length) return null;
    const a = this.model.values.get(n.inputs[0])?.dtype ?? "";
    const b = this.model.values.get(n.outputs[0])?.dtype ?? "";
    if (a === b || !(a in WIDTH) || !(b in WIDTH)) return null;
    return WIDTH[b] > WIDTH[a] || (WIDTH[b] === WIDTH[a] && b === "float16") ? "up" : "down";
  }

  /** "bf16 x bf16 -> f32, precision DEFAULT" for a matrix product. */
  product(n: GNode): string | null {
    if (!PRODUCTS.has(n.primitive)) return null;
    const t = (v: string): string => { const d = this.model.values.get(v)?.dtype ?? "?"; return SHORT[d] ?? d; };
    const p = n.params.precision;
    const precision = p === null || p === undefined ? "DEFAULT" : Array.isArray(p) ? [...new Set(p.map(String))].join("/") : String(p);
    return `${n.inputs.slice(0, 2).map(t).join(" x ")} -> ${n.outputs.slice(0, 1).map(t).join("")}, precision ${precision.split(".").pop()}`;
  }

  /** Why a mode has nothing to show, or null when it can show something. */
  unavailable(mode: OverlayMode): string | null {
    if ((mode === "flops" || mode === "bytes") && !this.hasCosts) return "this trace has no costs: trace it with costs (jaxlsp trace --costs)";
    if (mode === "time" && !this.time) return "this trace was not timed: trace it with time (jaxlsp trace --time)";
    if (mode === "pass" && !this.gradient) return "no backward pass: trace a gradient profile (transform = \"grad\")";
    if (mode === "memory" && !this.analysis) return "no memory analysis for this graph";
    if (mode === "diff" && !this.diff) return "no earlier trace of this target to compare with";
    return null;
  }

  /** The sums of a box: a node, a group, or a roll-up's members together. */
  sums(kind: string, ref: string, members?: string[]): Sums | null {
    this.ensure();
    if (kind === "node") return this.nodeSums.get(ref) ?? null;
    if (kind === "group" || kind === "container" || kind === "rollup") {
      const out = empty();
      for (const g of members ?? [ref]) this.addTo(out, this.groups.get(g) ?? empty());
      return out;
    }
    return null;
  }

  /** Marks for the boxes ``items`` in ``mode``; shades are relative to the largest of them. */
  marks(mode: OverlayMode, items: { id: string; kind: string; ref: string; members?: string[] }[]): Map<string, Mark> {
    const out = new Map<string, Mark>();
    if (mode === "none" || this.unavailable(mode)) return out;
    const sums = new Map<string, Sums>();
    for (const it of items) {
      const s = this.sums(it.kind, it.ref, it.members);
      if (s) sums.set(it.id, s);
    }
    const figure = (s: Sums): number =>
      mode === "flops" ? s.flops : mode === "bytes" ? s.bytes : mode === "memory" ? s.liveBytes : mode === "time" ? s.seconds : 0;
    // Shades are relative to the largest closed box: an open group holds them all, so it gets
    // its figure as a badge only (a shade would cover what it holds).
    let most = 0;
    for (const it of items) if (it.kind !== "container") most = Math.max(most, figure(sums.get(it.id) ?? empty()));
    for (const it of items) {
      const s = sums.get(it.id);
      if (!s) continue;
      const node = it.kind === "node" ? this.model.nodes.get(it.ref) : undefined;
      const m: Mark = {};
      if (mode === "flops" || mode === "bytes") {
        const v = figure(s);
        if (v > 0) {
          if (it.kind !== "container") m.heat = most > 0 ? Math.min(1, Math.sqrt(v / most)) : 0;
          m.badge = `${human(v)}${mode === "flops" ? "FLOP" : "B"}`;
        }
        if (node?.costs?.unknown) m.cls = "jx-ov-unknown";
      } else if (mode === "time") {
        if (s.seconds > 0) {
          if (it.kind !== "container") m.heat = most > 0 ? Math.min(1, Math.sqrt(s.seconds / most)) : 0;
          m.badge = `${duration(s.seconds)} \u00b7 ${this.share(s.seconds)}`;
        }
      } else if (mode === "precision") {
        const conv = node ? this.conversion(node) : null;
        if (conv) {
          m.cls = conv === "up" ? "jx-ov-up" : "jx-ov-down";
          m.badge = conv === "up" ? "upcast" : "downcast";
        } else if (node && PRODUCTS.has(node.primitive)) {
          m.cls = "jx-ov-product";
          m.badge = this.product(node)?.split(",")[0];
        } else if (!node && (s.up || s.down)) {
          m.cls = "jx-ov-converts";
          m.badge = `${s.up}\u2191 ${s.down}\u2193`;
        }
      } else if (mode === "pass") {
        if (node) m.cls = s.bwdOps ? "jx-ov-backward" : "jx-ov-forward";
        else if (s.fwdOps + s.bwdOps > 0) {
          const useFlops = s.fwdFlops + s.bwdFlops > 0;
          const f = useFlops ? s.fwdFlops : s.fwdOps;
          const b = useFlops ? s.bwdFlops : s.bwdOps;
          m.split = f / (f + b);
          m.badge = useFlops ? `fwd ${human(f)} | bwd ${human(b)}` : `fwd ${f} | bwd ${b} ops`;
        }
      } else if (mode === "memory") {
        if (s.peak) {
          m.cls = node ? "jx-ov-peak" : "jx-ov-peak-in";
          m.badge = `peak ${human(this.analysis!.memory.peakBytes)}B`;
        } else if (s.liveBytes > 0) {
          m.badge = `${human(s.liveBytes)}B live`;
        }
        if (s.liveBytes > 0 && it.kind !== "container") m.heat = most > 0 ? Math.min(1, Math.sqrt(s.liveBytes / most)) : 0;
      } else if (mode === "diff") {
        if (node) {
          if (s.added) { m.cls = "jx-ov-added"; m.badge = "new"; }
          else if (s.changed) { m.cls = "jx-ov-changed"; m.badge = "changed"; }
        } else if (s.added || s.changed) {
          m.cls = "jx-ov-changes-in";
          m.badge = `+${s.added} ~${s.changed}`;
        }
      }
      if (m.cls || m.heat !== undefined || m.badge || m.split !== undefined) out.set(it.id, m);
    }
    return out;
  }

  /** Whether shares read of device-busy time first, as the CLI's tables do (graph/timing.py's
   * device_view): on an accelerator a small model's step is mostly idle, and a share of the step
   * says 5 % of a line that is half the chip's work. The CPU keeps shares of the step. */
  private onDevice(): boolean {
    return (this.time?.platform ?? "cpu") !== "cpu";
  }

  /** "31 %": of device-busy time on an accelerator, else of the measured step. */
  share(seconds: number): string {
    const whole = this.onDevice() ? (this.time?.busy ?? 0) : (this.time?.step ?? 0);
    return percentOf(seconds, whole);
  }

  /** The measured time of a box, and for a node the HLO instructions that ran for it. */
  private timeDetails(s: Sums, node: GNode | undefined): Section[] {
    const t = this.time;
    if (!t) return [];
    const ofStep = `${percentOf(s.seconds, t.step)} of the step (${duration(t.step)})`;
    const rows: [string, string][] = [
      [
        "time",
        this.onDevice()
          ? `${duration(s.seconds)} per step \u00b7 ${this.share(s.seconds)} of device-busy time (${duration(t.busy)}) \u00b7 ${ofStep}`
          : `${duration(s.seconds)} per step \u00b7 ${ofStep}`,
      ],
    ];
    const out: Section[] = [{ title: "measured time", rows }];
    if (node) {
      const ops = this.instructions.get(node.id) ?? [];
      const hlo: [string, string][] = ops.slice(0, 50).map((op) => {
        const shared = op.nodes.length > 1 ? `, shared with ${op.nodes.length - 1} more node${op.nodes.length > 2 ? "s" : ""} by FLOPs` : "";
        return [op.name, `${op.opcode || "?"} \u00b7 ${duration(op.seconds)}${shared}`];
      });
      if (ops.length > 50) hlo.push(["\u2026", `${ops.length - 50} more`]);
      if (!hlo.length) hlo.push(["", "none ran for this node (fused away, or no HLO op names it)"]);
      out.push({ title: "HLO instructions", rows: hlo });
    }
    return out;
  }

  /** What the details panel adds for a box: costs, measured time and HLO instructions, forward /
   * backward side by side, precision, memory and changes, each when there is something to say. */
  details(kind: string, ref: string, members?: string[]): Section[] {
    this.ensure();
    const s = this.sums(kind, ref, members);
    if (!s) return [];
    const out: Section[] = [];
    const node = kind === "node" ? this.model.nodes.get(ref) : undefined;
    if (node?.costs) {
      const c = node.costs;
      const rows: [string, string][] = [
        ["FLOPs", `${c.flops.toLocaleString()}${c.runs !== 1 ? ` \u00d7 ${c.runs} runs` : ""}`],
        ["bytes", `${c.bytes.toLocaleString()}${c.runs !== 1 ? ` \u00d7 ${c.runs}` : ""}`],
        ["transcendentals", c.transcendentals.toLocaleString()],
      ];
      if (c.trips !== undefined) rows.push(["trips", `${c.trips}${c.tripsStatic === false ? " (not static: body counted once)" : ""}`]);
      if (c.branch !== undefined) rows.push(["branch", `${c.branch} (the most expensive, counted)`]);
      if (c.runs === 0) rows.push(["counted", "no: a cheaper cond branch"]);
      if (c.unknown) rows.push(["unknown", c.unknown]);
      if (this.total.flops) rows.push(["share", `${((100 * s.flops) / this.total.flops).toFixed(1)}% of the FLOPs`]);
      out.push({ title: "costs", rows });
    } else if (kind !== "node" && this.hasCosts) {
      out.push({
        title: "costs",
        rows: [
          ["FLOPs", s.flops.toLocaleString()],
          ["bytes", s.bytes.toLocaleString()],
          ["transcendentals", s.transcendentals.toLocaleString()],
          ["share", this.total.flops ? `${((100 * s.flops) / this.total.flops).toFixed(1)}% of the FLOPs` : "-"],
        ],
      });
    }
    out.push(...this.timeDetails(s, node));
    if (this.gradient) {
      if (node) out.push({ title: "pass", rows: [["pass", isBackward(node) ? `backward (differentiates ${node.scope || "the loss"})` : "forward"]] });
      else {
        const rows: [string, string][] = [["", "forward | backward"], ["ops", `${s.fwdOps} | ${s.bwdOps}`]];
        if (this.hasCosts) rows.push(["FLOPs", `${s.fwdFlops.toLocaleString()} | ${s.bwdFlops.toLocaleString()}`]);
        out.push({ title: "forward and backward", rows });
      }
    }
    if (node) {
      const conv = this.conversion(node);
      const prod = this.product(node);
      if (conv || prod) {
        const a = this.model.values.get(node.inputs[0] ?? "")?.dtype ?? "?";
        const b = this.model.values.get(node.outputs[0] ?? "")?.dtype ?? "?";
        out.push({ title: "precision", rows: [[conv ? conv + "cast" : "product", conv ? `${SHORT[a] ?? a} -> ${SHORT[b] ?? b}` : prod!]] });
      }
    } else if (s.up || s.down || s.products) {
      out.push({ title: "precision", rows: [["conversions", `${s.up} up, ${s.down} down`], ["products", String(s.products)]] });
    }
    if (this.analysis && (s.peak || s.liveBytes)) {
      const rows: [string, string][] = [];
      if (s.peak) rows.push(["peak", `${human(this.analysis.memory.peakBytes)}B live ${node ? "while this runs" : "inside"}`]);
      if (s.liveBytes) rows.push(["live at the peak", `${human(s.liveBytes)}B made here`]);
      out.push({ title: "memory", rows });
    }
    if (this.diff && (s.added || s.changed)) {
      const change = node ? this.changed.get(node.id) : undefined;
      const rows: [string, string][] = [];
      if (node && s.added) rows.push(["new", "not in the base graph"]);
      if (change) for (const f of change.fields) rows.push([f.field, `${f.before} \u2192 ${f.after}`]);
      if (!node) rows.push(["inside", `${s.added} new, ${s.changed} changed`]);
      out.push({ title: "changes", rows });
    }
    return out;
  }
}

const ITEM: Record<string, number> = {
  bool: 1, int8: 1, uint8: 1, int16: 2, uint16: 2, float16: 2, bfloat16: 2,
  int32: 4, uint32: 4, float32: 4, int64: 8, uint64: 8, float64: 8, complex64: 8, complex128: 16,
};

function bytesOf(shape: (number | string)[], dtype: string): number {
  let n = ITEM[dtype] ?? (dtype.startsWith("key<") ? 8 : 0);
  for (const d of shape) n *= typeof d === "number" ? d : 0;
  return n;
}

/** "31 %" of ``whole``, "-" when there is nothing to take a share of. */
function percentOf(part: number, whole: number): string {
  return whole > 0 ? `${Math.round((100 * part) / whole)} %` : "-";
}
