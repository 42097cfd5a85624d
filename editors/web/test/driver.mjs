// A headless Chromium driven by JSON lines on stdin (one command per line, one JSON answer per
// line on stdout), so that pytest can interleave browser actions with LSP traffic.
// Commands: {cmd: "goto", url} | {cmd: "click" | "dblclick", selector, ms?} | {cmd: "type", selector, text}
// | {cmd: "press", key} | {cmd: "eval", expr} | {cmd: "wait", expr, ms?} | {cmd: "screenshot", path}
// | {cmd: "viewport", width, height} | {cmd: "wheel", selector, deltaY} | {cmd: "logs"} | {cmd: "close"}.
// Answers: {ok: true, value?} or {ok: false, error, logs}.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";

const executablePath = process.env.JAXLSP_CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--allow-file-access-from-files"],
});
const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
const page = await context.newPage();
const logs = [];
page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));

const reply = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
reply({ ok: true, value: "ready" });

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let c;
  try {
    c = JSON.parse(line);
    let value = null;
    switch (c.cmd) {
      case "goto": {
        const r = await page.goto(c.url, { waitUntil: "load" });
        value = r ? r.status() : null;
        break;
      }
      case "click": await page.click(c.selector, { timeout: c.ms ?? 10000 }); break;
      case "dblclick": await page.dblclick(c.selector, { timeout: c.ms ?? 10000 }); break;
      case "type": await page.fill(c.selector, c.text); break;
      case "press": await page.keyboard.press(c.key); break;
      case "eval": value = await page.evaluate(c.expr); break;
      case "wait": {
        // Polled through evaluate (the devtools protocol), which the page's CSP does not block.
        const deadline = Date.now() + (c.ms ?? 20000);
        for (;;) {
          value = await page.evaluate(c.expr);
          if (value) break;
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${c.expr}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        break;
      }
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
    reply({ ok: false, error: String(e && e.message ? e.message : e), logs: logs.slice(-20) });
  }
}
await browser.close();
