// Times the viewer in headless Chromium for benchmarks/viewer.py: first paint of the collapsed top
// level (quick layout, then ELK) and expanding groups (something on screen, then the full layout).
// Usage: node measure.mjs PAGE.html '[{"label": ..., "expand": GROUP_ID | "all"}, ...]'
// Prints one JSON object. Times are ms: page load from navigation start, expansions from the call;
// the page's JS heap (MiB) after the first layout and after the steps.
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "..", "editors", "web", "package.json"));
const { chromium } = require("playwright-core");

const [page_, steps_] = process.argv.slice(2);
const steps = JSON.parse(steps_ ?? "[]");
const browser = await chromium.launch({
  executablePath: process.env.JAXLSP_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run"],
});
const poll = async (page, expr, ms = 60000) => {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await page.evaluate(expr);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${expr}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(pathToFileURL(page_).href, { waitUntil: "load" });
  await poll(page, "window.__jaxlsp && window.__jaxlsp.marks.firstFull");
  const marks = await page.evaluate("({...window.__jaxlsp.marks, items: document.querySelector('.jx-canvas').dataset.items})");
  const heap = async () => (await cdp.send("Runtime.getHeapUsage")).totalSize / 2 ** 20;
  const out = { graphMs: marks.graph, firstPaintMs: marks.firstPaint, firstFullMs: marks.firstFull, topItems: Number(marks.items), heapMiB: await heap(), steps: [] };
  const layouts = () => page.evaluate("window.__jaxlsp.marks.fullLayouts");
  for (const s of steps) {
    let n = await layouts();
    await page.evaluate("window.__jaxlsp.collapseAll()");
    await poll(page, `window.__jaxlsp.marks.fullLayouts > ${n}`);
    await page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))");
    n = await layouts();
    const call = s.expand === "all" ? "window.__jaxlsp.expandAll()" : `window.__jaxlsp.expand(${JSON.stringify(s.expand)})`;
    const t0 = await page.evaluate(`(() => { const m = window.__jaxlsp.marks; m.quick = undefined;
      const t = performance.now(); ${call}; return t; })()`);
    const quick = await poll(page, "window.__jaxlsp.marks.quick");
    await poll(page, `window.__jaxlsp.marks.fullLayouts > ${n} && window.__jaxlsp.marks.full > ${t0}`);
    const m = await page.evaluate("({...window.__jaxlsp.marks, items: Number(document.querySelector('.jx-canvas').dataset.items)})");
    out.steps.push({ label: s.label, quickMs: quick - t0, fullMs: m.full - t0, items: m.items, elkMs: m.elkMs, drawMs: m.drawMs });
  }
  out.heapMiBAfter = await heap();
  out.errors = errors;
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
