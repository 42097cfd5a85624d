/**
 * How the server is started: which program, from which folder, and the initialization options.
 *
 * Nothing of an untrusted workspace may run (docs/security.md): the server starts from a folder
 * outside every workspace folder, Python ignores the current folder (`-I`), and no program that
 * lies inside a workspace folder, or that the workspace chose (the Python extension's selection,
 * which `.vscode/settings.json` can set), starts before the workspace is trusted.
 */

import * as fs from "node:fs";
import * as path from "node:path";

/** The `jaxlsp.*` settings that shape the server. */
export interface Settings {
  python: string;
  /** `jaxlsp.serverPython`: the Python (>= 3.11) that runs the bundled server (see bundle.ts). */
  serverPython: string;
  serverPath: string;
  timeout: number;
  device: string;
  inlayHints: boolean;
  /** `jaxlsp.liveShapes`: re-trace on open and save (the server's default is on). */
  liveShapes: boolean;
  /** `jaxlsp.replay`: repeated Linen layers traced once (the server's default is on). */
  replay: boolean;
  /** `jaxlsp.learn.onOpen`: "ask" (once per trusted folder), "on" or "off" (the server's default). */
  "learn.onOpen": string;
}

export const DEFAULT_SETTINGS: Settings = {
  python: "",
  serverPython: "",
  serverPath: "",
  timeout: 0,
  device: "",
  inlayHints: false,
  liveShapes: true,
  replay: true,
  "learn.onOpen": "ask",
};

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for messages: `jaxlsp.serverPath`, `jaxlsp.python`, `Python extension`, `jaxlsp on PATH`, `default`. */
  source: string;
}

/** What the server is started with, and what the extension tells it. */
export interface Launch {
  server: ServerCommand;
  /** The server's working folder: outside every workspace folder. */
  cwd: string;
  /** The Python extension's interpreter, when it may be used (trusted workspaces only). */
  selectedPython?: string;
  /** Candidates passed over until the workspace is trusted, each with the reason (for the log). */
  withheld: string[];
}

/** `-I`: isolated mode, so neither the current folder nor PYTHON* variables nor the user site can shadow jaxlsp. */
export const PYTHON_ARGS = ["-I", "-m", "jaxlsp", "serve"];

/** Whether `file` is one of `folders` or lies inside one (a sibling with a common prefix does not). */
export function inside(file: string, folders: readonly string[]): boolean {
  const resolved = path.resolve(file);
  return folders.some((folder) => {
    const rel = path.relative(path.resolve(folder), resolved);
    return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
  });
}

/** Whether `file` is a file this process may run (on Windows, any file: the extension decides). */
function executableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** A variable of `env` by name, ignoring case on Windows, where `Path` and `PATH` are one variable. */
function variable(env: NodeJS.ProcessEnv, name: string, platform: NodeJS.Platform): string | undefined {
  if (platform !== "win32") return env[name];
  const key = Object.keys(env).find((k) => k.toUpperCase() === name);
  return key === undefined ? undefined : env[key];
}

/**
 * A command as the operating system would find it: a name without a separator through the
 * absolute entries of PATH (relative entries such as `.` would depend on the folder), a path as
 * it is (absolute, from the safe working folder). On Windows a name without one of PATHEXT's
 * extensions is tried with each of them, as cmd.exe does (`python` is `python.exe`). Undefined
 * when nothing executable is there.
 */
export function which(
  command: string,
  env: NodeJS.ProcessEnv = process.env,
  cwd = "/",
  platform: NodeJS.Platform = process.platform,
  isExecutable: (file: string) => boolean = executableFile,
): string | undefined {
  const paths = platform === "win32" ? path.win32 : path.posix;
  const names = [command];
  if (platform === "win32") {
    const extensions = (variable(env, "PATHEXT", platform) || ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean);
    const own = extensions.some((ext) => command.toUpperCase().endsWith(ext.toUpperCase()));
    if (!own) names.splice(0, 1, ...extensions.map((ext) => command + ext.toLowerCase()));
  }
  if (command.includes("/") || command.includes(paths.sep)) {
    return names.map((name) => paths.resolve(cwd, name)).find(isExecutable);
  }
  for (const dir of (variable(env, "PATH", platform) ?? "").split(paths.delimiter)) {
    if (!dir || !paths.isAbsolute(dir)) continue;
    const file = names.map((name) => paths.join(dir, name)).find(isExecutable);
    if (file) return file;
  }
  return undefined;
}

/** The path and, for a link, its target; for a script, its `#!` interpreter too (all must be outside the workspace). */
function programFiles(file: string): string[] {
  const files = [file];
  try {
    files.push(fs.realpathSync(file));
    const head = Buffer.alloc(256);
    const fd = fs.openSync(file, "r");
    const read = fs.readSync(fd, head, 0, head.length, 0);
    fs.closeSync(fd);
    const first = head.subarray(0, read).toString("latin1").split("\n", 1)[0];
    const interpreter = first.startsWith("#!") ? first.slice(2).trim().split(/\s+/, 1)[0] : "";
    if (interpreter.startsWith("/")) files.push(interpreter, ...(fs.existsSync(interpreter) ? [fs.realpathSync(interpreter)] : []));
  } catch {
    // unreadable: the path itself is checked
  }
  return files;
}

/** Whether a program (its path, link target or script interpreter) lies in a workspace folder (as given or resolved). */
export function inWorkspace(file: string, folders: readonly string[]): boolean {
  const all = folders.flatMap((folder) => {
    try {
      return [folder, fs.realpathSync(folder)];
    } catch {
      return [folder];
    }
  });
  return programFiles(file).some((f) => inside(f, all));
}

/** The first of `candidates` (the extension's global storage, the temporary folder, `/`) outside every workspace folder. */
export function safeCwd(candidates: readonly (string | undefined)[], folders: readonly string[]): string {
  for (const candidate of candidates) {
    if (candidate && path.isAbsolute(candidate) && !inside(candidate, folders)) return candidate;
  }
  return path.parse(process.cwd()).root;
}

export interface LaunchContext {
  /** The Python extension's interpreter, if it is installed and one is selected. */
  selected: string | undefined;
  trusted: boolean;
  /** Workspace folders (file system paths). */
  folders: readonly string[];
  /** The server's working folder (see `safeCwd`). */
  cwd: string;
  /** Finds a command as the system would (see `which`); tests pass their own. */
  find: (command: string) => string | undefined;
}

/**
 * The server command: the first of
 * 1. `jaxlsp.serverPath` (a `jaxlsp` executable, `serve`);
 * 2. `jaxlsp.python` (`<python> -I -m jaxlsp serve`);
 * 3. in a trusted workspace only, the interpreter selected in the Python extension;
 * 4. the `jaxlsp` console script on PATH;
 * 5. `python3 -I -m jaxlsp serve`.
 * Before trust, a candidate that lies inside a workspace folder is passed over (a `.venv` there is
 * workspace code); VS Code reads `jaxlsp.python` and `jaxlsp.serverPath` only from user settings
 * in restricted mode (`restrictedConfigurations`), so a workspace cannot name them either.
 * Commands are resolved to absolute paths here, so the server's PATH search never meets a
 * relative entry.
 */
export function resolveLaunch(settings: Settings, context: LaunchContext): Launch {
  const { trusted, folders } = context;
  const withheld: string[] = [];
  let selectedPython: string | undefined;
  if (context.selected && !trusted) {
    withheld.push(`the Python extension's interpreter ${context.selected} waits for workspace trust (a workspace can select it)`);
  } else if (context.selected) {
    selectedPython = context.selected;
  }
  const candidates: { command: string; args: string[]; source: string }[] = [];
  if (settings.serverPath) candidates.push({ command: settings.serverPath, args: ["serve"], source: "jaxlsp.serverPath" });
  if (settings.python) candidates.push({ command: settings.python, args: PYTHON_ARGS, source: "jaxlsp.python" });
  if (selectedPython) candidates.push({ command: selectedPython, args: PYTHON_ARGS, source: "Python extension" });
  candidates.push({ command: "jaxlsp", args: ["serve"], source: "jaxlsp on PATH" });
  candidates.push({ command: "python3", args: PYTHON_ARGS, source: "default" });
  for (const [index, candidate] of candidates.entries()) {
    const found = context.find(candidate.command);
    const last = index === candidates.length - 1;
    if (found === undefined) {
      // A setting that names nothing is still the user's choice: its start fails with a message.
      if (candidate.source.startsWith("jaxlsp.") || last) return { server: candidate, cwd: context.cwd, selectedPython, withheld };
      continue;
    }
    if (!trusted && inWorkspace(found, folders)) {
      withheld.push(`${found} (from ${candidate.source}) lies inside the workspace and waits for workspace trust`);
      if (candidate.source === "Python extension" && selectedPython === found) selectedPython = undefined;
      continue;
    }
    return { server: { ...candidate, command: found }, cwd: context.cwd, selectedPython, withheld };
  }
  // Unreachable (the last candidate always returns), kept for the type checker.
  return { server: candidates[candidates.length - 1], cwd: context.cwd, selectedPython, withheld };
}

/** `initializationOptions.jaxlsp`: only what is set, so the server keeps its own defaults. */
export function initializationOptions(settings: Settings, launch: Launch, trusted: boolean): { jaxlsp: Record<string, unknown> } {
  const options: Record<string, unknown> = { trusted, inlayHints: settings.inlayHints };
  if (settings.python) options.python = settings.python;
  if (launch.selectedPython) options.selectedPython = launch.selectedPython;
  if (settings.timeout > 0) options.timeout = settings.timeout;
  if (settings.device) options.device = settings.device;
  if (!settings.liveShapes) options.liveShapes = false;
  if (!settings.replay) options.replay = false;
  // nothing learns before trust; the extension restarts the server once the workspace is trusted
  if (trusted && settings["learn.onOpen"] !== "off") options.learn = { onOpen: settings["learn.onOpen"] };
  return { jaxlsp: options };
}

/** Settings read through any `get(key, default)` (a `WorkspaceConfiguration`), coerced to their types. */
export function readSettings(config: { get<T>(key: string, fallback: T): T }): Settings {
  const str = (key: keyof Settings): string => {
    const value = config.get<unknown>(key, "");
    return typeof value === "string" ? value.trim() : "";
  };
  const timeout = config.get<unknown>("timeout", 0);
  const onOpen = config.get<unknown>("learn.onOpen", "ask");
  return {
    python: str("python"),
    serverPython: str("serverPython"),
    serverPath: str("serverPath"),
    timeout: typeof timeout === "number" && Number.isFinite(timeout) && timeout > 0 ? timeout : 0,
    device: str("device"),
    inlayHints: config.get<unknown>("inlayHints", false) === true,
    liveShapes: config.get<unknown>("liveShapes", true) !== false,
    replay: config.get<unknown>("replay", true) !== false,
    "learn.onOpen": onOpen === "on" || onOpen === "off" ? onOpen : "ask",
  };
}

/** The subset of the Python extension's API (`ms-python.python` exports) that is read. */
export interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: unknown): { id?: string; path: string };
    resolveEnvironment(env: unknown): Promise<{ executable?: { uri?: { fsPath: string } } } | undefined>;
    onDidChangeActiveEnvironmentPath?: (listener: () => void) => { dispose(): void };
  };
}

/** The interpreter selected in the Python extension, or undefined (no extension, no selection, API errors). */
export async function selectedInterpreter(api: PythonApi | undefined, resource?: unknown): Promise<string | undefined> {
  const environments = api?.environments;
  if (!environments) return undefined;
  try {
    const active = environments.getActiveEnvironmentPath(resource);
    const resolved = await environments.resolveEnvironment(active);
    return resolved?.executable?.uri?.fsPath || active.path || undefined;
  } catch {
    return undefined;
  }
}
