/** Open in browser (remote-safe), export, the environment check, and the stale-source match. */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { beforeEach, test } from "node:test";
import { checkEnvironment, exportGraph, learnShapes, openInBrowser } from "../src/commands";
import { Gate } from "../src/gate";
import { isSource } from "../src/stale";
import { Uri, fake, workspace } from "./fake/vscode";
import { ScriptedClient } from "./helpers";

beforeEach(() => fake.reset());

test("the viewer URL goes through asExternalUri (port forwarding in remote windows); the server's own showDocument is gated", async () => {
  const gate = new Gate();
  let gated = false;
  const client = new ScriptedClient({
    "jaxlsp/openGraph": () => {
      gated = gate.active;
      return { url: "http://127.0.0.1:41234/?token=abc&trace=t1" };
    },
  });
  fake.externalMap = (uri) => Uri.parse(uri.toString().replace("http://127.0.0.1:41234", "https://41234-remote.example"));
  const opened = await openInBrowser(client, "t1", gate);
  assert.equal(gated, true);
  assert.equal(opened.toString(), "https://41234-remote.example/?token=abc&trace=t1");
  assert.deepEqual(fake.externalOpened, ["https://41234-remote.example/?token=abc&trace=t1"]);
  assert.deepEqual(client.requests[0].params, { traceId: "t1" });
});

test("a file URL (the offline export) is opened as it is", async () => {
  const client = new ScriptedClient({ "jaxlsp/openGraph": () => ({ url: "file:///home/u/.cache/jaxlsp/exports/t1.html" }) });
  fake.externalMap = () => {
    throw new Error("asExternalUri is for http(s)");
  };
  await openInBrowser(client, "t1", new Gate());
  assert.deepEqual(fake.externalOpened, ["file:///home/u/.cache/jaxlsp/exports/t1.html"]);
});

test("export: pick a format, jaxlsp/export, copy where the user says", async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-export-"));
  const exported = path.join(tmp, "cache.dot");
  fs.writeFileSync(exported, "digraph {}");
  const client = new ScriptedClient({ "jaxlsp/export": () => ({ uri: Uri.file(exported).toString() }) });
  fake.quickPickAnswers = [(items) => (items as { label: string }[]).find((i) => i.label === "dot")];
  const target = Uri.file(path.join(tmp, "mlp.dot"));
  fake.saveDialogAnswers = [target];
  fake.messageAnswers = [undefined];
  assert.equal((await exportGraph(client, "t1", "mlp"))?.toString(), target.toString());
  assert.deepEqual(client.requests[0].params, { traceId: "t1", format: "dot" });
  assert.equal(fs.readFileSync(target.fsPath, "utf8"), "digraph {}");
  // a cancelled pick sends nothing
  fake.quickPickAnswers = [() => undefined];
  assert.equal(await exportGraph(client, "t1", "mlp"), undefined);
  assert.equal(client.requests.length, 1);
});

test("the environment check shows the server's message; details on request; install through the server's command", async () => {
  const report = { ok: false, message: "flax is not installed", install: "python -m pip install 'flax>=0.10'", python: "/usr/bin/python3" };
  const client = new ScriptedClient({ "jaxlsp/environment": () => report, "workspace/executeCommand": () => ({ ...report, ok: true }) });
  fake.messageAnswers = ["Details"];
  assert.deepEqual(await checkEnvironment(client, "file:///w/m.py"), report);
  assert.deepEqual(client.requests[0].params, { textDocument: { uri: "file:///w/m.py" }, refresh: true });
  assert.deepEqual(fake.messages[0], { kind: "warning", message: "jaxlsp: flax is not installed", items: ["Install…", "Details"] });
  assert.equal(client.requests.length, 1); // details only: nothing installed
  fake.messageAnswers = ["Install…"];
  await checkEnvironment(client, "file:///w/m.py");
  assert.deepEqual(client.requests.at(-1), {
    method: "workspace/executeCommand",
    params: { command: "jaxlsp.checkEnvironment", arguments: [{ uri: "file:///w/m.py" }] },
  });
});

test("an older server without jaxlsp/environment gets a warning; other errors propagate", async () => {
  const old = new ScriptedClient({});
  assert.equal(await checkEnvironment(old, undefined), undefined);
  assert.equal(fake.messages[0].kind, "warning");
  assert.match(fake.messages[0].message, /jaxlsp\/environment/);
  const broken = new ScriptedClient({
    "jaxlsp/environment": () => {
      throw Object.assign(new Error("not trusted"), { code: -32803 });
    },
  });
  await assert.rejects(checkEnvironment(broken, undefined), /not trusted/);
});

test("a file is a source of a trace by its graph key or as the traced file", () => {
  assert.equal(isSource("/w/models/mlp.py", ["models/mlp.py"], undefined), true);
  assert.equal(isSource("/w/other/mlp.py", ["models/mlp.py"], undefined), false);
  assert.equal(isSource("/w/xmodels/mlp.py", ["models/mlp.py"], undefined), false);
  assert.equal(isSource("/w/train.py", [], "/w/train.py"), true);
  assert.equal(isSource("/w/lib.py", ["/w/lib.py"], undefined), true);
});

test("Learn shapes runs the server's jaxlsp.learnShapes on the active file's workspace folder, cancellable", async () => {
  const result = { learned: 3, targets: ["tinylm/layers.py::Attention"], examples: [], failures: [], seconds: 1.5 };
  const client = new ScriptedClient({ "workspace/executeCommand": () => result });
  const outer = Uri.file(path.join(os.tmpdir(), "repo"));
  const inner = Uri.file(path.join(os.tmpdir(), "repo", "sub"));
  workspace.workspaceFolders = [
    { uri: outer, name: "repo", index: 0 },
    { uri: inner, name: "sub", index: 1 },
  ];
  const file = Uri.file(path.join(os.tmpdir(), "repo", "sub", "model.py"));
  assert.deepEqual(await learnShapes(client, file as never), result);
  assert.deepEqual(client.requests[0], {
    method: "workspace/executeCommand",
    params: { command: "jaxlsp.learnShapes", arguments: [{ uri: inner.toString() }] },
  });
  // no file open, or one outside every folder: the server's own default (its first workspace folder)
  await learnShapes(client, undefined);
  await learnShapes(client, Uri.file(path.join(os.tmpdir(), "elsewhere.py")) as never);
  assert.deepEqual(client.requests.slice(1).map((r) => r.params.arguments), [[], []]);
});
