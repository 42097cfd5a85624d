/** The trace flow: `jaxlsp/trace`, needs-input answers and the save question, status and the panel. */

import * as vscode from "vscode";
import { askSave, pickExample, promptAnswers } from "./needsInput";
import type { TraceStatus } from "./status";
import type { DiscoverResult, EntrypointItem, LspClient, NeedsInputResult, TraceParams, TraceResult } from "./wire";
import { errorMessage, isNeedsInput, isTraceResult } from "./wire";

export interface Target {
  uri: string;
  name: string;
  profile?: string;
  /** Also compile and time the program under the profiler ("Trace with measured time"). */
  time?: boolean;
}

export function isTarget(value: unknown): value is Target {
  const v = value as Partial<Target> | null;
  return typeof v === "object" && v !== null && typeof v.uri === "string" && typeof v.name === "string" && (v.profile === undefined || typeof v.profile === "string") && (v.time === undefined || typeof v.time === "boolean");
}

export const MANAGE_TRUST = "Manage Workspace Trust";

/** A needs-input answer can lead to more questions (an `inputs` answer names new dimensions): a few rounds at most. */
const MAX_ROUNDS = 4;

export interface TraceOutcome {
  target: Target;
  result: TraceResult;
}

export class Tracer {
  /** The last target traced from this window, for Re-trace. */
  last: (Target & { traceId?: string }) | undefined;

  constructor(
    private readonly client: () => LspClient | undefined,
    private readonly status: TraceStatus,
    private readonly onTraced: (outcome: TraceOutcome) => void,
  ) {}

  /** Traces a target, asking for what its profile lacks; undefined when cancelled or failed (already reported). */
  async trace(target: Target): Promise<TraceResult | undefined> {
    const client = this.client();
    if (client === undefined) {
      void vscode.window.showErrorMessage("jaxlsp: the server is not running.");
      return undefined;
    }
    if (!vscode.workspace.isTrusted) {
      // VS Code's restricted mode is the trust decision here: no second, jaxlsp-only prompt.
      const manage = await vscode.window.showWarningMessage(
        `jaxlsp: tracing ${target.name} runs this workspace's code, which restricted mode does not allow. Trust the workspace to trace.`,
        MANAGE_TRUST,
      );
      if (manage === MANAGE_TRUST) await vscode.commands.executeCommand("workbench.trust.manage");
      return undefined;
    }
    this.last = { ...target };
    this.status.begin(target.name);
    try {
      const params: TraceParams = { textDocument: { uri: target.uri }, name: target.name };
      if (target.profile !== undefined) params.profile = target.profile;
      if (target.time) params.time = true;
      let result = await client.sendRequest<TraceResult | NeedsInputResult>("jaxlsp/trace", params);
      let save: boolean | undefined;
      const answers: Record<string, string> = {};
      // Rounds that ask new items are bounded; rounds that ask again what did not parse are the user's.
      for (let round = 0; isNeedsInput(result); ) {
        const again = Object.keys(result.errors ?? {}).length > 0;
        if (!again && ++round > MAX_ROUNDS) throw new Error(`${target.name} still needs input after ${MAX_ROUNDS} rounds of answers`);
        const example = round === 1 && !again ? await pickExample(result.examples, target.name) : null;
        if (example === undefined) {
          this.status.cancelled(target.name);
          return undefined;
        }
        if (example !== null) {
          // One pick, then trace: the run learns the inputs (saved on the user's yes).
          save ??= await askSave(result);
          result = await client.sendRequest<TraceResult | NeedsInputResult>("jaxlsp/trace", { ...params, example, save });
          continue;
        }
        const more = await promptAnswers(result, target.name, answers);
        if (more === undefined) {
          this.status.cancelled(target.name);
          return undefined;
        }
        Object.assign(answers, more);
        save ??= await askSave(result);
        result = await client.sendRequest<TraceResult | NeedsInputResult>("jaxlsp/trace", { ...params, answers, save });
      }
      if (!isTraceResult(result)) throw new Error("the server answered jaxlsp/trace with neither a trace nor a needs-input list");
      this.last.traceId = result.traceId;
      if (result.saved) void this.announceSaved(result.saved, result.profile);
      this.status.succeeded(target.name, result);
      this.onTraced({ target, result });
      return result;
    } catch (error) {
      if (isCancelled(error)) {
        this.status.cancelled(target.name);
        return undefined;
      }
      const message = errorMessage(error);
      this.status.failed(target.name, message);
      void vscode.window.showErrorMessage(`jaxlsp: ${message}`);
      return undefined;
    }
  }

  private async announceSaved(saved: string, profile: string | null): Promise<void> {
    const file = vscode.Uri.parse(saved);
    const name = profile ? ` "${profile}"` : "";
    const open = await vscode.window.showInformationMessage(`jaxlsp: saved the profile${name} to ${vscode.workspace.asRelativePath(file)}.`, "Open");
    if (open === "Open") await vscode.window.showTextDocument(file);
  }

  /** The target for the palette command: the only entrypoint, else a pick with the one at the cursor first. */
  async pickTarget(editor: vscode.TextEditor | undefined): Promise<Target | undefined> {
    const client = this.client();
    if (client === undefined || editor === undefined || editor.document.languageId !== "python") {
      void vscode.window.showInformationMessage("jaxlsp: open a Python file with a JAX function or module to trace.");
      return undefined;
    }
    const uri = editor.document.uri.toString();
    const found = await client.sendRequest<DiscoverResult>("jaxlsp/discover", { textDocument: { uri } });
    const entrypoints = found.entrypoints;
    if (entrypoints.length === 0) {
      void vscode.window.showInformationMessage("jaxlsp: no JAX entrypoint found in this file.");
      return undefined;
    }
    const line = editor.selection.active.line;
    const ordered = orderByCursor(entrypoints, line);
    if (ordered.length === 1) return { uri, name: ordered[0].name };
    const picked = await vscode.window.showQuickPick(
      ordered.map((e) => ({ label: e.name, description: e.kind, detail: e.reason, name: e.name })),
      { title: "jaxlsp: trace which entrypoint?", matchOnDescription: true },
    );
    return picked === undefined ? undefined : { uri, name: picked.name };
  }
}

/** Entrypoints enclosing the line first (innermost first), then the rest in file order. */
export function orderByCursor<T extends Pick<EntrypointItem, "range" | "bodyRange">>(entrypoints: readonly T[], line: number): T[] {
  const enclosing = entrypoints
    .filter((e) => e.bodyRange.start.line <= line && line <= e.bodyRange.end.line)
    .sort((a, b) => a.bodyRange.end.line - a.bodyRange.start.line - (b.bodyRange.end.line - b.bodyRange.start.line));
  return [...enclosing, ...entrypoints.filter((e) => !enclosing.includes(e))];
}

function isCancelled(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === -32800; // RequestCancelled
}
