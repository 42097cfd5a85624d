/** The first-run check (firstRun.ts): one message when the capture interpreter cannot trace, naming the fix; once per interpreter. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { firstRunCheck } from "../src/firstRun";
import { fake } from "./fake/vscode";

const client = (report: Record<string, unknown>, asked: unknown[] = []) =>
  ({
    sendRequest: async (method: string, params: unknown) => {
      asked.push({ method, params });
      return report;
    },
  }) as never;

test("no JAX in the capture interpreter: one warning with the server's words and the install command, once", async () => {
  fake.reset();
  const report = {
    ok: false,
    python: "/w/.venv/bin/python",
    route: "workspace .venv",
    message: "The capture environment /w/.venv/bin/python (workspace .venv) cannot trace: jax is not installed. Fix: install jax[cpu]>=0.4.30",
    install: "/w/.venv/bin/python -m pip install 'jax[cpu]>=0.4.30'",
  };
  const asked: unknown[] = [];
  const shown = await firstRunCheck(client(report, asked), "file:///w/model.py");
  assert.deepEqual(asked, [{ method: "jaxlsp/environment", params: { textDocument: { uri: "file:///w/model.py" } } }]);
  assert.equal(fake.messages.length, 1);
  assert.equal(fake.messages[0].kind, "warning");
  assert.match(fake.messages[0].message, /workspace \.venv\) cannot trace: jax is not installed\. Fix: install jax\[cpu\]>=0\.4\.30\. To install it, run: \/w\/\.venv\/bin\/python -m pip install 'jax\[cpu\]>=0\.4\.30'/);
  assert.deepEqual(fake.messages[0].items, ["Check capture environment"]);
  assert.equal(shown, fake.messages[0].message);
  // A restart (a setting changed) asks again but says nothing new for the same interpreter.
  assert.equal(await firstRunCheck(client(report), undefined), undefined);
  assert.equal(fake.messages.length, 1);
});

test("a ready interpreter, or a server that cannot answer, shows nothing", async () => {
  fake.reset();
  assert.equal(await firstRunCheck(client({ ok: true, python: "/env/bin/python", message: "ready" }), undefined), undefined);
  const failing = { sendRequest: async () => Promise.reject(new Error("MethodNotFound")) } as never;
  assert.equal(await firstRunCheck(failing, undefined), undefined);
  assert.equal(fake.messages.length, 0);
});
