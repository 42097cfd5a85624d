/**
 * jaxlsp in JupyterLab: "Trace graph" in the cell toolbar and the command palette.
 *
 * jupyterlab-lsp (on JupyterLab's `@jupyterlab/lsp`) connects the notebook to the jaxlsp server
 * (`jaxlsp serve`, started by jupyter-lsp) and shows its hover and diagnostics; it shows neither
 * code lenses nor code actions, so this extension sends jaxlsp's own requests over that same
 * connection: `jaxlsp/discover` for the entrypoint under the cursor, `jaxlsp/trace` (the server's
 * trust prompt arrives as `window/showMessageRequest`, which jupyterlab-lsp shows as a dialog) and
 * `jaxlsp/openGraph`, whose viewer page opens in a main-area tab.
 */
import { type JupyterFrontEnd, type JupyterFrontEndPlugin } from "@jupyterlab/application";
import { Dialog, ICommandPalette, IFrame, MainAreaWidget, Notification, showDialog } from "@jupyterlab/apputils";
import { DocumentConnectionManager, ILSPDocumentConnectionManager } from "@jupyterlab/lsp";
import { INotebookTracker, type NotebookPanel } from "@jupyterlab/notebook";
import { Widget } from "@lumino/widgets";
import { describe, type Entrypoint, isTrace, type NeedsInput, targetAt, type TraceResult } from "./target";

export const COMMAND = "jaxlsp:trace-graph";
const WAIT_MS = 20_000; // for jupyterlab-lsp to connect the notebook to the server

/** The part of jupyterlab-lsp's connection used here: its JSON-RPC connection (a protected field). */
interface RpcConnection {
  sendRequest<R>(method: string, params: unknown): Promise<R>;
}

async function connectionOf(manager: ILSPDocumentConnectionManager, panel: NotebookPanel): Promise<{ rpc: RpcConnection; uri: string }> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const adapter = manager.adapters.get(panel.context.path);
    const document = adapter?.virtualDocument;
    const connection = document ? manager.connections.get(document.uri) : undefined;
    const rpc = (connection as unknown as { connection?: RpcConnection } | undefined)?.connection;
    if (document && connection?.isReady && rpc) {
      // The notebook's document as the server knows it (the .ipynb file's URI when the server
      // spec says requires_documents_on_disk: false, as jaxlsp's does).
      const uri = DocumentConnectionManager.solveUris(document, document.language)?.document;
      return { rpc, uri: uri ?? document.uri };
    }
    if (Date.now() > deadline) {
      throw new Error("the notebook is not connected to the jaxlsp language server (is jupyterlab-lsp installed, and jaxlsp configured? see editors/jupyterlab/README.md)");
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function openViewer(app: JupyterFrontEnd, url: string, title: string): void {
  const frame = new IFrame({ sandbox: ["allow-scripts", "allow-same-origin", "allow-downloads"], referrerPolicy: "no-referrer" });
  frame.url = url;
  const widget = new MainAreaWidget({ content: frame });
  widget.id = `jaxlsp-graph-${Date.now()}`;
  widget.title.label = `Graph: ${title}`;
  widget.title.closable = true;
  widget.addClass("jaxlsp-graph");
  app.shell.add(widget, "main", { mode: "split-right" });
}

function proposalBody(result: NeedsInput): Widget {
  const body = document.createElement("div");
  const text = document.createElement("p");
  const missing = result.needsInput.map((item) => item.message ?? item.path).join("; ");
  text.textContent = `The target needs inputs: ${missing}. Complete this profile and add it to jaxlsp.toml:`;
  const pre = document.createElement("pre");
  pre.textContent = result.proposal;
  body.append(text, pre);
  return new Widget({ node: body });
}

async function trace(app: JupyterFrontEnd, tracker: INotebookTracker, manager: ILSPDocumentConnectionManager): Promise<void> {
  const panel = tracker.currentWidget;
  if (panel === null) return;
  const notebook = panel.content;
  const cell = notebook.activeCellIndex;
  const line = notebook.activeCell?.editor?.getCursorPosition().line ?? 0;
  // The worker reads the notebook from disk, like an import: save what the user sees first.
  if (panel.context.model.dirty) await panel.context.save();
  const { rpc, uri } = await connectionOf(manager, panel);
  const found = await rpc.sendRequest<{ entrypoints: Entrypoint[] }>("jaxlsp/discover", { textDocument: { uri } });
  const target = targetAt(found.entrypoints, cell, line);
  if (target === undefined) {
    Notification.warning("jaxlsp: no JAX function or Flax / Equinox module is defined in this cell.", { autoClose: 5000 });
    return;
  }
  const id = Notification.emit(`jaxlsp: tracing ${target.name}…`, "in-progress", { autoClose: false });
  try {
    const result = await rpc.sendRequest<TraceResult | NeedsInput>("jaxlsp/trace", { textDocument: { uri }, name: target.name, cell: target.cell });
    if (!isTrace(result)) {
      Notification.dismiss(id);
      await showDialog({ title: `jaxlsp: ${target.name} needs inputs`, body: proposalBody(result), buttons: [Dialog.okButton()] });
      return;
    }
    Notification.update({ id, message: `jaxlsp: traced ${describe(target.name, result)}`, type: "success", autoClose: 5000 });
    const opened = await rpc.sendRequest<{ url: string }>("jaxlsp/openGraph", { traceId: result.traceId });
    openViewer(app, opened.url, target.name);
  } catch (error) {
    const message = (error as { message?: string } | null)?.message ?? String(error);
    Notification.update({ id, message: `jaxlsp: ${target.name} was not traced: ${message}`, type: "error", autoClose: false });
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: "jaxlsp-jupyterlab:plugin",
  description: "Trace graph for the JAX function or module under the cursor, over jupyterlab-lsp's connection to jaxlsp.",
  autoStart: true,
  requires: [INotebookTracker, ILSPDocumentConnectionManager],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, manager: ILSPDocumentConnectionManager, palette: ICommandPalette | null) => {
    app.commands.addCommand(COMMAND, {
      label: "Trace graph",
      caption: "jaxlsp: trace the JAX function or module under the cursor into a graph",
      isEnabled: () => tracker.currentWidget !== null,
      execute: async () => {
        try {
          await trace(app, tracker, manager);
        } catch (error) {
          Notification.error(`jaxlsp: ${(error as { message?: string } | null)?.message ?? String(error)}`, { autoClose: false });
        }
      },
    });
    palette?.addItem({ command: COMMAND, category: "jaxlsp" });
  },
};

export default plugin;
