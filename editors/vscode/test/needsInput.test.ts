/** Asking for needs-input answers: the typed text goes to the server as it is; what the server
 * could not parse is asked again, prefilled, with its message (real VS Code runs the same flow in
 * tests/clients/vscode). */

import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { askSave, promptAnswers } from "../src/needsInput";
import type { NeedsInputItem } from "../src/wire";
import { fake } from "./fake/vscode";

beforeEach(() => fake.reset());

const ITEMS: NeedsInputItem[] = [
  { path: "profiles.mlp.dims.batch", kind: "dimension", message: "the size of dimension batch" },
  { path: "profiles.mlp.inputs.args[1].shape", kind: "shape", message: "the shape of x" },
];

test("each item is asked once and its typed text sent as it is, keyed by path", async () => {
  fake.inputAnswers = ["8", "1.5, 784"];
  const answers = await promptAnswers({ needsInput: ITEMS }, "mlp");
  assert.deepEqual(answers, { "profiles.mlp.dims.batch": "8", "profiles.mlp.inputs.args[1].shape": "1.5, 784" });
  assert.equal(fake.inputBoxes[0].prompt, "the size of dimension batch");
  // Nothing is parsed here: any text is accepted, only an empty one is not.
  assert.equal(fake.inputBoxes[1].validateInput?.("1.5, 784"), undefined);
  assert.equal(fake.inputBoxes[1].validateInput?.("  "), "an answer is needed");
});

test("asked again: only what the server refused, prefilled, with its message until the text changes", async () => {
  const typed = { "profiles.mlp.dims.batch": "8", "profiles.mlp.inputs.args[1].shape": "1.5, 784" };
  const error = '"1.5" is neither a positive integer nor a dimension name';
  fake.inputAnswers = ["2, 784"];
  const answers = await promptAnswers({ needsInput: ITEMS, errors: { "profiles.mlp.inputs.args[1].shape": error } }, "mlp", typed);
  assert.deepEqual(answers, { "profiles.mlp.inputs.args[1].shape": "2, 784" });
  assert.equal(fake.inputBoxes.length, 1);
  assert.equal(fake.inputBoxes[0].value, "1.5, 784");
  assert.equal(fake.inputBoxes[0].prompt, `Not accepted: ${error}. the shape of x`);
  assert.equal(fake.inputBoxes[0].validateInput?.("1.5, 784"), error);
  assert.equal(fake.inputBoxes[0].validateInput?.("2, 784"), undefined);
});

test("cancelling one input box cancels them all", async () => {
  fake.inputAnswers = [undefined];
  assert.equal(await promptAnswers({ needsInput: ITEMS }, "f"), undefined);
  assert.equal(fake.inputBoxes.length, 1);
});

test("saving the profile is asked, and dismissing means no", async () => {
  fake.messageAnswers = ["Save"];
  assert.equal(await askSave({ profile: "mlp" }), true);
  assert.match(fake.messages[0].message, /Save this profile "mlp" to jaxlsp\.toml\?/);
  fake.messageAnswers = [undefined];
  assert.equal(await askSave({ profile: "" }), false);
  fake.messageAnswers = ["Don't save"];
  assert.equal(await askSave({ profile: "" }), false);
});
