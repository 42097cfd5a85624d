/** The graph panel: its HTML and CSP, and the routing of the viewer's messages to the LSP client. */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeEach, test } from "node:test";
import { Gate } from "../src/gate";
import { GraphPanel, scriptJson, webviewHtml } from "../src/panel";
import { ColorThemeKind, Position, Uri, ViewColumn, fake } from "./fake/vscode";
import { ScriptedClient, until } from "./helpers";

beforeEach(() => fake.reset());

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-panel-"));
const graphFile = path.join(tmp, "graph.json");
fs.writeFileSync(graphFile, JSON.stringify({ format: "jaxlsp.graph", version: 1, sources: { "models/mlp.py": "ab" }, nodes: [] }));
const viewerRoot = Uri.file(path.join(tmp, "viewer"));

const location = { uri: "file:///w/models/mlp.py", range: { start: { line: 9, character: 8 }, end: { line: 9, character: 30 } } };

function open(handlers: ConstructorParameters<typeof ScriptedClient>[0] = {}) {
  const client = new ScriptedClient({ "jaxlsp/export": () => ({ uri: Uri.file(graphFile).toString() }), ...handlers });
  const gate = new Gate();
  const sources: [string, string[]][] = [];
  const panel = new GraphPanel(viewerRoot as never, () => client, gate, (id, keys) => sources.push([id, keys]));
  panel.show({ kind: "trace", traceId: "t1" });
  const webview = fake.panels[0].webview;
  return { client, gate, panel, webview, sources };
}

test("the HTML: nonce-only scripts, a Blob worker, assets from the webview root, the config before the bundle", () => {
  const html = webviewHtml({
    cspSource: "https://x.vscode-cdn.net",
    scriptUri: "https://x.vscode-cdn.net/ext/dist/viewer/viewer.js",
    styleUri: "https://x.vscode-cdn.net/ext/dist/viewer/viewer.css",
    nonce: "N0nce",
    traceId: "t</script><script>alert(1)</script>",
  });
  const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)?.[1] ?? "";
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'nonce-N0nce'(;|$)/);
  assert.match(csp, /worker-src blob:/);
  assert.doesNotMatch(csp, /unsafe-eval|\*|http:/);
  const scripts = [...html.matchAll(/<script([^>]*)>/g)].map((m) => m[1]);
  assert.equal(scripts.length, 2);
  for (const attrs of scripts) assert.match(attrs, /nonce="N0nce"/);
  assert.ok(html.indexOf("window.JAXLSP_VIEWER") < html.indexOf("viewer.js"));
  assert.ok(!html.includes("</script><script>alert"), "a trace id cannot end the script element");
  assert.match(html, /"mode":"webview","traceId":"t\\u003c\/script\\u003e/);
  assert.equal(JSON.parse(scriptJson("a\u2028b<&>")), "a\u2028b<&>");
});

test("the panel keeps its context, loads only the viewer folder and gets a fresh nonce each time", () => {
  const { webview } = open();
  const panel = fake.panels[0];
  assert.equal(panel.options.enableScripts, true);
  assert.equal(panel.options.retainContextWhenHidden, true);
  assert.deepEqual(panel.options.localResourceRoots?.map(String), [viewerRoot.toString()]);
  assert.match(webview.html, /src="https:\/\/fake\.vscode-cdn\.net\/.*\/viewer\/viewer\.js"/);
  const nonce = /nonce-([^']+)'/.exec(webview.html)?.[1];
  assert.ok(nonce && nonce.length >= 16);
});

test("ready → the theme and the whole graph from jaxlsp/export", async () => {
  const { client, webview, sources, panel } = open();
  fake.panels[0].webview.fromView({ type: "ready" });
  await until(() => webview.posted.length === 2);
  await panel.sendGraph(); // a second load after ready, as a re-trace does
  assert.deepEqual(client.requests[0], { method: "jaxlsp/export", params: { traceId: "t1", format: "json" } });
  assert.deepEqual(webview.posted[0], { type: "theme", kind: "dark" });
  const graph = webview.posted[1] as { type: string; traceId: string; graph: { format: string }; stale: boolean; origin: string };
  assert.equal(graph.type, "graph");
  assert.equal(graph.traceId, "t1");
  assert.equal(graph.graph.format, "jaxlsp.graph");
  assert.equal(graph.stale, false);
  assert.equal(graph.origin, "server");
  assert.deepEqual(sources[0], ["t1", ["models/mlp.py"]]);
  assert.deepEqual(panel.sourceKeys, ["models/mlp.py"]);
});

test("reveal → jaxlsp/revealSource (server showDocument held back) → the editor at the range, beside the panel", async () => {
  let gateDuringRequest = false;
  const { client, gate, panel } = open({
    "jaxlsp/revealSource": () => {
      gateDuringRequest = gate.active;
      return { location };
    },
  });
  await panel.receive({ type: "reveal", traceId: "t1", nodeId: "n12", frame: 1 });
  assert.deepEqual(client.requests.at(-1), { method: "jaxlsp/revealSource", params: { traceId: "t1", nodeId: "n12", frame: 1 } });
  assert.equal(gateDuringRequest, true);
  assert.equal(gate.active, false);
  assert.equal(fake.shownDocuments.length, 1);
  const shown = fake.shownDocuments[0];
  assert.equal(shown.uri, location.uri);
  assert.deepEqual(shown.selection?.start, new Position(9, 8));
  assert.deepEqual(shown.selection?.end, new Position(9, 30));
  assert.equal(shown.viewColumn, ViewColumn.One); // the panel is in column two
});

test("a failed reveal is shown, not thrown", async () => {
  const { panel } = open({
    "jaxlsp/revealSource": () => {
      throw new Error("unknown node n99 in trace t1");
    },
  });
  await panel.receive({ type: "reveal", traceId: "t1", nodeId: "n99" });
  assert.deepEqual(fake.messages.map((m) => m.message), ["jaxlsp: unknown node n99 in trace t1"]);
});

test("a reveal with an id is answered: where the editor went, or why not (the view's footer says it)", async () => {
  const { panel, webview } = open({ "jaxlsp/revealSource": () => ({ location }) });
  await panel.receive({ type: "reveal", id: 7, traceId: "t1", nodeId: "n12" });
  assert.deepEqual(webview.posted.at(-1), { type: "revealed", id: 7, ok: true, location });
  fake.reset();
  const failing = open({
    "jaxlsp/revealSource": () => {
      throw new Error("unknown node n99 in trace t1");
    },
  });
  await failing.panel.receive({ type: "reveal", id: 8, traceId: "t1", nodeId: "n99" });
  assert.deepEqual(failing.webview.posted.at(-1), { type: "revealed", id: 8, ok: false, error: "unknown node n99 in trace t1" });
  assert.deepEqual(fake.messages, [], "answered in the view, not as a pop-up");
});

test("save → the user picks a file and gets the bytes", async () => {
  const { panel } = open();
  const target = Uri.file(path.join(tmp, "out.svg"));
  fake.saveDialogAnswers = [target];
  await panel.receive({ type: "save", filename: "mlp.svg", mime: "image/svg+xml", base64: Buffer.from("<svg/>").toString("base64") });
  assert.equal(fs.readFileSync(target.fsPath, "utf8"), "<svg/>");
});

test("malformed messages are ignored", async () => {
  const { client, panel } = open();
  for (const bad of [null, "ready", { type: "reveal" }, { type: "reveal", traceId: 1, nodeId: "n" }, { type: "exec" }]) await panel.receive(bad);
  assert.equal(client.requests.length, 0);
  assert.equal(fake.messages.length, 0);
});

test("highlights, staleness and theme changes reach the view; other traces' highlights do not", () => {
  const { panel, webview } = open();
  panel.highlight("t1", ["n3", "n2"]);
  panel.highlight("t0", ["n1"]);
  panel.setStale("t1", true);
  panel.setStale("t1", true);
  fake.themeEmitter.fire({ kind: ColorThemeKind.HighContrastLight });
  assert.deepEqual(webview.posted, [
    { type: "highlight", traceId: "t1", nodeIds: ["n3", "n2"] },
    { type: "stale", traceId: "t1", stale: true },
    { type: "theme", kind: "light" },
  ]);
});

test("a newer trace reuses the panel and sends its graph; a saved file is sent with origin file", async () => {
  const { panel, client, webview } = open();
  panel.show({ kind: "trace", traceId: "t2" });
  await until(() => webview.posted.length === 1);
  assert.equal(fake.panels.length, 1);
  assert.equal(fake.panels[0].revealed, 1);
  assert.deepEqual(client.requests.at(-1)?.params, { traceId: "t2", format: "json" });
  panel.show({ kind: "file", uri: Uri.file(graphFile) as never });
  await until(() => webview.posted.length === 2);
  const last = webview.posted.at(-1) as { origin: string };
  assert.equal(last.origin, "file");
});
