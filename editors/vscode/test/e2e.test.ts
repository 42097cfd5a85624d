/**
 * End to end, as in VS Code but without it: the real server started the extension's way, the
 * extension's trace flow, graph panel and cursor tracker, and the panel's HTML (its CSP included)
 * with the real viewer bundle in headless Chromium, `acquireVsCodeApi` wired to the panel:
 * ready → graph from jaxlsp/export → nodes drawn → a click → reveal → jaxlsp/revealSource → the
 * editor at the node's line; the cursor → highlight; the theme; needs-input answered and saved.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { Gate, routeShowDocument } from "../src/gate";
import { GraphPanel } from "../src/panel";
import { CursorTracker } from "../src/cursor";
import { TraceStatus } from "../src/status";
import { type TraceOutcome, Tracer } from "../src/tracer";
import { ColorThemeKind, Uri, fake } from "./fake/vscode";
import { until } from "./helpers";
import { copyWorkspace, extensionRoot, need, openDocument, startServer, venvPython } from "./realServer";

const chromiumPath = process.env.JAXLSP_CHROMIUM ?? "/usr/bin/chromium";
const viewerRoot = path.join(extensionRoot, "dist", "viewer");
const PAGE = "https://jaxlsp-webview.test/index.html";

test("trace → graph panel in Chromium → click a node → the editor at its line; cursor → highlight; theme", { timeout: 180_000 }, async (t) => {
  if (!need(t, `the interpreter ${venvPython()}`, fs.existsSync(venvPython()))) return;
  if (!need(t, `Chromium at ${chromiumPath}`, fs.existsSync(chromiumPath))) return;
  if (!need(t, `the viewer bundle in ${viewerRoot} (build jaxlsp/viewer, then npm run build)`, fs.existsSync(path.join(viewerRoot, "viewer.js")))) return;
  fake.reset();
  const workspace = copyWorkspace();
  const server = await startServer(workspace, venvPython());
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  t.after(async () => {
    await browser.close();
    await server.stop();
  });

  const revealGate = new Gate();
  server.onShowDocument = (params) => routeShowDocument(params, revealGate, new Gate()) === "handled";
  const status = new TraceStatus();
  const panel = new GraphPanel(Uri.file(viewerRoot) as never, () => server.client, revealGate);
  const traced: TraceOutcome[] = [];
  const tracer = new Tracer(() => server.client, status, (outcome) => {
    traced.push(outcome);
    panel.show({ kind: "trace", traceId: outcome.result.traceId });
  });
  const file = path.join(workspace, "model.py");
  const uri = await openDocument(server, file);

  const result = await tracer.trace({ uri, name: "mlp" });
  assert.ok(result, `the trace failed: ${fake.messages.map((m) => m.message).join("; ")}\n${server.stderr.join("")}`);
  assert.equal(status.state.kind, "ok");
  assert.equal(fake.panels.length, 1);
  const webview = fake.panels[0].webview;

  // The page as VS Code would serve it: the panel's HTML on its own origin, assets on cspSource.
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error" || /Content Security Policy/i.test(m.text())) problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(e.message));
  await page.route("**/*", async (route) => {
    const url = new URL(route.request().url());
    if (url.href === PAGE) return route.fulfill({ contentType: "text/html", body: webview.html });
    if (url.origin === webview.cspSource) {
      const asset = decodeURIComponent(url.pathname);
      if (!asset.startsWith(viewerRoot + path.sep)) return route.fulfill({ status: 404, body: "outside localResourceRoots" });
      return route.fulfill({ contentType: asset.endsWith(".css") ? "text/css" : "text/javascript", body: fs.readFileSync(asset) });
    }
    return route.abort();
  });
  await page.exposeFunction("__jaxlspToHost", (message: unknown) => webview.fromView(message));
  await page.addInitScript(() => {
    let acquired = false;
    (window as unknown as { acquireVsCodeApi: () => unknown }).acquireVsCodeApi = () => {
      if (acquired) throw new Error("acquireVsCodeApi can only be called once");
      acquired = true;
      return {
        postMessage: (m: unknown) => (window as unknown as { __jaxlspToHost: (m: unknown) => void }).__jaxlspToHost(m),
        getState: () => undefined,
        setState: () => undefined,
      };
    };
  });
  webview.deliver = (message) => page.evaluate((m) => window.postMessage(m, "*"), message);
  await page.goto(PAGE);

  // ready → theme + graph → the viewer lays the graph out (ELK in its Blob worker: the CSP has no
  // 'unsafe-eval', so the main-thread fallback could not run) and draws the nodes.
  await page.waitForFunction(() => document.querySelector("svg[data-engine='elk']") !== null, undefined, { timeout: 60_000 });
  const exports = fake.panels[0].webview.posted.filter((m) => (m as { type: string }).type === "graph");
  assert.equal(exports.length, 1);
  const graph = (exports[0] as { graph: { nodes: { id: string; primitive: string; source: { path: string; line: number } | null }[] } }).graph;
  const drawn = await page.$$eval(".jx-item.jx-node", (nodes) => nodes.map((n) => (n as SVGGElement).dataset.id ?? ""));
  assert.ok(drawn.length > 0, "no node drawn");

  // Click the node of the matmul on `logits = h @ w2` (line 8): reveal → the editor at that line.
  const logitsLine = 8;
  const node = graph.nodes.find((n) => n.source?.line === logitsLine && drawn.includes(n.id));
  assert.ok(node, `no drawn node on line ${logitsLine}: ${JSON.stringify(graph.nodes.map((n) => [n.id, n.primitive, n.source?.line]))}`);
  await page.click(`.jx-item.jx-node[data-id="${node.id}"]`);
  await until(() => fake.shownDocuments.length > 0, 20_000);
  assert.equal(fake.shownDocuments.length, 1, "the source opened once");
  const shown = fake.shownDocuments[0];
  assert.equal(Uri.parse(shown.uri).fsPath, file);
  assert.equal(shown.selection?.start.line, logitsLine - 1);
  // The server's own showDocument came while the reveal was in flight and was held back.
  assert.equal(server.showDocuments.length, 1);

  // Cursor on `h = jax.nn.relu(x @ w1)` (line 7) → jaxlsp/cursorMoved + jaxlsp/nodesAt → highlight.
  const cursor = new CursorTracker(() => server.client, panel, 0);
  cursor.moved({ uri, line: 6, character: 4 });
  await cursor.flush();
  await page.waitForFunction(() => Number(document.querySelector("svg[data-highlighted]")?.getAttribute("data-highlighted")) > 0, undefined, { timeout: 10_000 });
  const highlight = webview.posted.find((m) => (m as { type: string }).type === "highlight") as { nodeIds: string[] };
  const onLine7 = new Set(graph.nodes.filter((n) => n.source?.line === 7).map((n) => n.id));
  assert.ok(highlight.nodeIds.length > 0 && highlight.nodeIds.every((id) => onLine7.has(id)), JSON.stringify(highlight));

  // The theme follows VS Code.
  assert.equal(await page.getAttribute("[data-theme]", "data-theme"), "dark");
  fake.themeEmitter.fire({ kind: ColorThemeKind.Light });
  await page.waitForFunction(() => document.querySelector("[data-theme]")?.getAttribute("data-theme") === "light", undefined, { timeout: 5000 });

  assert.deepEqual(problems, []);
});

test("needs input against the real server: the answers trace it, and the saved profile traces it next time", { timeout: 180_000 }, async (t) => {
  if (!need(t, `the interpreter ${venvPython()}`, fs.existsSync(venvPython()))) return;
  fake.reset();
  const workspace = copyWorkspace();
  const server = await startServer(workspace, venvPython());
  t.after(() => server.stop());
  const status = new TraceStatus();
  const tracer = new Tracer(() => server.client, status, () => undefined);
  const uri = await openDocument(server, path.join(workspace, "model.py"));
  const before = fs.readFileSync(path.join(workspace, "jaxlsp.toml"), "utf8");
  // The document selector syncs jaxlsp.toml too (the server then never overwrites unsaved edits):
  // the client's requests on it must answer, not fail.
  const recipeUri = await openDocument(server, path.join(workspace, "jaxlsp.toml"));
  assert.deepEqual(await server.connection.sendRequest("textDocument/codeLens", { textDocument: { uri: recipeUri } }), []);

  fake.inputAnswers = ["[3, 5]"];
  fake.messageAnswers = ["Save"];
  const result = await tracer.trace({ uri, name: "scale" });
  assert.ok(result, `no trace: ${fake.messages.map((m) => m.message).join("; ")}`);
  assert.equal(fake.inputBoxes.length, 1);
  assert.match(fake.inputBoxes[0].prompt ?? "", /shape/);
  assert.deepEqual(result.summary.outputs, ["f32[3,5]"]);
  const after = fs.readFileSync(path.join(workspace, "jaxlsp.toml"), "utf8");
  assert.notEqual(after, before);
  assert.match(after, /model\.py::scale/);
  await until(() => fake.messages.some((m) => /saved the profile/.test(m.message)));

  // Saved: the next trace asks nothing.
  fake.inputBoxes.length = 0;
  const again = await tracer.trace({ uri, name: "scale" });
  assert.deepEqual(again?.summary.outputs, ["f32[3,5]"]);
  assert.equal(fake.inputBoxes.length, 0);
});
