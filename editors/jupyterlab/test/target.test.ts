/** Which entrypoint "Trace graph" means for a cursor in a cell (the plain logic of src/target.ts). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { describe, type Entrypoint, isTrace, targetAt } from "../src/target";

function entry(name: string, cell: number, start: number, end: number): Entrypoint {
  const range = { start: { line: start, character: 0 }, end: { line: start, character: 10 } };
  return { name, kind: "linen", range, bodyRange: { start: range.start, end: { line: end, character: 0 } }, cell };
}

const found = [entry("MLP", 4, 0, 10), entry("Outer", 6, 0, 20), entry("Outer.Inner", 6, 3, 8), entry("f", 6, 22, 25)];

test("the innermost entrypoint around the cursor, in the cursor's cell", () => {
  assert.equal(targetAt(found, 6, 5)?.name, "Outer.Inner");
  assert.equal(targetAt(found, 6, 15)?.name, "Outer");
  assert.equal(targetAt(found, 6, 24)?.name, "f");
  assert.equal(targetAt(found, 4, 2)?.name, "MLP");
});

test("a cursor outside every entrypoint of its cell takes the cell's first; a cell without any, none", () => {
  assert.equal(targetAt(found, 6, 21)?.name, "Outer");
  assert.equal(targetAt(found, 5, 0), undefined);
  assert.equal(targetAt([{ ...found[0], cell: undefined }], 4, 2), undefined); // not a notebook's answer
});

test("a trace result and its one-line description", () => {
  const result = { traceId: "t1", summary: { ops: 1234, outputs: ["f32[8,10]", "f32[8]", "i32[]"] } };
  assert.ok(isTrace(result));
  assert.ok(!isTrace({ needsInput: [], proposal: "" }));
  assert.equal(describe("MLP", result), "MLP · 1,234 ops · f32[8,10], f32[8]");
});
