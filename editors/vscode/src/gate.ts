/**
 * Counts requests in flight whose answer the extension acts on itself, so the
 * `window/showDocument` the server sends during them is not acted on a second time.
 */
export class Gate {
  private open = 0;

  get active(): boolean {
    return this.open > 0;
  }

  async during<T>(work: () => Promise<T>): Promise<T> {
    this.open += 1;
    try {
      return await work();
    } finally {
      this.open -= 1;
    }
  }
}

/**
 * What to do with the server's `window/showDocument`: during our own reveal the extension opens
 * the range itself (beside the panel), during our own open-in-browser it opens the URL itself
 * (through `asExternalUri`); other external URLs also go through `asExternalUri`; the rest is
 * vscode-languageclient's default.
 */
export function routeShowDocument(params: { external?: boolean }, reveal: Gate, browser: Gate): "handled" | "openExternal" | "default" {
  if (params.external) return browser.active ? "handled" : "openExternal";
  return reveal.active ? "handled" : "default";
}
