/** Which server command starts, with which initialization options. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_SETTINGS, initializationOptions, readSettings, resolveLaunch, selectedInterpreter } from "../src/server";

const folders = ["/home/u/project"];

test("jaxlsp.serverPath, then jaxlsp.python, then the Python extension, then python3", () => {
  const all = { ...DEFAULT_SETTINGS, serverPath: "/opt/bin/jaxlsp", python: "/usr/bin/python3.11" };
  assert.deepEqual(resolveLaunch(all, "/env/bin/python", true, folders).server, { command: "/opt/bin/jaxlsp", args: ["serve"], source: "jaxlsp.serverPath" });
  const python = { ...DEFAULT_SETTINGS, python: "/usr/bin/python3.11" };
  assert.deepEqual(resolveLaunch(python, "/env/bin/python", true, folders).server, {
    command: "/usr/bin/python3.11",
    args: ["-m", "jaxlsp", "serve"],
    source: "jaxlsp.python",
  });
  assert.deepEqual(resolveLaunch(DEFAULT_SETTINGS, "/env/bin/python", true, folders).server, {
    command: "/env/bin/python",
    args: ["-m", "jaxlsp", "serve"],
    source: "Python extension",
  });
  assert.deepEqual(resolveLaunch(DEFAULT_SETTINGS, undefined, true, folders).server, { command: "python3", args: ["-m", "jaxlsp", "serve"], source: "default" });
});

test("an untrusted workspace never starts the interpreter inside it", () => {
  const venv = "/home/u/project/.venv/bin/python";
  const untrusted = resolveLaunch(DEFAULT_SETTINGS, venv, false, folders);
  assert.equal(untrusted.server.command, "python3");
  assert.equal(untrusted.selectedPython, undefined);
  assert.equal(untrusted.withheldPython, venv);
  const trusted = resolveLaunch(DEFAULT_SETTINGS, venv, true, folders);
  assert.equal(trusted.server.command, venv);
  assert.equal(trusted.selectedPython, venv);
  // outside every folder it is not workspace code; a sibling folder with a common prefix is outside
  assert.equal(resolveLaunch(DEFAULT_SETTINGS, "/home/u/project-env/bin/python", false, folders).server.command, "/home/u/project-env/bin/python");
});

test("initializationOptions carry trust and only the settings that are set", () => {
  const launch = resolveLaunch(DEFAULT_SETTINGS, "/env/bin/python", true, folders);
  assert.deepEqual(initializationOptions(DEFAULT_SETTINGS, launch, true), {
    jaxlsp: { trusted: true, inlayHints: false, selectedPython: "/env/bin/python" },
  });
  const settings = { ...DEFAULT_SETTINGS, python: "/usr/bin/python3", timeout: 30, device: "cuda:0", inlayHints: true };
  const other = resolveLaunch(settings, undefined, false, folders);
  assert.deepEqual(initializationOptions(settings, other, false), {
    jaxlsp: { trusted: false, inlayHints: true, python: "/usr/bin/python3", timeout: 30, device: "cuda:0" },
  });
});

test("settings of the wrong type fall back to their defaults", () => {
  const values: Record<string, unknown> = { python: "  /usr/bin/python3 ", timeout: -4, device: 3, inlayHints: "yes" };
  const config = { get: <T>(key: string, fallback: T): T => (key in values ? (values[key] as T) : fallback) };
  assert.deepEqual(readSettings(config), { python: "/usr/bin/python3", serverPath: "", timeout: 0, device: "", inlayHints: false });
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
