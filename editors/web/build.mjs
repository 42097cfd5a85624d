// Builds the viewer into jaxlsp/viewer/ (viewer.js, viewer.css, index.html): one self-contained
// bundle with the ELK worker script embedded as a string (no network, no separate worker file).
// Deterministic: the same sources and lock file give the same bytes (make test compares them).
import { build } from "esbuild";
import { mkdir, readFile, writeFile, copyFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, "..", "..", "jaxlsp", "viewer");
await mkdir(out, { recursive: true });

const elkWorker = {
  name: "elk-worker-source",
  setup(b) {
    b.onResolve({ filter: /^elk-worker-source$/ }, () => ({ path: "elk-worker-source", namespace: "elk" }));
    b.onLoad({ filter: /.*/, namespace: "elk" }, async () => ({
      contents: await readFile(join(here, "node_modules", "elkjs", "lib", "elk-worker.min.js"), "utf8"),
      loader: "text",
    }));
  },
};

const result = await build({
  entryPoints: [join(here, "src", "main.ts")],
  bundle: true,
  format: "iife",
  target: "es2020",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  write: false,
  plugins: [elkWorker],
  banner: { js: "/* jaxlsp graph viewer (editors/web); embeds elkjs (EPL-2.0, https://github.com/kieler/elkjs) */" },
});
let js = result.outputFiles[0].text;
// Inlined in one HTML file (the static export), the script must not end its own element.
if (/<\/script|<!--/i.test(js)) {
  js = js.replace(/<\/script/gi, "<\\/script").replace(/<!--/g, "<\\!--");
}
await writeFile(join(out, "viewer.js"), js);
await copyFile(join(here, "src", "viewer.css"), join(out, "viewer.css"));
await copyFile(join(here, "src", "index.html"), join(out, "index.html"));
console.log(`built ${out}: viewer.js ${(js.length / 1024).toFixed(0)} KiB`);
