/** The jaxlsp LSP extensions the extension uses (docs/lsp-extensions.md), and the webview messages. */

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface Location {
  uri: string;
  range: Range;
}

export interface EntrypointItem {
  name: string;
  kind: string;
  range: Range;
  reason: string;
}

export interface DiscoverResult {
  entrypoints: EntrypointItem[];
  drivers: EntrypointItem[];
}

export interface TraceSummary {
  ops: number;
  values: number;
  groups: number;
  parameters: number;
  outputs: string[];
}

export interface TraceResult {
  traceId: string;
  summary: TraceSummary;
  coverage: { complete: boolean; notes: string[] };
  freshness: string;
  interpreter: string;
  /** How the interpreter was chosen (docs/environments.md). */
  interpreterRoute?: string;
  profile: string | null;
  /** With `save`: the jaxlsp.toml the profile was written to. */
  saved?: string;
  /** Where the inputs came from without a profile: "tests/test_models.py:25 (test)". */
  inputsFrom?: string;
}

/** A runnable example of the workspace that reaches the target (docs/lsp-extensions.md). */
export interface ExampleChoice {
  example: string;
  kind: "test" | "script" | "module";
  path: string;
  static: boolean;
  via?: string;
}

/** One missing piece of a profile (docs/recipes.md, "Needs input"). */
export interface NeedsInputItem {
  path: string;
  kind: string;
  message: string;
  name?: string;
  [key: string]: unknown;
}

export interface NeedsInputResult {
  needsInput: NeedsInputItem[];
  /** The proposed profile: TOML text, or the table itself. */
  proposal?: unknown;
  profile?: string;
  toml?: string;
  /** Runnable examples that reach the target, best first: one pick traces it. */
  examples?: ExampleChoice[];
}

export interface TraceParams {
  textDocument: { uri: string };
  name: string;
  profile?: string;
  /** Key path → answer, for the items of a needs-input answer. */
  answers?: Record<string, unknown>;
  /** Write the completed profile to jaxlsp.toml. */
  save?: boolean;
  /** Run this example up to the target's first call to learn its inputs. */
  example?: string;
}

export interface TraceFinished {
  uri: string;
  name: string;
  ok: boolean;
  traceId?: string;
  error?: string;
}

export interface NodesAtResult {
  traceId: string | null;
  nodeIds: string[];
}

export type ExportFormat = "json" | "dot" | "html";

export function isNeedsInput(value: unknown): value is NeedsInputResult {
  return typeof value === "object" && value !== null && Array.isArray((value as NeedsInputResult).needsInput);
}

export function isTraceResult(value: unknown): value is TraceResult {
  return typeof value === "object" && value !== null && typeof (value as TraceResult).traceId === "string";
}

/** View → host messages (the viewer contract, "webview" mode). */
export type ViewMessage =
  | { type: "ready" }
  | { type: "reveal"; traceId: string; nodeId: string; frame?: number }
  | { type: "save"; filename: string; mime: string; base64: string };

/** Host → view messages. */
export type HostMessage =
  | { type: "graph"; traceId: string; graph: unknown; stale?: boolean; origin?: "server" | "file" }
  | { type: "highlight"; traceId: string; nodeIds: string[] }
  | { type: "stale"; traceId: string; stale: boolean }
  | { type: "theme"; kind: "light" | "dark" };

/** The part of vscode-languageclient's client the logic needs: tests pass a fake or a raw connection. */
export interface LspClient {
  sendRequest<R>(method: string, params: unknown): Promise<R>;
  sendNotification(method: string, params: unknown): Promise<void> | void;
}

/** JSON-RPC MethodNotFound. */
export const METHOD_NOT_FOUND = -32601;

export function errorCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : String(error);
}
