/**
 * Needs-input answers: ask for each missing item and send what the user typed. The server parses
 * the text by the recipe's rules (docs/lsp-extensions.md, "Trace") and, when an answer does not
 * parse, answers needs-input again with `errors`: the item is asked again with the typed text and
 * the server's message. The extension parses nothing itself, so it behaves as every other client.
 */

import * as vscode from "vscode";
import type { NeedsInputItem, NeedsInputResult } from "./wire";

function placeholder(item: NeedsInputItem): string {
  switch (item.kind) {
    case "dimension":
      return "a positive integer, e.g. 32";
    case "shape":
      return "e.g. [32, 784] or [batch, 784]";
    case "inputs":
      return 'e.g. { args = [{ kind = "array", shape = [4, 3] }] }';
    default:
      return 'a TOML value as in jaxlsp.toml: 3, "relu", { kind = "array", shape = [4] }';
  }
}

/**
 * Asks for the items still to answer: those not answered yet and those whose answer the server
 * refused (prefilled with the typed text, its message shown until the text changes). The typed
 * text by path; undefined when the user cancels one.
 */
export async function promptAnswers(
  result: Pick<NeedsInputResult, "needsInput" | "errors">,
  target: string,
  typed: Readonly<Record<string, string>> = {},
): Promise<Record<string, string> | undefined> {
  const errors = result.errors ?? {};
  const items = result.needsInput.filter((item) => errors[item.path] !== undefined || typed[item.path] === undefined);
  const answers: Record<string, string> = {};
  for (const [index, item] of items.entries()) {
    const before = typed[item.path];
    const error = errors[item.path];
    const text = await vscode.window.showInputBox({
      title: `jaxlsp: ${target} needs input (${index + 1}/${items.length})`,
      // VS Code validates only what is typed, not the prefilled text: the server's message is in
      // the prompt too, so it shows from the start.
      prompt: error !== undefined ? `Not accepted: ${error}. ${item.message || item.path}` : item.message || item.path,
      placeHolder: placeholder(item),
      value: before,
      ignoreFocusOut: true,
      validateInput: (value: string) => {
        if (!value.trim()) return "an answer is needed";
        return error !== undefined && value === before ? error : undefined;
      },
    });
    if (text === undefined) return undefined;
    answers[item.path] = text;
  }
  return answers;
}

export const SAVE = "Save";
export const DONT_SAVE = "Don't save";

/** Whether to write the completed profile to jaxlsp.toml; dismissing the question means no. */
export async function askSave(result: Pick<NeedsInputResult, "profile">): Promise<boolean> {
  const name = result.profile ? ` "${result.profile}"` : "";
  const answer = await vscode.window.showInformationMessage(
    `Save this profile${name} to jaxlsp.toml? Saved, the next trace of this target needs no answers.`,
    SAVE,
    DONT_SAVE,
  );
  return answer === SAVE;
}
