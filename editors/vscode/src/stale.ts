/** Whether an edited file is one of a trace's sources (graph `sources` keys are workspace-relative paths). */

import * as path from "node:path";

export function isSource(fsPath: string, keys: readonly string[], tracedFile: string | undefined): boolean {
  const file = path.resolve(fsPath);
  if (tracedFile !== undefined && path.resolve(tracedFile) === file) return true;
  const posix = file.split(path.sep).join("/");
  return keys.some((key) => {
    const k = key.split("\\").join("/");
    return path.isAbsolute(k) ? path.resolve(k) === file : posix.endsWith(`/${k.replace(/^\.\//, "")}`);
  });
}
