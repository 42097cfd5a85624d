/** Needs-input answers: parse what the user types for each missing item, ask for them, and ask to save. */

import * as vscode from "vscode";
import type { ExampleChoice, NeedsInputItem, NeedsInputResult } from "./wire";

export type Parsed = { ok: true; value: unknown } | { ok: false; error: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function positiveInt(text: string): number | undefined {
  return /^[1-9][0-9]*$/.test(text) ? Number(text) : undefined;
}

/**
 * JSON, or a TOML inline value as written in jaxlsp.toml (`{ kind = "array", shape = [4, 3] }`,
 * single-quoted strings): both are what docs/recipes.md shows, so either is accepted.
 */
export function parseLiteral(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    // not JSON: try the TOML inline form below
  }
  const json = text
    .replace(/'([^'\\]*)'/g, (_m, s: string) => JSON.stringify(s))
    .replace(/([{,]\s*)([A-Za-z_][A-Za-z0-9_-]*)\s*=/g, (_m, lead: string, key: string) => `${lead}"${key}":`)
    .replace(/([{,]\s*)("(?:[^"\\]|\\.)*")\s*=/g, (_m, lead: string, key: string) => `${lead}${key}:`);
  try {
    return { ok: true, value: JSON.parse(json) };
  } catch {
    return { ok: false, error: `expected JSON or a TOML inline value, got ${JSON.stringify(text)}` };
  }
}

/** A shape: `[4, "batch", 3]`, `[4, batch, 3]`, `(4, 3)` or `4, 3`; sizes are positive integers or names. */
export function parseShape(text: string): Parsed {
  let body = text.trim();
  if ((body.startsWith("[") && body.endsWith("]")) || (body.startsWith("(") && body.endsWith(")"))) {
    body = body.slice(1, -1);
  }
  if (body.trim() === "") return { ok: true, value: [] };
  const dims: (number | string)[] = [];
  for (const raw of body.split(",")) {
    const item = raw.trim().replace(/^["']|["']$/g, "");
    const size = positiveInt(item);
    if (size !== undefined) dims.push(size);
    else if (NAME.test(item)) dims.push(item);
    else return { ok: false, error: `expected positive integers or dimension names, got ${JSON.stringify(raw.trim())}` };
  }
  return { ok: true, value: dims };
}

/** The answer to one item, by its kind (`dimension`, `shape`, `value`, `inputs`). */
export function parseAnswer(item: Pick<NeedsInputItem, "kind">, text: string): Parsed {
  const trimmed = text.trim();
  if (trimmed === "") return { ok: false, error: "an answer is needed" };
  switch (item.kind) {
    case "dimension": {
      const size = positiveInt(trimmed);
      return size !== undefined ? { ok: true, value: size } : { ok: false, error: `expected a positive integer, got ${JSON.stringify(trimmed)}` };
    }
    case "shape":
      return parseShape(trimmed);
    case "inputs": {
      const parsed = parseLiteral(trimmed);
      if (parsed.ok && (typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value))) {
        return { ok: false, error: "expected a table: { args = [...], kwargs = {...} } or { factory = \"module:function\" }" };
      }
      return parsed;
    }
    default:
      return parseLiteral(trimmed);
  }
}

function placeholder(item: NeedsInputItem): string {
  switch (item.kind) {
    case "dimension":
      return "a positive integer, e.g. 32";
    case "shape":
      return "e.g. [32, 784] or [batch, 784]";
    case "inputs":
      return 'e.g. { args = [{ kind = "array", shape = [4, 3] }] }';
    default:
      return 'JSON or TOML: 3, "relu", { kind = "array", shape = [4] }';
  }
}

/** Asks for every item in turn; undefined when the user cancels one. */
export async function promptAnswers(items: readonly NeedsInputItem[], target: string): Promise<Record<string, unknown> | undefined> {
  const answers: Record<string, unknown> = {};
  for (const [index, item] of items.entries()) {
    const text = await vscode.window.showInputBox({
      title: `jaxlsp: ${target} needs input (${index + 1}/${items.length})`,
      prompt: item.message || item.path,
      placeHolder: placeholder(item),
      ignoreFocusOut: true,
      validateInput: (value: string) => {
        const parsed = parseAnswer(item, value);
        return parsed.ok ? undefined : parsed.error;
      },
    });
    if (text === undefined) return undefined;
    const parsed = parseAnswer(item, text);
    if (!parsed.ok) return undefined;
    answers[item.path] = parsed.value;
  }
  return answers;
}

export const SAVE = "Save";
export const DONT_SAVE = "Don't save";

/** Whether to write the completed profile to jaxlsp.toml; dismissing the question means no. */
export async function askSave(result: NeedsInputResult): Promise<boolean> {
  const name = result.profile ? ` "${result.profile}"` : "";
  const answer = await vscode.window.showInformationMessage(
    `Save this profile${name} to jaxlsp.toml? Saved, the next trace of this target needs no answers.`,
    SAVE,
    DONT_SAVE,
  );
  return answer === SAVE;
}

export const BY_HAND = "Enter the inputs by hand";

/**
 * When the server offers runnable examples, one pick among them (or the manual answers):
 * the example's text, null for the manual answers, undefined when the user dismisses the pick.
 */
export async function pickExample(examples: readonly ExampleChoice[] | undefined, target: string): Promise<string | null | undefined> {
  if (!examples || examples.length === 0) return null;
  const items = [
    ...examples.map((choice) => ({
      label: choice.example,
      description: `${choice.kind}, ${choice.path}`,
      detail: choice.via ? `runs up to ${target}'s first call: ${choice.via}` : `runs up to ${target}'s first call`,
      example: choice.example,
    })),
    { label: BY_HAND, description: "answer each missing value", example: null },
  ];
  const picked = (await vscode.window.showQuickPick(items, {
    title: `jaxlsp: learn the inputs of ${target} from one of the workspace's examples?`,
    ignoreFocusOut: true,
  })) as { example: string | null } | undefined;
  return picked === undefined ? undefined : picked.example;
}
