/**
 * `activate()` with the real vscode-languageclient over the fake `vscode` module, for what real
 * VS Code (tests/clients/vscode/, code-server) cannot show quickly: a server command that cannot
 * start leaves activation complete, with a message that names the command and the setting.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { activate, deactivate } from "../src/extension";
import { Uri, commands, fake } from "./fake/vscode";
import { until } from "./helpers";
import { extensionRoot } from "./paths";

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
  assert.match(shown?.message ?? "", /"\/nonexistent\/bin\/python -I -m jaxlsp serve" \(from jaxlsp\.python\)/);
  assert.deepEqual(shown?.items, ["Open settings"]);
  // The commands are there, and say the server is not running instead of throwing.
  assert.equal(await commands.executeCommand("jaxlsp.trace", { uri: "file:///w/m.py", name: "f" }), undefined);
  assert.equal(fake.messages.at(-1)?.message, "jaxlsp: the server is not running.");
});
