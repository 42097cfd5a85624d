/** The jaxlsp graph viewer: boots from ``window.JAXLSP_VIEWER``, lays the graph out (quick grid
 * first, then elkjs in a worker) and draws it as SVG, with details, search, highlights, themes,
 * export and keyboard navigation. Every text from the graph goes through ``textContent``. */

import { expandGraph } from "./compact";
import { Elk, quickLayout, type Layout } from "./layout";
import { makeHost, type Host } from "./host";
import { Model, constraintSpec, mapSpecs, meshStr, typeStr } from "./model";
import { MODES, Overlay, type Mark, type OverlayMode } from "./overlay";
import { MAX_PARAMS, PARAM_LINE, buildView, descendants, paramsTop, rollupKey, type Item, type State, type View } from "./view";
import { Minimap } from "./minimap";
import { placeLabels } from "./labels";
import type { Analysis, Config, DiffInfo, Graph } from "./types";
import { frameWhere } from "./types";
import { OVERLAYS, Overlays, statsBlock, type Overlay as ValueMode } from "./values";

const SVG = "http://www.w3.org/2000/svg";
const EXPAND_ALL_LIMIT = 4000; // visible items "expand all" stops at, to stay fluid
const VALUE_MODES: ReadonlySet<string> = new Set(OVERLAYS.map((o) => o.mode).filter((m) => m !== "none"));
/** Node titles are 13 px: at this zoom they are 11 px on screen, the least that reads well. */
const READABLE = 11 / 13;
/** Zoom levels of detail: below BOXES_ONLY no text; below FULL_DETAIL titles only; edge labels from LABELS. */
const BOXES_ONLY = 0.25;
const FULL_DETAIL = 0.6;
const LABELS = 0.8;
/** Below this panel width the details pane starts collapsed. */
const NARROW = 900;

function detailLevel(k: number): 0 | 1 | 2 | 3 {
  return k < BOXES_ONLY ? 0 : k < FULL_DETAIL ? 1 : k < LABELS ? 2 : 3;
}

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
  /** When a compact (version 2) graph had been expanded into rows. */
  expanded?: number;
  firstPaint?: number;
  firstFull?: number;
  quick?: number;
  full?: number;
  layouts: number;
  fullLayouts: number;
  /** At first paint: the zoom, the panel's width, how many node titles were drawn and the smallest
   * one's on-screen font size (px). */
  firstPaintK?: number;
  firstPaintWidth?: number;
  firstPaintTitles?: number;
  firstPaintTitlePx?: number;
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
  /** The costs / precision / pass / memory / changes overlays (overlay.ts) and the mode shown. */
  overlay: Overlay | null = null;
  /** The overlay shown: one of the costs / changes modes (overlay.ts) or a values run's (values.ts). */
  overlayMode: OverlayMode | ValueMode = "none";
  /** A values run's overlays (null: the graph has no statistics). */
  overlays: Overlays | null = null;
  private pendingNode: string | null = null;
  private analysis: Analysis | null = null;
  private diffInfo: DiffInfo | null = null;
  private elk: Elk | null = null;
  private canvasSize = { w: 800, h: 600 };
  private drawn: { x0: number; y0: number; x1: number; y1: number } | null = null;
  private drawnScale = 1;
  /** Boxes and group headers drawn last: edge labels are placed around them. */
  private obstacles: { x: number; y: number; w: number; h: number }[] = [];
  private redrawQueued = false;
  private version = 0;
  private transform = { x: 20, y: 20, k: 1 };
  /** The user panned, zoomed or went somewhere: a layout that arrives later keeps the view. */
  private moved = false;
  private banners: { stale: boolean; file: boolean; partial: boolean; newer: string | null } = {
    stale: false, file: false, partial: false, newer: null,
  };
  private themeChoice: "auto" | "light" | "dark" = "auto";
  private hostTheme: "light" | "dark" | null = null;

  // DOM
  private readonly app = el("div", "jx-app");
  private readonly titleEl = el("span", "jx-title");
  private readonly titlePath = el("span", "jx-title-path");
  private readonly titleName = el("span", "jx-title-name", "jaxlsp");
  private readonly search = el("input", "jx-search");
  private readonly overlaySelect = el("select", "jx-overlay");
  private readonly bannerEl = el("div", "jx-banners");
  private readonly stage = el("div", "jx-stage");
  private readonly svgEl = svg("svg", { class: "jx-canvas", tabindex: 0, role: "application" });
  private readonly minimap = new Minimap((x, y) => this.lookAt(x, y));
  private readonly detailsButton: HTMLButtonElement;
  private readonly viewport = svg("g", { class: "jx-viewport" });
  private readonly side = el("aside", "jx-side");
  private readonly details = el("div", "jx-details");
  private readonly results = el("div", "jx-results");
  private readonly statusEl = el("footer", "jx-status");

  constructor(config: Config) {
    this.host = makeHost(config);
    this.pendingNode = typeof config.nodeId === "string" ? config.nodeId : null;
    this.detailsButton = this.button("Details", "Show or hide the details pane (D)", () => this.toggleSide());
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
      extras: (traceId, analysis, diff) => {
        if (traceId === this.traceId) this.setExtras(analysis, diff);
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
    // The target's name never shrinks; a long path is cut at its start ("…/models/cnn.py").
    const inner = document.createElement("bdi");
    inner.dir = "ltr";
    this.titlePath.append(inner);
    this.titleEl.append(this.titlePath, this.titleName);
    this.overlaySelect.title = "Colour the boxes by costs, precision, pass, memory or changes";
    this.overlaySelect.setAttribute("aria-label", "overlay");
    // One menu: the costs and changes modes, then a values run's statistics (shown when the graph has them).
    for (const { mode, label } of [...MODES, ...OVERLAYS.filter((o) => o.mode !== "none")]) {
      const option = el("option", "", label);
      option.value = mode;
      if (VALUE_MODES.has(mode)) option.dataset.values = "1";
      this.overlaySelect.append(option);
    }
    this.overlaySelect.addEventListener("change", () => this.setOverlay(this.overlaySelect.value as OverlayMode | ValueMode));
    bar.append(
      this.titleEl,
      this.search,
      this.overlaySelect,
      this.button("Expand all", "Expand every group (E)", () => this.expandAll()),
      this.button("Collapse all", "Collapse every group (C)", () => this.collapseAll()),
      this.button("Fit", "Fit the graph in the window (F)", () => this.fit()),
      this.detailsButton,
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
    const close = this.button("×", "Hide the details pane (D)", () => this.toggleSide(false));
    close.classList.add("jx-side-close");
    this.side.append(close, this.results, this.details);
    this.stage.append(this.svgEl, this.minimap.element);
    main.append(this.stage, this.side);
    this.app.append(bar, this.bannerEl, main, this.statusEl);
    document.body.append(this.app);
    this.clearDetails();
    this.toggleSide(this.app.clientWidth >= NARROW);
    // A narrower or wider panel: draw what is now visible (the zoom stays).
    new ResizeObserver(() => {
      if (this.layout) this.applyTransform();
    }).observe(this.svgEl);
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
      graph = expandGraph(graph);
      this.marks.expanded = performance.now();
      this.model = new Model(graph);
    } catch (e) {
      this.setStatus(`this is not a jaxlsp graph: ${e}`, true);
      return;
    }
    this.traceId = traceId;
    this.analysis = null;
    this.diffInfo = null;
    this.overlay = new Overlay(this.model);
    this.overlays = graph.execution ? new Overlays(this.model) : null;
    this.syncOverlayChoices();
    this.banners = { stale, file: origin === "file", partial: graph.coverage?.complete === false, newer: null };
    this.state = this.initialState();
    // A new graph: nothing of the old one stays selected, highlighted or found.
    this.selected = null;
    this.highlighted.clear();
    this.matches.clear();
    this.clearDetails();
    this.moved = false;
    const t = graph.target ?? {};
    (this.titlePath.firstChild as HTMLElement).textContent = t.path ?? "?";
    this.titleName.textContent = `::${t.name ?? "?"}`;
    this.titleEl.title = `${t.path ?? "?"}::${t.name ?? "?"}`;
    document.title = `jaxlsp · ${t.name ?? "graph"}`;
    this.renderBanners();
    this.refresh(null, "entry");
    if (this.search.value.trim()) this.runSearch();
    this.setStatus(`${graph.nodes.length.toLocaleString()} ops · ${graph.groups.length} groups${traceId ? ` · trace ${traceId}` : ""}`);
    // The page was opened at a node (a non-finite value's code action): go there once.
    const pending = this.pendingNode;
    this.pendingNode = null;
    if (pending && this.model.nodes.has(pending)) this.goTo(pending);
  }

  /** The analysis and the changes of the graph shown, when its host has them. */
  setExtras(analysis: Analysis | null, diff: DiffInfo | null): void {
    if (!this.model) return;
    this.analysis = analysis;
    this.diffInfo = diff;
    this.overlay = new Overlay(this.model, analysis, diff);
    this.syncOverlayChoices();
    this.renderBanners();
    if (this.layout) this.draw();
    if (this.selected) {
      const rep = this.repFor(this.selected);
      if (rep) this.showDetails(rep);
    }
  }

  /** Show ``mode`` (an overlay with nothing to show falls back to none, and says why). */
  setOverlay(mode: OverlayMode | ValueMode): void {
    const why = this.unavailable(mode);
    this.overlayMode = why ? "none" : mode;
    this.overlaySelect.value = this.overlayMode;
    this.svgEl.dataset.overlay = this.overlayMode;
    if (why) this.setStatus(`${mode}: ${why}`);
    if (this.layout) this.draw();
    this.renderBanners();
    const values = this.valueMode();
    if (values && this.overlays) this.setStatus(this.overlays.legend(values));
  }

  /** Why ``mode`` has nothing to show for this graph (null: it has). */
  private unavailable(mode: OverlayMode | ValueMode): string | null {
    if (!VALUE_MODES.has(mode)) return this.overlay?.unavailable(mode as OverlayMode) ?? null;
    if (!this.overlays) return "the graph has no values: Trace with values (jaxlsp trace --values)";
    if (mode === "grad" && !this.overlays.hasGradients) return "not a gradient profile";
    return null;
  }

  /** The values overlay shown, if one is. */
  private valueMode(): ValueMode | null {
    return VALUE_MODES.has(this.overlayMode) ? (this.overlayMode as ValueMode) : null;
  }

  private syncOverlayChoices(): void {
    for (const option of this.overlaySelect.options) {
      const why = this.unavailable(option.value as OverlayMode | ValueMode);
      option.disabled = why !== null;
      option.title = why ?? "";
      // a values run's modes are listed only for graphs that have one
      if (option.dataset.values) option.hidden = why !== null;
    }
    if (this.unavailable(this.overlayMode)) this.overlayMode = "none";
    this.overlaySelect.value = this.overlayMode;
    this.svgEl.dataset.overlay = this.overlayMode;
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
  /** Rebuild the view; keep ``anchor`` where it is on screen, or fit it all, or show its entry
   * at a readable zoom (a new graph). */
  refresh(anchor: string | null, how: "keep" | "fit" | "entry" = "keep"): void {
    if (!this.model) return;
    const version = ++this.version;
    const before = anchor && this.layout ? this.layout.boxes.get(this.repFor(anchor) ?? anchor) : undefined;
    const t0 = performance.now();
    this.view = buildView(this.model, this.state);
    const t1 = performance.now();
    const quick = quickLayout(this.view);
    this.marks.buildMs = t1 - t0;
    this.marks.quickMs = performance.now() - t1;
    this.apply(quick, anchor, before, how);
    if (this.selected) {
      const rep = this.repFor(this.selected);
      if (rep) this.showDetails(rep);
    }
    this.marks.layouts++;
    this.afterPaint(() => {
      this.marks.quick = performance.now();
      if (this.marks.firstPaint === undefined) {
        this.marks.firstPaint = this.marks.quick;
        const titles = this.titleSizes();
        this.marks.firstPaintK = this.transform.k;
        this.marks.firstPaintWidth = this.app.clientWidth;
        this.marks.firstPaintTitles = titles.length;
        this.marks.firstPaintTitlePx = titles.length ? Math.min(...titles) : 0;
      }
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
        this.apply(full, anchor, anchorBox, how);
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

  /** The on-screen font size (px) of every node title drawn (``g.jx-node``'s first text). */
  titleSizes(): number[] {
    const out: number[] = [];
    for (const g of this.viewport.querySelectorAll<SVGGElement>("g.jx-node")) {
      const t = g.querySelector("text");
      const m = t?.getScreenCTM();
      if (t && m) out.push(m.a * parseFloat(getComputedStyle(t).fontSize));
    }
    return out;
  }

  private apply(layout: Layout, anchor: string | null, before: { x: number; y: number } | undefined, how: "keep" | "fit" | "entry"): void {
    this.layout = layout;
    const after = anchor ? layout.boxes.get(this.repFor(anchor) ?? anchor) : undefined;
    if (before && after) {
      this.transform.x += (before.x - after.x) * this.transform.k;
      this.transform.y += (before.y - after.y) * this.transform.k;
    }
    if (how === "fit" && !this.moved) this.fit(false, false);
    if (how === "entry" && !this.moved) this.showEntry();
    this.minimap.setLayout(layout, this.view!);
    this.draw();
  }

  /** A new graph's first view: all of it when that reads (titles >= 11 px), else its entry — the
   * inputs and the first boxes — at a readable zoom, never "fit everything" below it. */
  private showEntry(): void {
    const layout = this.layout;
    const view = this.view;
    if (!layout || !view) return;
    const r = this.svgEl.getBoundingClientRect();
    const w = r.width || 800;
    const h = r.height || 600;
    const fitK = Math.min((w - 40) / Math.max(layout.width, 1), (h - 40) / Math.max(layout.height, 1));
    if (fitK >= READABLE) {
      this.fit(false, false);
      return;
    }
    const k = 1;
    // The entry: input boxes and the first few boxes of the outermost open level, in program order.
    const entry: Item[] = [];
    let level = view.root;
    for (;;) {
      const open = level.children.filter((c) => c.kind === "container");
      if (open.length !== 1 || level.children.some((c) => c.kind !== "container" && c.kind !== "ports" && c.kind !== "outputs")) break;
      level = open[0];
    }
    for (const item of view.root.children) if (item.kind === "ports") entry.push(item);
    entry.push(...level.children.filter((c) => c.kind !== "ports" && c.kind !== "outputs").slice(0, 3));
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity;
    for (const item of entry) {
      const b = layout.boxes.get(item.id);
      if (!b) continue;
      x0 = Math.min(x0, b.x);
      y0 = Math.min(y0, b.y);
      x1 = Math.max(x1, b.x + b.w);
    }
    if (!Number.isFinite(x0)) x0 = y0 = x1 = 0;
    // Layouts start at y = 0 with the inputs; the frames of open groups begin above their boxes.
    const top = y0 < h / k / 2 ? 0 : y0 - 60;
    const x = (x1 - x0) * k <= w - 40 ? (w - (x1 - x0) * k) / 2 - x0 * k : 20 - x0 * k;
    this.transform = { k, x, y: 20 - top * k };
    this.applyTransform(false);
  }

  /** The part of the layout (world coordinates) the canvas shows now. */
  private visibleRect(): { x0: number; y0: number; x1: number; y1: number } {
    return this.visibleRectFor(this.canvasSize.w, this.canvasSize.h);
  }

  private visibleRectFor(w: number, h: number): { x0: number; y0: number; x1: number; y1: number } {
    const { x, y, k } = this.transform;
    return { x0: -x / k, y0: -y / k, x1: (w - x) / k, y1: (h - y) / k };
  }

  /** Center the view on a point of the layout (the minimap's clicks), at the same zoom. */
  private lookAt(wx: number, wy: number): void {
    const r = this.svgEl.getBoundingClientRect();
    const k = this.transform.k;
    this.moved = true;
    this.transform = { k, x: r.width / 2 - wx * k, y: r.height / 2 - wy * k };
    this.applyTransform();
  }

  /** Draw what lies in and around the visible part only: a 1,000-node group is mostly off screen,
   * and a pan or zoom past the drawn margin draws again (at most once a frame). What is drawn
   * depends on the zoom: boxes only, titles, then subtitles and weights, then edge labels. */
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
    const level = detailLevel(this.transform.k);
    const groupsLayer = svg("g", { class: "jx-containers" });
    const itemsLayer = svg("g", { class: "jx-items" });
    let drawnItems = 0;
    const obstacles: { x: number; y: number; w: number; h: number }[] = [];
    const shown = [...descendants(view.root)].filter((item) => {
      const box = layout.boxes.get(item.id);
      return box !== undefined && inside(box.x, box.y, box.x + box.w, box.y + box.h);
    });
    const costsMode = this.valueMode() === null && this.overlayMode !== "none" ? (this.overlayMode as OverlayMode) : null;
    const marks = this.overlay && costsMode ? this.overlay.marks(costsMode, shown) : new Map<string, Mark>();
    for (const item of shown) {
      const box = layout.boxes.get(item.id)!;
      drawnItems++;
      const kind = item.kind === "node" ? "jx-op" : `jx-${item.kind}`;
      const mark = marks.get(item.id);
      if (item.kind === "container") {
        const g = svg("g", { class: `jx-item ${kind}`, "data-id": item.id, transform: `translate(${box.x},${box.y})` });
        if (mark?.cls) g.classList.add(mark.cls);
        g.append(svg("rect", { class: "jx-frame", width: box.w, height: box.h, rx: 6 }));
        if (mark?.heat !== undefined) g.append(this.heat(box.w, box.h, mark.heat, 6));
        if (this.overlays?.unrun(item)) g.classList.add("jx-unrun");
        if (level > 0) {
          const head = svg("text", { class: "jx-head", x: 22, y: 17 });
          head.textContent = `${item.title}  ·  ${item.sub}${mark?.badge ? `  ·  ${mark.badge}` : ""}`;
          const toggle = svg("text", { class: "jx-toggle", x: 7, y: 17, "data-toggle": item.id });
          toggle.textContent = "−";
          g.append(head, toggle);
        }
        obstacles.push({ x: box.x, y: box.y, w: box.w, h: 24 });
        groupsLayer.append(g);
        continue;
      }
      obstacles.push(box);
      // Every box is a g.jx-node whose first text is its title (docs/viewer.md, test hooks).
      const g = svg("g", { class: `jx-item jx-node ${kind}`, "data-id": item.id, transform: `translate(${box.x},${box.y})` });
      if (mark?.cls) g.classList.add(mark.cls);
      if (item.kind === "rollup") {
        g.append(svg("rect", { class: "jx-stack", x: 6, y: 6, width: box.w, height: box.h, rx: 5 }));
        g.append(svg("rect", { class: "jx-stack", x: 3, y: 3, width: box.w, height: box.h, rx: 5 }));
      }
      const rect = svg("rect", { class: "jx-box", width: box.w, height: box.h, rx: item.kind === "node" ? 4 : 6 });
      g.append(rect);
      if (this.overlays) this.paint(g, rect, item);
      if (mark?.heat !== undefined) g.append(this.heat(box.w, box.h, mark.heat, item.kind === "node" ? 4 : 6));
      if (mark?.split !== undefined) {
        const w = Math.max(0, box.w - 8);
        g.append(
          svg("rect", { class: "jx-split-fwd", x: 4, y: box.h - 6, width: w * mark.split, height: 3 }),
          svg("rect", { class: "jx-split-bwd", x: 4 + w * mark.split, y: box.h - 6, width: w * (1 - mark.split), height: 3 }),
        );
      }
      const tip = svg("title");
      tip.textContent = this.tooltip(item) + (mark?.badge ? `\n${mark.badge}` : "");
      if (level === 0) {
        g.append(tip);
        itemsLayer.append(g);
        continue;
      }
      const full = level >= 2;
      const titleY = full ? (item.kind === "node" ? 18 : 21) : Math.min(box.h / 2 + 5, item.kind === "node" ? 25 : 29);
      const t1 = svg("text", { class: "jx-t1", x: box.w / 2, y: titleY });
      t1.textContent = item.title;
      g.append(t1);
      if (full) {
        const t2 = svg("text", { class: "jx-t2", x: box.w / 2, y: item.kind === "node" ? 34 : 38 });
        t2.textContent = item.sub;
        g.append(t2);
        const top = paramsTop(item);
        item.params.slice(0, MAX_PARAMS).forEach((p, i) => {
          const line = svg("text", { class: `jx-param jx-param-${p.role}`, x: 10, y: top + i * PARAM_LINE + 8, "data-value": p.value });
          const name = svg("tspan", { class: "jx-param-name" });
          name.textContent = p.name;
          const type = svg("tspan", { class: "jx-param-type" });
          type.textContent = ` ${p.type}`;
          line.append(name, type);
          g.append(line);
        });
        if (item.params.length > MAX_PARAMS) {
          const more = svg("text", { class: "jx-param jx-param-more", x: 10, y: top + MAX_PARAMS * PARAM_LINE + 8 });
          more.textContent = `+${item.params.length - MAX_PARAMS} more`;
          g.append(more);
        }
        if (item.params.length) g.append(svg("line", { class: "jx-param-rule", x1: 6, x2: box.w - 6, y1: top - 7, y2: top - 7 }));
      }
      g.append(tip);
      if (mark?.badge && !(item.kind === "node" && this.overlayMode === "diff")) {
        // a changed node says so by its outline (and tooltip): dozens of badges would cover the edges' labels
        const badge = svg("text", { class: "jx-badge", x: box.w - 4, y: -3 });
        badge.textContent = mark.badge;
        g.append(badge);
        obstacles.push({ x: box.x, y: box.y - 14, w: box.w, h: 14 });
      }
      if (item.kind === "group" || item.kind === "rollup") {
        const toggle = svg("text", { class: "jx-toggle", x: 7, y: 15, "data-toggle": item.id });
        toggle.textContent = "+";
        g.append(toggle);
      }
      itemsLayer.append(g);
    }
    this.obstacles = obstacles;
    this.viewport.replaceChildren(groupsLayer, svg("g", { class: "jx-edges" }), itemsLayer, svg("g", { class: "jx-edge-labels" }));
    this.drawEdges();
    this.svgEl.dataset.engine = layout.engine;
    this.svgEl.dataset.items = String(view.items.size);
    this.svgEl.dataset.drawn = String(drawnItems);
    this.svgEl.dataset.detail = String(level);
    this.applyTransform(false);
    this.decorate();
    this.marks.drawMs = performance.now() - t0;
  }

  /** A values run on a box: dashed when it never ran, filled by the values overlay's figure. */
  private paint(g: SVGGElement, rect: SVGElement, item: Item): void {
    const overlays = this.overlays!;
    if (overlays.unrun(item)) g.classList.add("jx-unrun");
    const mode = this.valueMode();
    if (mode === null) return;
    const v = overlays.of(item, mode);
    if (v === null) return;
    rect.style.fill = overlays.colour(v, mode);
    g.dataset.overlay = String(v);
  }

  /** The edges (and their labels) in the drawn area; the selection's edges are marked and labelled
   * first. Redrawn alone when the selection changes, so the boxes under the pointer stay (a
   * double-click needs its two clicks on one element). */
  private drawEdges(): void {
    const view = this.view!;
    const layout = this.layout!;
    const area = this.drawn!;
    const inside = (x0: number, y0: number, x1: number, y1: number): boolean =>
      x1 >= area.x0 && x0 <= area.x1 && y1 >= area.y0 && y0 <= area.y1;
    const edgesLayer = svg("g", { class: "jx-edges" });
    const labelsLayer = svg("g", { class: "jx-edge-labels" });
    const sel = this.selected ? this.repFor(this.selected) : null;
    const paths: { id: string; pts: { x: number; y: number }[]; label: string; priority: boolean }[] = [];
    for (const e of view.edges) {
      const pts = layout.routes.get(e.id);
      if (!pts || pts.length < 2) continue;
      let ex0 = Infinity, ey0 = Infinity, ex1 = -Infinity, ey1 = -Infinity;
      for (const p of pts) {
        ex0 = Math.min(ex0, p.x); ey0 = Math.min(ey0, p.y); ex1 = Math.max(ex1, p.x); ey1 = Math.max(ey1, p.y);
      }
      if (!inside(ex0, ey0, ex1, ey1)) continue;
      const d = pts.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
      const touches = sel !== null && (e.source === sel || e.target === sel);
      const g = svg("g", { class: touches ? "jx-link jx-link-selected" : "jx-link", "data-edge": e.id });
      // A wide invisible twin makes the edge easy to hover: its tooltip is the value's type.
      const hit = svg("path", { class: "jx-edge-hit", d });
      const path = svg("path", { class: "jx-edge", d, "marker-end": "url(#jx-arrow)" });
      const tip = svg("title");
      tip.textContent = e.label;
      g.append(path, hit, tip);
      edgesLayer.append(g);
      paths.push({ id: e.id, pts, label: e.label, priority: touches });
    }
    // One label per edge, along its path where it overlaps no box and no other label; an edge
    // whose path has no free spot keeps its type as a tooltip (and shows it when selected).
    if (detailLevel(this.drawnScale) >= 3 && paths.length <= 4000) {
      for (const l of placeLabels(paths, this.obstacles)) {
        const text = svg("text", { class: l.priority ? "jx-edge-label jx-edge-label-selected" : "jx-edge-label", x: l.x, y: l.y, "data-edge": l.id });
        text.textContent = l.label;
        labelsLayer.append(text);
      }
    }
    this.viewport.querySelector(".jx-edges")?.replaceWith(edgesLayer);
    this.viewport.querySelector(".jx-edge-labels")?.replaceWith(labelsLayer);
  }

  /** A shade over a box: more opaque for a larger figure. */
  private heat(w: number, h: number, level: number, rx: number): SVGRectElement {
    return svg("rect", { class: "jx-heat", width: w, height: h, rx, "fill-opacity": (0.08 + 0.72 * level).toFixed(3) });
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
    const r = this.svgEl.getBoundingClientRect();
    this.minimap.setView(this.visibleRectFor(r.width || 800, r.height || 600));
    if (!redraw || !this.layout || this.redrawQueued) return;
    const vis = this.visibleRect();
    const d = this.drawn;
    const detailChanged = detailLevel(k) !== detailLevel(this.drawnScale);
    if (detailChanged || !d || vis.x0 < d.x0 || vis.y0 < d.y0 || vis.x1 > d.x1 || vis.y1 > d.y1) {
      this.redrawQueued = true;
      requestAnimationFrame(() => {
        this.redrawQueued = false;
        if (this.layout) this.draw();
      });
    }
  }

  /** Fit the whole graph in the canvas (the Fit button, `f`): it may then be too small to read. */
  fit(redraw = true, byUser = true): void {
    if (!this.layout) return;
    if (byUser) this.moved = true;
    const r = this.svgEl.getBoundingClientRect();
    const w = Math.max(this.layout.width, 1);
    const h = Math.max(this.layout.height, 1);
    // A very tall graph (a long chain) fits its width, not its height: boxes stay readable.
    const k = Math.min(1.2, Math.max(0.05, Math.min((r.width - 40) / w, (r.height - 40) / h)));
    this.transform = { k, x: Math.max(20, (r.width - w * k) / 2), y: 20 };
    this.applyTransform(redraw);
  }

  /** Bring a visible box to the middle of the canvas, at a readable zoom. */
  center(id: string): void {
    const box = this.layout?.boxes.get(id);
    if (!box) return;
    this.moved = true;
    const r = this.svgEl.getBoundingClientRect();
    const k = Math.max(this.transform.k, READABLE);
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
        this.moved = true;
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
    this.moved = true;
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
        case "d": this.toggleSide(); break;
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
    // The selection's edges are marked and carry their labels first.
    if (this.layout && this.drawn) this.drawEdges();
    this.decorate();
    this.showDetails(id);
  }

  /** Go to a node's source; the footer says what the host answered (opened where, or why not). */
  async reveal(nodeId: string, frame?: number): Promise<void> {
    this.setStatus("opening the source…");
    try {
      const answer = await this.host.reveal(this.traceId, nodeId, frame);
      this.setStatus(answer.message, !answer.ok);
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
    this.refresh(null, "entry");
    if (stopped) this.setStatus(`expanded as far as ${EXPAND_ALL_LIMIT.toLocaleString()} boxes; expand the rest group by group`);
  }

  collapseAll(): void {
    this.state = this.initialState();
    this.moved = false;
    this.refresh(null, "entry");
  }

  setHighlight(nodeIds: string[]): void {
    this.highlighted = new Set(nodeIds);
    this.decorate();
    const first = nodeIds.length ? this.repFor(nodeIds[0]) : null;
    if (first) this.center(first);
  }

  // -- the details pane ---------------------------------------------------------------------------
  /** Show or hide the details pane (``open`` forces it); it stays so for the next graphs. */
  toggleSide(open?: boolean): void {
    const next = open ?? !this.app.classList.contains("jx-side-open");
    this.app.classList.toggle("jx-side-open", next);
    this.detailsButton.setAttribute("aria-pressed", String(next));
    if (this.layout) this.applyTransform();
  }

  private clearDetails(): void {
    this.details.replaceChildren(el("p", "jx-muted", "Click a box for details; double-click (or Enter) a group to expand it."));
  }

  // -- search -------------------------------------------------------------------------------------
  private runSearch(): void {
    if (!this.model) return;
    // Results live in the details pane: searching opens it.
    if (this.search.value.trim() && !this.app.classList.contains("jx-side-open")) this.toggleSide(true);
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
    // A group found inside a roll-up (layers_7 of "layers_* ×32") is shown by unrolling its run;
    // it stays closed itself.
    if (this.model.groups.has(id)) this.unrollAround(id);
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
      const spec = constraintSpec(n);
      if (spec) row(n.primitive === "reshard" ? "reshards to" : "constrained to", spec);
      const specs = mapSpecs(n);
      if (specs) {
        row("in specs", specs.inSpecs);
        row("out specs", specs.outSpecs);
      }
      if (model.graph.mesh) row("mesh", meshStr(model.graph.mesh));
      if (this.overlays) this.valueDetails(n.id, item);
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
      this.overlayDetails(item);
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
    const specs = mapSpecs(g.node ? model.nodes.get(g.node) : undefined);
    if (specs) {
      row("in specs", specs.inSpecs);
      row("out specs", specs.outSpecs);
    }
    if (item.params.length) {
      d.append(el("h4", "", item.kind === "rollup" ? "weights (each)" : "weights"));
      for (const p of item.params.slice(0, 500)) row(p.name, p.type);
    }
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
    this.overlayDetails(item);
    const action = item.kind === "container" ? "Collapse" : item.kind === "rollup" ? "Unroll" : "Expand";
    d.append(this.button(action, `${action} this group`, () => this.toggle(item.id)));
  }

  /** A values run's statistics of a node's outputs (and its inputs'), with their histograms. */
  private valueDetails(nodeId: string, item: Item): void {
    const model = this.model!;
    const n = model.nodes.get(nodeId)!;
    if (this.overlays!.unrun(item)) {
      this.details.append(el("p", "jx-muted jx-unrun-note", "never ran: a branch not taken, or a loop that did not turn"));
      return;
    }
    n.outputs.forEach((v, i) => {
      const value = model.values.get(v);
      if (value?.stats) this.details.append(statsBlock(`output ${n.outputs.length > 1 ? i + 1 : ""} ${typeStr(value)}`.replace("  ", " "), value.stats));
    });
    n.inputs.forEach((v, i) => {
      const value = model.values.get(v);
      if (value?.stats && value.kind === "var") this.details.append(statsBlock(`input ${i + 1} ${typeStr(value)}`, value.stats));
    });
  }

  /** The overlays' figures for a box: costs, forward and backward side by side, precision,
   * memory and changes (each when the graph or the server says something about it). */
  private overlayDetails(item: Item): void {
    for (const section of this.overlay?.details(item.kind, item.ref, item.members) ?? []) {
      const box = el("section", `jx-ov-details jx-ov-details-${section.title.replace(/\s+/g, "-")}`);
      box.append(el("h4", "", section.title));
      for (const [k, v] of section.rows) {
        const r = el("div", "jx-row");
        r.append(el("span", "jx-key", k), el("span", "jx-val", v));
        box.append(r);
      }
      this.details.append(box);
    }
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
    const execution = this.model?.graph.execution;
    if (execution) {
      if (execution.validation.status === "mismatch") {
        add("jx-banner-mismatch", `Replay mismatch: ${execution.validation.mismatch?.message ?? execution.validation.message ?? "the outputs differ from a direct call"}`);
      }
      const first = execution.firstNonFinite;
      if (first) {
        const e = add("jx-banner-nonfinite", `${first.message} `);
        e.append(this.button("Show", "Select the node and bring it into view", () => this.goTo(first.node)));
      }
    }
    const changes = this.diffInfo;
    if (changes && !changes.same) {
      const e = add("jx-banner-diff", `Changed since the previous trace: ${changes.summary}. `);
      if (this.overlayMode !== "diff") e.append(this.button("Show changes", "Mark what changed (the Changes overlay)", () => this.setOverlay("diff")));
      else if (changes.removed.length) {
        const names = changes.removed.slice(0, 6).map((r) => `${r.primitive}${r.scope ? ` in ${r.scope}` : ""}`);
        e.append(el("span", "jx-removed", `Removed: ${names.join(", ")}${changes.removed.length > 6 ? `, … ${changes.removed.length - 6} more` : ""}.`));
      }
    }
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
      text { font: 13px ui-sans-serif, system-ui, sans-serif; fill: ${v("--fg")}; }
      .jx-param { font: 11px ui-monospace, monospace; } .jx-param-type, .jx-param-more { fill: ${v("--muted")}; }
      .jx-param-rule { stroke: ${v("--border")}; stroke-opacity: 0.5; }
      .jx-edge-hit { fill: none; stroke: none; }
      .jx-box { fill: ${v("--node")}; stroke: ${v("--border")}; }
      .jx-group .jx-box, .jx-rollup .jx-box { fill: ${v("--group")}; }
      .jx-stack { fill: ${v("--group")}; stroke: ${v("--border")}; }
      .jx-ports .jx-box, .jx-outputs .jx-box { fill: ${v("--ports")}; }
      .jx-frame { fill: ${v("--frame")}; stroke: ${v("--border")}; }
      .jx-t1 { text-anchor: middle; font-weight: 600; } .jx-t2 { text-anchor: middle; font-size: 11px; fill: ${v("--muted")}; }
      .jx-head { font-weight: 600; } .jx-toggle { font-weight: 700; }
      .jx-edge { fill: none; stroke: ${v("--edge")}; } .jx-arrowhead { fill: ${v("--edge")}; }
      .jx-edge-label { font-size: 10px; fill: ${v("--muted")}; }
      .jx-heat { fill: ${v("--heat")}; pointer-events: none; } .jx-badge { font-size: 10px; text-anchor: end; fill: ${v("--muted")}; }
      .jx-split-fwd { fill: ${v("--forward")}; } .jx-split-bwd { fill: ${v("--backward")}; }
      .jx-ov-added > .jx-box { stroke: ${v("--added")}; stroke-width: 3; } .jx-ov-changed > .jx-box { stroke: ${v("--changed")}; stroke-width: 3; }
      .jx-ov-forward > .jx-box { fill: ${v("--forward")}; } .jx-ov-backward > .jx-box { fill: ${v("--backward")}; }
      .jx-ov-up > .jx-box { stroke: ${v("--upcast")}; stroke-width: 3; } .jx-ov-down > .jx-box { stroke: ${v("--downcast")}; stroke-width: 3; }
      .jx-ov-peak > .jx-box, .jx-ov-peak-in > .jx-box, .jx-ov-peak-in > .jx-frame { stroke: ${v("--peak")}; stroke-width: 3; }`;
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
