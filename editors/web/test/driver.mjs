// A headless Chromium driven by JSON lines on stdin (one command per line, one JSON answer per
// line on stdout), so that pytest can interleave browser actions with LSP traffic: the viewer's
// tests (tests/viewer) and real VS Code's (tests/clients/vscode, code-server) share it.
//
// A command may name `frame: "viewer"`: the frame running the jaxlsp viewer (the one whose window
// has `__jaxlsp`, e.g. inside a VS Code webview); otherwise it acts on the page. Locators take
// `hasText` (a substring) and `nth`.
// Commands: {cmd: "goto", url} | {cmd: "click" | "dblclick" | "hover", selector, hasText?, nth?, frame?, position?, ms?}
// | {cmd: "type", selector?, text, delay?} (a selector: fill that field; none: type on the keyboard)
// | {cmd: "press", key} | {cmd: "eval", expr, frame?} | {cmd: "wait", expr, frame?, ms?}
// | {cmd: "waitFor", selector, hasText?, state?, frame?, ms?} | {cmd: "texts", selector, frame?}
// | {cmd: "screenshot", path} | {cmd: "viewport", width, height} | {cmd: "wheel", selector, deltaY}
// | {cmd: "logs"} | {cmd: "close"}. Answers: {ok: true, value?} or {ok: false, error, logs}.
// The window's first size comes from JAXLSP_VIEWPORT_WIDTH/HEIGHT (default 1400x900): VS Code's
// workbench does not lay out again when it changes.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";

const executablePath = process.env.JAXLSP_CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--allow-file-access-from-files"],
});
const viewport = { width: Number(process.env.JAXLSP_VIEWPORT_WIDTH || 1400), height: Number(process.env.JAXLSP_VIEWPORT_HEIGHT || 900) };
const context = await browser.newContext({ viewport, acceptDownloads: true });
const page = await context.newPage();
const logs = [];
page.on("console", (m) => logs.push(`${m.type()}: ${m.text().slice(0, 400)}`));
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
  if (!frame) throw new Error("no frame runs the jaxlsp viewer");
  return frame;
}

async function locate(c) {
  let loc = (await target(c)).locator(c.selector);
  if (c.hasText !== undefined && c.hasText !== null) loc = loc.filter({ hasText: c.hasText });
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
    const ms = c.ms ?? 10000;
    switch (c.cmd) {
      case "goto": {
        const r = await page.goto(c.url, { waitUntil: "load", timeout: c.ms ?? 30000 });
        value = r ? r.status() : null;
        break;
      }
      case "click": await (await locate(c)).click({ timeout: ms, position: c.position }); break;
      case "dblclick": await (await locate(c)).dblclick({ timeout: ms, position: c.position }); break;
      case "hover": await (await locate(c)).hover({ timeout: ms, position: c.position }); break;
      case "type":
        if (c.selector) await page.fill(c.selector, c.text);
        else await page.keyboard.type(c.text, { delay: c.delay ?? 10 });
        break;
      case "press": await page.keyboard.press(c.key); break;
      case "eval": value = await (await target(c)).evaluate(c.expr); break;
      case "wait": {
        // Polled through evaluate (the devtools protocol), which the page's CSP does not block; the
        // frame is looked up again each time (a webview may be created or reloaded meanwhile).
        const deadline = Date.now() + (c.ms ?? 20000);
        let last = null;
        for (;;) {
          try {
            value = await (await target(c)).evaluate(c.expr);
            if (value) break;
          } catch (e) {
            last = e;
          }
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${c.expr}${last ? ` (last error: ${last.message})` : ""}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        break;
      }
      case "waitFor": await (await locate(c)).waitFor({ state: c.state ?? "visible", timeout: ms }); break;
      case "texts": value = await (await target(c)).locator(c.selector).allTextContents(); break;
      case "screenshot": await page.screenshot({ path: c.path, fullPage: false }); break;
      case "viewport": await page.setViewportSize({ width: c.width, height: c.height }); break;
      case "wheel": {
        const box = await page.locator(c.selector).first().boundingBox();
        await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
        await page.mouse.wheel(0, c.deltaY);
        break;
      }
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
