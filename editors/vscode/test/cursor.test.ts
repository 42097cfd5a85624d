/** Cursor moves: one debounced jaxlsp/cursorMoved, and a highlight for the panel from jaxlsp/nodesAt. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { CursorTracker } from "../src/cursor";
import { ScriptedClient } from "./helpers";

function panel(visible = true) {
  const highlights: [string, string[]][] = [];
  return { visible, traceId: "t1" as string | undefined, highlights, highlight: (id: string, ids: string[]) => highlights.push([id, ids]) };
}

test("several moves within the delay send one notification, for the last position", async () => {
  const client = new ScriptedClient({ "jaxlsp/nodesAt": () => ({ traceId: "t1", nodeIds: ["n4", "n1"] }) });
  const view = panel();
  const tracker = new CursorTracker(() => client, view, 10_000);
  tracker.moved({ uri: "file:///w/m.py", line: 1, character: 0 });
  tracker.moved({ uri: "file:///w/m.py", line: 7, character: 4 });
  await tracker.flush();
  await tracker.flush(); // nothing pending: nothing sent
  tracker.dispose();
  const params = { textDocument: { uri: "file:///w/m.py" }, position: { line: 7, character: 4 } };
  assert.deepEqual(client.notifications, [{ method: "jaxlsp/cursorMoved", params }]);
  assert.deepEqual(client.requests, [{ method: "jaxlsp/nodesAt", params }]);
  assert.deepEqual(view.highlights, [["t1", ["n4", "n1"]]]);
});

test("the timer sends it by itself", async () => {
  const client = new ScriptedClient({ "jaxlsp/nodesAt": () => ({ traceId: null, nodeIds: [] }) });
  const view = panel();
  const tracker = new CursorTracker(() => client, view, 1);
  tracker.moved({ uri: "file:///w/m.py", line: 2, character: 0 });
  await new Promise<void>((resolve) => {
    const poll = () => (view.highlights.length ? resolve() : setTimeout(poll, 1));
    poll();
  });
  // a line without nodes clears the highlight
  assert.deepEqual(view.highlights, [["t1", []]]);
});

test("no open panel: the notification still goes (browser viewers), no nodesAt", async () => {
  const client = new ScriptedClient({});
  const tracker = new CursorTracker(() => client, panel(false), 10_000);
  tracker.moved({ uri: "file:///w/m.py", line: 2, character: 0 });
  await tracker.flush();
  tracker.dispose();
  assert.equal(client.notifications.length, 1);
  assert.equal(client.requests.length, 0);
});
