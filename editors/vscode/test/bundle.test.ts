/** The server the extension carries (bundle.ts): which Python runs it, what is never run, and the one message when none fits. */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { type BundleContext, findBundle, isMissing, newEnough, pythonVersion, resolveBundledLaunch, startFailureMessage } from "../src/bundle";
import { DEFAULT_SETTINGS, type Launch } from "../src/server";

const folders = ["/home/u/project"];
const bundle = { entry: "/ext/bundled/tool/server.py", libs: "/ext/bundled/libs" };
const context = (over: Partial<BundleContext> = {}, versions: Record<string, string> = {}): BundleContext => {
  const ran: string[] = [];
  return {
    selected: undefined,
    trusted: true,
    folders,
    cwd: "/home/u/.vscode/globalStorage/jaxlsp.jaxlsp",
    find: (command) => (command.startsWith("/") ? command : ({ python3: "/usr/bin/python3", "python3.12": "/usr/local/bin/python3.12" } as Record<string, string>)[command]),
    bundle,
    version: async (python) => {
      ran.push(python);
      return versions[python];
    },
    platform: "linux",
    ...over,
  };
};

test("the bundled server runs in python3 on PATH when nothing is set, isolated, with the entry script", async () => {
  const launch = (await resolveBundledLaunch(DEFAULT_SETTINGS, context({}, { "/usr/bin/python3": "3.12.3" }))) as Launch;
  assert.deepEqual(launch.server, { command: "/usr/bin/python3", args: ["-I", bundle.entry], source: "bundled server, python3 on PATH" });
});

test("jaxlsp.serverPython, jaxlsp.python, then the Python extension's interpreter (trusted), each only when 3.11 or newer", async () => {
  const versions = { "/opt/py/bin/python": "3.13.1", "/env/bin/python": "3.11.9", "/usr/bin/python3": "3.12.3", "/old/bin/python": "3.10.12" };
  const server = (await resolveBundledLaunch({ ...DEFAULT_SETTINGS, serverPython: "/opt/py/bin/python", python: "/env/bin/python" }, context({}, versions))) as Launch;
  assert.equal(server.server.command, "/opt/py/bin/python");
  assert.equal(server.server.source, "bundled server, jaxlsp.serverPython");
  const python = (await resolveBundledLaunch({ ...DEFAULT_SETTINGS, python: "/env/bin/python" }, context({}, versions))) as Launch;
  assert.equal(python.server.command, "/env/bin/python");
  // A capture interpreter too old for the server still captures; the server runs in the next one.
  const selected = (await resolveBundledLaunch({ ...DEFAULT_SETTINGS, python: "/old/bin/python" }, context({ selected: "/env/bin/python" }, versions))) as Launch;
  assert.deepEqual([selected.server.command, selected.selectedPython], ["/env/bin/python", "/env/bin/python"]);
  // python3 on PATH is 3.10: python3.12 on PATH is next.
  const newer = (await resolveBundledLaunch(DEFAULT_SETTINGS, context({}, { "/usr/bin/python3": "3.10.12", "/usr/local/bin/python3.12": "3.12.1" }))) as Launch;
  assert.equal(newer.server.command, "/usr/local/bin/python3.12");
});

test("jaxlsp.serverPath (an installed jaxlsp) and a build without the bundle leave the launch to resolveLaunch", async () => {
  assert.equal(await resolveBundledLaunch({ ...DEFAULT_SETTINGS, serverPath: "/home/u/.local/bin/jaxlsp" }, context({}, { "/usr/bin/python3": "3.12.0" })), undefined);
  assert.equal(await resolveBundledLaunch(DEFAULT_SETTINGS, context({ bundle: undefined }, { "/usr/bin/python3": "3.12.0" })), undefined);
});

test("before trust nothing inside the workspace runs, not even to ask its version, and the selection is not used", async () => {
  const asked: string[] = [];
  const ctx = context({
    trusted: false,
    selected: "/opt/envs/ml/bin/python",
    version: async (python) => {
      asked.push(python);
      return "3.12.0";
    },
  });
  const launch = (await resolveBundledLaunch({ ...DEFAULT_SETTINGS, serverPython: "/home/u/project/.venv/bin/python" }, ctx)) as Launch;
  assert.equal(launch.server.command, "/usr/bin/python3");
  assert.deepEqual(asked, ["/usr/bin/python3"]);
  assert.equal(launch.selectedPython, undefined);
  assert.match(launch.withheld.join("\n"), /\.venv\/bin\/python \(from jaxlsp.serverPython\) lies inside the workspace/);
  assert.match(launch.withheld.join("\n"), /Python extension's interpreter \/opt\/envs\/ml\/bin\/python waits for workspace trust/);
});

test("no Python 3.11 or newer: one message naming what was found and the command that installs one", async () => {
  const missing = await resolveBundledLaunch(DEFAULT_SETTINGS, context({}, { "/usr/bin/python3": "3.10.12", "/usr/local/bin/python3.12": "" }));
  assert.ok(isMissing(missing));
  assert.match(missing.message, /no Python 3\.11 or newer to run its server/);
  assert.match(missing.message, /python3 on PATH: \/usr\/bin\/python3 is Python 3\.10\.12/);
  assert.match(missing.message, /python3\.12 on PATH: \/usr\/local\/bin\/python3\.12 is not a working Python/);
  assert.match(missing.message, /sudo apt install python3\.11/);
  assert.match(missing.message, /jaxlsp\.serverPython/);
  const mac = await resolveBundledLaunch(DEFAULT_SETTINGS, context({ platform: "darwin", find: () => undefined }));
  assert.ok(isMissing(mac));
  assert.match(mac.message, /no python3 on PATH.*brew install python@3\.12/);
});

test("newEnough compares major and minor", () => {
  assert.deepEqual(["3.11.0", "3.14.2", "4.0.0", "3.10.9", "2.7.18", undefined, ""].map(newEnough), [true, true, true, false, false, false, false]);
});

test("pythonVersion runs the interpreter isolated and reads major.minor.micro; a failure is undefined", async () => {
  const version = await pythonVersion(os.tmpdir())(process.env.JAXLSP_TEST_PYTHON ?? "python3");
  if (version !== undefined) assert.match(version, /^3\.\d+\.\d+$/);
  assert.equal(await pythonVersion(os.tmpdir())("/nonexistent/python"), undefined);
});

test("findBundle: only a build that carries the libraries and the entry script", (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-bundle-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  assert.equal(findBundle(root), undefined);
  fs.mkdirSync(path.join(root, "bundled", "tool"), { recursive: true });
  fs.writeFileSync(path.join(root, "bundled", "tool", "server.py"), "");
  assert.equal(findBundle(root), undefined);
  fs.mkdirSync(path.join(root, "bundled", "libs", "jaxlsp"), { recursive: true });
  fs.writeFileSync(path.join(root, "bundled", "libs", "jaxlsp", "__init__.py"), "");
  assert.deepEqual(findBundle(root), { entry: path.join(root, "bundled", "tool", "server.py"), libs: path.join(root, "bundled", "libs") });
});

test("a failed start says what ran and what fixes it, per source", () => {
  const launch = (command: string, args: string[], source: string): Launch => ({ server: { command, args, source }, cwd: "/", withheld: [] });
  assert.match(startFailureMessage(launch("/usr/bin/python3", ["-I", bundle.entry], "bundled server, python3 on PATH"), "exited"), /bundled server did not start.*jaxlsp\.serverPython/);
  assert.match(startFailureMessage(launch("/x/jaxlsp", ["serve"], "jaxlsp.serverPath"), "ENOENT"), /pipx install jaxlsp.*clear jaxlsp\.serverPath/);
  assert.match(startFailureMessage(launch("python3", ["-I", "-m", "jaxlsp", "serve"], "default"), "exited"), /pip install jaxlsp/);
});
