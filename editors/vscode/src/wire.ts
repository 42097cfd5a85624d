/** The jaxlsp LSP extensions the extension uses (docs/lsp-extensions.md), and the webview messages. */

// The server's wire types, generated from jaxlsp/server/wire.py (scripts/wire_ts.py; a test fails
// when they drift). Below them only what the server does not define: the webview's messages and
// the client seam the tests fill in.
export type {
  CostsResult,
  DiffResult,
  DiscoverResult,
  EntrypointItem,
  EnvironmentResult,
  ExampleChoice,
  LearnShapesArguments,
  LearnShapesResult,
  LiveStatus,
  LiveTarget,
  Location,
  NeedsInputItem,
  NeedsInputResult,
  NodesAtResult,
  Position,
  Range,
  TraceFinished,
  TraceParams,
  TraceResult,
  TraceSummary,
} from "./wire.generated";
import type { CostsResult, DiffResult, ExportParams, Location, NeedsInputResult, TraceResult } from "./wire.generated";

export type ExportFormat = NonNullable<ExportParams["format"]>;

export function isNeedsInput(value: unknown): value is NeedsInputResult {
  return typeof value === "object" && value !== null && Array.isArray((value as NeedsInputResult).needsInput);
}

export function isTraceResult(value: unknown): value is TraceResult {
  return typeof value === "object" && value !== null && typeof (value as TraceResult).traceId === "string";
}

/** View → host messages (the viewer contract, "webview" mode). */
export type ViewMessage =
  | { type: "ready" }
  | { type: "reveal"; id?: number; traceId: string; nodeId: string; frame?: number }
  | { type: "save"; filename: string; mime: string; base64: string };

/** Host → view messages. */
export type HostMessage =
  | { type: "graph"; traceId: string; graph: unknown; stale?: boolean; origin?: "server" | "file" }
  | { type: "highlight"; traceId: string; nodeIds: string[] }
  | { type: "stale"; traceId: string; stale: boolean }
  | { type: "theme"; kind: "light" | "dark" }
  /** After a trace's graph: what the overlays show beyond it (jaxlsp/costs, jaxlsp/diff against the previous trace). */
  | { type: "extras"; traceId: string; analysis: CostsResult | null; diff: DiffResult | null }
  /** The answer to the view's reveal `id`: where the editor went, or why it did not. */
  | { type: "revealed"; id: number; ok: true; location: Location }
  | { type: "revealed"; id: number; ok: false; error: string };

/** The part of vscode-languageclient's client the logic needs: tests pass a fake or a raw connection. */
export interface LspClient {
  /** `token`: a cancellation token (vscode's), sent on as `$/cancelRequest`. */
  sendRequest<R>(method: string, params: unknown, token?: unknown): Promise<R>;
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
