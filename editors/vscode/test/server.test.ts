/** Which server command starts, from which folder, with which initialization options. */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import {
  DEFAULT_SETTINGS,
  type LaunchContext,
  PYTHON_ARGS,
  inWorkspace,
  initializationOptions,
  readSettings,
  resolveLaunch,
  safeCwd,
  selectedInterpreter,
  which,
} from "../src/server";

const folders = ["/home/u/project"];
const onPath = (names: Record<string, string>) => (command: string) => (command.startsWith("/") ? command : names[command]);
const context = (over: Partial<LaunchContext> = {}): LaunchContext => ({
  selected: undefined,
  trusted: true,
  folders,
  cwd: "/home/u/.vscode/globalStorage/jaxlsp.jaxlsp",
  find: onPath({ jaxlsp: "/home/u/.local/bin/jaxlsp", python3: "/usr/bin/python3" }),
  ...over,
});

test("jaxlsp.serverPath, jaxlsp.python, the Python extension (trusted), jaxlsp on PATH, then python3 -I", () => {
  const all = { ...DEFAULT_SETTINGS, serverPath: "/opt/bin/jaxlsp", python: "/usr/bin/python3.11" };
  assert.deepEqual(resolveLaunch(all, context({ selected: "/env/bin/python" })).server, { command: "/opt/bin/jaxlsp", args: ["serve"], source: "jaxlsp.serverPath" });
  const python = { ...DEFAULT_SETTINGS, python: "/usr/bin/python3.11" };
  assert.deepEqual(resolveLaunch(python, context({ selected: "/env/bin/python" })).server, {
    command: "/usr/bin/python3.11",
    args: ["-I", "-m", "jaxlsp", "serve"],
    source: "jaxlsp.python",
  });
  assert.deepEqual(resolveLaunch(DEFAULT_SETTINGS, context({ selected: "/env/bin/python" })).server, {
    command: "/env/bin/python",
    args: PYTHON_ARGS,
    source: "Python extension",
  });
  assert.deepEqual(resolveLaunch(DEFAULT_SETTINGS, context()).server, { command: "/home/u/.local/bin/jaxlsp", args: ["serve"], source: "jaxlsp on PATH" });
  const bare = context({ find: onPath({ python3: "/usr/bin/python3" }) });
  assert.deepEqual(resolveLaunch(DEFAULT_SETTINGS, bare).server, { command: "/usr/bin/python3", args: PYTHON_ARGS, source: "default" });
  // Nothing found at all: python3 as it is, and its start fails with the usual message.
  assert.deepEqual(resolveLaunch(DEFAULT_SETTINGS, context({ find: () => undefined })).server, { command: "python3", args: PYTHON_ARGS, source: "default" });
  // Every Python start is isolated: the current folder never comes first on sys.path.
  assert.deepEqual(PYTHON_ARGS.slice(0, 1), ["-I"]);
});

test("before trust the Python extension's interpreter is not used at all, even outside the workspace", () => {
  const outside = "/opt/envs/ml/bin/python";
  const untrusted = resolveLaunch(DEFAULT_SETTINGS, context({ selected: outside, trusted: false }));
  assert.equal(untrusted.server.source, "jaxlsp on PATH");
  assert.equal(untrusted.selectedPython, undefined);
  assert.match(untrusted.withheld.join("\n"), /Python extension's interpreter \/opt\/envs\/ml\/bin\/python waits for workspace trust/);
  assert.deepEqual(initializationOptions(DEFAULT_SETTINGS, untrusted, false), { jaxlsp: { trusted: false, inlayHints: false } });
  // Once trusted (the extension restarts the server then), it is used and passed on.
  const trusted = resolveLaunch(DEFAULT_SETTINGS, context({ selected: outside, trusted: true }));
  assert.equal(trusted.server.command, outside);
  assert.equal(trusted.selectedPython, outside);
});

test("before trust no program inside a workspace folder starts, whatever named it", () => {
  const venv = "/home/u/project/.venv/bin/python";
  const settings = { ...DEFAULT_SETTINGS, python: venv, serverPath: "/home/u/project/.venv/bin/jaxlsp" };
  const inWs = context({ trusted: false, find: onPath({ jaxlsp: "/home/u/project/bin/jaxlsp", python3: "/usr/bin/python3" }) });
  const launch = resolveLaunch(settings, inWs);
  assert.deepEqual(launch.server, { command: "/usr/bin/python3", args: PYTHON_ARGS, source: "default" });
  assert.equal(launch.withheld.length, 3, launch.withheld.join("\n"));
  // Trusted, the same settings win.
  assert.equal(resolveLaunch(settings, { ...inWs, trusted: true }).server.command, "/home/u/project/.venv/bin/jaxlsp");
  // A sibling folder with a common prefix is outside.
  const sibling = resolveLaunch({ ...DEFAULT_SETTINGS, python: "/home/u/project-env/bin/python" }, context({ trusted: false }));
  assert.equal(sibling.server.command, "/home/u/project-env/bin/python");
});

test("a link or a script whose interpreter lies in the workspace counts as inside it", (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-launch-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const ws = path.join(root, "ws");
  const bin = path.join(root, "bin");
  fs.mkdirSync(path.join(ws, ".venv", "bin"), { recursive: true });
  fs.mkdirSync(bin);
  const python = path.join(ws, ".venv", "bin", "python");
  fs.writeFileSync(python, "#!/bin/sh\n", { mode: 0o755 });
  const script = path.join(bin, "jaxlsp");
  fs.writeFileSync(script, `#!${python}\nimport sys\n`, { mode: 0o755 });
  const link = path.join(bin, "python3");
  fs.symlinkSync(python, link);
  const plain = path.join(bin, "tool");
  fs.writeFileSync(plain, "#!/bin/sh\n", { mode: 0o755 });
  assert.equal(inWorkspace(script, [ws]), true);
  assert.equal(inWorkspace(link, [ws]), true);
  assert.equal(inWorkspace(plain, [ws]), false);
  // The workspace opened through a link to it is the same workspace.
  const wsLink = path.join(root, "ws-link");
  fs.symlinkSync(ws, wsLink);
  assert.equal(inWorkspace(python, [wsLink]), true);
  const launch = resolveLaunch(DEFAULT_SETTINGS, context({ trusted: false, folders: [ws], find: (c) => which(c, { PATH: bin }) }));
  assert.equal(launch.server.source, "default", "both jaxlsp and python3 on PATH lead into the workspace");
  assert.equal(launch.server.command, "python3");
});

test("which: absolute PATH entries only; paths as they are", (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "jaxlsp-which-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const tool = path.join(root, "jaxlsp");
  fs.writeFileSync(tool, "#!/bin/sh\n", { mode: 0o755 });
  fs.writeFileSync(path.join(root, "data"), "", { mode: 0o644 });
  assert.equal(which("jaxlsp", { PATH: `relative${path.delimiter}${root}` }), tool);
  assert.equal(which("jaxlsp", { PATH: "." }, root), undefined, "a relative PATH entry is never searched");
  assert.equal(which("data", { PATH: root }), undefined, "not executable");
  assert.equal(which(tool, {}), tool);
  assert.equal(which("./jaxlsp", {}, root), tool);
});

test("which on Windows: Path in any case, PATHEXT's extensions, drive paths", () => {
  const files = new Set(["C:\\Python312\\python.exe", "C:\\tools\\jaxlsp.cmd", "D:\\env\\Scripts\\python.exe"]);
  const exists = (file: string) => files.has(file);
  const env = { Path: "relative;C:\\tools;C:\\Python312", PATHEXT: ".COM;.EXE;.BAT;.CMD" };
  assert.equal(which("python", env, "C:\\", "win32", exists), "C:\\Python312\\python.exe");
  assert.equal(which("python.exe", env, "C:\\", "win32", exists), "C:\\Python312\\python.exe");
  assert.equal(which("jaxlsp", env, "C:\\", "win32", exists), "C:\\tools\\jaxlsp.cmd");
  assert.equal(which("python3", env, "C:\\", "win32", exists), undefined);
  assert.equal(which("D:\\env\\Scripts\\python", {}, "C:\\", "win32", exists), "D:\\env\\Scripts\\python.exe");
  assert.equal(which("python", { PATH: "C:\\Python312" }, "C:\\", "win32", exists), "C:\\Python312\\python.exe", "no PATHEXT: the default list");
  assert.equal(which("python", { Path: "C:\\Python312" }, "/", "linux", exists), undefined, "elsewhere the name is case-sensitive and has no extension");
});

test("the working folder is never a workspace folder", () => {
  assert.equal(safeCwd(["/home/u/.config/Code/globalStorage/jaxlsp.jaxlsp", "/tmp"], folders), "/home/u/.config/Code/globalStorage/jaxlsp.jaxlsp");
  assert.equal(safeCwd(["/home/u/project/.storage", "/tmp"], folders), "/tmp");
  assert.equal(safeCwd([undefined, "relative", "/tmp"], folders), "/tmp");
  assert.equal(safeCwd(["/tmp"], ["/tmp"]), "/");
});

test("initializationOptions carry trust and only the settings that are set", () => {
  const launch = resolveLaunch(DEFAULT_SETTINGS, context({ selected: "/env/bin/python" }));
  assert.deepEqual(initializationOptions(DEFAULT_SETTINGS, launch, true), {
    jaxlsp: { trusted: true, inlayHints: false, selectedPython: "/env/bin/python", learn: { onOpen: "ask" } },
  });
  // learning on open: only in a trusted workspace, and not at all when turned off
  assert.deepEqual(initializationOptions({ ...DEFAULT_SETTINGS, "learn.onOpen": "off" }, launch, true), {
    jaxlsp: { trusted: true, inlayHints: false, selectedPython: "/env/bin/python" },
  });
  const settings = { ...DEFAULT_SETTINGS, python: "/usr/bin/python3", timeout: 30, device: "cuda:0", inlayHints: true };
  const other = resolveLaunch(settings, context({ trusted: false }));
  assert.deepEqual(initializationOptions(settings, other, false), {
    jaxlsp: { trusted: false, inlayHints: true, python: "/usr/bin/python3", timeout: 30, device: "cuda:0" },
  });
  const off = { ...DEFAULT_SETTINGS, liveShapes: false, replay: false }; // sent only when turned off
  assert.deepEqual(initializationOptions(off, launch, true), {
    jaxlsp: {
      trusted: true,
      inlayHints: false,
      selectedPython: "/env/bin/python",
      liveShapes: false,
      replay: false,
      learn: { onOpen: "ask" },
    },
  });
});

test("settings of the wrong type fall back to their defaults", () => {
  const values: Record<string, unknown> = { python: "  /usr/bin/python3 ", timeout: -4, device: 3, inlayHints: "yes", "learn.onOpen": true };
  const config = { get: <T>(key: string, fallback: T): T => (key in values ? (values[key] as T) : fallback) };
  assert.deepEqual(readSettings(config), {
    python: "/usr/bin/python3",
    serverPython: "",
    serverPath: "",
    timeout: 0,
    device: "",
    inlayHints: false,
    liveShapes: true,
    replay: true,
    "learn.onOpen": "ask",
  });
});

test("the Python extension's interpreter: resolved executable, else the path, else nothing", async () => {
  const api = (resolved: unknown, fail = false) => ({
    environments: {
      getActiveEnvironmentPath: () => {
        if (fail) throw new Error("not ready");
        return { path: "/env" };
      },
      resolveEnvironment: async () => resolved as never,
    },
  });
  assert.equal(await selectedInterpreter(api({ executable: { uri: { fsPath: "/env/bin/python" } } })), "/env/bin/python");
  assert.equal(await selectedInterpreter(api(undefined)), "/env");
  assert.equal(await selectedInterpreter(api(undefined, true)), undefined);
  assert.equal(await selectedInterpreter(undefined), undefined);
  assert.equal(await selectedInterpreter({}), undefined);
});
