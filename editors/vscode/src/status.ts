/** The status-bar item: tracing while a trace is in flight, then the last outcome (ok, stale, failed). */

import * as vscode from "vscode";
import type { TraceFinished, TraceResult } from "./wire";

export type StatusState =
  | { kind: "idle" }
  | { kind: "tracing"; name: string }
  | { kind: "ok"; name: string; traceId: string; ops: number; outputs: string[]; inputsFrom?: string }
  | { kind: "stale"; name: string; traceId: string }
  | { kind: "failed"; name: string; error: string };

export interface StatusView {
  text: string;
  tooltip: string;
  command?: string;
  error: boolean;
  warning: boolean;
}

/** Plain state machine; `TraceStatusItem` draws it. */
export class TraceStatus {
  private inFlight: string[] = [];
  private outcome: StatusState = { kind: "idle" };
  private readonly listeners: (() => void)[] = [];

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  get state(): StatusState {
    const tracing = this.inFlight.at(-1);
    return tracing !== undefined ? { kind: "tracing", name: tracing } : this.outcome;
  }

  begin(name: string): void {
    this.inFlight.push(name);
    this.changed();
  }

  private end(name: string): void {
    const index = this.inFlight.lastIndexOf(name);
    if (index >= 0) this.inFlight.splice(index, 1);
  }

  succeeded(name: string, result: TraceResult): void {
    this.end(name);
    this.outcome = { kind: "ok", name, traceId: result.traceId, ops: result.summary.ops, outputs: result.summary.outputs };
    if (result.inputsFrom) this.outcome.inputsFrom = result.inputsFrom;
    this.changed();
  }

  failed(name: string, error: string): void {
    this.end(name);
    this.outcome = { kind: "failed", name, error };
    this.changed();
  }

  /** A cancelled trace (or unanswered needs-input) leaves the previous outcome. */
  cancelled(name: string): void {
    this.end(name);
    this.changed();
  }

  /** `jaxlsp/traceFinished`: traces started elsewhere (another command, the browser) count too. */
  finished(note: TraceFinished): void {
    if (note.ok && note.traceId) {
      const ops = this.outcome.kind === "ok" && this.outcome.traceId === note.traceId ? this.outcome.ops : undefined;
      if (ops === undefined) {
        this.outcome = { kind: "ok", name: note.name, traceId: note.traceId, ops: -1, outputs: [] };
      }
    } else if (!note.ok) {
      this.outcome = { kind: "failed", name: note.name, error: note.error ?? "failed" };
    }
    this.changed();
  }

  /** A source of the trace shown changed since it was traced. */
  markStale(traceId: string): void {
    const current = this.outcome;
    if (current.kind === "ok" && current.traceId === traceId) {
      this.outcome = { kind: "stale", name: current.name, traceId };
      this.changed();
    }
  }

  view(): StatusView | undefined {
    const state = this.state;
    switch (state.kind) {
      case "idle":
        return undefined;
      case "tracing":
        return { text: `$(sync~spin) jaxlsp: tracing ${state.name}`, tooltip: `Tracing ${state.name}`, error: false, warning: false };
      case "ok": {
        const figures = state.ops >= 0 ? ` · ${state.ops.toLocaleString("en-US")} ops` : "";
        const outputs = state.outputs.length ? `\nOutputs: ${state.outputs.join(", ")}` : "";
        const inputs = state.inputsFrom ? `\nInputs from ${state.inputsFrom}` : "";
        return {
          text: `$(type-hierarchy) ${state.name}${figures}`,
          tooltip: `jaxlsp: ${state.name} traced${outputs}${inputs}\nClick to open the graph.`,
          command: "jaxlsp.showGraph",
          error: false,
          warning: false,
        };
      }
      case "stale":
        return {
          text: `$(warning) ${state.name} (stale)`,
          tooltip: `jaxlsp: a source of ${state.name} changed since it was traced.\nClick to re-trace.`,
          command: "jaxlsp.retrace",
          error: false,
          warning: true,
        };
      case "failed":
        return {
          text: `$(error) ${state.name} failed`,
          tooltip: `jaxlsp: tracing ${state.name} failed.\n${state.error}\nClick to re-trace.`,
          command: "jaxlsp.retrace",
          error: true,
          warning: false,
        };
    }
  }
}

/** Draws a `TraceStatus` on a status-bar item. */
export class TraceStatusItem implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;

  constructor(private readonly status: TraceStatus) {
    this.item = vscode.window.createStatusBarItem("jaxlsp.status", vscode.StatusBarAlignment.Left, 0);
    this.item.name = "jaxlsp";
    status.onChange(() => this.render());
    this.render();
  }

  render(): void {
    const view = this.status.view();
    if (view === undefined) {
      this.item.hide();
      return;
    }
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.command = view.command;
    this.item.backgroundColor = view.error
      ? new vscode.ThemeColor("statusBarItem.errorBackground")
      : view.warning
        ? new vscode.ThemeColor("statusBarItem.warningBackground")
        : undefined;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
