/**
 * The server the extension carries, and the Python that runs it (issue 48).
 *
 * As the Python tools extensions (Ruff, Pylint, Mypy) do, the `.vsix` holds jaxlsp and its
 * libraries under `bundled/libs`; `bundled/tool/server.py` puts them first on `sys.path` and
 * starts `jaxlsp serve`. Nothing is installed into the workspace's environment: captures still run
 * in the workspace's interpreter (its `.venv`, the Python extension's selection, `jaxlsp.python`),
 * which needs only JAX. The server's own Python is the first >= 3.11 of `jaxlsp.serverPython`,
 * `jaxlsp.python`, the Python extension's interpreter (trusted workspaces only), then `python3`
 * (and `python3.14` ... `python3.11`) on PATH; before trust, a program inside a workspace folder
 * is never run, not even to ask its version. `jaxlsp.serverPath` (an installed `jaxlsp`) wins over
 * all of this, and a build without `bundled/libs` falls back to `resolveLaunch`'s installed server.
 */

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { type Launch, type LaunchContext, type Settings, inWorkspace } from "./server";

export const MIN_PYTHON: readonly [number, number] = [3, 11];

/** Where the bundled server lies inside the installed extension. */
export interface Bundle {
  /** `bundled/tool/server.py`. */
  entry: string;
  /** `bundled/libs`. */
  libs: string;
}

/** The bundle under `extensionPath`, or undefined when this build carries none (a development build). */
export function findBundle(extensionPath: string): Bundle | undefined {
  const entry = path.join(extensionPath, "bundled", "tool", "server.py");
  const libs = path.join(extensionPath, "bundled", "libs");
  return fs.existsSync(entry) && fs.existsSync(path.join(libs, "jaxlsp", "__init__.py")) ? { entry, libs } : undefined;
}

/** `python -I bundled/tool/server.py`: isolated, so neither the current folder nor PYTHON* variables nor the user site come first. */
export function bundledArgs(bundle: Bundle): string[] {
  return ["-I", bundle.entry];
}

export interface BundleContext extends LaunchContext {
  bundle: Bundle | undefined;
  /** The `major.minor.micro` of an interpreter (undefined when it does not run); tests pass their own. */
  version: (python: string) => Promise<string | undefined>;
  platform: NodeJS.Platform;
}

/** No Python to run the bundled server: the one message the user sees, and what was tried (for the log). */
export interface Missing {
  message: string;
  tried: string[];
}

/** Commands on PATH tried last, newest first after `python3`. */
export const PATH_PYTHONS = ["python3", "python3.14", "python3.13", "python3.12", "python3.11", "python"];

export function newEnough(version: string | undefined): boolean {
  const [major, minor] = (version ?? "").split(".").map(Number);
  return major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);
}

/** The command that installs a new enough Python on this platform, for the message. */
export function installHint(platform: NodeJS.Platform): string {
  if (platform === "darwin") return "brew install python@3.12";
  if (platform === "win32") return "winget install Python.Python.3.12";
  return "sudo apt install python3.11 (Debian, Ubuntu) or uv python install 3.12";
}

/**
 * The bundled server's launch: undefined when `jaxlsp.serverPath` is set or this build has no
 * bundle (the caller then uses `resolveLaunch`), a `Missing` when no Python >= 3.11 was found.
 */
export async function resolveBundledLaunch(settings: Settings, context: BundleContext): Promise<Launch | Missing | undefined> {
  const { bundle, trusted, folders } = context;
  if (settings.serverPath || bundle === undefined) return undefined;
  const withheld: string[] = [];
  const tried: string[] = [];
  let selectedPython: string | undefined;
  if (context.selected && !trusted) {
    withheld.push(`the Python extension's interpreter ${context.selected} waits for workspace trust (a workspace can select it)`);
  } else if (context.selected) {
    selectedPython = context.selected;
  }
  const candidates: { command: string; source: string }[] = [];
  if (settings.serverPython) candidates.push({ command: settings.serverPython, source: "jaxlsp.serverPython" });
  if (settings.python) candidates.push({ command: settings.python, source: "jaxlsp.python" });
  if (selectedPython) candidates.push({ command: selectedPython, source: "Python extension" });
  for (const name of PATH_PYTHONS) candidates.push({ command: name, source: `${name} on PATH` });
  const seen = new Set<string>();
  for (const candidate of candidates) {
    const found = context.find(candidate.command);
    if (found === undefined) {
      if (candidate.source === "jaxlsp.serverPython") tried.push(`jaxlsp.serverPython ${candidate.command} was not found`);
      continue;
    }
    if (seen.has(found)) continue;
    seen.add(found);
    if (!trusted && inWorkspace(found, folders)) {
      withheld.push(`${found} (from ${candidate.source}) lies inside the workspace and waits for workspace trust`);
      if (candidate.source === "Python extension") selectedPython = undefined;
      continue;
    }
    const version = await context.version(found);
    if (newEnough(version)) {
      return { server: { command: found, args: bundledArgs(bundle), source: `bundled server, ${candidate.source}` }, cwd: context.cwd, selectedPython, withheld };
    }
    tried.push(`${candidate.source}: ${found} is ${version ? `Python ${version}` : "not a working Python"}`);
  }
  const names = [...tried, ...withheld].join("; ");
  return {
    message:
      `jaxlsp: no Python ${MIN_PYTHON.join(".")} or newer to run its server (${names || "no python3 on PATH"}). ` +
      `Install one (${installHint(context.platform)}) or set jaxlsp.serverPython to one; your project's environment needs only JAX.`,
    tried: [...tried, ...withheld],
  };
}

export function isMissing(value: Launch | Missing | undefined): value is Missing {
  return value !== undefined && "message" in value;
}

/** `major.minor.micro` of `python`, run isolated from `cwd` (outside every workspace), or undefined. */
export function pythonVersion(cwd: string): (python: string) => Promise<string | undefined> {
  return (python) =>
    new Promise((resolve) => {
      execFile(python, ["-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], { cwd, timeout: 15000 }, (error, stdout) => {
        const text = String(stdout).trim();
        resolve(error || !/^\d+\.\d+\.\d+$/.test(text) ? undefined : text);
      });
    });
}

/** The one message when the server did not start: what ran, and what fixes it. */
export function startFailureMessage(launch: Launch, error: string): string {
  const what = `"${launch.server.command} ${launch.server.args.join(" ")}" (from ${launch.server.source})`;
  if (launch.server.source.startsWith("bundled server")) {
    return (
      `jaxlsp: the bundled server did not start with ${what}: ${error}. The jaxlsp output says why; ` +
      "set jaxlsp.serverPython to another Python 3.11 or newer, or jaxlsp.serverPath to an installed jaxlsp (pipx install jaxlsp)."
    );
  }
  if (launch.server.source === "jaxlsp.serverPath") {
    return `jaxlsp: could not start ${what}: ${error}. Install it (pipx install jaxlsp, or uv tool install jaxlsp) or clear jaxlsp.serverPath to use the bundled server.`;
  }
  return `jaxlsp: could not start ${what}: ${error}. Install jaxlsp in that interpreter (pip install jaxlsp) or set jaxlsp.python.`;
}
