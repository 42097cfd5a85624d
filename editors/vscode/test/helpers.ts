/** Shared test helpers: a scripted LSP client that records requests. */

import type { LspClient } from "../src/wire";

export type Handler = (params: any) => unknown;

export class ScriptedClient implements LspClient {
  readonly requests: { method: string; params: any }[] = [];
  readonly notifications: { method: string; params: any }[] = [];

  constructor(private readonly handlers: Record<string, Handler | Handler[]> = {}) {}

  async sendRequest<R>(method: string, params: unknown): Promise<R> {
    this.requests.push({ method, params });
    let handler = this.handlers[method];
    if (Array.isArray(handler)) handler = handler.shift() as Handler;
    if (handler === undefined) throw Object.assign(new Error(`Unhandled method ${method}`), { code: -32601 });
    return (await handler(params)) as R;
  }

  async sendNotification(method: string, params: unknown): Promise<void> {
    this.notifications.push({ method, params });
  }
}

/** Resolves once `condition` holds (polled each event-loop turn); fails after `ms`. */
export async function until(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
