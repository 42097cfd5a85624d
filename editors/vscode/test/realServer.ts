/**
 * The real `jaxlsp serve` over stdio, started as the extension would start it (its command
 * resolution and initialization options), with a client that answers like VS Code's.
 */

import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import type { TestContext } from "node:test";
import { type ProtocolConnection, StreamMessageReader, StreamMessageWriter, createProtocolConnection } from "vscode-languageserver-protocol/node";
import { DEFAULT_SETTINGS, initializationOptions, resolveLaunch, safeCwd, which } from "../src/server";
import type { LspClient } from "../src/wire";

export const repoRoot = path.resolve(__dirname, "..", "..", "..", "..");
export const extensionRoot = path.resolve(__dirname, "..", "..");

/** A prerequisite: missing, the test skips, except under CI=true, where it fails. */
export function need(t: TestContext, what: string, present: boolean): boolean {
  if (present) return true;
  if (process.env.CI === "true") throw new Error(`${what} is missing, and under CI=true a missing tool fails the test`);
  t.skip(`${what} is missing`);
  return false;
}

export function venvPython(): string {
  return process.env.JAXLSP_PYTHON ?? path.join(repoRoot, ".venv", "bin", "python");
}

/** A fresh copy of the fixture workspace (a trace may write jaxlsp.toml into it). */
export function copyWorkspace(): string {
  const target = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-vscode-ws-"));
  fs.cpSync(path.join(extensionRoot, "test", "workspace"), target, { recursive: true });
  return fs.realpathSync(target);
}

export interface RealServer {
  connection: ProtocolConnection;
  client: LspClient;
  process: ChildProcess;
  showDocuments: { uri: string; external?: boolean; selection?: unknown }[];
  /** How the client answers `window/showDocument` (the extension's middleware decides). */
  onShowDocument: (params: { uri: string; external?: boolean }) => boolean;
  stderr: string[];
  stop(): Promise<void>;
}

export async function startServer(workspace: string, python: string): Promise<RealServer> {
  const settings = { ...DEFAULT_SETTINGS, python };
  const cwd = safeCwd([os.tmpdir()], [workspace]);
  const launch = resolveLaunch(settings, { selected: undefined, trusted: true, folders: [workspace], cwd, find: (c) => which(c, process.env, cwd) });
  const env = {
    ...process.env,
    XDG_CONFIG_HOME: fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-vscode-config-")),
    XDG_CACHE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-vscode-cache-")),
  };
  const child = spawn(launch.server.command, launch.server.args, { cwd: launch.cwd, env, stdio: ["pipe", "pipe", "pipe"] });
  const stderr: string[] = [];
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
  const connection = createProtocolConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
  const server: RealServer = {
    connection,
    process: child,
    showDocuments: [],
    onShowDocument: () => true,
    stderr,
    client: {
      sendRequest: <R>(method: string, params: unknown) => connection.sendRequest<R>(method, params),
      sendNotification: (method: string, params: unknown) => connection.sendNotification(method, params),
    },
    async stop() {
      const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())));
      try {
        await Promise.race([connection.sendRequest("shutdown"), new Promise((r) => setTimeout(r, 5000))]);
        await connection.sendNotification("exit");
      } catch {
        // already gone
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
      connection.dispose();
    },
  };
  connection.onRequest("window/showDocument", (params: { uri: string; external?: boolean; selection?: unknown }) => {
    server.showDocuments.push(params);
    return { success: server.onShowDocument(params) };
  });
  connection.onRequest("window/workDoneProgress/create", () => null);
  connection.onRequest("client/registerCapability", () => null);
  connection.onRequest("workspace/codeLens/refresh", () => null);
  connection.onRequest("workspace/inlayHint/refresh", () => null);
  connection.onRequest("workspace/configuration", (params: { items: unknown[] }) => params.items.map(() => null));
  connection.onNotification("window/logMessage", () => undefined);
  connection.onNotification("$/progress", () => undefined);
  connection.listen();
  const rootUri = pathToFileURL(workspace).toString();
  await connection.sendRequest("initialize", {
    processId: process.pid,
    rootUri,
    workspaceFolders: [{ uri: rootUri, name: path.basename(workspace) }],
    capabilities: { window: { showDocument: { support: true }, workDoneProgress: true }, workspace: { workspaceFolders: true } },
    initializationOptions: initializationOptions(settings, launch, true),
  });
  await connection.sendNotification("initialized", {});
  return server;
}

export async function openDocument(server: RealServer, file: string): Promise<string> {
  const uri = pathToFileURL(file).toString();
  await server.connection.sendNotification("textDocument/didOpen", {
    textDocument: { uri, languageId: file.endsWith(".toml") ? "toml" : "python", version: 1, text: fs.readFileSync(file, "utf8") },
  });
  return uri;
}
