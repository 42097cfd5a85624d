/** Edge labels that never overlap: one per edge, placed along its path at the first spot that
 * covers no box and no label placed before it (the selection's edges first). An edge with no
 * free spot gets no label; its type stays in its tooltip. Plain geometry, no DOM. */

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface LabelPath {
  id: string;
  pts: { x: number; y: number }[];
  label: string;
  priority: boolean;
}

export interface PlacedLabel {
  id: string;
  label: string;
  priority: boolean;
  /** The text's anchor (start of the baseline). */
  x: number;
  y: number;
  rect: Rect;
}

export const LABEL_CHAR = 5.7; // px per character at the labels' 10 px
export const LABEL_HEIGHT = 12;
const CELL = 80;
const SPOTS = [0.5, 0.3, 0.7, 0.15, 0.85];

/** A uniform grid of rectangles, for overlap tests in about constant time. */
class Grid {
  private cells = new Map<string, Rect[]>();

  private keys(r: Rect): string[] {
    const out: string[] = [];
    for (let i = Math.floor(r.x / CELL); i <= Math.floor((r.x + r.w) / CELL); i++) {
      for (let j = Math.floor(r.y / CELL); j <= Math.floor((r.y + r.h) / CELL); j++) out.push(`${i},${j}`);
    }
    return out;
  }

  add(r: Rect): void {
    for (const key of this.keys(r)) {
      const list = this.cells.get(key);
      if (list) list.push(r);
      else this.cells.set(key, [r]);
    }
  }

  free(r: Rect): boolean {
    for (const key of this.keys(r)) {
      for (const o of this.cells.get(key) ?? []) {
        if (r.x < o.x + o.w && o.x < r.x + r.w && r.y < o.y + o.h && o.y < r.y + r.h) return false;
      }
    }
    return true;
  }
}

/** Candidate rectangles along a path: beside vertical stretches, above horizontal ones. */
function* candidates(pts: { x: number; y: number }[], w: number): Generator<Rect> {
  // Longest stretches first: the middle of a long edge is where a reader looks for its label.
  const segments = pts.slice(1).map((b, i) => ({ a: pts[i], b, len: Math.hypot(b.x - pts[i].x, b.y - pts[i].y) }));
  segments.sort((p, q) => q.len - p.len);
  for (const { a, b, len } of segments) {
    if (len < 16) continue;
    const vertical = Math.abs(b.y - a.y) >= Math.abs(b.x - a.x);
    for (const t of SPOTS) {
      const x = a.x + (b.x - a.x) * t;
      const y = a.y + (b.y - a.y) * t;
      if (vertical) {
        yield { x: x + 4, y: y - LABEL_HEIGHT / 2, w, h: LABEL_HEIGHT };
        yield { x: x - 4 - w, y: y - LABEL_HEIGHT / 2, w, h: LABEL_HEIGHT };
      } else {
        yield { x: x - w / 2, y: y - LABEL_HEIGHT - 2, w, h: LABEL_HEIGHT };
        yield { x: x - w / 2, y: y + 2, w, h: LABEL_HEIGHT };
      }
    }
  }
}

export function placeLabels(paths: LabelPath[], obstacles: Rect[]): PlacedLabel[] {
  const grid = new Grid();
  for (const o of obstacles) grid.add({ x: o.x - 2, y: o.y - 2, w: o.w + 4, h: o.h + 4 });
  const ordered = [...paths.filter((p) => p.priority), ...paths.filter((p) => !p.priority)];
  const placed: PlacedLabel[] = [];
  for (const path of ordered) {
    const w = path.label.length * LABEL_CHAR + 4;
    for (const rect of candidates(path.pts, w)) {
      if (!grid.free(rect)) continue;
      grid.add(rect);
      placed.push({ id: path.id, label: path.label, priority: path.priority, x: rect.x + 2, y: rect.y + LABEL_HEIGHT - 3, rect });
      break;
    }
  }
  return placed;
}
