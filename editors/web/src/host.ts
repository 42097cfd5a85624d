/** The three ways the viewer talks to its host: the loopback bridge (http), a VS Code webview
 * (messages), or nothing (a static file). docs/viewer.md specifies each. */

import type { Config, Graph } from "./types";

export interface HostEvents {
  graph(traceId: string | null, graph: Graph, stale: boolean, origin: "server" | "file"): void;
  highlight(traceId: string, nodeIds: string[]): void;
  stale(traceId: string, stale: boolean): void;
  /** A newer trace of the target of ``replaces`` (the page's trace) finished. */
  trace(traceId: string, replaces: string | null): void;
  theme(kind: "light" | "dark"): void;
  error(message: string): void;
}

/** What going to a node's source came to, for the footer: "opened model.py:12", or why not. */
export interface RevealAnswer {
  ok: boolean;
  message: string;
}

interface LocationLike {
  uri: string;
  range: { start: { line: number } };
}

/** "opened model.py:12" for a location the host went to. */
export function opened(location: LocationLike): RevealAnswer {
  return { ok: true, message: `opened ${decodeURIComponent(location.uri.split("/").pop() ?? "")}:${location.range.start.line + 1}` };
}

export interface Host {
  readonly mode: Config["mode"];
  start(events: HostEvents): void;
  load(traceId: string): void;
  /** Go to the node's source; resolves once the host has answered, done or failed with the reason. */
  reveal(traceId: string | null, nodeId: string, frame?: number): Promise<RevealAnswer>;
  save(filename: string, mime: string, data: Blob): void;
}

function download(filename: string, data: Blob): void {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(data);
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

class HttpHost implements Host {
  readonly mode = "http" as const;
  private events!: HostEvents;
  constructor(private config: Config) {}

  private url(path: string, extra: Record<string, string> = {}): string {
    const q = new URLSearchParams({ token: this.config.token ?? "", ...extra });
    return `${path}?${q}`;
  }

  start(events: HostEvents): void {
    this.events = events;
    const source = new EventSource(this.url("/events"));
    const on = (name: string, f: (data: Record<string, unknown>) => void): void =>
      source.addEventListener(name, (ev) => {
        try {
          f(JSON.parse((ev as MessageEvent).data));
        } catch (e) {
          events.error(`bad ${name} event: ${e}`);
        }
      });
    on("highlight", (d) => events.highlight(String(d.traceId), (d.nodeIds as string[]) ?? []));
    on("stale", (d) => events.stale(String(d.traceId), d.stale === true));
    on("trace", (d) => events.trace(String(d.traceId), typeof d.replaces === "string" ? d.replaces : null));
    if (this.config.traceId) this.load(this.config.traceId);
  }

  load(traceId: string): void {
    fetch(this.url("/graph", { trace: traceId }))
      .then(async (r) => {
        if (!r.ok) throw new Error(`${r.status} ${(await r.text()).slice(0, 200)}`);
        const stale = r.headers.get("X-Jaxlsp-Stale") === "1";
        this.events.graph(traceId, (await r.json()) as Graph, stale, "server");
      })
      .catch((e) => this.events.error(`could not load trace ${traceId}: ${e}`));
  }

  async reveal(traceId: string | null, nodeId: string, frame?: number): Promise<RevealAnswer> {
    const body: Record<string, unknown> = { traceId, nodeId };
    if (frame !== undefined) body.frame = frame;
    const r = await fetch(this.url("/reveal"), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const data = (await r.json()) as { location?: LocationLike; error?: string };
    if (!r.ok || !data.location) return { ok: false, message: `go to source failed: ${data.error ?? r.status}` };
    return opened(data.location);
  }

  save(filename: string, _mime: string, data: Blob): void {
    download(filename, data);
  }
}

interface VsCodeApi {
  postMessage(message: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

class WebviewHost implements Host {
  readonly mode = "webview" as const;
  private api: VsCodeApi = acquireVsCodeApi();
  /** Reveals waiting for the host's "revealed" answer, by request id. */
  private reveals = new Map<number, (answer: RevealAnswer) => void>();
  private nextReveal = 1;

  start(events: HostEvents): void {
    window.addEventListener("message", (ev: MessageEvent) => {
      const m = ev.data as Record<string, unknown> | null;
      if (!m || typeof m !== "object") return;
      switch (m.type) {
        case "graph":
          events.graph(String(m.traceId), m.graph as Graph, m.stale === true, m.origin === "file" ? "file" : "server");
          break;
        case "highlight":
          events.highlight(String(m.traceId), (m.nodeIds as string[]) ?? []);
          break;
        case "stale":
          events.stale(String(m.traceId), m.stale === true);
          break;
        case "theme":
          events.theme(m.kind === "light" ? "light" : "dark");
          break;
        case "revealed": {
          const done = this.reveals.get(Number(m.id));
          this.reveals.delete(Number(m.id));
          const location = m.location as LocationLike | undefined;
          if (m.ok === true && location) done?.(opened(location));
          else done?.({ ok: false, message: `go to source failed: ${String(m.error ?? "no answer")}` });
          break;
        }
      }
    });
    this.api.postMessage({ type: "ready" });
  }

  load(): void {
    this.api.postMessage({ type: "ready" });
  }

  reveal(traceId: string | null, nodeId: string, frame?: number): Promise<RevealAnswer> {
    const id = this.nextReveal++;
    const m: Record<string, unknown> = { type: "reveal", id, traceId, nodeId };
    if (frame !== undefined) m.frame = frame;
    return new Promise((resolve) => {
      this.reveals.set(id, resolve);
      this.api.postMessage(m);
    });
  }

  save(filename: string, mime: string, data: Blob): void {
    const reader = new FileReader();
    reader.onload = () => {
      const base64 = String(reader.result).split(",", 2)[1] ?? "";
      this.api.postMessage({ type: "save", filename, mime, base64 });
    };
    reader.readAsDataURL(data);
  }
}

class StaticHost implements Host {
  readonly mode = "static" as const;
  constructor(private config: Config) {}

  start(events: HostEvents): void {
    if (this.config.graph) events.graph(null, this.config.graph, false, "file");
    else events.error("no graph embedded in this page");
  }

  load(): void {}

  async reveal(): Promise<RevealAnswer> {
    return { ok: false, message: "going to source needs the language server: open the graph from the editor (jaxlsp/openGraph)" };
  }

  save(filename: string, _mime: string, data: Blob): void {
    download(filename, data);
  }
}

export function makeHost(config: Config): Host {
  if (config.mode === "http") return new HttpHost(config);
  if (config.mode === "webview") return new WebviewHost();
  return new StaticHost(config);
}
