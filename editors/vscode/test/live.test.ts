/** The live-shapes status-bar item through `jaxlsp/liveStatus`: tracing, fresh, failed, not live, off. */

import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";
import { LiveStatusItem, liveView } from "../src/live";
import type { LiveStatus, LiveTarget } from "../src/wire";
import { fake } from "./fake/vscode";

beforeEach(() => fake.reset());

const target = (name: string, state: LiveTarget["state"], extra: Partial<LiveTarget> = {}): LiveTarget => ({
  uri: `file:///w/my%20model.py`,
  name,
  state,
  ...extra,
});
const status = (...targets: LiveTarget[]): LiveStatus => ({ enabled: true, targets, started: targets.length });

test("hidden until the server says something is live, and when live shapes are off", () => {
  const live = new LiveStatusItem();
  const item = fake.statusItems[0];
  assert.equal(item.id, "jaxlsp.live");
  assert.equal(item.visible, false);
  live.update(status(target("layer", "tracing")));
  assert.equal(item.visible, true);
  live.update({ enabled: false, targets: [target("layer", "fresh")], started: 1 });
  assert.equal(item.visible, false);
  live.update(status());
  assert.equal(item.visible, false);
  live.dispose();
});

test("tracing names what is being traced, with the queue behind it", () => {
  const view = liveView(status(target("layer", "tracing"), target("mlp", "queued"), target("cnn", "fresh")));
  assert.equal(view?.text, "$(sync~spin) live: tracing layer · 1 queued");
  assert.equal(view?.command, undefined);
  assert.match(view?.tooltip ?? "", /^layer \(my model\.py\): tracing$/m);
});

test("settled: counts of failed, fresh and not live; a failure opens the Problems view", () => {
  assert.equal(liveView(status(target("a", "fresh"), target("b", "fresh")))?.text, "$(check) live: 2 fresh");
  const view = liveView(
    status(
      target("a", "fresh"),
      target("b", "failed", { reason: "TypeError: dot_general requires contracting dimensions to have the same shape\nmore", waiting: true }),
      target("c", "notLive", { reason: "needs input (profiles.c.dims.batch)" }),
    ),
  );
  assert.equal(view?.text, "$(error) live: 1 failed · 1 fresh · 1 not live");
  assert.equal(view?.command, "workbench.actions.view.problems");
  const tooltip = view?.tooltip ?? "";
  assert.match(tooltip, /^b \(my model\.py\): failed: TypeError: dot_general requires .* same shape \(waits for its files to change\)$/m);
  assert.match(tooltip, /^c \(my model\.py\): not live: needs input \(profiles\.c\.dims\.batch\)$/m);
  assert.doesNotMatch(tooltip, /more/, "only a cause's first line");
  assert.equal(liveView(status(target("c", "notLive")))?.text, "$(circle-slash) live: 1 not live");
  assert.equal(liveView(status(target("c", "queued")))?.text, "$(clock) live: 1 queued");
});

test("a long list: the tooltip shows the first twenty targets and how many more", () => {
  const many = Array.from({ length: 25 }, (_, i) => target(`t${i}`, "fresh"));
  const tooltip = liveView(status(...many))?.tooltip ?? "";
  assert.match(tooltip, /t19 /);
  assert.doesNotMatch(tooltip, /t20 /);
  assert.match(tooltip, /and 5 more$/);
});

test("a server restart clears the previous server's states", () => {
  const live = new LiveStatusItem();
  const item = fake.statusItems[0];
  live.update(status(target("layer", "failed", { reason: "boom" })));
  assert.equal(item.text, "$(error) live: 1 failed");
  live.clear();
  assert.equal(item.visible, false);
});
