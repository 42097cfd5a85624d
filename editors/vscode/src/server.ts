/** How the server is started: which interpreter or executable, and the initialization options. */

import * as path from "node:path";

/** The `jaxlsp.*` settings that shape the server. */
export interface Settings {
  python: string;
  serverPath: string;
  timeout: number;
  device: string;
  inlayHints: boolean;
}

export const DEFAULT_SETTINGS: Settings = { python: "", serverPath: "", timeout: 0, device: "", inlayHints: false };

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for messages: `setting`, `serverPath`, `python extension`, `default`. */
  source: string;
}

/** What the server is started with, and what the extension tells it. */
export interface Launch {
  server: ServerCommand;
  /** The Python extension's interpreter, when it is known and may be used. */
  selectedPython?: string;
  /** A selected interpreter held back until the workspace is trusted (it is workspace code). */
  withheldPython?: string;
}

function inside(file: string, folders: readonly string[]): boolean {
  const resolved = path.resolve(file);
  return folders.some((folder) => {
    const rel = path.relative(path.resolve(folder), resolved);
    return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
  });
}

/**
 * The server command, in order: the `jaxlsp.serverPath` executable, the `jaxlsp.python`
 * interpreter, the interpreter selected in the Python extension, `python3`.
 *
 * An untrusted workspace never starts a program that lies inside it (a selected `.venv` is
 * workspace code): the selected interpreter is withheld until trust is granted. The settings are
 * safe to use as they are, since VS Code reads `restrictedConfigurations` only from user settings
 * in restricted mode.
 */
export function resolveLaunch(
  settings: Settings,
  selected: string | undefined,
  trusted: boolean,
  folders: readonly string[],
): Launch {
  let selectedPython = selected || undefined;
  let withheldPython: string | undefined;
  if (selectedPython && !trusted && inside(selectedPython, folders)) {
    withheldPython = selectedPython;
    selectedPython = undefined;
  }
  let server: ServerCommand;
  if (settings.serverPath) {
    server = { command: settings.serverPath, args: ["serve"], source: "jaxlsp.serverPath" };
  } else if (settings.python) {
    server = { command: settings.python, args: ["-m", "jaxlsp", "serve"], source: "jaxlsp.python" };
  } else if (selectedPython) {
    server = { command: selectedPython, args: ["-m", "jaxlsp", "serve"], source: "Python extension" };
  } else {
    server = { command: "python3", args: ["-m", "jaxlsp", "serve"], source: "default" };
  }
  return { server, selectedPython, withheldPython };
}

/** `initializationOptions.jaxlsp`: only what is set, so the server keeps its own defaults. */
export function initializationOptions(settings: Settings, launch: Launch, trusted: boolean): { jaxlsp: Record<string, unknown> } {
  const options: Record<string, unknown> = { trusted, inlayHints: settings.inlayHints };
  if (settings.python) options.python = settings.python;
  if (launch.selectedPython) options.selectedPython = launch.selectedPython;
  if (settings.timeout > 0) options.timeout = settings.timeout;
  if (settings.device) options.device = settings.device;
  return { jaxlsp: options };
}

/** Settings read through any `get(key, default)` (a `WorkspaceConfiguration`), coerced to their types. */
export function readSettings(config: { get<T>(key: string, fallback: T): T }): Settings {
  const str = (key: keyof Settings): string => {
    const value = config.get<unknown>(key, "");
    return typeof value === "string" ? value.trim() : "";
  };
  const timeout = config.get<unknown>("timeout", 0);
  return {
    python: str("python"),
    serverPath: str("serverPath"),
    timeout: typeof timeout === "number" && Number.isFinite(timeout) && timeout > 0 ? timeout : 0,
    device: str("device"),
    inlayHints: config.get<unknown>("inlayHints", false) === true,
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
