/** The jaxlsp graph viewer: boots from ``window.JAXLSP_VIEWER``, lays the graph out (quick grid
 * first, then elkjs in a worker) and draws it as SVG, with details, search, highlights, themes,
 * export and keyboard navigation. Every text from the graph goes through ``textContent``. */

import { Elk, quickLayout, type Layout } from "./layout";
import { makeHost, type Host } from "./host";
import { Model, typeStr } from "./model";
import { buildView, descendants, rollupKey, type Item, type State, type View } from "./view";
import type { Config, Graph } from "./types";
import { frameWhere } from "./types";

const SVG = "http://www.w3.org/2000/svg";
const EXPAND_ALL_LIMIT = 4000; // visible items "expand all" stops at, to stay fluid

declare global {
  interface Window {
    JAXLSP_VIEWER?: Config;
    __jaxlsp?: Viewer;
  }
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/** Timings in ms since navigation start, read by the tests and the benchmark. */
export interface Marks {
  graph?: number;
  firstPaint?: number;
  firstFull?: number;
  quick?: number;
  full?: number;
  layouts: number;
  fullLayouts: number;
  /** The last refresh: view building, quick layout, drawing; the last ELK layout (worker time included). */
  buildMs?: number;
  quickMs?: number;
  drawMs?: number;
  elkMs?: number;
}

class Viewer {
  readonly host: Host;
  model: Model | null = null;
  traceId: string | null = null;
  view: View | null = null;
  layout: Layout | null = null;
  state: State = { expanded: new Set(), unrolled: new Set() };
  selected: string | null = null;
  highlighted = new Set<string>();
  matches = new Set<string>();
  marks: Marks = { layouts: 0, fullLayouts: 0 };
  status = "";
  private elk: Elk | null = null;
  private canvasSize = { w: 800, h: 600 };
  private drawn: { x0: number; y0: number; x1: number; y1: number } | null = null;
  private drawnScale = 1;
  private redrawQueued = false;
  private version = 0;
  private transform = { x: 20, y: 20, k: 1 };
  private banners: { stale: boolean; file: boolean; partial: boolean; newer: string | null } = {
    stale: false, file: false, partial: false, newer: null,
  };
  private themeChoice: "auto" | "light" | "dark" = "auto";
  private hostTheme: "light" | "dark" | null = null;

  // DOM
  private readonly app = el("div", "jx-app");
  private readonly titleEl = el("span", "jx-title", "jaxlsp");
  private readonly search = el("input", "jx-search");
  private readonly bannerEl = el("div", "jx-banners");
  private readonly svgEl = svg("svg", { class: "jx-canvas", tabindex: 0, role: "application" });
  private readonly viewport = svg("g", { class: "jx-viewport" });
  private readonly side = el("aside", "jx-side");
  private readonly details = el("div", "jx-details");
  private readonly results = el("div", "jx-results");
  private readonly statusEl = el("footer", "jx-status");

  constructor(config: Config) {
    this.host = makeHost(config);
    this.buildShell();
    this.host.start({
      graph: (traceId, graph, stale, origin) => this.setGraph(traceId, graph, stale, origin),
      highlight: (traceId, ids) => {
        if (traceId === this.traceId || this.traceId === null) this.setHighlight(ids);
      },
      stale: (traceId, stale) => {
        if (traceId === this.traceId) {
          this.banners.stale = stale;
          this.renderBanners();
        }
      },
      trace: (traceId, replaces) => {
        if (traceId !== this.traceId && (replaces === null || replaces === this.traceId)) {
          this.banners.newer = traceId;
          this.renderBanners();
        }
      },
      theme: (kind) => {
        this.hostTheme = kind;
        this.applyTheme();
      },
      error: (message) => this.setStatus(message, true),
    });
  }

  // -- shell --------------------------------------------------------------------------------------
  private button(label: string, title: string, action: () => void): HTMLButtonElement {
    const b = el("button", "jx-button", label);
    b.type = "button";
    b.title = title;
    b.dataset.action = label.toLowerCase().replace(/\s+/g, "-");
    b.addEventListener("click", action);
    return b;
  }

  private buildShell(): void {
    const bar = el("header", "jx-toolbar");
    this.search.type = "search";
    this.search.placeholder = "Search op, scope or shape ( / )";
    this.search.setAttribute("aria-label", "search");
    this.search.addEventListener("input", () => this.runSearch());
    this.search.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        const first = this.results.querySelector<HTMLElement>(".jx-result");
        first?.click();
      }
      if (e.key === "Escape") this.svgEl.focus();
    });
    bar.append(
      this.titleEl,
      this.search,
      this.button("Expand all", "Expand every group (E)", () => this.expandAll()),
      this.button("Collapse all", "Collapse every group (C)", () => this.collapseAll()),
      this.button("Fit", "Fit the graph in the window (F)", () => this.fit()),
      this.button("Theme", "Light, dark or the editor's theme (T)", () => this.cycleTheme()),
      this.button("SVG", "Export as SVG", () => this.exportSvg()),
      this.button("PNG", "Export as PNG", () => void this.exportPng()),
    );
    const defs = svg("defs");
    const marker = svg("marker", { id: "jx-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "jx-arrowhead" }));
    defs.append(marker);
    this.svgEl.append(defs, this.viewport);
    const main = el("main", "jx-main");
    this.side.append(this.results, this.details);
    main.append(this.svgEl, this.side);
    this.app.append(bar, this.bannerEl, main, this.statusEl);
    document.body.append(this.app);
    this.details.append(el("p", "jx-muted", "Click a box for details; double-click (or Enter) a group to expand it."));
    this.bindCanvas();
    this.bindKeys();
    this.applyTheme();
    const themeObserver = new MutationObserver(() => this.applyTheme());
    themeObserver.observe(document.body, { attributes: true, attributeFilter: ["class"] });
    window.matchMedia?.("(prefers-color-scheme: dark)").addEventListener?.("change", () => this.applyTheme());
  }

  // -- data ---------------------------------------------------------------------------------------
  setGraph(traceId: string | null, graph: Graph, stale: boolean, origin: "server" | "file"): void {
    this.marks.graph = performance.now();
    try {
      this.model = new Model(graph);
    } catch (e) {
      this.setStatus(`this is not a jaxlsp graph: ${e}`, true);
      return;
    }
    this.traceId = traceId;
    this.banners = { stale, file: origin === "file", partial: graph.coverage?.complete === false, newer: null };
    this.state = this.initialState();
    this.selected = null;
    this.highlighted.clear();
    const t = graph.target ?? {};
    this.titleEl.textContent = `${t.path ?? "?"}::${t.name ?? "?"}`;
    document.title = `jaxlsp · ${t.name ?? "graph"}`;
    this.renderBanners();
    this.refresh(null, true);
    this.setStatus(`${graph.nodes.length.toLocaleString()} ops · ${graph.groups.length} groups${traceId ? ` · trace ${traceId}` : ""}`);
  }

  /** Everything collapsed, except that a level whose only group is the model itself (a few loose
   * ops around it) says nothing: that group starts open. */
  private initialState(): State {
    const state: State = { expanded: new Set(), unrolled: new Set() };
    let level = this.model?.children.get(null) ?? [];
    for (;;) {
      const groups = level.filter((c) => c.kind === "group");
      if (groups.length !== 1) break;
      state.expanded.add(groups[0].id);
      level = this.model?.children.get(groups[0].id) ?? [];
    }
    return state;
  }

  // -- layout and drawing -------------------------------------------------------------------------
  /** Rebuild the view; keep ``anchor`` where it is on screen (or fit when asked). */
  refresh(anchor: string | null, fit = false): void {
    if (!this.model) return;
    const version = ++this.version;
    const before = anchor && this.layout ? this.layout.boxes.get(this.repFor(anchor) ?? anchor) : undefined;
    const t0 = performance.now();
    this.view = buildView(this.model, this.state);
    const t1 = performance.now();
    const quick = quickLayout(this.view);
    this.marks.buildMs = t1 - t0;
    this.marks.quickMs = performance.now() - t1;
    this.apply(quick, anchor, before, fit);
    if (this.selected) {
      const rep = this.repFor(this.selected);
      if (rep) this.showDetails(rep);
    }
    this.marks.layouts++;
    this.afterPaint(() => {
      this.marks.quick = performance.now();
      this.marks.firstPaint ??= this.marks.quick;
    });
    if (!this.elk) this.elk = new Elk();
    const view = this.view;
    const anchorBox = anchor ? this.layout?.boxes.get(this.repFor(anchor) ?? anchor) : undefined;
    const sent = performance.now();
    this.elk
      .layout(view)
      .then((full) => {
        if (version !== this.version) return; // a newer state was drawn meanwhile
        this.marks.elkMs = performance.now() - sent;
        this.apply(full, anchor, anchorBox, fit);
        this.marks.fullLayouts++;
        this.afterPaint(() => {
          this.marks.full = performance.now();
          this.marks.firstFull ??= this.marks.full;
        });
      })
      .catch((e) => {
        if (version === this.version) this.setStatus(`layout engine unavailable, showing the quick layout (${e})`);
      });
  }

  private afterPaint(f: () => void): void {
    requestAnimationFrame(() => requestAnimationFrame(f));
  }

  private repFor(id: string): string | null {
    if (!this.view) return null;
    if (this.view.items.has(id)) return id;
    if (this.model?.nodes.has(id)) return this.view.repOf(id);
    for (const g of this.model?.ancestors(id).reverse() ?? []) {
      if (this.view.items.has(g)) return g;
    }
    return null;
  }

  private apply(layout: Layout, anchor: string | null, before: { x: number; y: number } | undefined, fit: boolean): void {
    this.layout = layout;
    const after = anchor ? layout.boxes.get(this.repFor(anchor) ?? anchor) : undefined;
    if (before && after) {
      this.transform.x += (before.x - after.x) * this.transform.k;
      this.transform.y += (before.y - after.y) * this.transform.k;
    }
    if (fit) this.fit(false);
    this.draw();
  }

  /** The part of the layout (world coordinates) the canvas shows now. */
  private visibleRect(): { x0: number; y0: number; x1: number; y1: number } {
    const { x, y, k } = this.transform;
    const w = this.canvasSize.w;
    const h = this.canvasSize.h;
    return { x0: -x / k, y0: -y / k, x1: (w - x) / k, y1: (h - y) / k };
  }

  /** Draw what lies in and around the visible part only: a 1,000-node group is mostly off screen,
   * and a pan or zoom past the drawn margin draws again (at most once a frame). */
  private draw(): void {
    const view = this.view!;
    const layout = this.layout!;
    const t0 = performance.now();
    const r = this.svgEl.getBoundingClientRect();
    this.canvasSize = { w: r.width || 800, h: r.height || 600 };
    const vis = this.visibleRect();
    const mw = vis.x1 - vis.x0;
    const mh = vis.y1 - vis.y0;
    const area = { x0: vis.x0 - mw, y0: vis.y0 - mh, x1: vis.x1 + mw, y1: vis.y1 + mh };
    this.drawn = area;
    this.drawnScale = this.transform.k;
    const inside = (x0: number, y0: number, x1: number, y1: number): boolean =>
      x1 >= area.x0 && x0 <= area.x1 && y1 >= area.y0 && y0 <= area.y1;
    const detail = this.transform.k >= 0.25; // below this, text is unreadable: boxes and edges only
    const groupsLayer = svg("g", { class: "jx-containers" });
    const edgesLayer = svg("g", { class: "jx-edges" });
    const labelsLayer = svg("g", { class: "jx-edge-labels" });
    const itemsLayer = svg("g", { class: "jx-items" });
    const showLabels = view.edges.length <= 3000;
    const incoming = new Map<string, number>();
    for (const e of view.edges) incoming.set(e.target, (incoming.get(e.target) ?? 0) + 1);
    let drawnItems = 0;
    for (const item of descendants(view.root)) {
      const box = layout.boxes.get(item.id);
      if (!box || !inside(box.x, box.y, box.x + box.w, box.y + box.h)) continue;
      drawnItems++;
      const g = svg("g", { class: `jx-item jx-${item.kind}`, "data-id": item.id, transform: `translate(${box.x},${box.y})` });
      if (item.kind === "container") {
        g.append(svg("rect", { class: "jx-frame", width: box.w, height: box.h, rx: 6 }));
        const head = svg("text", { class: "jx-head", x: 22, y: 17 });
        head.textContent = `${item.title}  ·  ${item.sub}`;
        const toggle = svg("text", { class: "jx-toggle", x: 7, y: 17, "data-toggle": item.id });
        toggle.textContent = "−";
        g.append(head, toggle);
        groupsLayer.append(g);
        continue;
      }
      if (item.kind === "rollup") {
        g.append(svg("rect", { class: "jx-stack", x: 6, y: 6, width: box.w, height: box.h, rx: 5 }));
        g.append(svg("rect", { class: "jx-stack", x: 3, y: 3, width: box.w, height: box.h, rx: 5 }));
      }
      g.append(svg("rect", { class: "jx-box", width: box.w, height: box.h, rx: item.kind === "node" ? 4 : 6 }));
      if (!detail) {
        itemsLayer.append(g);
        continue;
      }
      const t1 = svg("text", { class: "jx-t1", x: box.w / 2, y: item.kind === "node" ? 16 : 19 });
      t1.textContent = item.title;
      const t2 = svg("text", { class: "jx-t2", x: box.w / 2, y: item.kind === "node" ? 30 : 35 });
      t2.textContent = item.sub;
      const tip = svg("title");
      tip.textContent = this.tooltip(item);
      g.append(t1, t2, tip);
      if (item.kind === "group" || item.kind === "rollup") {
        const toggle = svg("text", { class: "jx-toggle", x: 7, y: 15, "data-toggle": item.id });
        toggle.textContent = "+";
        g.append(toggle);
      }
      itemsLayer.append(g);
    }
    for (const e of view.edges) {
      const pts = layout.routes.get(e.id);
      if (!pts || pts.length < 2) continue;
      let ex0 = Infinity, ey0 = Infinity, ex1 = -Infinity, ey1 = -Infinity;
      for (const p of pts) {
        ex0 = Math.min(ex0, p.x); ey0 = Math.min(ey0, p.y); ex1 = Math.max(ex1, p.x); ey1 = Math.max(ey1, p.y);
      }
      if (!inside(ex0, ey0, ex1, ey1)) continue;
      const d = pts.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
      const path = svg("path", { class: "jx-edge", d, "marker-end": "url(#jx-arrow)", "data-edge": e.id });
      const tip = svg("title");
      tip.textContent = e.label;
      path.append(tip);
      edgesLayer.append(path);
      // Many edges into one box would pile their labels up: those keep theirs as a tooltip.
      if (detail && showLabels && (incoming.get(e.target) ?? 0) <= 4) {
        // Next to the arrow head: edges into one box fan out there, so labels rarely overlap.
        const end = pts[pts.length - 1];
        const label = svg("text", { class: "jx-edge-label", x: end.x + 4, y: end.y - 6 });
        label.textContent = e.label;
        labelsLayer.append(label);
      }
    }
    this.viewport.replaceChildren(groupsLayer, edgesLayer, itemsLayer, labelsLayer);
    this.svgEl.dataset.engine = layout.engine;
    this.svgEl.dataset.items = String(view.items.size);
    this.svgEl.dataset.drawn = String(drawnItems);
    this.applyTransform(false);
    this.decorate();
    this.marks.drawMs = performance.now() - t0;
  }

  private tooltip(item: Item): string {
    if (item.kind === "node") {
      const n = this.model!.nodes.get(item.ref)!;
      return `${n.primitive}${n.scope ? `\n${n.scope}` : ""}${n.source ? `\n${frameWhere(n.source)}` : ""}`;
    }
    if (item.kind === "rollup") return `${item.members!.length} groups with the same structure: double-click to unroll`;
    if (item.kind === "group") return "double-click to expand";
    return item.title;
  }

  /** Classes for selection, highlights and search matches, without re-drawing. */
  private decorate(): void {
    const hl = new Set<string>();
    for (const id of this.highlighted) {
      const rep = this.repFor(id);
      if (rep) hl.add(rep);
    }
    const found = new Set<string>();
    for (const id of this.matches) {
      const rep = this.repFor(id);
      if (rep) found.add(rep);
    }
    const sel = this.selected ? this.repFor(this.selected) : null;
    for (const g of this.viewport.querySelectorAll<SVGGElement>(".jx-item")) {
      const id = g.dataset.id!;
      g.classList.toggle("jx-highlight", hl.has(id));
      g.classList.toggle("jx-match", found.has(id));
      g.classList.toggle("jx-selected", id === sel);
    }
    this.svgEl.dataset.highlighted = String(hl.size);
  }

  private applyTransform(redraw = true): void {
    const { x, y, k } = this.transform;
    this.viewport.setAttribute("transform", `translate(${x},${y}) scale(${k})`);
    if (!redraw || !this.layout || this.redrawQueued) return;
    const vis = this.visibleRect();
    const d = this.drawn;
    const detailChanged = (k >= 0.25) !== (this.drawnScale >= 0.25);
    if (detailChanged || !d || vis.x0 < d.x0 || vis.y0 < d.y0 || vis.x1 > d.x1 || vis.y1 > d.y1) {
      this.redrawQueued = true;
      requestAnimationFrame(() => {
        this.redrawQueued = false;
        if (this.layout) this.draw();
      });
    }
  }

  fit(redraw = true): void {
    if (!this.layout) return;
    const r = this.svgEl.getBoundingClientRect();
    const w = Math.max(this.layout.width, 1);
    const h = Math.max(this.layout.height, 1);
    // A very tall graph (a long chain) fits its width, not its height: boxes stay readable.
    const k = Math.min(1.2, Math.max(0.3, Math.min((r.width - 40) / w, (r.height - 40) / h)));
    this.transform = { k, x: Math.max(20, (r.width - w * k) / 2), y: 20 };
    this.applyTransform(redraw);
  }

  /** Bring a visible box to the middle of the canvas (readable zoom). */
  center(id: string): void {
    const box = this.layout?.boxes.get(id);
    if (!box) return;
    const r = this.svgEl.getBoundingClientRect();
    const k = Math.max(this.transform.k, 0.6);
    this.transform = { k, x: r.width / 2 - (box.x + box.w / 2) * k, y: r.height / 2 - (box.y + box.h / 2) * k };
    this.applyTransform();
  }

  // -- interaction --------------------------------------------------------------------------------
  private bindCanvas(): void {
    let drag: { x: number; y: number; tx: number; ty: number; moved: boolean } | null = null;
    this.svgEl.addEventListener("mousedown", (e) => {
      drag = { x: e.clientX, y: e.clientY, tx: this.transform.x, ty: this.transform.y, moved: false };
    });
    window.addEventListener("mousemove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        this.transform.x = drag.tx + dx;
        this.transform.y = drag.ty + dy;
        this.applyTransform();
      }
    });
    window.addEventListener("mouseup", () => {
      setTimeout(() => (drag = null), 0);
    });
    this.svgEl.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = this.svgEl.getBoundingClientRect();
      this.zoom(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    this.svgEl.addEventListener("click", (e) => {
      if (drag?.moved) return;
      const target = e.target as Element;
      const toggle = target.closest("[data-toggle]") as SVGElement | null;
      if (toggle) {
        this.toggle(toggle.dataset.toggle!);
        return;
      }
      const g = target.closest(".jx-item") as SVGGElement | null;
      if (g) this.activate(g.dataset.id!, false);
    });
    this.svgEl.addEventListener("dblclick", (e) => {
      const g = (e.target as Element).closest(".jx-item") as SVGGElement | null;
      if (g && !(e.target as Element).closest("[data-toggle]")) this.toggle(g.dataset.id!);
    });
  }

  private zoom(factor: number, cx: number, cy: number): void {
    const k = Math.min(4, Math.max(0.03, this.transform.k * factor));
    const f = k / this.transform.k;
    this.transform = { k, x: cx - (cx - this.transform.x) * f, y: cy - (cy - this.transform.y) * f };
    this.applyTransform();
  }

  private bindKeys(): void {
    document.addEventListener("keydown", (e) => {
      if (e.target === this.search || e.ctrlKey || e.metaKey || e.altKey) return;
      const r = this.svgEl.getBoundingClientRect();
      switch (e.key) {
        case "/": e.preventDefault(); this.search.focus(); break;
        case "f": this.fit(); break;
        case "e": this.expandAll(); break;
        case "c": this.collapseAll(); break;
        case "t": this.cycleTheme(); break;
        case "+": case "=": this.zoom(1.25, r.width / 2, r.height / 2); break;
        case "-": this.zoom(0.8, r.width / 2, r.height / 2); break;
        case "Enter": case " ":
          if (this.selected) { e.preventDefault(); this.activate(this.repFor(this.selected) ?? this.selected, true); }
          break;
        case "Escape": this.collapseSelected(); break;
        case "ArrowLeft": case "ArrowRight": case "ArrowUp": case "ArrowDown":
          e.preventDefault(); this.move(e.key); break;
      }
    });
  }

  /** Arrow keys: the nearest visible box in that direction. */
  private move(key: string): void {
    if (!this.layout || !this.view) return;
    const cur = this.selected ? this.layout.boxes.get(this.repFor(this.selected) ?? "") : undefined;
    const ids = [...this.view.items.values()].filter((i) => i.kind !== "container").map((i) => i.id);
    if (!cur) {
      if (ids.length) this.select(ids[0]);
      return;
    }
    const cx = cur.x + cur.w / 2;
    const cy = cur.y + cur.h / 2;
    let best: string | null = null;
    let bestScore = Infinity;
    for (const id of ids) {
      const b = this.layout.boxes.get(id)!;
      const dx = b.x + b.w / 2 - cx;
      const dy = b.y + b.h / 2 - cy;
      const along = key === "ArrowRight" ? dx : key === "ArrowLeft" ? -dx : key === "ArrowDown" ? dy : -dy;
      const across = key === "ArrowRight" || key === "ArrowLeft" ? Math.abs(dy) : Math.abs(dx);
      if (along <= 1) continue;
      const score = along + across * 2;
      if (score < bestScore) {
        bestScore = score;
        best = id;
      }
    }
    if (best) {
      this.select(best);
      this.center(best);
    }
  }

  /** Click on a box: select it and show details; a node also goes to its source (``open``: Enter). */
  activate(id: string, open: boolean): void {
    const item = this.view?.items.get(id);
    if (!item) return;
    this.select(id);
    if (item.kind === "node") void this.reveal(item.ref);
    else if (open) this.toggle(id);
  }

  select(id: string): void {
    this.selected = id;
    this.decorate();
    this.showDetails(id);
  }

  async reveal(nodeId: string, frame?: number): Promise<void> {
    try {
      this.setStatus(await this.host.reveal(this.traceId, nodeId, frame));
    } catch (e) {
      this.setStatus(`go to source failed: ${e}`, true);
    }
  }

  toggle(id: string): void {
    const item = this.view?.items.get(id);
    if (!item || !this.model) return;
    if (item.kind === "group") {
      this.state.expanded.add(item.ref);
    } else if (item.kind === "container") {
      this.state.expanded.delete(item.ref);
    } else if (item.kind === "rollup") {
      this.state.unrolled.add(rollupKey(this.model.parentOf(item.ref), item.ref));
    } else {
      return;
    }
    this.refresh(item.kind === "rollup" ? item.ref : item.ref);
  }

  /** Programmatic expand (search results, tests): open every group around ``id`` and ``id`` itself. */
  reveal_(id: string): void {
    if (!this.model) return;
    for (const g of this.model.ancestors(id)) this.open(g);
    if (this.model.groups.has(id)) this.open(id);
  }

  /** Expand ``g`` and unroll the roll-up that holds it, if any. */
  private open(g: string): void {
    this.state.expanded.add(g);
    this.unrollAround(g);
  }

  private unrollAround(g: string): void {
    const model = this.model!;
    const parent = model.parentOf(g);
    const kids = model.children.get(parent) ?? [];
    const at = kids.findIndex((c) => c.id === g);
    const sig = model.signature.get(g);
    let first = at;
    while (first > 0 && kids[first - 1].kind === "group" && model.signature.get(kids[first - 1].id) === sig) first--;
    if (first >= 0) this.state.unrolled.add(rollupKey(parent, kids[first].id));
  }

  expand(id: string): void {
    this.reveal_(id);
    this.refresh(id);
  }

  collapse(id: string): void {
    this.state.expanded.delete(id);
    this.refresh(id);
  }

  private collapseSelected(): void {
    if (!this.selected || !this.model) return;
    const rep = this.repFor(this.selected);
    const item = rep ? this.view?.items.get(rep) : undefined;
    const parent = item?.parent;
    if (parent && parent.kind === "container" && parent.parent) {
      this.state.expanded.delete(parent.ref);
      this.selected = parent.ref;
      this.refresh(parent.ref);
    }
  }

  expandAll(): void {
    if (!this.model) return;
    // Breadth first, so a huge graph opens its outer levels and stops while still fluid.
    let frontier: (string | null)[] = [null];
    let visible = (this.model.children.get(null) ?? []).length;
    let stopped = false;
    while (frontier.length && !stopped) {
      const next: string[] = [];
      for (const parent of frontier) {
        for (const c of this.model.children.get(parent) ?? []) {
          if (c.kind !== "group") continue;
          const size = (this.model.children.get(c.id) ?? []).length;
          if (visible + size > EXPAND_ALL_LIMIT) {
            stopped = true;
            continue;
          }
          visible += size;
          this.state.expanded.add(c.id);
          this.state.unrolled.add(rollupKey(parent, c.id));
          next.push(c.id);
        }
      }
      frontier = next;
    }
    this.refresh(null, true);
    if (stopped) this.setStatus(`expanded as far as ${EXPAND_ALL_LIMIT.toLocaleString()} boxes; expand the rest group by group`);
  }

  collapseAll(): void {
    this.state = this.initialState();
    this.refresh(null, true);
  }

  setHighlight(nodeIds: string[]): void {
    this.highlighted = new Set(nodeIds);
    this.decorate();
    const first = nodeIds.length ? this.repFor(nodeIds[0]) : null;
    if (first) this.center(first);
  }

  // -- search -------------------------------------------------------------------------------------
  private runSearch(): void {
    if (!this.model) return;
    const found = this.model.search(this.search.value);
    this.matches = new Set(found.map((f) => f.id));
    this.results.replaceChildren();
    if (this.search.value.trim()) {
      this.results.append(el("div", "jx-muted", `${found.length}${found.length >= 200 ? "+" : ""} matches`));
    }
    for (const f of found) {
      const row = el("div", "jx-result", f.text);
      row.dataset.id = f.id;
      row.tabIndex = 0;
      row.addEventListener("click", () => this.goTo(f.id));
      row.addEventListener("keydown", (e) => {
        if (e.key === "Enter") this.goTo(f.id);
      });
      this.results.append(row);
    }
    this.decorate();
  }

  /** Open what hides ``id``, select it and bring it into view. */
  goTo(id: string): void {
    if (!this.model) return;
    for (const g of this.model.ancestors(id)) this.open(g);
    this.selected = id;
    this.refresh(null);
    const rep = this.repFor(id);
    if (rep) this.center(rep);
    this.decorate();
    this.showDetails(rep ?? id);
  }

  // -- details ------------------------------------------------------------------------------------
  private showDetails(id: string): void {
    const model = this.model;
    const item = this.view?.items.get(id);
    if (!model || !item) return;
    const d = this.details;
    d.replaceChildren();
    const row = (k: string, v: string): void => {
      const r = el("div", "jx-row");
      r.append(el("span", "jx-key", k), el("span", "jx-val", v));
      d.append(r);
    };
    if (item.kind === "node") {
      const n = model.nodes.get(item.ref)!;
      d.append(el("h3", "", n.primitive));
      row("id", n.id);
      row("scope", n.scope || "(top)");
      if (n.transforms.length) row("transforms", n.transforms.join(", "));
      row("inputs", n.inputs.map((v) => typeStr(model.values.get(v))).join(", ") || "—");
      row("outputs", model.outputTypes(n) || "—");
      const params = el("pre", "jx-params", JSON.stringify(n.params, null, 1));
      d.append(el("h4", "", "params"), params);
      d.append(el("h4", "", "frames"));
      n.frames.forEach((f, i) => {
        const a = el("a", "jx-frame-link", `${frameWhere(f, f.path.split("/").slice(-2).join("/"))}${f.function ? ` ${f.function}` : ""}`);
        a.href = "#";
        a.title = f.path;
        a.addEventListener("click", (e) => {
          e.preventDefault();
          void this.reveal(n.id, i);
        });
        d.append(a);
      });
      if (!n.frames.length) d.append(el("p", "jx-muted", "no user frame"));
      return;
    }
    if (item.kind === "ports" || item.kind === "outputs") {
      d.append(el("h3", "", item.title));
      const ports = item.kind === "ports" ? model.graph.inputs.filter((p) => p.role === item.ref) : model.graph.outputs;
      for (const p of ports.slice(0, 500)) row(p.label, typeStr(model.values.get(p.value)));
      if (ports.length > 500) d.append(el("p", "jx-muted", `… ${ports.length - 500} more`));
      return;
    }
    const g = model.groups.get(item.ref)!;
    d.append(el("h3", "", item.title));
    row("kind", g.kind);
    if (item.members) row("members", item.members.map((m) => model.groups.get(m)!.label).join(", "));
    row("ops", String(model.counts.get(g.id) ?? 0));
    const prims = new Map<string, number>();
    const walk = (gid: string): void => {
      for (const c of model.children.get(gid) ?? []) {
        if (c.kind === "node") {
          const p = model.nodes.get(c.id)!.primitive;
          prims.set(p, (prims.get(p) ?? 0) + 1);
        } else walk(c.id);
      }
    };
    walk(g.id);
    row("primitives", [...prims].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([p, c]) => `${p} ${c}`).join(", "));
    const action = item.kind === "container" ? "Collapse" : item.kind === "rollup" ? "Unroll" : "Expand";
    d.append(this.button(action, `${action} this group`, () => this.toggle(item.id)));
  }

  // -- banners, status, theme ---------------------------------------------------------------------
  private renderBanners(): void {
    const b = this.bannerEl;
    b.replaceChildren();
    const add = (cls: string, text: string): HTMLElement => {
      const e = el("div", `jx-banner ${cls}`, text);
      b.append(e);
      return e;
    };
    if (this.banners.file) {
      add("jx-banner-file", this.host.mode === "static"
        ? "Loaded from a file: positions may not match the current source, and going to source needs the language server (open the graph from the editor)."
        : "Loaded from a file: positions may not match the current source.");
    }
    if (this.banners.partial) {
      const opaque = this.model?.graph.coverage.opaque ?? [];
      add("jx-banner-partial", `Partial coverage: ${opaque.length} opaque region(s) are not in the graph${opaque.length ? ` (${opaque.map((o) => o.reason).slice(0, 3).join("; ")})` : ""}.`);
    }
    if (this.banners.stale) add("jx-banner-stale", "Stale: a source file changed since this trace. Re-trace to update.");
    if (this.banners.newer) {
      const e = add("jx-banner-newer", "A newer trace of this target is ready. ");
      const id = this.banners.newer;
      e.append(this.button("Load", "Load the newer trace", () => this.host.load(id)));
    }
  }

  setStatus(text: string, error = false): void {
    this.status = text;
    this.statusEl.textContent = text;
    this.statusEl.classList.toggle("jx-error", error);
  }

  private cycleTheme(): void {
    this.themeChoice = this.themeChoice === "auto" ? "light" : this.themeChoice === "light" ? "dark" : "auto";
    this.applyTheme();
    this.setStatus(`theme: ${this.themeChoice}`);
  }

  theme(): "light" | "dark" {
    if (this.themeChoice !== "auto") return this.themeChoice;
    const cls = document.body.classList;
    if (cls.contains("vscode-light") || cls.contains("vscode-high-contrast-light")) return "light";
    if (cls.contains("vscode-dark") || cls.contains("vscode-high-contrast")) return "dark";
    if (this.hostTheme) return this.hostTheme;
    return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  private applyTheme(): void {
    this.app.dataset.theme = this.theme();
  }

  // -- export -------------------------------------------------------------------------------------
  /** A standalone SVG of the whole graph with the theme's colours written in. */
  svgText(): string {
    const clone = this.svgEl.cloneNode(true) as SVGSVGElement;
    const w = Math.ceil((this.layout?.width ?? 100) + 40);
    const h = Math.ceil((this.layout?.height ?? 100) + 40);
    clone.setAttribute("xmlns", SVG);
    clone.setAttribute("width", String(w));
    clone.setAttribute("height", String(h));
    clone.setAttribute("viewBox", `0 0 ${w} ${h}`);
    clone.removeAttribute("tabindex");
    clone.querySelector(".jx-viewport")?.setAttribute("transform", "translate(20,20)");
    const cs = getComputedStyle(this.app);
    const v = (name: string): string => cs.getPropertyValue(name).trim();
    const style = document.createElementNS(SVG, "style");
    style.textContent = `
      text { font: 12px ui-sans-serif, system-ui, sans-serif; fill: ${v("--fg")}; }
      .jx-box { fill: ${v("--node")}; stroke: ${v("--border")}; }
      .jx-group .jx-box, .jx-rollup .jx-box { fill: ${v("--group")}; }
      .jx-stack { fill: ${v("--group")}; stroke: ${v("--border")}; }
      .jx-ports .jx-box, .jx-outputs .jx-box { fill: ${v("--ports")}; }
      .jx-frame { fill: ${v("--frame")}; stroke: ${v("--border")}; }
      .jx-t1 { text-anchor: middle; font-weight: 600; } .jx-t2 { text-anchor: middle; font-size: 10px; fill: ${v("--muted")}; }
      .jx-head { font-weight: 600; } .jx-toggle { font-weight: 700; }
      .jx-edge { fill: none; stroke: ${v("--edge")}; } .jx-arrowhead { fill: ${v("--edge")}; }
      .jx-edge-label { font-size: 9px; fill: ${v("--muted")}; }`;
    const bg = document.createElementNS(SVG, "rect");
    bg.setAttribute("width", "100%");
    bg.setAttribute("height", "100%");
    bg.setAttribute("fill", v("--bg"));
    clone.insertBefore(style, clone.firstChild);
    clone.insertBefore(bg, style.nextSibling);
    return new XMLSerializer().serializeToString(clone);
  }

  private fileStem(): string {
    return (this.model?.graph.target.name ?? "graph").replace(/[^\w.-]+/g, "_");
  }

  exportSvg(): void {
    this.host.save(`${this.fileStem()}.svg`, "image/svg+xml", new Blob([this.svgText()], { type: "image/svg+xml" }));
  }

  /** PNG bytes of the SVG export (at most 8192 px a side). */
  async pngBlob(): Promise<Blob> {
    const text = this.svgText();
    const img = new Image();
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    await new Promise<void>((resolve, reject) => {
      img.onload = () => resolve();
      img.onerror = () => reject(new Error("the SVG could not be rasterised"));
      img.src = url;
    });
    const scale = Math.min(2, 8192 / Math.max(img.width, img.height, 1));
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, Math.round(img.width * scale));
    canvas.height = Math.max(1, Math.round(img.height * scale));
    const ctx = canvas.getContext("2d")!;
    ctx.scale(scale, scale);
    ctx.drawImage(img, 0, 0);
    URL.revokeObjectURL(url);
    return new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("empty PNG"))), "image/png"));
  }

  async exportPng(): Promise<void> {
    try {
      this.host.save(`${this.fileStem()}.png`, "image/png", await this.pngBlob());
    } catch (e) {
      this.setStatus(`PNG export failed: ${e}`, true);
    }
  }
}

function boot(): void {
  const config = window.JAXLSP_VIEWER;
  if (!config || !["http", "webview", "static"].includes(config.mode)) {
    document.body.textContent = "jaxlsp viewer: window.JAXLSP_VIEWER is missing or has no valid mode.";
    return;
  }
  window.__jaxlsp = new Viewer(config);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
else boot();

export type { Viewer };
