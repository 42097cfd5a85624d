/** The trace flow: needs-input answers, the save question, failures, the palette's target pick. */

import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { TraceStatus } from "../src/status";
import { type TraceOutcome, Tracer, orderByCursor } from "../src/tracer";
import { Position, Selection, Uri, fake, workspace } from "./fake/vscode";
import { ScriptedClient } from "./helpers";

beforeEach(() => fake.reset());

const done = { traceId: "t1", summary: { ops: 5, values: 7, groups: 0, parameters: 0, outputs: ["f32[8,10]"] }, coverage: { complete: true, notes: [] }, freshness: "fresh", interpreter: "python3", profile: "mlp" };
const needs = {
  needsInput: [
    { path: "profiles.mlp.dims.batch", kind: "dimension", name: "batch", message: "the size of dimension batch (a positive integer)" },
    { path: "profiles.mlp.inputs.args[0].shape", kind: "shape", message: "the shape of x" },
  ],
  profile: "mlp",
  proposal: "[profiles.mlp]\n",
};

function setup(handlers: ConstructorParameters<typeof ScriptedClient>[0]) {
  const client = new ScriptedClient(handlers);
  const status = new TraceStatus();
  const traced: TraceOutcome[] = [];
  const tracer = new Tracer(() => client, status, (o) => traced.push(o));
  return { client, status, traced, tracer };
}

test("needs input: ask each item, ask to save, trace again with the answers", async () => {
  const { client, status, traced, tracer } = setup({ "jaxlsp/trace": [() => needs, () => done] });
  fake.inputAnswers = ["8", "[8, 784]"];
  fake.messageAnswers = ["Save"];
  const result = await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" });
  assert.equal(result?.traceId, "t1");
  assert.deepEqual(
    client.requests.map((r) => r.params),
    [
      { textDocument: { uri: "file:///w/mlp.py" }, name: "mlp" },
      {
        textDocument: { uri: "file:///w/mlp.py" },
        name: "mlp",
        answers: { "profiles.mlp.dims.batch": "8", "profiles.mlp.inputs.args[0].shape": "[8, 784]" },
        save: true,
      },
    ],
  );
  assert.equal(status.state.kind, "ok");
  assert.deepEqual(traced.map((t) => t.result.traceId), ["t1"]);
  assert.equal(tracer.last?.traceId, "t1");
});

test("a timed target asks for time, and the needs-input rounds keep asking for it", async () => {
  const { client, tracer } = setup({ "jaxlsp/trace": [() => needs, () => done] });
  fake.inputAnswers = ["8", "[8, 784]"];
  fake.messageAnswers = ["Don't save"];
  assert.equal((await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp", time: true }))?.traceId, "t1");
  assert.deepEqual(client.requests.map((r) => (r.params as { time?: boolean }).time), [true, true]);
  assert.equal(tracer.last?.time, true); // Re-trace times again
});

test("runnable examples: one pick traces it, after the save question; the status says where the inputs came from", async () => {
  const choices = { ...needs, examples: [{ example: "tests/test_m.py::test_mlp", kind: "test", path: "tests/test_m.py:12", static: false, via: "through Net" }] };
  const learned = { ...done, inputsFrom: "models.py:40 (test)" };
  const { client, status, tracer } = setup({ "jaxlsp/trace": [() => choices, () => learned] });
  fake.quickPickAnswers = [(items) => items[0]];
  fake.messageAnswers = ["Save"];
  assert.equal((await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" }))?.traceId, "t1");
  assert.deepEqual((fake.quickPicks[0] as { label: string }[]).map((i) => i.label), ["tests/test_m.py::test_mlp", "Enter the inputs by hand"]);
  assert.deepEqual(client.requests[1].params, {
    textDocument: { uri: "file:///w/mlp.py" },
    name: "mlp",
    example: "tests/test_m.py::test_mlp",
    save: true,
  });
  assert.equal(fake.inputBoxes.length, 0);
  assert.match(status.view()?.tooltip ?? "", /Inputs from models\.py:40 \(test\)/);
});

test("runnable examples: the manual answers stay one pick away", async () => {
  const choices = { ...needs, examples: [{ example: "train.py", kind: "script", path: "train.py:3", static: false }] };
  const { client, tracer } = setup({ "jaxlsp/trace": [() => choices, () => done] });
  fake.quickPickAnswers = [(items) => items[1]];
  fake.inputAnswers = ["8", "[8, 784]"];
  fake.messageAnswers = ["Don't save"];
  assert.equal((await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" }))?.traceId, "t1");
  assert.equal((client.requests[1].params as { example?: string }).example, undefined);
});

test("declining to save sends save: false; a second round keeps the first answers", async () => {
  const more = { needsInput: [{ path: "profiles.mlp.dims.seq", kind: "dimension", message: "seq" }], proposal: "" };
  const { client, tracer } = setup({ "jaxlsp/trace": [() => needs, () => more, () => done] });
  fake.inputAnswers = ["8", "[8, 784]", "16"];
  fake.messageAnswers = ["Don't save"];
  assert.equal((await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp", profile: "mlp" }))?.traceId, "t1");
  assert.equal(fake.messages.filter((m) => /Save this profile/.test(m.message)).length, 1);
  assert.deepEqual(client.requests[2].params, {
    textDocument: { uri: "file:///w/mlp.py" },
    name: "mlp",
    profile: "mlp",
    answers: { "profiles.mlp.dims.batch": "8", "profiles.mlp.inputs.args[0].shape": "[8, 784]", "profiles.mlp.dims.seq": "16" },
    save: false,
  });
});

test("answers the server could not parse are asked again, and all answers sent again", async () => {
  const refused = { ...needs, errors: { "profiles.mlp.dims.batch": 'expected a positive integer (the dimension\'s size), got "1.5"' } };
  const { client, tracer } = setup({ "jaxlsp/trace": [() => needs, () => refused, () => done] });
  fake.inputAnswers = ["1.5", "[8, 784]", "8"];
  fake.messageAnswers = ["Don't save"];
  assert.equal((await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" }))?.traceId, "t1");
  assert.equal(fake.inputBoxes.length, 3);
  assert.equal(fake.inputBoxes[2].value, "1.5");
  assert.deepEqual((client.requests[2].params as { answers: unknown }).answers, {
    "profiles.mlp.dims.batch": "8",
    "profiles.mlp.inputs.args[0].shape": "[8, 784]",
  });
});

test("cancelling an input box traces nothing more and leaves the status as it was", async () => {
  const { client, status, traced, tracer } = setup({ "jaxlsp/trace": [() => needs] });
  fake.inputAnswers = [undefined];
  assert.equal(await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" }), undefined);
  assert.equal(client.requests.length, 1);
  assert.equal(status.state.kind, "idle");
  assert.equal(traced.length, 0);
});

test("a failed trace shows the server's paragraph and marks the status failed", async () => {
  const paragraph = "tracing mlp failed: ImportError: No module named 'flax' (mlp.py:3)";
  const { status, tracer } = setup({
    "jaxlsp/trace": () => {
      throw Object.assign(new Error(paragraph), { code: -32803, data: { kind: "import" } });
    },
  });
  assert.equal(await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" }), undefined);
  assert.deepEqual(status.state, { kind: "failed", name: "mlp", error: paragraph });
  assert.deepEqual(fake.messages.map((m) => [m.kind, m.message]), [["error", `jaxlsp: ${paragraph}`]]);
});

test("a cancelled request is not reported as a failure", async () => {
  const { status, tracer } = setup({
    "jaxlsp/trace": () => {
      throw Object.assign(new Error("cancelled"), { code: -32800 });
    },
  });
  await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" });
  assert.equal(status.state.kind, "idle");
  assert.equal(fake.messages.length, 0);
});

test("a server that keeps asking stops after a few rounds with a clear error", async () => {
  const { status, tracer } = setup({ "jaxlsp/trace": () => needs });
  fake.inputAnswers = Array(20).fill("8");
  fake.inputAnswers = fake.inputAnswers.map((_a, i) => (i % 2 ? "[8]" : "8"));
  fake.messageAnswers = ["Save"];
  await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" });
  assert.equal(status.state.kind, "failed");
  assert.match(fake.messages.at(-1)?.message ?? "", /still needs input after 4 rounds/);
});

test("restricted mode: nothing is sent, and the user is pointed at VS Code's trust", async () => {
  const { client, status, tracer } = setup({ "jaxlsp/trace": () => done });
  workspace.isTrusted = false;
  fake.messageAnswers = ["Manage Workspace Trust"];
  assert.equal(await tracer.trace({ uri: "file:///w/mlp.py", name: "mlp" }), undefined);
  assert.equal(client.requests.length, 0);
  assert.equal(status.state.kind, "idle");
  assert.match(fake.messages[0].message, /restricted mode/);
  assert.deepEqual(fake.executed, [{ command: "workbench.trust.manage", args: [] }]);
});

const range = (a: number, b: number) => ({ start: { line: a, character: 0 }, end: { line: b, character: 0 } });

test("the palette's pick lists the entrypoint at the cursor first", async () => {
  const entrypoints = [
    { name: "first", kind: "function", range: range(0, 0), bodyRange: range(0, 4), reason: "jit" },
    { name: "Outer", kind: "nnx", range: range(6, 6), bodyRange: range(6, 20), reason: "nnx" },
    { name: "Outer.Inner", kind: "nnx", range: range(8, 8), bodyRange: range(8, 12), reason: "nnx" },
  ];
  assert.deepEqual(orderByCursor(entrypoints, 10).map((e) => e.name), ["Outer.Inner", "Outer", "first"]);
  const { tracer } = setup({ "jaxlsp/discover": () => ({ entrypoints, drivers: [] }) });
  const editor = { document: { uri: Uri.parse("file:///w/m.py"), languageId: "python" }, selection: new Selection(new Position(10, 0), new Position(10, 2)) };
  fake.quickPickAnswers = [(items) => items[1]];
  const target = await tracer.pickTarget(editor as never);
  assert.deepEqual(target, { uri: "file:///w/m.py", name: "Outer" });
  assert.deepEqual((fake.quickPicks[0] as { label: string }[]).map((i) => i.label), ["Outer.Inner", "Outer", "first"]);
});

test("one entrypoint needs no pick; none says so", async () => {
  const one = [{ name: "mlp", kind: "function", range: range(3, 3), bodyRange: range(3, 6), reason: "jax" }];
  const { tracer } = setup({ "jaxlsp/discover": [() => ({ entrypoints: one, drivers: [] }), () => ({ entrypoints: [], drivers: [] })] });
  const editor = { document: { uri: Uri.parse("file:///w/m.py"), languageId: "python" }, selection: new Selection(new Position(0, 0), new Position(0, 0)) };
  assert.deepEqual(await tracer.pickTarget(editor as never), { uri: "file:///w/m.py", name: "mlp" });
  assert.equal(fake.quickPicks.length, 0);
  assert.equal(await tracer.pickTarget(editor as never), undefined);
  assert.match(fake.messages[0].message, /no JAX entrypoint/);
});
