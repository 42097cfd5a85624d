/** The minimap: the whole layout in a corner of the canvas, boxes as small rectangles and the part
 * on screen as a frame; a click or a drag there moves the view. Shown only while the graph does
 * not fit on screen. Drawn on a 2D canvas (thousands of boxes cost a few ms). */

import type { Layout } from "./layout";
import type { View } from "./view";

const MAX_W = 200;
const MAX_H = 150;
const PAD = 4;

interface Rect {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export class Minimap {
  readonly element = document.createElement("canvas");
  private boxes: { x: number; y: number; w: number; h: number; open: boolean }[] = [];
  private bounds = { w: 1, h: 1 };
  private scale = 1;
  private view: Rect | null = null;

  constructor(private readonly go: (x: number, y: number) => void) {
    this.element.className = "jx-minimap";
    this.element.setAttribute("aria-label", "minimap: click to move the view");
    this.element.hidden = true;
    let dragging = false;
    const move = (e: MouseEvent): void => {
      const r = this.element.getBoundingClientRect();
      this.go((e.clientX - r.left - PAD) / this.scale, (e.clientY - r.top - PAD) / this.scale);
    };
    this.element.addEventListener("mousedown", (e) => {
      e.stopPropagation();
      dragging = true;
      move(e);
    });
    window.addEventListener("mousemove", (e) => {
      if (dragging) move(e);
    });
    window.addEventListener("mouseup", () => (dragging = false));
    this.element.addEventListener("wheel", (e) => e.stopPropagation(), { passive: true });
  }

  setLayout(layout: Layout, view: View): void {
    this.bounds = { w: Math.max(layout.width, 1), h: Math.max(layout.height, 1) };
    this.scale = Math.min((MAX_W - 2 * PAD) / this.bounds.w, (MAX_H - 2 * PAD) / this.bounds.h);
    this.element.width = Math.ceil(this.bounds.w * this.scale + 2 * PAD);
    this.element.height = Math.ceil(this.bounds.h * this.scale + 2 * PAD);
    this.boxes = [];
    for (const [id, b] of layout.boxes) {
      const item = view.items.get(id);
      if (item) this.boxes.push({ ...b, open: item.kind === "container" });
    }
    this.render();
  }

  setView(rect: Rect): void {
    this.view = rect;
    this.render();
  }

  private render(): void {
    const v = this.view;
    const all = v !== null && v.x0 <= 0 && v.y0 <= 0 && v.x1 >= this.bounds.w && v.y1 >= this.bounds.h;
    this.element.hidden = all || this.boxes.length === 0;
    if (this.element.hidden) return;
    const ctx = this.element.getContext("2d");
    if (!ctx) return;
    const style = getComputedStyle(this.element);
    const s = this.scale;
    ctx.clearRect(0, 0, this.element.width, this.element.height);
    ctx.fillStyle = style.getPropertyValue("--minimap-box").trim() || "#8c959f";
    ctx.strokeStyle = style.getPropertyValue("--minimap-frame").trim() || "#8c959f";
    ctx.lineWidth = 1;
    for (const b of this.boxes) {
      if (b.open) ctx.strokeRect(PAD + b.x * s, PAD + b.y * s, Math.max(1, b.w * s), Math.max(1, b.h * s));
      else ctx.fillRect(PAD + b.x * s, PAD + b.y * s, Math.max(1, b.w * s), Math.max(1, b.h * s));
    }
    if (v) {
      ctx.strokeStyle = style.getPropertyValue("--minimap-view").trim() || "#0969da";
      ctx.lineWidth = 2;
      ctx.strokeRect(PAD + v.x0 * s, PAD + v.y0 * s, (v.x1 - v.x0) * s, (v.y1 - v.y0) * s);
    }
  }
}
