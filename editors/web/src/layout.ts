/** Two layouts of a view: a quick layered grid computed at once on the main thread (shown first),
 * and the elkjs layered layout computed in a web worker made from the embedded ELK script. */

import elkSource from "elk-worker-source";
import { HEADER, type Item, type View } from "./view";

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Point {
  x: number;
  y: number;
}

export interface Layout {
  boxes: Map<string, Box>;
  routes: Map<string, Point[]>;
  width: number;
  height: number;
  engine: "quick" | "elk";
}

const PAD = 12;
const GAP_X = 24;
const GAP_Y = 44;
const ROW = 14; // items per row before a layer wraps

/** Local edges per container: each edge is attributed to the lowest container holding both ends. */
function localEdges(view: View): Map<Item, [Item, Item][]> {
  const local = new Map<Item, [Item, Item][]>();
  const chain = (item: Item): Item[] => {
    const out: Item[] = [];
    for (let i: Item | null = item; i; i = i.parent) out.push(i);
    return out.reverse();
  };
  for (const e of view.edges) {
    const a = view.items.get(e.source);
    const b = view.items.get(e.target);
    if (!a || !b) continue;
    const ca = chain(a);
    const cb = chain(b);
    let k = 0;
    while (k < ca.length && k < cb.length && ca[k] === cb[k]) k++;
    if (k === 0 || k >= ca.length || k >= cb.length) continue;
    const owner = ca[k - 1];
    if (!local.has(owner)) local.set(owner, []);
    local.get(owner)!.push([ca[k], cb[k]]);
  }
  return local;
}

export function quickLayout(view: View): Layout {
  const local = localEdges(view);
  const rel = new Map<Item, Box>();
  const place = (container: Item): { w: number; h: number } => {
    for (const c of container.children) {
      if (c.kind === "container") {
        const s = place(c);
        c.width = s.w;
        c.height = s.h;
      }
    }
    const kids = container.children;
    const layer = new Map<Item, number>();
    const preds = new Map<Item, Item[]>();
    for (const [a, b] of local.get(container) ?? []) {
      if (!preds.has(b)) preds.set(b, []);
      preds.get(b)!.push(a);
    }
    let depth = 0;
    for (const c of kids) {
      let l = 0;
      for (const p of preds.get(c) ?? []) {
        const lp = layer.get(p);
        if (lp !== undefined) l = Math.max(l, lp + 1); // back edges (not yet placed) are ignored
      }
      layer.set(c, l);
      depth = Math.max(depth, l);
    }
    const rows: Item[][] = [];
    for (let l = 0; l <= depth; l++) {
      const inLayer = kids.filter((c) => layer.get(c) === l);
      for (let i = 0; i < inLayer.length; i += ROW) rows.push(inLayer.slice(i, i + ROW));
    }
    const top = container.parent ? HEADER + PAD : 0;
    const left = container.parent ? PAD : 0;
    let y = top;
    let width = 0;
    for (const row of rows) {
      let x = left;
      let h = 0;
      for (const c of row) {
        rel.set(c, { x, y, w: c.width, h: c.height });
        x += c.width + GAP_X;
        h = Math.max(h, c.height);
      }
      width = Math.max(width, x - GAP_X);
      y += h + GAP_Y;
    }
    const label = Math.ceil(container.title.length * 7.2) + 40;
    return { w: Math.max(width + left + (container.parent ? PAD : 0), label), h: Math.max(y - GAP_Y + (container.parent ? PAD : 0), HEADER + PAD) };
  };
  const total = place(view.root);
  const boxes = new Map<string, Box>();
  const absolute = (container: Item, ox: number, oy: number): void => {
    for (const c of container.children) {
      const r = rel.get(c)!;
      boxes.set(c.id, { x: ox + r.x, y: oy + r.y, w: r.w, h: r.h });
      if (c.kind === "container") absolute(c, ox + r.x, oy + r.y);
    }
  };
  absolute(view.root, 0, 0);
  const routes = new Map<string, Point[]>();
  for (const e of view.edges) {
    const a = boxes.get(e.source);
    const b = boxes.get(e.target);
    if (!a || !b) continue;
    routes.set(e.id, [
      { x: a.x + a.w / 2, y: a.y + a.h },
      { x: b.x + b.w / 2, y: b.y },
    ]);
  }
  return { boxes, routes, width: total.w, height: total.h, engine: "quick" };
}

// -- elk ----------------------------------------------------------------------------------------

interface ElkNode {
  id: string;
  width?: number;
  height?: number;
  x?: number;
  y?: number;
  children?: ElkNode[];
  edges?: ElkEdge[];
  layoutOptions?: Record<string, string>;
}

interface ElkEdge {
  id: string;
  sources: string[];
  targets: string[];
  sections?: { startPoint: Point; endPoint: Point; bendPoints?: Point[] }[];
}

const ROOT_OPTIONS: Record<string, string> = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.layered.spacing.nodeNodeBetweenLayers": "36",
  "elk.spacing.nodeNode": "18",
  "elk.separateConnectedComponents": "false",
  // One balanced alignment instead of four candidate ones: several times faster on long chains.
  "elk.layered.nodePlacement.bk.fixedAlignment": "BALANCED",
  "elk.json.shapeCoords": "ROOT",
  "elk.json.edgeCoords": "ROOT",
};
const SMALL = 400; // boxes: below this, ELK may also keep program order and try harder
const SMALL_OPTIONS: Record<string, string> = {
  "elk.layered.considerModelOrder.strategy": "NODES_AND_EDGES",
  "elk.layered.thoroughness": "7",
};
const LARGE_OPTIONS: Record<string, string> = { "elk.layered.thoroughness": "1" };

function toElk(view: View): ElkNode {
  const convert = (item: Item): ElkNode => {
    if (item.kind !== "container") return { id: item.id, width: item.width, height: item.height };
    return {
      id: item.id,
      children: item.children.map(convert),
      layoutOptions: {
        "elk.padding": `[top=${HEADER + 10},left=10,bottom=10,right=10]`,
        "elk.nodeSize.minimum": `(${Math.ceil(item.title.length * 7.2) + 40}, 40)`,
        "elk.nodeSize.constraints": "MINIMUM_SIZE",
      },
    };
  };
  return {
    id: "root",
    layoutOptions: { ...ROOT_OPTIONS, ...(view.items.size < SMALL ? SMALL_OPTIONS : LARGE_OPTIONS) },
    children: view.root.children.map(convert),
    edges: view.edges
      .filter((e) => view.items.has(e.source) && view.items.has(e.target))
      .map((e) => ({ id: e.id, sources: [e.source], targets: [e.target] })),
  };
}

function fromElk(result: ElkNode): Layout {
  const boxes = new Map<string, Box>();
  const walk = (n: ElkNode): void => {
    for (const c of n.children ?? []) {
      boxes.set(c.id, { x: c.x ?? 0, y: c.y ?? 0, w: c.width ?? 0, h: c.height ?? 0 });
      walk(c);
    }
  };
  walk(result);
  const routes = new Map<string, Point[]>();
  for (const e of result.edges ?? []) {
    const s = e.sections?.[0];
    if (s) routes.set(e.id, [s.startPoint, ...(s.bendPoints ?? []), s.endPoint]);
  }
  return { boxes, routes, width: result.width ?? 0, height: result.height ?? 0, engine: "elk" };
}

interface WorkerLike {
  postMessage(message: unknown): void;
  onmessage: ((event: { data: { id: number; data?: ElkNode; error?: unknown } }) => void) | null;
  onerror?: ((event: unknown) => void) | null;
  terminate?: () => void;
}

interface Pending {
  message: Record<string, unknown>;
  boxes: number;
  resolve: (l: Layout) => void;
  reject: (e: unknown) => void;
}

const RESTART_ABOVE = 300; // boxes: a newer request abandons a running layout this big

/** The ELK engine: a worker from a Blob URL of the embedded script, else ELK on the main thread
 * (its own FakeWorker), else none (the quick layout stays). A worker that fails to load (a
 * policy without ``worker-src blob:``) falls back the same way, and its requests move along. */
export class Elk {
  private worker: WorkerLike | null = null;
  private next = 1; // id 0 is the registration
  private pending = new Map<number, Pending>();
  where: "worker" | "main" | "none" = "none";

  constructor() {
    this.start(true);
  }

  private start(tryWorker: boolean): void {
    let worker = tryWorker ? this.startWorker() : null;
    this.where = worker ? "worker" : "none";
    if (!worker) {
      worker = this.startMain();
      if (worker) this.where = "main";
    }
    this.worker = worker;
    if (!worker) return;
    worker.onmessage = (event) => {
      const { id, data, error } = event.data;
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (error !== undefined || !data) p.reject(error ?? new Error("elk: empty result"));
      else p.resolve(fromElk(data));
    };
    if (this.where === "worker") worker.onerror = () => this.workerFailed();
    // ELK's worker knows no algorithm until told which to load (elk-api does the same).
    worker.postMessage({ id: 0, cmd: "register", algorithms: ["layered"] });
  }

  private workerFailed(): void {
    this.worker?.terminate?.();
    this.start(false);
    for (const [id, p] of this.pending) {
      if (this.worker) this.worker.postMessage(p.message);
      else {
        this.pending.delete(id);
        p.reject(new Error("no layout engine: the worker did not start"));
      }
    }
  }

  private startWorker(): WorkerLike | null {
    try {
      const url = URL.createObjectURL(new Blob([elkSource], { type: "text/javascript" }));
      return new Worker(url) as unknown as WorkerLike;
    } catch {
      return null;
    }
  }

  private startMain(): WorkerLike | null {
    try {
      // Only where the page's policy allows evaluating code (a worker is the normal path).
      const module = { exports: {} as { Worker?: new (url: string) => WorkerLike } };
      new Function("module", "exports", "document", "self", elkSource)(module, module.exports, undefined, undefined);
      const Fake = module.exports.Worker;
      return Fake ? new Fake("") : null;
    } catch {
      return null;
    }
  }

  layout(view: View): Promise<Layout> {
    if (!this.worker) return Promise.reject(new Error("no layout engine"));
    // Newer state wins: a big layout still running for an older state is abandoned (a fresh
    // worker costs a few hundred ms; waiting for it could cost many seconds).
    const stale = [...this.pending.values()];
    if (this.where === "worker" && stale.some((p) => p.boxes > RESTART_ABOVE)) {
      this.worker.terminate?.();
      this.pending.clear();
      for (const p of stale) p.reject(new Error("superseded"));
      this.start(true);
      if (!this.worker) return Promise.reject(new Error("no layout engine"));
    }
    const id = this.next++;
    const message = { id, cmd: "layout", graph: toElk(view), layoutOptions: {}, options: {} };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { message, boxes: view.items.size, resolve, reject });
      this.worker!.postMessage(message);
    });
  }
}
