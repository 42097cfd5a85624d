/**
 * The live-shapes status-bar item, fed by the server's `jaxlsp/liveStatus` (docs/live-shapes.md):
 * what is being traced now, else how many targets are fresh, failed, queued or not live. Its
 * tooltip lists every target with its state and cause; when one failed, a click opens the
 * Problems view, where the failure's diagnostic is.
 */

import * as vscode from "vscode";
import type { LiveStatus, LiveTarget } from "./wire";

export interface LiveView {
  text: string;
  tooltip: string;
  command?: string;
}

const MAX_TOOLTIP_TARGETS = 20;
const MAX_REASON = 160; // characters of a cause in the tooltip (a failure's paragraph can be long)

const WORDS: Record<LiveTarget["state"], string> = {
  fresh: "fresh",
  queued: "queued",
  tracing: "tracing",
  failed: "failed",
  notLive: "not live",
};

function fileName(uri: string): string {
  const last = uri.split("/").pop() ?? uri;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

function describe(target: LiveTarget): string {
  const reason = (target.reason ?? "").split("\n", 1)[0].trim();
  const cause = reason ? `: ${reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON - 1)}…` : reason}` : "";
  const waiting = target.waiting ? " (waits for its files to change)" : "";
  return `${target.name} (${fileName(target.uri)}): ${WORDS[target.state]}${cause}${waiting}`;
}

/** What the item shows for a `jaxlsp/liveStatus`; undefined (hidden) when live shapes are off or nothing is live. */
export function liveView(status: LiveStatus | undefined): LiveView | undefined {
  if (status === undefined || !status.enabled || status.targets.length === 0) return undefined;
  const count = (state: LiveTarget["state"]): number => status.targets.filter((t) => t.state === state).length;
  const tracing = status.targets.filter((t) => t.state === "tracing").map((t) => t.name);
  const [fresh, failed, queued, notLive] = [count("fresh"), count("failed"), count("queued"), count("notLive")];
  let text: string;
  if (tracing.length > 0) {
    text = `$(sync~spin) live: tracing ${tracing.join(", ")}${queued ? ` · ${queued} queued` : ""}`;
  } else {
    const parts = [
      failed ? `${failed} failed` : "",
      fresh ? `${fresh} fresh` : "",
      queued ? `${queued} queued` : "",
      notLive ? `${notLive} not live` : "",
    ].filter(Boolean);
    const icon = failed ? "$(error)" : queued ? "$(clock)" : fresh ? "$(check)" : "$(circle-slash)";
    text = `${icon} live: ${parts.join(" · ")}`;
  }
  const shown = status.targets.slice(0, MAX_TOOLTIP_TARGETS).map(describe);
  const more = status.targets.length - shown.length;
  const lines = ["jaxlsp live shapes", ...shown, ...(more > 0 ? [`and ${more} more`] : [])];
  if (failed) lines.push("Click to open the Problems view.");
  const view: LiveView = { text, tooltip: lines.join("\n") };
  if (failed) view.command = "workbench.actions.view.problems";
  return view;
}

/** Draws the newest `jaxlsp/liveStatus` on a status-bar item (beside the trace item). */
export class LiveStatusItem implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private status: LiveStatus | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem("jaxlsp.live", vscode.StatusBarAlignment.Left, -1);
    this.item.name = "jaxlsp live shapes";
    this.render();
  }

  /** A `jaxlsp/liveStatus` notification: it lists every target, so it replaces the previous one. */
  update(status: LiveStatus): void {
    this.status = status;
    this.render();
  }

  /** The server stopped (a restart): its targets' states are gone with it. */
  clear(): void {
    this.status = undefined;
    this.render();
  }

  render(): void {
    const view = liveView(this.status);
    if (view === undefined) {
      this.item.hide();
      return;
    }
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.command = view.command;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
