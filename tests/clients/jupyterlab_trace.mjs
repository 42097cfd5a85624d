// JupyterLab with jupyterlab-lsp and editors/jupyterlab in headless Chromium (playwright-core from
// editors/web): open a notebook, put the cursor in a cell that defines a model, press "Trace graph"
// in the cell toolbar, answer the trust prompt, wait for the graph viewer's tab, then hover a
// traced line of that cell (Ctrl held, as jupyterlab-lsp wants) and read the tooltip.
// Usage: node jupyterlab_trace.mjs URL CELL_INDEX HOVER_LINE HOVER_TEXT ARTIFACTS_DIR
// Prints one JSON object: {ok, steps, hover?, error?}; screenshots land in ARTIFACTS_DIR.
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "..", "editors", "web", "package.json"));
const { chromium } = require("playwright-core");

const [url, cellArg, lineArg, hoverText, artifacts] = process.argv.slice(2);
const cellIndex = Number(cellArg);
const hoverLine = Number(lineArg);
const steps = [];
const logs = [];
const step = (name) => steps.push(name);

const browser = await chromium.launch({
  executablePath: process.env.JAXLSP_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
});
const page = await (await browser.newContext({ viewport: { width: 1500, height: 1000 } })).newPage();
page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
let result;
try {
  await page.goto(url, { waitUntil: "domcontentloaded", timeout: 60000 });
  const cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell");
  await cells.nth(cellIndex).waitFor({ timeout: 60000 });
  step("notebook open");
  // jupyterlab-lsp connects the notebook to jaxlsp (its status item says so)
  await page.waitForFunction(() => [...document.querySelectorAll(".lsp-status-item, .lsp-statusbar-item, [class*='lsp-status']")]
    .some((e) => /initialized|connected/i.test(e.textContent || "") && !/not /i.test(e.textContent || "")), null, { timeout: 60000 }).catch(() => undefined);
  step("lsp status seen");
  const cell = cells.nth(cellIndex);
  await cell.locator(".cm-content").click({ position: { x: 40, y: 6 } });
  step("cursor in the cell");
  const button = page.locator(".jp-Cell.jp-mod-active .jp-cell-toolbar [data-command='jaxlsp:trace-graph']");
  await button.first().click({ timeout: 20000 });
  step("Trace graph pressed");
  const trust = page.locator(".jp-Dialog button", { hasText: "Trust once" });
  await trust.click({ timeout: 60000 });
  step("trusted once");
  const frame = page.locator(".jaxlsp-graph iframe");
  await frame.waitFor({ timeout: 120000 });
  const src = await frame.getAttribute("src");
  step(`viewer tab: ${src && src.startsWith("http://127.0.0.1:") ? "loopback" : src}`);
  await page.frameLocator(".jaxlsp-graph iframe").locator("body *").first().waitFor({ timeout: 30000 });
  step("viewer page loaded");
  // Hover the traced line: the first word of the line, with Ctrl held
  const line = cell.locator(".cm-line").nth(hoverLine);
  const box = await line.boundingBox();
  const text = (await line.textContent()) || "";
  const indent = text.length - text.trimStart().length;
  const charWidth = box.width / Math.max(text.length, 1);
  const x = box.x + (indent + 1) * Math.min(charWidth, 9);
  const y = box.y + box.height / 2;
  let hover = "";
  for (let attempt = 0; attempt < 10 && !hover.includes(hoverText); attempt++) {
    await page.keyboard.down("Control");
    await page.mouse.move(x + attempt, y);
    await page.waitForTimeout(400);
    hover = (await page.locator(".lsp-hover, .jp-lsp-hover, .cm-tooltip-hover").allTextContents().catch(() => [])).join("\n");
    await page.keyboard.up("Control");
  }
  step("hovered");
  result = { ok: hover.includes(hoverText), steps, hover };
  if (!result.ok) result.error = `no hover with ${hoverText}`;
} catch (error) {
  result = { ok: false, steps, error: String(error && error.message || error) };
}
if (!result.ok) {
  await page.screenshot({ path: path.join(artifacts, "jupyterlab-failure.png") }).catch(() => undefined);
  result.logs = logs.slice(-40);
} else {
  await page.screenshot({ path: path.join(artifacts, "jupyterlab.png") }).catch(() => undefined);
}
process.stdout.write(JSON.stringify(result) + "\n");
await browser.close();
