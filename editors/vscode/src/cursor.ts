/** Cursor → graph: a debounced `jaxlsp/cursorMoved` for every viewer, and a `highlight` for the panel via `jaxlsp/nodesAt`. */

import type { LspClient, NodesAtResult } from "./wire";

export interface CursorEvent {
  uri: string;
  line: number;
  character: number;
}

export class CursorTracker {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private pending: CursorEvent | undefined;

  constructor(
    private readonly client: () => LspClient | undefined,
    private readonly panel: { readonly visible: boolean; readonly traceId: string | undefined; highlight(traceId: string, nodeIds: string[]): void },
    private readonly delayMs = 150,
  ) {}

  /** Called on every selection change; only the last one within the delay is sent. */
  moved(event: CursorEvent): void {
    this.pending = event;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.delayMs);
  }

  /** Sends the pending position now (the timer calls it; tests too). */
  async flush(): Promise<void> {
    const event = this.pending;
    this.pending = undefined;
    const client = this.client();
    if (event === undefined || client === undefined) return;
    const params = { textDocument: { uri: event.uri }, position: { line: event.line, character: event.character } };
    try {
      await client.sendNotification("jaxlsp/cursorMoved", params);
      if (!this.panel.visible || this.panel.traceId === undefined) return;
      const found = await client.sendRequest<NodesAtResult>("jaxlsp/nodesAt", params);
      // nothing on this line clears the panel's highlight
      if (found.traceId !== null) this.panel.highlight(found.traceId, found.nodeIds);
      else this.panel.highlight(this.panel.traceId, []);
    } catch {
      // a cursor move is not worth an error message: the next one tries again
    }
  }

  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}
