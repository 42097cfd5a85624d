/** Commands around a trace: export, open in the browser, the capture-environment check, learning shapes. */

import * as path from "node:path";
import * as vscode from "vscode";
import type { Gate } from "./gate";
import type { ExportFormat, LearnShapesArguments, LearnShapesResult, LspClient } from "./wire";
import { METHOD_NOT_FOUND, errorCode } from "./wire";

const FORMATS: { label: ExportFormat; description: string; filters: Record<string, string[]> }[] = [
  { label: "json", description: "the canonical graph (docs/graph-format.md)", filters: { JSON: ["json"] } },
  { label: "dot", description: "Graphviz source", filters: { Graphviz: ["dot", "gv"] } },
  { label: "html", description: "one offline page", filters: { HTML: ["html"] } },
];

/** `jaxlsp/export` writes under the user's cache; the user picks where the copy goes. */
export async function exportGraph(client: LspClient, traceId: string, name: string, format?: ExportFormat): Promise<vscode.Uri | undefined> {
  const choice = format ? FORMATS.find((f) => f.label === format) : await vscode.window.showQuickPick(FORMATS, { title: `jaxlsp: export ${name} as` });
  if (choice === undefined) return undefined;
  const exported = await client.sendRequest<{ uri: string }>("jaxlsp/export", { traceId, format: choice.label });
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const filename = `${name.replace(/[^A-Za-z0-9_.-]/g, "_")}.${choice.label}`;
  const target = await vscode.window.showSaveDialog({
    defaultUri: folder ? vscode.Uri.joinPath(folder, filename) : undefined,
    filters: choice.filters,
    title: `Export ${name} graph`,
  });
  if (target === undefined) return undefined;
  await vscode.workspace.fs.copy(vscode.Uri.parse(exported.uri), target, { overwrite: true });
  const open = await vscode.window.showInformationMessage(`jaxlsp: exported ${name} to ${vscode.workspace.asRelativePath(target)}.`, "Open");
  if (open === "Open") await vscode.commands.executeCommand("vscode.open", target);
  return target;
}

/**
 * `jaxlsp/openGraph` answers a URL on the server's machine; `asExternalUri` makes a loopback URL
 * reachable from the user's browser in remote windows (SSH, WSL, containers) by forwarding the port.
 */
export async function openInBrowser(client: LspClient, traceId: string, gate: Gate): Promise<vscode.Uri> {
  const { url } = await gate.during(() => client.sendRequest<{ url: string }>("jaxlsp/openGraph", { traceId }));
  const target = await externalUri(vscode.Uri.parse(url));
  await vscode.env.openExternal(target);
  return target;
}

/** http(s) goes through `asExternalUri`; a file URL (the offline export) is opened as it is. */
export async function externalUri(uri: vscode.Uri): Promise<vscode.Uri> {
  return uri.scheme === "http" || uri.scheme === "https" ? vscode.env.asExternalUri(uri) : uri;
}

export interface EnvironmentReport {
  ok: boolean;
  message: string;
  install?: string;
  [key: string]: unknown;
}

/**
 * "Check capture environment": `jaxlsp/environment` (fresh, never installing) for the active file,
 * its message shown, details as a JSON document on request; when an install would fix it, the
 * server's own `jaxlsp.checkEnvironment` command offers it (and asks again before running anything).
 */
export async function checkEnvironment(client: LspClient, uri: string | undefined): Promise<EnvironmentReport | undefined> {
  let report: EnvironmentReport;
  try {
    report = await client.sendRequest<EnvironmentReport>("jaxlsp/environment", uri ? { textDocument: { uri }, refresh: true } : { refresh: true });
  } catch (error) {
    if (errorCode(error) === METHOD_NOT_FOUND) {
      void vscode.window.showWarningMessage("jaxlsp: this server cannot check the capture environment (no jaxlsp/environment); update jaxlsp.");
      return undefined;
    }
    throw error;
  }
  const actions = report.install ? ["Install…", "Details"] : ["Details"];
  const show = report.ok ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
  const action = await show(`jaxlsp: ${report.message}`, ...actions);
  if (action === "Details") {
    const document = await vscode.workspace.openTextDocument({ language: "json", content: `${JSON.stringify(report, null, 2)}\n` });
    await vscode.window.showTextDocument(document, { preview: true });
  } else if (action === "Install…") {
    await client.sendRequest("workspace/executeCommand", { command: "jaxlsp.checkEnvironment", arguments: uri ? [{ uri }] : [] });
  }
  return report;
}

/** The workspace folder holding `uri` (the innermost), if any. */
function folderOf(uri: vscode.Uri): vscode.Uri | undefined {
  const inside = (vscode.workspace.workspaceFolders ?? []).filter(
    (f) => uri.fsPath === f.uri.fsPath || uri.fsPath.startsWith(f.uri.fsPath.endsWith(path.sep) ? f.uri.fsPath : f.uri.fsPath + path.sep),
  );
  return inside.sort((a, b) => b.uri.fsPath.length - a.uri.fsPath.length)[0]?.uri;
}

/**
 * "jaxlsp: Learn shapes": the server's `jaxlsp.learnShapes` on the workspace folder of `active` (the
 * first folder when there is none): it runs that folder's tests and documented scripts once and keeps
 * every reached target's call, so nested modules and helpers get live shapes. A notification shows it
 * running and cancels it (the server kills the running example); the server's work-done progress
 * (examples done, targets learned) shows in the status bar, and its message sums it up.
 */
export async function learnShapes(client: LspClient, active: vscode.Uri | undefined): Promise<LearnShapesResult | undefined> {
  const folder = active ? folderOf(active) : undefined;
  const args: LearnShapesArguments[] = folder ? [{ uri: folder.toString() }] : [];
  const title = "jaxlsp: Learning shapes from the workspace's tests";
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (_progress, token) =>
    client.sendRequest<LearnShapesResult>("workspace/executeCommand", { command: "jaxlsp.learnShapes", arguments: args }, token),
  );
}
