// Headless Chromium on a code-server page, driven by JSON lines on stdin (one command per line,
// one JSON answer per line on stdout), so that pytest can script a VS Code session step by step.
//
// A command may name `frame: "viewer"`: the webview frame running the jaxlsp viewer (the one
// whose window has `__jaxlsp`); otherwise it acts on the workbench page.
// Commands: {cmd: "goto", url} | {cmd: "press", key} | {cmd: "type", text}
// | {cmd: "click" | "hover" | "dblclick", selector, hasText?, nth?, frame?, position?, ms?}
// | {cmd: "waitFor", selector, hasText?, state?, frame?, ms?} | {cmd: "count", selector, hasText?, frame?}
// | {cmd: "texts", selector, frame?} | {cmd: "eval", expr, frame?} | {cmd: "wait", expr, frame?, ms?}
// | {cmd: "mouse", x, y, click?} | {cmd: "screenshot", path} | {cmd: "logs"} | {cmd: "close"}.
// Answers: {ok: true, value?} or {ok: false, error, logs}. The window's size comes from
// JAXLSP_VIEWPORT_WIDTH/HEIGHT (VS Code's workbench does not lay out again when it changes).
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

// playwright-core comes from editors/vscode's node_modules (npm ci there installs it).
const require = createRequire(process.env.JAXLSP_PLAYWRIGHT_FROM);
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
  executablePath: process.env.JAXLSP_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run"],
});
const width = Number(process.env.JAXLSP_VIEWPORT_WIDTH || 1600);
const height = Number(process.env.JAXLSP_VIEWPORT_HEIGHT || 1000);
const context = await browser.newContext({ viewport: { width, height } });
const page = await context.newPage();
const logs = [];
page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") logs.push(`${m.type()}: ${m.text().slice(0, 400)}`); });
page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));

async function viewerFrame() {
  for (const frame of page.frames()) {
    try {
      if (await frame.evaluate("typeof window.__jaxlsp !== 'undefined'")) return frame;
    } catch {
      // a frame that is navigating or gone
    }
  }
  return null;
}

async function target(c) {
  if (c.frame !== "viewer") return page;
  const frame = await viewerFrame();
  if (!frame) throw new Error("no webview frame runs the jaxlsp viewer");
  return frame;
}

function locate(where, c) {
  let loc = where.locator(c.selector);
  if (c.hasText !== undefined) loc = loc.filter({ hasText: c.hasText });
  return c.nth === undefined ? loc.first() : loc.nth(c.nth);
}

const reply = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
reply({ ok: true, value: "ready" });

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let c;
  try {
    c = JSON.parse(line);
    let value = null;
    const ms = c.ms ?? 20000;
    switch (c.cmd) {
      case "goto": {
        const r = await page.goto(c.url, { waitUntil: "load", timeout: ms });
        value = r ? r.status() : null;
        break;
      }
      case "press": await page.keyboard.press(c.key); break;
      case "type": await page.keyboard.type(c.text, { delay: c.delay ?? 10 }); break;
      case "click": await locate(await target(c), c).click({ timeout: ms, position: c.position, modifiers: c.modifiers }); break;
      case "dblclick": await locate(await target(c), c).dblclick({ timeout: ms, position: c.position }); break;
      case "hover": await locate(await target(c), c).hover({ timeout: ms, position: c.position }); break;
      case "waitFor": await locate(await target(c), c).waitFor({ state: c.state ?? "visible", timeout: ms }); break;
      case "count": {
        let loc = (await target(c)).locator(c.selector);
        if (c.hasText !== undefined) loc = loc.filter({ hasText: c.hasText });
        value = await loc.count();
        break;
      }
      case "texts": value = await (await target(c)).locator(c.selector).allTextContents(); break;
      case "eval": value = await (await target(c)).evaluate(c.expr); break;
      case "wait": {
        // Polled (a deadline, not a pace); the frame is looked up again each time, since the
        // webview may be created or reloaded meanwhile.
        const deadline = Date.now() + ms;
        let last = null;
        for (;;) {
          try {
            value = await (await target(c)).evaluate(c.expr);
            if (value) break;
          } catch (e) {
            last = e;
          }
          if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${c.expr}${last ? ` (last error: ${last.message})` : ""}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        break;
      }
      case "mouse":
        await page.mouse.move(c.x, c.y);
        if (c.click) await page.mouse.click(c.x, c.y);
        break;
      case "screenshot": await page.screenshot({ path: c.path, fullPage: false }); break;
      case "logs": value = logs.splice(0); break;
      case "close":
        reply({ ok: true });
        await browser.close();
        process.exit(0);
      default: throw new Error(`unknown command ${c.cmd}`);
    }
    reply({ ok: true, value });
  } catch (e) {
    reply({ ok: false, error: String(e && e.message ? e.message : e).slice(0, 2000), logs: logs.slice(-20) });
  }
}
await browser.close();
