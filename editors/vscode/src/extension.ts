/**
 * The jaxlsp VS Code extension: starts `jaxlsp serve` over stdio and adds the trace commands, the
 * status-bar item, needs-input prompts and the graph panel on top of the language client.
 */

import * as os from "node:os";
import * as vscode from "vscode";
import type { ShowDocumentParams, ShowDocumentResult } from "vscode-languageclient";
import { LanguageClient, State, TransportKind, type LanguageClientOptions, type ServerOptions } from "vscode-languageclient/node";
import { checkEnvironment, exportGraph, externalUri, learnShapes, openInBrowser } from "./commands";
import { CursorTracker } from "./cursor";
import { Gate, routeShowDocument } from "./gate";
import { GraphPanel } from "./panel";
import { type PythonApi, initializationOptions, readSettings, resolveLaunch, safeCwd, selectedInterpreter, which } from "./server";
import { findBundle, isMissing, pythonVersion, resolveBundledLaunch, startFailureMessage } from "./bundle";
import { firstRunCheck } from "./firstRun";
import { LiveStatusItem } from "./live";
import { isSource } from "./stale";
import { TraceStatus, TraceStatusItem } from "./status";
import { Tracer, isTarget } from "./tracer";
import type { ExportFormat, LiveStatus, TraceFinished } from "./wire";
import { errorMessage } from "./wire";
import { isAnalysed } from "./notebooks";

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel | undefined;

async function pythonApi(): Promise<PythonApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonApi>("ms-python.python");
  if (extension === undefined) return undefined;
  try {
    return extension.isActive ? extension.exports : await extension.activate();
  } catch {
    return undefined;
  }
}

/** The extension's global storage folder, created: the server's working folder (never a workspace folder). */
async function storageFolder(context: vscode.ExtensionContext): Promise<string | undefined> {
  const uri = context.globalStorageUri;
  if (uri?.scheme !== "file") return undefined;
  try {
    await vscode.workspace.fs.createDirectory(uri);
    return uri.fsPath;
  } catch {
    return undefined;
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<JaxlspApi> {
  output = vscode.window.createOutputChannel("jaxlsp", { log: true });
  const status = new TraceStatus();
  const revealGate = new Gate();
  const browserGate = new Gate();
  const current = () => (client?.state === State.Running ? client : undefined);
  const panel = new GraphPanel(vscode.Uri.joinPath(context.extensionUri, "dist", "viewer"), current, revealGate);
  const tracer = new Tracer(current, status, ({ result }) => panel.show({ kind: "trace", traceId: result.traceId }));
  const cursor = new CursorTracker(current, panel);
  const live = new LiveStatusItem();
  context.subscriptions.push(output, new TraceStatusItem(status), live, panel, { dispose: () => cursor.dispose() });

  const clientOptions = (init: unknown): LanguageClientOptions => ({
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "file", pattern: "**/jaxlsp.toml" },
      // Python cells of Jupyter notebooks: the server declares notebook sync for them (lenses, hover in cells).
      { notebook: "jupyter-notebook", language: "python" },
    ],
    initializationOptions: init,
    outputChannel: output,
    middleware: {
      // Lens and code-action clicks go through the same flow as the palette command.
      executeCommand: async (command, args, next) => {
        if (command === "jaxlsp.traceGraph" && args.length === 1 && isTarget(args[0])) return tracer.trace(args[0]);
        // The server's "Open graph" lens: in VS Code the graph opens in the panel, not the browser.
        const traceId = command === "jaxlsp.openGraph" && args.length === 1 ? (args[0] as { traceId?: unknown })?.traceId : undefined;
        if (typeof traceId === "string") return panel.show({ kind: "trace", traceId }, false);
        return next(command, args);
      },
      window: {
        // Our own reveal and open-in-browser act on the answer; the server's showDocument during them would open twice.
        showDocument: async (params: ShowDocumentParams, token, next): Promise<ShowDocumentResult> => {
          switch (routeShowDocument(params, revealGate, browserGate)) {
            case "handled":
              return { success: true };
            case "openExternal":
              return { success: await vscode.env.openExternal(await externalUri(vscode.Uri.parse(params.uri))) };
            default:
              return next(params, token) as Promise<ShowDocumentResult>;
          }
        },
      },
    },
  });

  async function start(): Promise<void> {
    const settings = readSettings(vscode.workspace.getConfiguration("jaxlsp"));
    const trusted = vscode.workspace.isTrusted;
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    // The Python extension's choice is read only once the workspace is trusted: workspace settings can make it.
    const selected = trusted ? await selectedInterpreter(await pythonApi()) : undefined;
    const cwd = safeCwd([await storageFolder(context), os.tmpdir()], folders);
    const launchContext = { selected, trusted, folders, cwd, find: (command: string) => which(command, process.env, cwd) };
    // The server the extension carries, with a Python >= 3.11 found outside the workspace (bundle.ts);
    // jaxlsp.serverPath, or a build without the bundle, starts an installed jaxlsp instead.
    const bundled = await resolveBundledLaunch(settings, {
      ...launchContext,
      bundle: findBundle(context.extensionUri.fsPath),
      version: pythonVersion(cwd),
      platform: process.platform,
    });
    if (isMissing(bundled)) {
      for (const reason of bundled.tried) output?.info(`not used: ${reason}`);
      output?.error(bundled.message);
      void vscode.window
        .showErrorMessage(bundled.message, "Open settings")
        .then((action) => (action === "Open settings" ? vscode.commands.executeCommand("workbench.action.openSettings", "jaxlsp.serverPython") : undefined));
      return;
    }
    const launch = bundled ?? resolveLaunch(settings, launchContext);
    // Without a cwd the client would start the server in the first workspace folder.
    const serverOptions: ServerOptions = {
      command: launch.server.command,
      args: launch.server.args,
      transport: TransportKind.stdio,
      options: { cwd: launch.cwd },
    };
    output?.info(`starting ${launch.server.command} ${launch.server.args.join(" ")} in ${launch.cwd} (from ${launch.server.source}; trusted: ${trusted})`);
    for (const reason of launch.withheld) output?.info(`not started: ${reason}`);
    if (!trusted) output?.info("the Python extension's interpreter is not asked for before the workspace is trusted");
    const next = new LanguageClient("jaxlsp", "jaxlsp", serverOptions, clientOptions(initializationOptions(settings, launch, trusted)));
    next.onNotification("jaxlsp/traceFinished", (note: TraceFinished) => status.finished(note));
    next.onNotification("jaxlsp/liveStatus", (note: LiveStatus) => live.update(note));
    client = next;
    try {
      await next.start();
      // Once per session, in a trusted workspace: one message when the capture interpreter lacks JAX.
      if (trusted) void firstRunCheck(next, vscode.window.activeTextEditor?.document.uri.toString(), output);
    } catch (error) {
      // Not awaited: activation (and the next restart) must not wait for the user to read it.
      void vscode.window
        .showErrorMessage(startFailureMessage(launch, errorMessage(error)), "Open settings")
        .then((action) => (action === "Open settings" ? vscode.commands.executeCommand("workbench.action.openSettings", "jaxlsp") : undefined));
    }
  }

  // Starts and restarts run one after another (trust granted and a setting changed at once).
  let lifecycle: Promise<void> = Promise.resolve();
  const restart = (): Promise<void> => (lifecycle = lifecycle.then(restartNow, restartNow));

  async function restartNow(): Promise<void> {
    const previous = client;
    client = undefined;
    live.clear();
    if (previous !== undefined) {
      try {
        await previous.stop();
      } catch {
        // a server that already died has nothing to stop
      }
    }
    await start();
  }

  const needGraph = (): string | undefined => {
    const traceId = panel.traceId ?? tracer.last?.traceId;
    if (traceId === undefined) void vscode.window.showInformationMessage("jaxlsp: no graph yet. Trace a target first (jaxlsp: Trace graph).");
    return traceId;
  };
  const guarded =
    (work: (...args: unknown[]) => Promise<unknown>) =>
    async (...args: unknown[]): Promise<unknown> => {
      try {
        return await work(...args);
      } catch (error) {
        void vscode.window.showErrorMessage(`jaxlsp: ${errorMessage(error)}`);
        return undefined;
      }
    };

  context.subscriptions.push(
    vscode.commands.registerCommand(
      "jaxlsp.trace",
      guarded(async (arg?: unknown) => {
        // A lens clicked while the server restarts (trust just granted) traces on the new one.
        await lifecycle;
        const target = isTarget(arg) ? arg : await tracer.pickTarget(vscode.window.activeTextEditor);
        return target === undefined ? undefined : tracer.trace(target);
      }),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.traceWithTime",
      guarded(async () => {
        const target = await tracer.pickTarget(vscode.window.activeTextEditor);
        return target === undefined ? undefined : tracer.trace({ ...target, time: true });
      }),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.retrace",
      guarded(async () => (tracer.last ? tracer.trace(tracer.last) : vscode.commands.executeCommand("jaxlsp.trace"))),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.showGraph",
      guarded(async () => {
        const traceId = panel.traceId ?? tracer.last?.traceId;
        if (traceId !== undefined) return panel.show({ kind: "trace", traceId }, false);
        const files = await vscode.window.showOpenDialog({ filters: { "jaxlsp graph": ["json"] }, title: "Open a saved jaxlsp graph" });
        if (files?.[0]) panel.show({ kind: "file", uri: files[0] }, false);
        return undefined;
      }),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.openGraphInBrowser",
      guarded(async () => {
        const traceId = needGraph();
        const c = current();
        return traceId && c ? openInBrowser(c, traceId, browserGate) : undefined;
      }),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.exportGraph",
      guarded(async (format?: unknown) => {
        const traceId = needGraph();
        const c = current();
        const fmt = format === "json" || format === "dot" || format === "html" ? (format as ExportFormat) : undefined;
        return traceId && c ? exportGraph(c, traceId, tracer.last?.name ?? "graph", fmt) : undefined;
      }),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.checkCaptureEnvironment",
      guarded(async () => {
        const c = current();
        if (c === undefined) throw new Error("the server is not running");
        return checkEnvironment(c, vscode.window.activeTextEditor?.document.uri.toString());
      }),
    ),
    vscode.commands.registerCommand(
      "jaxlsp.learn",
      guarded(async () => {
        const c = current();
        if (c === undefined) throw new Error("the server is not running");
        return learnShapes(c, vscode.window.activeTextEditor?.document.uri);
      }),
    ),
    vscode.commands.registerCommand("jaxlsp.restartServer", guarded(restart)),
    // Granting trust restarts the server with `trusted: true` (and the selected interpreter), so tracing asks nothing.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void restart()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("jaxlsp")) void restart();
    }),
    vscode.window.onDidChangeTextEditorSelection((event) => {
      if (event.textEditor.document.languageId !== "python" || !isAnalysed(event.textEditor.document.uri)) return;
      const active = event.selections[0]?.active;
      if (active) cursor.moved({ uri: event.textEditor.document.uri.toString(), line: active.line, character: active.character });
    }),
    vscode.workspace.onDidChangeTextDocument((event) => {
      const traceId = panel.traceId;
      // A cell's URI has its notebook's path: an edited cell makes the notebook's graph stale.
      if (event.contentChanges.length === 0 || !isAnalysed(event.document.uri)) return;
      const traced = tracer.last?.uri ? vscode.Uri.parse(tracer.last.uri).fsPath : undefined;
      if (!isSource(event.document.uri.fsPath, panel.sourceKeys, traced)) return;
      if (traceId !== undefined) panel.setStale(traceId, true);
      if (tracer.last?.traceId !== undefined) status.markStale(tracer.last.traceId);
    }),
  );

  const python = await pythonApi();
  // Before trust the selection is not used, so changing it changes nothing.
  const changed = python?.environments?.onDidChangeActiveEnvironmentPath?.(() => {
    if (vscode.workspace.isTrusted) void restart();
  });
  if (changed) context.subscriptions.push(changed);
  lifecycle = start();
  await lifecycle;
  return { ready: () => lifecycle };
}

/** What `activate` returns to other extensions (and tests): `ready()` settles once the latest (re)start did. */
export interface JaxlspApi {
  ready(): Promise<void>;
}

export async function deactivate(): Promise<void> {
  const previous = client;
  client = undefined;
  await previous?.stop();
}
