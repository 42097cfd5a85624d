/** The manifest agrees with the code: commands, settings, trust, and the showDocument routing. */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { Gate, routeShowDocument } from "../src/gate";
import { DEFAULT_SETTINGS } from "../src/server";
import { extensionRoot } from "./paths";

const manifest = JSON.parse(fs.readFileSync(path.join(extensionRoot, "package.json"), "utf8"));
const source = fs.readFileSync(path.join(extensionRoot, "src", "extension.ts"), "utf8");

test("every registered command is contributed, and no contributed command is missing", () => {
  const registered = [...source.matchAll(/registerCommand\(\s*"([^"]+)"/g)].map((m) => m[1]).sort();
  const contributed = (manifest.contributes.commands as { command: string }[]).map((c) => c.command).sort();
  assert.deepEqual(registered, contributed);
  // The server registers its own commands through vscode-languageclient: ours must not collide.
  // Read from the server's own constants (jaxlsp/server/wire.py), so a new server command cannot collide unseen.
  const wire = fs.readFileSync(path.join(extensionRoot, "..", "..", "jaxlsp", "server", "wire.py"), "utf8");
  const serverCommands = [...wire.matchAll(/^[A-Z_]+_COMMAND: Final = "(jaxlsp\.[A-Za-z]+)"/gm)].map((m) => m[1]);
  assert.ok(serverCommands.includes("jaxlsp.openGraph") && serverCommands.length >= 5, String(serverCommands));
  for (const serverCommand of serverCommands) {
    assert.ok(!contributed.includes(serverCommand), serverCommand);
  }
});

test("settings: one per field the extension reads, interpreter paths restricted in untrusted workspaces", () => {
  const properties = Object.keys(manifest.contributes.configuration.properties).sort();
  assert.deepEqual(properties, Object.keys(DEFAULT_SETTINGS).map((k) => `jaxlsp.${k}`).sort());
  const trust = manifest.capabilities.untrustedWorkspaces;
  assert.equal(trust.supported, "limited");
  assert.deepEqual(trust.restrictedConfigurations.sort(), ["jaxlsp.python", "jaxlsp.serverPath", "jaxlsp.serverPython"]);
  assert.ok(manifest.activationEvents.includes("onLanguage:python"));
  assert.equal(manifest.main, "./dist/extension.js");
});

test("the server's showDocument: held back during our reveal and open-in-browser, external URLs made remote-safe", () => {
  const reveal = new Gate();
  const browser = new Gate();
  assert.equal(routeShowDocument({}, reveal, browser), "default");
  assert.equal(routeShowDocument({ external: true }, reveal, browser), "openExternal");
  return Promise.all([
    reveal.during(async () => assert.equal(routeShowDocument({}, reveal, browser), "handled")),
    browser.during(async () => assert.equal(routeShowDocument({ external: true }, reveal, browser), "handled")),
  ]).then(() => assert.equal(reveal.active || browser.active, false));
});

test("the packaged bundle loads against a bare vscode module and exports activate and deactivate", (t) => {
  const bundle = path.join(extensionRoot, "dist", "extension.js");
  if (!fs.existsSync(bundle)) return t.skip("dist/extension.js is not built (npm run build)");
  // Any member of `vscode`, at any depth, is a class: enough for module-level code, which only defines things.
  const member = (): object =>
    new Proxy(class {}, {
      get: (target, key) => (key in target ? (target as unknown as Record<string | symbol, unknown>)[key] : key === "then" ? undefined : member()),
    });
  // `__esModule` keeps TypeScript's `import * as vscode` helper from copying (no) own keys.
  const bare: object = new Proxy({}, { get: (_target, key) => (key === "__esModule" ? true : key === "then" ? undefined : member()) });
  const Module = require("node:module") as { _load: (request: string, ...rest: unknown[]) => unknown };
  const load = Module._load;
  Module._load = function (this: unknown, request: string, ...rest: unknown[]) {
    return request === "vscode" ? bare : load.call(this, request, ...rest);
  };
  try {
    const loaded = require(bundle) as { activate?: unknown; deactivate?: unknown };
    assert.equal(typeof loaded.activate, "function");
    assert.equal(typeof loaded.deactivate, "function");
  } finally {
    Module._load = load;
  }
});
