/**
 * The graph panel: a webview running the viewer bundle in "webview" mode. It loads the whole
 * graph with `jaxlsp/export`, routes the viewer's messages (reveal, save) and pushes highlights,
 * staleness and the theme (the viewer contract in docs/lsp-extensions.md and editors/web).
 */

import * as crypto from "node:crypto";
import * as vscode from "vscode";
import type { Gate } from "./gate";
import type { HostMessage, Location, LspClient, ViewMessage } from "./wire";
import { errorMessage } from "./wire";

export interface HtmlParts {
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  nonce: string;
  traceId: string | null;
}

function escapeAttr(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** JSON that cannot end a `<script>` element. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/**
 * The page: scripts only with the nonce, the bundle's layout worker from a Blob URL, nothing from
 * the network. Styles allow inline attributes, which the viewer's SVG uses.
 */
export function webviewHtml(parts: HtmlParts): string {
  const csp = [
    "default-src 'none'",
    `img-src ${parts.cspSource} data: blob:`,
    `style-src ${parts.cspSource} 'unsafe-inline'`,
    `font-src ${parts.cspSource}`,
    `script-src 'nonce-${parts.nonce}'`,
    "worker-src blob:",
    "connect-src 'none'",
  ].join("; ");
  const config = scriptJson({ mode: "webview", traceId: parts.traceId });
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttr(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>jaxlsp graph</title>
<link rel="stylesheet" href="${escapeAttr(parts.styleUri)}">
</head>
<body>
<div id="app"></div>
<script nonce="${parts.nonce}">window.JAXLSP_VIEWER = ${config};</script>
<script nonce="${parts.nonce}" src="${escapeAttr(parts.scriptUri)}"></script>
</body>
</html>
`;
}

export function newNonce(): string {
  return crypto.randomBytes(18).toString("base64url");
}

export function themeKind(kind: vscode.ColorThemeKind): "light" | "dark" {
  return kind === vscode.ColorThemeKind.Light || kind === vscode.ColorThemeKind.HighContrastLight ? "light" : "dark";
}

const SAVE_FILTERS: Record<string, Record<string, string[]>> = {
  "image/svg+xml": { "SVG image": ["svg"] },
  "image/png": { "PNG image": ["png"] },
  "application/json": { JSON: ["json"] },
};

export function isViewMessage(value: unknown): value is ViewMessage {
  const message = value as { type?: unknown; id?: unknown; traceId?: unknown; nodeId?: unknown; filename?: unknown; base64?: unknown } | null;
  if (typeof message !== "object" || message === null) return false;
  switch (message.type) {
    case "ready":
      return true;
    case "reveal":
      return typeof message.traceId === "string" && typeof message.nodeId === "string" && (message.id === undefined || typeof message.id === "number");
    case "save":
      return typeof message.filename === "string" && typeof message.base64 === "string";
    default:
      return false;
  }
}

/** Where a graph comes from: the server (by trace id) or a saved file. */
export type GraphSource = { kind: "trace"; traceId: string } | { kind: "file"; uri: vscode.Uri };

/** The one graph panel; it follows the newest trace it is asked to show. */
export class GraphPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private source: GraphSource | undefined;
  private stale = false;
  private sources: string[] = [];
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly viewerRoot: vscode.Uri,
    private readonly client: () => LspClient | undefined,
    private readonly revealGate: Gate,
    private readonly onSources: (traceId: string, sources: string[]) => void = () => {},
  ) {
    this.disposables.push(vscode.window.onDidChangeActiveColorTheme((theme) => this.post({ type: "theme", kind: themeKind(theme.kind) })));
  }

  get traceId(): string | undefined {
    return this.source?.kind === "trace" ? this.source.traceId : undefined;
  }

  get visible(): boolean {
    return this.panel?.visible ?? false;
  }

  /** The workspace-relative keys of the sources of the graph shown (graph `sources`). */
  get sourceKeys(): readonly string[] {
    return this.sources;
  }

  /** Opens the panel on a graph, or points the open panel at it. */
  show(source: GraphSource, preserveFocus = true): void {
    this.source = source;
    this.stale = false;
    if (this.panel === undefined) {
      this.panel = vscode.window.createWebviewPanel(
        "jaxlsp.graph",
        "jaxlsp graph",
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus },
        { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [this.viewerRoot] },
      );
      this.panel.onDidDispose(() => {
        this.panel = undefined;
      });
      this.panel.webview.onDidReceiveMessage((message: unknown) => {
        void this.receive(message);
      });
      this.panel.webview.html = this.html();
    } else {
      this.panel.reveal(undefined, preserveFocus);
      void this.sendGraph();
    }
  }

  html(): string {
    if (this.panel === undefined) throw new Error("no panel");
    const webview = this.panel.webview;
    return webviewHtml({
      cspSource: webview.cspSource,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(this.viewerRoot, "viewer.js")).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(this.viewerRoot, "viewer.css")).toString(),
      nonce: newNonce(),
      traceId: this.traceId ?? null,
    });
  }

  post(message: HostMessage): void {
    void this.panel?.webview.postMessage(message);
  }

  /** Routes one message from the viewer; malformed ones are ignored (the page is not trusted input). */
  async receive(message: unknown): Promise<void> {
    if (!isViewMessage(message)) return;
    try {
      switch (message.type) {
        case "ready":
          this.post({ type: "theme", kind: themeKind(vscode.window.activeColorTheme.kind) });
          await this.sendGraph();
          return;
        case "reveal":
          await this.answerReveal(message.id, message.traceId, message.nodeId, message.frame);
          return;
        case "save":
          await this.save(message.filename, message.mime, message.base64);
          return;
      }
    } catch (error) {
      void vscode.window.showErrorMessage(`jaxlsp: ${errorMessage(error)}`);
    }
  }

  /** Loads the whole canonical graph (never pages) and hands it to the viewer. */
  async sendGraph(): Promise<void> {
    const source = this.source;
    if (source === undefined) return;
    let uri: vscode.Uri;
    if (source.kind === "trace") {
      const client = this.client();
      if (client === undefined) throw new Error("the server is not running");
      const exported = await client.sendRequest<{ uri: string }>("jaxlsp/export", { traceId: source.traceId, format: "json" });
      uri = vscode.Uri.parse(exported.uri);
    } else {
      uri = source.uri;
    }
    const graph = JSON.parse(new TextDecoder().decode(await vscode.workspace.fs.readFile(uri))) as { sources?: Record<string, string> };
    if (this.source !== source) return; // a newer graph was asked for meanwhile
    this.sources = Object.keys(graph.sources ?? {});
    if (source.kind === "trace") {
      this.onSources(source.traceId, this.sources);
      this.post({ type: "graph", traceId: source.traceId, graph, stale: this.stale, origin: "server" });
    } else {
      this.post({ type: "graph", traceId: "", graph, origin: "file" });
    }
  }

  /** A reveal the view asked for, answered (done or failed, with the reason) so its footer can say so. */
  private async answerReveal(id: number | undefined, traceId: string, nodeId: string, frame?: number): Promise<void> {
    try {
      const location = await this.reveal(traceId, nodeId, frame);
      if (id !== undefined && location) this.post({ type: "revealed", id, ok: true, location });
    } catch (error) {
      if (id === undefined) throw error;
      this.post({ type: "revealed", id, ok: false, error: errorMessage(error) });
    }
  }

  /** `jaxlsp/revealSource`, then the editor at the range; the server's own showDocument is held back meanwhile. */
  async reveal(traceId: string, nodeId: string, frame?: number): Promise<Location | undefined> {
    const client = this.client();
    if (client === undefined) throw new Error("go to source needs the server, which is not running");
    const params: Record<string, unknown> = { traceId, nodeId };
    if (typeof frame === "number") params.frame = frame;
    const result = await this.revealGate.during(() => client.sendRequest<{ location: Location }>("jaxlsp/revealSource", params));
    const location = result.location;
    const start = new vscode.Position(location.range.start.line, location.range.start.character);
    const end = new vscode.Position(location.range.end.line, location.range.end.character);
    await vscode.window.showTextDocument(vscode.Uri.parse(location.uri), {
      selection: new vscode.Range(start, end),
      viewColumn: this.editorColumn(),
      preserveFocus: false,
    });
    return location;
  }

  /** The column of a text editor, so the source never covers the panel. */
  private editorColumn(): vscode.ViewColumn {
    const panelColumn = this.panel?.viewColumn;
    const editor = vscode.window.visibleTextEditors.find((e) => e.viewColumn !== undefined && e.viewColumn !== panelColumn);
    if (editor?.viewColumn !== undefined) return editor.viewColumn;
    return panelColumn === vscode.ViewColumn.One ? vscode.ViewColumn.Two : vscode.ViewColumn.One;
  }

  async save(filename: string, mime: string, base64: string): Promise<vscode.Uri | undefined> {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const safeName = filename.replace(/[\\/]/g, "_") || "graph";
    const target = await vscode.window.showSaveDialog({
      defaultUri: folder ? vscode.Uri.joinPath(folder, safeName) : undefined,
      filters: SAVE_FILTERS[mime] ?? { "All files": ["*"] },
      title: "Save graph image",
    });
    if (target === undefined) return undefined;
    await vscode.workspace.fs.writeFile(target, Buffer.from(base64, "base64"));
    return target;
  }

  /** Pushed by the cursor tracker: the nodes at the editor's cursor. */
  highlight(traceId: string, nodeIds: string[]): void {
    if (traceId === this.traceId) this.post({ type: "highlight", traceId, nodeIds });
  }

  setStale(traceId: string, stale: boolean): void {
    if (traceId !== this.traceId || stale === this.stale) return;
    this.stale = stale;
    this.post({ type: "stale", traceId, stale });
  }

  dispose(): void {
    this.panel?.dispose();
    for (const d of this.disposables) d.dispose();
  }
}
