/**
 * `activate()` with the real vscode-languageclient over the fake `vscode` module, for what real
 * VS Code (tests/clients/vscode/, code-server) cannot show quickly: a server command that cannot
 * start leaves activation complete, with a message that names the command and the setting.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { activate, deactivate } from "../src/extension";
import { Uri, commands, fake } from "./fake/vscode";
import { until } from "./helpers";

test("a server that cannot start: activation still completes, and the message names the command and the setting", { timeout: 60_000 }, async (t) => {
  fake.reset();
  fake.config = { python: "/nonexistent/bin/python" };
  // A build without the bundled server (bundled/libs is made only when packaging): the installed-server launch.
  const bare = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-ext-"));
  t.after(() => fs.rmSync(bare, { recursive: true, force: true }));
  const context = { subscriptions: [] as { dispose(): unknown }[], extensionUri: Uri.file(bare) };
  t.after(async () => {
    await deactivate().catch(() => undefined);
    for (const d of context.subscriptions) d.dispose();
  });
  const api = await activate(context as never);
  await api.ready();
  await until(() => fake.messages.some((m) => m.message.startsWith("jaxlsp: could not start")));
  const shown = fake.messages.find((m) => m.message.startsWith("jaxlsp: could not start"));
  assert.match(shown?.message ?? "", /"\/nonexistent\/bin\/python -I -m jaxlsp serve" \(from jaxlsp\.python\)/);
  assert.deepEqual(shown?.items, ["Open settings"]);
  // The commands are there, and say the server is not running instead of throwing.
  assert.equal(await commands.executeCommand("jaxlsp.trace", { uri: "file:///w/m.py", name: "f" }), undefined);
  assert.equal(fake.messages.at(-1)?.message, "jaxlsp: the server is not running.");
});

test("the bundled server with no Python 3.11 or newer anywhere: one message naming what is missing and how to get it", { timeout: 60_000 }, async (t) => {
  fake.reset();
  fake.config = {};
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-ext-"));
  fs.mkdirSync(path.join(root, "bundled", "tool"), { recursive: true });
  fs.writeFileSync(path.join(root, "bundled", "tool", "server.py"), "");
  fs.mkdirSync(path.join(root, "bundled", "libs", "jaxlsp"), { recursive: true });
  fs.writeFileSync(path.join(root, "bundled", "libs", "jaxlsp", "__init__.py"), "");
  // PATH holds only an old python3 (a script that says 3.10): no interpreter can run the server.
  const bin = path.join(root, "bin");
  fs.mkdirSync(bin);
  fs.writeFileSync(path.join(bin, "python3"), "#!/bin/sh\necho 3.10.12\n", { mode: 0o755 });
  const savedPath = process.env.PATH;
  process.env.PATH = bin;
  const context = { subscriptions: [] as { dispose(): unknown }[], extensionUri: Uri.file(root) };
  t.after(async () => {
    process.env.PATH = savedPath;
    await deactivate().catch(() => undefined);
    for (const d of context.subscriptions) d.dispose();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const api = await activate(context as never);
  await api.ready();
  const shown = fake.messages.filter((m) => m.kind === "error");
  assert.equal(shown.length, 1, JSON.stringify(fake.messages));
  assert.match(shown[0].message, /no Python 3\.11 or newer to run its server \(python3 on PATH: .*python3 is Python 3\.10\.12\)/);
  assert.match(shown[0].message, /Install one \(.+\) or set jaxlsp\.serverPython/);
  assert.deepEqual(shown[0].items, ["Open settings"]);
  assert.equal(await commands.executeCommand("jaxlsp.trace", { uri: "file:///w/m.py", name: "f" }), undefined);
});
