/**
 * The first-run check (issue 48): once the server runs in a trusted workspace, ask it once whether
 * the capture interpreter it picked can trace (`jaxlsp/environment`, which runs that interpreter:
 * hence trusted only). When it cannot (no JAX in the workspace's `.venv`, none selected), the user
 * sees one message naming the interpreter, why it was picked, what is missing and the command that
 * fixes it, instead of meeting it at the first trace. Each interpreter is reported once per session.
 */

import * as vscode from "vscode";
import type { EnvironmentReport } from "./commands";
import type { LspClient } from "./wire";

const reported = new Set<string>();

/** The message for a report that cannot trace: the server's own words and the install command. */
export function firstRunMessage(report: EnvironmentReport): string {
  const text = String(report.message);
  if (typeof report.install !== "string" || !report.install) return `jaxlsp: ${text}`;
  return `jaxlsp: ${text}${/[.!]$/.test(text) ? " " : ". "}To install it, run: ${report.install}`;
}

/** Asks once per interpreter; resolves to the message shown, or undefined (ready, asked before, or no answer). */
export async function firstRunCheck(client: LspClient, uri: string | undefined, log?: { info(text: string): void }): Promise<string | undefined> {
  let report: EnvironmentReport;
  try {
    const params = uri?.endsWith(".py") || uri?.endsWith(".ipynb") ? { textDocument: { uri } } : {};
    report = await client.sendRequest<EnvironmentReport>("jaxlsp/environment", params);
  } catch (error) {
    log?.info(`first-run check: no answer (${String(error)})`);
    return undefined;
  }
  const python = typeof report.python === "string" ? report.python : "";
  log?.info(`first-run check: ${report.message}`);
  if (report.ok || reported.has(python)) return undefined;
  reported.add(python);
  const message = firstRunMessage(report);
  void vscode.window.showWarningMessage(message, "Check capture environment").then((action) => {
    if (action === "Check capture environment") void vscode.commands.executeCommand("jaxlsp.checkCaptureEnvironment");
  });
  return message;
}
