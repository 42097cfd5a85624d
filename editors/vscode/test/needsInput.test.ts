/** Parsing needs-input answers and asking for them. */

import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { askSave, parseAnswer, promptAnswers } from "../src/needsInput";
import { fake } from "./fake/vscode";

beforeEach(() => fake.reset());

test("a dimension is a positive integer", () => {
  assert.deepEqual(parseAnswer({ kind: "dimension" }, " 32 "), { ok: true, value: 32 });
  for (const bad of ["0", "-3", "3.5", "batch", "", "08"]) {
    assert.equal(parseAnswer({ kind: "dimension" }, bad).ok, false, bad);
  }
});

test("a shape is a list of positive integers and dimension names, bracketed or not", () => {
  for (const text of ["[4, batch, 3]", '[4, "batch", 3]', "(4, batch, 3)", "4, batch, 3"]) {
    assert.deepEqual(parseAnswer({ kind: "shape" }, text), { ok: true, value: [4, "batch", 3] }, text);
  }
  assert.deepEqual(parseAnswer({ kind: "shape" }, "[]"), { ok: true, value: [] });
  const bad = parseAnswer({ kind: "shape" }, "[4, -1]");
  assert.equal(bad.ok, false);
  assert.match((bad as { error: string }).error, /"-1"/);
});

test("a value is JSON or a TOML inline value", () => {
  assert.deepEqual(parseAnswer({ kind: "value" }, "3"), { ok: true, value: 3 });
  assert.deepEqual(parseAnswer({ kind: "value" }, '"relu"'), { ok: true, value: "relu" });
  assert.deepEqual(parseAnswer({ kind: "value" }, '{ kind = "array", shape = [4, 3], dtype = \'int32\' }'), {
    ok: true,
    value: { kind: "array", shape: [4, 3], dtype: "int32" },
  });
  assert.equal(parseAnswer({ kind: "value" }, "relu").ok, false);
});

test("inputs must be a table", () => {
  assert.deepEqual(parseAnswer({ kind: "inputs" }, '{ args = [{ kind = "array", shape = [2] }] }'), {
    ok: true,
    value: { args: [{ kind: "array", shape: [2] }] },
  });
  assert.equal(parseAnswer({ kind: "inputs" }, "[1, 2]").ok, false);
});

test("promptAnswers asks once per item, validates, and keys the answers by path", async () => {
  fake.inputAnswers = ["8", "[8, 784]"];
  const answers = await promptAnswers(
    [
      { path: "profiles.mlp.dims.batch", kind: "dimension", message: "the size of dimension batch" },
      { path: "profiles.mlp.inputs.args[1].shape", kind: "shape", message: "the shape of x" },
    ],
    "mlp",
  );
  assert.deepEqual(answers, { "profiles.mlp.dims.batch": 8, "profiles.mlp.inputs.args[1].shape": [8, 784] });
  assert.equal(fake.inputBoxes.length, 2);
  assert.equal(fake.inputBoxes[0].prompt, "the size of dimension batch");
  assert.equal(fake.inputBoxes[0].validateInput?.("zero"), 'expected a positive integer, got "zero"');
  assert.equal(fake.inputBoxes[0].validateInput?.("4"), undefined);
});

test("cancelling one input box cancels them all", async () => {
  fake.inputAnswers = [undefined];
  const items = [
    { path: "a", kind: "dimension", message: "a" },
    { path: "b", kind: "dimension", message: "b" },
  ];
  assert.equal(await promptAnswers(items, "f"), undefined);
  assert.equal(fake.inputBoxes.length, 1);
});

test("saving the profile is asked, and dismissing means no", async () => {
  fake.messageAnswers = ["Save"];
  assert.equal(await askSave({ needsInput: [], profile: "mlp" }), true);
  assert.match(fake.messages[0].message, /Save this profile "mlp" to jaxlsp\.toml\?/);
  fake.messageAnswers = [undefined];
  assert.equal(await askSave({ needsInput: [] }), false);
  fake.messageAnswers = ["Don't save"];
  assert.equal(await askSave({ needsInput: [] }), false);
});
