/**
 * The whole extension as VS Code runs it, minus VS Code: `activate()` with the real
 * vscode-languageclient over the fake `vscode` module, starting the real server with the
 * interpreter the (fake) Python extension selected. Restricted mode refuses to trace; granting
 * trust restarts the server trusted, and the lens command then traces with no prompt; the panel's
 * reveal opens the source once although the server also sends showDocument.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { activate, deactivate } from "../src/extension";
import { Uri, commands, fake, window, workspace } from "./fake/vscode";
import { until } from "./helpers";
import { copyWorkspace, extensionRoot, need, venvPython } from "./realServer";

test("activate → restricted → trust granted → lens trace → panel → reveal once → deactivate", { timeout: 180_000 }, async (t) => {
  const python = venvPython();
  if (!need(t, `the interpreter ${python}`, fs.existsSync(python))) return;
  process.env.XDG_CONFIG_HOME = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-vscode-config-"));
  process.env.XDG_CACHE_HOME = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-vscode-cache-"));
  fake.reset();
  const ws = copyWorkspace();
  workspace.workspaceFolders = [{ uri: Uri.file(ws), name: "ws", index: 0 }];
  workspace.isTrusted = false;
  fake.pythonExtension = {
    isActive: true,
    exports: {
      environments: {
        getActiveEnvironmentPath: () => ({ path: python }),
        resolveEnvironment: async () => ({ executable: { uri: { fsPath: python } } }),
      },
    },
  };
  const context = { subscriptions: [] as { dispose(): unknown }[], extensionUri: Uri.file(extensionRoot) };
  t.after(async () => {
    await deactivate();
    for (const d of context.subscriptions) d.dispose();
  });
  const api = await activate(context as never);
  const log = () => (window as unknown as { outputChannels: { lines: string[] }[] }).outputChannels[0].lines.join("\n");
  assert.match(log(), /starting .*python -m jaxlsp serve \(from Python extension; trusted: false\)/);

  // Our commands, and the server's (registered by the client, so no id may collide).
  for (const id of ["jaxlsp.trace", "jaxlsp.retrace", "jaxlsp.showGraph", "jaxlsp.exportGraph", "jaxlsp.traceGraph", "jaxlsp.checkEnvironment", "jaxlsp.openGraph"]) {
    assert.ok(fake.commands.has(id), id);
  }
  const uri = pathToFileURL(path.join(ws, "model.py")).toString();

  // Restricted mode: the lens command sends nothing and points at VS Code's trust.
  assert.equal(await commands.executeCommand("jaxlsp.traceGraph", { uri, name: "mlp" }), undefined);
  assert.match(fake.messages.at(-1)?.message ?? "", /restricted mode/);
  assert.equal(fake.panels.length, 0);

  // Trust granted: the server restarts with trusted: true; the lens then traces without a prompt.
  workspace.isTrusted = true;
  const before = fake.messages.length;
  fake.fire("onDidGrantWorkspaceTrust");
  await api.ready();
  assert.match(log(), /trusted: true\)/);
  const result = (await commands.executeCommand("jaxlsp.traceGraph", { uri, name: "mlp" })) as { traceId?: string } | undefined;
  assert.ok(result?.traceId, `no trace: ${JSON.stringify(fake.messages.slice(before))}`);
  assert.deepEqual(
    fake.messages.slice(before).filter((m) => /Trust/.test(m.message)),
    [],
    "no trust prompt after VS Code's trust was granted",
  );
  assert.match(fake.statusItems[0].text, /mlp · \d+ ops/);

  // The panel opened on the trace; ready → the graph; a reveal opens the source once.
  assert.equal(fake.panels.length, 1);
  const webview = fake.panels[0].webview;
  webview.fromView({ type: "ready" });
  await until(() => webview.posted.some((m) => (m as { type: string }).type === "graph"), 20_000);
  const graph = (webview.posted.find((m) => (m as { type: string }).type === "graph") as { graph: { nodes: { id: string; source: { line: number } | null }[] } }).graph;
  const node = graph.nodes.find((n) => n.source?.line === 8);
  assert.ok(node);
  webview.fromView({ type: "reveal", traceId: result.traceId, nodeId: node.id });
  // The panel's own open (beside the panel: it names a column) comes after the server's
  // showDocument, which the server awaits before answering: any duplicate is in by then.
  await until(() => fake.shownDocuments.some((d) => d.viewColumn !== undefined), 20_000);
  assert.equal(fake.shownDocuments.length, 1);
  assert.equal(fake.shownDocuments[0].selection?.start.line, 7);
});

test("a server that cannot start: activation still completes, and the message names the command and the setting", { timeout: 60_000 }, async (t) => {
  fake.reset();
  fake.config = { python: "/nonexistent/bin/python" };
  const context = { subscriptions: [] as { dispose(): unknown }[], extensionUri: Uri.file(extensionRoot) };
  t.after(async () => {
    await deactivate().catch(() => undefined);
    for (const d of context.subscriptions) d.dispose();
  });
  const api = await activate(context as never);
  await api.ready();
  await until(() => fake.messages.some((m) => m.message.startsWith("jaxlsp: could not start")));
  const shown = fake.messages.find((m) => m.message.startsWith("jaxlsp: could not start"));
  assert.match(shown?.message ?? "", /"\/nonexistent\/bin\/python -m jaxlsp serve" \(from jaxlsp\.python\)/);
  assert.deepEqual(shown?.items, ["Open settings"]);
  // The commands are there, and say the server is not running instead of throwing.
  assert.equal(await commands.executeCommand("jaxlsp.trace", { uri: "file:///w/m.py", name: "f" }), undefined);
  assert.equal(fake.messages.at(-1)?.message, "jaxlsp: the server is not running.");
});
