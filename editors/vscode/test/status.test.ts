/** The status-bar item through a trace's life: tracing, done, stale, failed. */

import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { TraceStatus, TraceStatusItem } from "../src/status";
import type { TraceResult } from "../src/wire";
import { ThemeColor, fake } from "./fake/vscode";

beforeEach(() => fake.reset());

const result = (traceId: string, ops = 1234): TraceResult => ({
  traceId,
  summary: { ops, values: 1, groups: 0, parameters: 0, outputs: ["f32[8,10]"] },
  coverage: { complete: true, notes: [] },
  freshness: "fresh",
  interpreter: "/usr/bin/python3",
  interpreterRoute: "server's own interpreter",
  profile: "mlp",
});

test("hidden until a trace starts; tracing while in flight; then the figures", () => {
  const status = new TraceStatus();
  const drawn = new TraceStatusItem(status);
  const item = fake.statusItems[0];
  assert.equal(item.visible, false);
  status.begin("mlp");
  assert.equal(item.visible, true);
  assert.equal(item.text, "$(sync~spin) jaxlsp: tracing mlp");
  status.succeeded("mlp", result("t1"));
  assert.equal(item.text, "$(type-hierarchy) mlp · 1,234 ops");
  assert.equal(item.command, "jaxlsp.showGraph");
  assert.match(String(item.tooltip), /f32\[8,10\]/);
  assert.equal(item.backgroundColor, undefined);
  drawn.dispose();
});

test("two traces in flight: tracing until both are done", () => {
  const status = new TraceStatus();
  status.begin("a");
  status.begin("b");
  status.succeeded("b", result("tb"));
  assert.deepEqual(status.state, { kind: "tracing", name: "a" });
  status.failed("a", "ImportError at model.py:3");
  assert.equal(status.state.kind, "failed");
});

test("a source edit makes the shown trace stale; a re-trace makes it fresh", () => {
  const status = new TraceStatus();
  new TraceStatusItem(status);
  const item = fake.statusItems[0];
  status.begin("mlp");
  status.succeeded("mlp", result("t1"));
  status.markStale("other");
  assert.equal(status.state.kind, "ok");
  status.markStale("t1");
  assert.equal(item.text, "$(warning) mlp (stale)");
  assert.equal(item.command, "jaxlsp.retrace");
  assert.deepEqual(item.backgroundColor, new ThemeColor("statusBarItem.warningBackground"));
  status.begin("mlp");
  status.succeeded("mlp", result("t2"));
  assert.equal(status.state.kind, "ok");
});

test("a failure shows the error and offers a re-trace; a cancel keeps the previous outcome", () => {
  const status = new TraceStatus();
  new TraceStatusItem(status);
  const item = fake.statusItems[0];
  status.begin("mlp");
  status.failed("mlp", "timeout after 60 s");
  assert.equal(item.text, "$(error) mlp failed");
  assert.match(String(item.tooltip), /timeout after 60 s/);
  assert.deepEqual(item.backgroundColor, new ThemeColor("statusBarItem.errorBackground"));
  status.begin("mlp");
  status.cancelled("mlp");
  assert.equal(item.text, "$(error) mlp failed");
});

test("jaxlsp/traceFinished from traces started elsewhere updates the item", () => {
  const status = new TraceStatus();
  status.finished({ uri: "file:///m.py", name: "CNN", ok: false, error: "shape mismatch" });
  assert.deepEqual(status.state, { kind: "failed", name: "CNN", error: "shape mismatch" });
  status.finished({ uri: "file:///m.py", name: "CNN", ok: true, traceId: "t9" });
  assert.equal(status.view()?.text, "$(type-hierarchy) CNN");
  // the notification of our own trace keeps the figures the result gave
  status.begin("mlp");
  status.succeeded("mlp", result("t1", 7));
  status.finished({ uri: "file:///m.py", name: "mlp", ok: true, traceId: "t1" });
  assert.equal(status.view()?.text, "$(type-hierarchy) mlp · 7 ops");
});
