// Bundles the extension (and, with --tests, the tests with the `vscode` module replaced by a fake)
// and copies the viewer bundle from ../../jaxlsp/viewer into dist/viewer.
import { build } from "esbuild";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const viewerSource = resolve(root, "..", "..", "jaxlsp", "viewer");
const viewerTarget = join(root, "dist", "viewer");
const tests = process.argv.includes("--tests");

// The tests bundle the sources themselves: the packaged, minified extension stays as built.
if (!tests) rmSync(join(root, "dist"), { recursive: true, force: true });
if (!tests) await build({
  entryPoints: [join(root, "src", "extension.ts")],
  outfile: join(root, "dist", "extension.js"),
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node18",
  external: ["vscode"],
  minify: true,
  logLevel: "warning",
});

rmSync(viewerTarget, { recursive: true, force: true });
const assets = ["viewer.js", "viewer.css"];
const missing = assets.filter((name) => !existsSync(join(viewerSource, name)));
if (missing.length === 0) {
  mkdirSync(viewerTarget, { recursive: true });
  for (const name of assets) copyFileSync(join(viewerSource, name), join(viewerTarget, name));
} else if (!tests) {
  // A package without the viewer would open an empty panel.
  console.error(`build: ${missing.join(", ")} missing in ${viewerSource}: build the viewer first (make viewer)`);
  process.exit(1);
}

if (tests) {
  const testDir = join(root, "test");
  const entryPoints = readdirSync(testDir)
    .filter((name) => name.endsWith(".test.ts"))
    .map((name) => join(testDir, name));
  rmSync(join(root, "out"), { recursive: true, force: true });
  await build({
    entryPoints,
    outdir: join(root, "out", "test"),
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node18",
    alias: { vscode: join(testDir, "fake", "vscode.ts") },
    sourcemap: true,
    logLevel: "warning",
  });
}
