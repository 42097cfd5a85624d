/**
 * A small stand-in for the `vscode` module (the real one exists only inside VS Code): the parts
 * the extension's logic uses, with a `fake` controller that scripts the user's answers and
 * records what the extension showed.
 */

import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as fs from "node:fs/promises";

type Listener<T> = (event: T) => unknown;

export class Disposable {
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  constructor(private readonly callback: () => void = () => {}) {}
  dispose(): void {
    this.callback();
  }
}

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    });
  };
  fire(event: T): void {
    for (const listener of [...this.listeners]) listener(event);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    private readonly text: string,
  ) {}
  static parse(text: string): Uri {
    const scheme = text.slice(0, text.indexOf(":"));
    const pathname = scheme === "file" ? new URL(text).pathname : new URL(text).pathname;
    return new Uri(scheme, decodeURIComponent(pathname), text);
  }
  static file(fsPath: string): Uri {
    return Uri.parse(pathToFileURL(fsPath).toString());
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    if (base.scheme !== "file") throw new Error("fake Uri.joinPath: file URIs only");
    return Uri.file(path.join(base.fsPath, ...parts));
  }
  get fsPath(): string {
    return this.scheme === "file" ? fileURLToPath(this.text) : this.path;
  }
  toString(): string {
    return this.text;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  constructor(
    readonly start: Position,
    readonly end: Position,
  ) {}
}

export class Selection extends Range {
  get active(): Position {
    return this.end;
  }
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ViewColumn {
  Active = -1,
  Beside = -2,
  One = 1,
  Two = 2,
  Three = 3,
}

export enum ColorThemeKind {
  Light = 1,
  Dark = 2,
  HighContrast = 3,
  HighContrastLight = 4,
}

export class CancellationTokenSource {
  readonly token = { isCancellationRequested: false, onCancellationRequested: new EventEmitter<void>().event };
}

export class FakeStatusBarItem {
  text = "";
  tooltip: string | undefined;
  command: string | undefined;
  name: string | undefined;
  backgroundColor: ThemeColor | undefined;
  visible = false;
  constructor(
    readonly id: string,
    readonly alignment: StatusBarAlignment,
  ) {}
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.visible = false;
  }
}

export class FakeWebview {
  html = "";
  readonly cspSource = "https://fake.vscode-cdn.net";
  readonly posted: unknown[] = [];
  /** Set by a test to carry host → view messages somewhere (a browser page). */
  deliver: ((message: unknown) => unknown) | undefined;
  private readonly received = new EventEmitter<unknown>();
  readonly onDidReceiveMessage = this.received.event;
  asWebviewUri(uri: Uri): Uri {
    return Uri.parse(`${this.cspSource}${uri.path}`);
  }
  async postMessage(message: unknown): Promise<boolean> {
    this.posted.push(message);
    await this.deliver?.(message);
    return true;
  }
  /** What the page would send with `acquireVsCodeApi().postMessage`. */
  fromView(message: unknown): void {
    this.received.fire(message);
  }
}

export class FakeWebviewPanel {
  readonly webview = new FakeWebview();
  visible = true;
  viewColumn: ViewColumn | undefined = ViewColumn.Two;
  revealed = 0;
  private readonly disposed = new EventEmitter<void>();
  readonly onDidDispose = this.disposed.event;
  constructor(
    readonly viewType: string,
    readonly title: string,
    readonly showOptions: unknown,
    readonly options: { enableScripts?: boolean; retainContextWhenHidden?: boolean; localResourceRoots?: Uri[] },
  ) {}
  reveal(): void {
    this.revealed += 1;
  }
  dispose(): void {
    this.visible = false;
    this.disposed.fire();
  }
}

export interface Shown {
  kind: "info" | "warning" | "error";
  message: string;
  items: string[];
}

/** A named event (`workspace.onDidGrantWorkspaceTrust`, ...) that `fake.fire(name, event)` fires. */
function named<T>(name: string) {
  return (listener: Listener<T>): Disposable => {
    const emitter = (fake.emitters[name] ??= new EventEmitter<unknown>()) as EventEmitter<T>;
    return emitter.event(listener);
  };
}

/** The test's handle on the fake editor. */
export const fake = {
  emitters: {} as Record<string, EventEmitter<unknown>>,
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  pythonExtension: undefined as unknown,
  fire(name: string, event?: unknown): void {
    this.emitters[name]?.fire(event);
  },
  inputAnswers: [] as (string | undefined)[],
  inputBoxes: [] as { prompt?: string; title?: string; value?: string; validateInput?: (value: string) => string | undefined }[],
  messageAnswers: [] as (string | undefined)[],
  messages: [] as Shown[],
  quickPickAnswers: [] as ((items: unknown[]) => unknown)[],
  quickPicks: [] as unknown[][],
  saveDialogAnswers: [] as (Uri | undefined)[],
  openDialogAnswers: [] as (Uri[] | undefined)[],
  shownDocuments: [] as { uri: string; selection?: Range; viewColumn?: ViewColumn }[],
  panels: [] as FakeWebviewPanel[],
  statusItems: [] as FakeStatusBarItem[],
  externalOpened: [] as string[],
  externalMap: (uri: Uri): Uri => uri,
  executed: [] as { command: string; args: unknown[] }[],
  config: {} as Record<string, unknown>,
  themeEmitter: new EventEmitter<{ kind: ColorThemeKind }>(),
  reset(): void {
    this.emitters = {};
    this.commands = new Map();
    this.pythonExtension = undefined;
    this.inputAnswers = [];
    this.inputBoxes = [];
    this.messageAnswers = [];
    this.messages = [];
    this.quickPickAnswers = [];
    this.quickPicks = [];
    this.saveDialogAnswers = [];
    this.openDialogAnswers = [];
    this.shownDocuments = [];
    this.panels = [];
    this.statusItems = [];
    this.externalOpened = [];
    this.externalMap = (uri) => uri;
    this.executed = [];
    this.config = {};
    this.themeEmitter = new EventEmitter();
    window.activeColorTheme = { kind: ColorThemeKind.Dark };
    window.visibleTextEditors = [];
    workspace.workspaceFolders = undefined;
    workspace.isTrusted = true;
  },
};

function show(kind: Shown["kind"]) {
  return async (message: string, ...rest: unknown[]): Promise<string | undefined> => {
    const items = rest.filter((r): r is string => typeof r === "string");
    fake.messages.push({ kind, message, items });
    return items.length ? fake.messageAnswers.shift() : undefined;
  };
}

class FakeOutputChannel {
  readonly lines: string[] = [];
  logLevel = LogLevel.Info;
  onDidChangeLogLevel = new EventEmitter<number>().event;
  constructor(readonly name: string) {}
  append(text: string): void {
    this.lines.push(text);
  }
  appendLine(text: string): void {
    this.lines.push(text);
  }
  replace(text: string): void {
    this.lines.splice(0, this.lines.length, text);
  }
  trace(text: string): void {
    this.lines.push(text);
  }
  debug(text: string): void {
    this.lines.push(text);
  }
  info(text: string): void {
    this.lines.push(text);
  }
  warn(text: string): void {
    this.lines.push(text);
  }
  error(text: string | Error): void {
    this.lines.push(String(text));
  }
  clear(): void {
    this.lines.length = 0;
  }
  show(): void {}
  hide(): void {}
  dispose(): void {}
}

export const window = {
  outputChannels: [] as FakeOutputChannel[],
  tabGroups: { all: [] as unknown[], onDidChangeTabs: named("onDidChangeTabs"), onDidChangeTabGroups: named("onDidChangeTabGroups") },
  onDidChangeVisibleTextEditors: named("onDidChangeVisibleTextEditors"),
  onDidChangeActiveTextEditor: named("onDidChangeActiveTextEditor"),
  onDidChangeTextEditorSelection: named("onDidChangeTextEditorSelection"),
  createOutputChannel(name: string): FakeOutputChannel {
    const channel = new FakeOutputChannel(name);
    window.outputChannels.push(channel);
    return channel;
  },
  async withProgress<R>(_options: unknown, task: (progress: { report(v: unknown): void }, token: unknown) => Promise<R>): Promise<R> {
    return task({ report: () => undefined }, new CancellationTokenSource().token);
  },
  activeColorTheme: { kind: ColorThemeKind.Dark } as { kind: ColorThemeKind },
  visibleTextEditors: [] as { viewColumn?: ViewColumn }[],
  activeTextEditor: undefined as unknown,
  onDidChangeActiveColorTheme: (listener: Listener<{ kind: ColorThemeKind }>) => fake.themeEmitter.event(listener),
  createStatusBarItem(id: string, alignment: StatusBarAlignment): FakeStatusBarItem {
    const item = new FakeStatusBarItem(id, alignment);
    fake.statusItems.push(item);
    return item;
  },
  async showInputBox(options: { prompt?: string; title?: string; value?: string; validateInput?: (value: string) => string | undefined }): Promise<string | undefined> {
    fake.inputBoxes.push(options);
    const answer = fake.inputAnswers.shift();
    // like VS Code: an answer the validator refuses cannot be accepted
    if (answer !== undefined && options.validateInput?.(answer)) throw new Error(`fake: the input box refuses ${JSON.stringify(answer)}`);
    return answer;
  },
  showInformationMessage: show("info"),
  showWarningMessage: show("warning"),
  showErrorMessage: show("error"),
  async showQuickPick(items: unknown[]): Promise<unknown> {
    fake.quickPicks.push(items);
    const answer = fake.quickPickAnswers.shift();
    return answer ? answer(items) : undefined;
  },
  async showSaveDialog(): Promise<Uri | undefined> {
    return fake.saveDialogAnswers.shift();
  },
  async showOpenDialog(): Promise<Uri[] | undefined> {
    return fake.openDialogAnswers.shift();
  },
  createWebviewPanel(viewType: string, title: string, showOptions: unknown, options: FakeWebviewPanel["options"]): FakeWebviewPanel {
    const panel = new FakeWebviewPanel(viewType, title, showOptions, options);
    fake.panels.push(panel);
    return panel;
  },
  async showTextDocument(target: Uri | { uri: Uri }, options?: { selection?: Range; viewColumn?: ViewColumn }): Promise<unknown> {
    const uri = target instanceof Uri ? target : target.uri;
    fake.shownDocuments.push({ uri: uri.toString(), selection: options?.selection, viewColumn: options?.viewColumn });
    return {};
  },
};

export const workspace = {
  isTrusted: true,
  textDocuments: [] as unknown[],
  notebookDocuments: [] as unknown[],
  onDidOpenTextDocument: named("onDidOpenTextDocument"),
  onDidChangeTextDocument: named("onDidChangeTextDocument"),
  onDidCloseTextDocument: named("onDidCloseTextDocument"),
  onDidSaveTextDocument: named("onDidSaveTextDocument"),
  onWillSaveTextDocument: named("onWillSaveTextDocument"),
  onDidChangeConfiguration: named("onDidChangeConfiguration"),
  onDidChangeWorkspaceFolders: named("onDidChangeWorkspaceFolders"),
  onDidGrantWorkspaceTrust: named("onDidGrantWorkspaceTrust"),
  onDidOpenNotebookDocument: named("onDidOpenNotebookDocument"),
  onDidChangeNotebookDocument: named("onDidChangeNotebookDocument"),
  onDidCloseNotebookDocument: named("onDidCloseNotebookDocument"),
  onDidSaveNotebookDocument: named("onDidSaveNotebookDocument"),
  createFileSystemWatcher(): unknown {
    return { onDidCreate: named("fsCreate"), onDidChange: named("fsChange"), onDidDelete: named("fsDelete"), dispose: () => undefined };
  },
  async applyEdit(): Promise<boolean> {
    return true;
  },
  workspaceFolders: undefined as { uri: Uri; name: string; index: number }[] | undefined,
  fs: {
    async readFile(uri: Uri): Promise<Uint8Array> {
      return fs.readFile(uri.fsPath);
    },
    async writeFile(uri: Uri, content: Uint8Array): Promise<void> {
      await fs.writeFile(uri.fsPath, content);
    },
    async copy(source: Uri, target: Uri): Promise<void> {
      await fs.copyFile(source.fsPath, target.fsPath);
    },
  },
  asRelativePath(target: Uri): string {
    return target.fsPath;
  },
  async openTextDocument(options: { language: string; content: string }): Promise<{ uri: Uri; getText(): string }> {
    return { uri: Uri.parse("untitled:Untitled-1"), getText: () => options.content };
  },
  /** `fake.config` holds the `jaxlsp` section; other sections are empty. */
  getConfiguration(section?: string) {
    const values = section === undefined || section === "jaxlsp" ? fake.config : {};
    return {
      get<T>(key: string, fallback?: T): T | undefined {
        return key in values ? (values[key] as T) : fallback;
      },
      has: (key: string) => key in values,
      inspect: () => undefined,
      update: async () => undefined,
    };
  },
};

export const version = "1.91.0";

export const extensions = {
  getExtension(id: string): unknown {
    return id === "ms-python.python" ? fake.pythonExtension : undefined;
  },
};

export const env = {
  appName: "Visual Studio Code (fake)",
  language: "en",
  machineId: "fake",
  uriScheme: "vscode",
  async asExternalUri(uri: Uri): Promise<Uri> {
    return fake.externalMap(uri);
  },
  async openExternal(uri: Uri): Promise<boolean> {
    fake.externalOpened.push(uri.toString());
    return true;
  },
};

export const commands = {
  registerCommand(command: string, handler: (...args: unknown[]) => unknown): Disposable {
    if (fake.commands.has(command)) throw new Error(`command '${command}' already exists`);
    fake.commands.set(command, handler);
    return new Disposable(() => fake.commands.delete(command));
  },
  async executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
    fake.executed.push({ command, args });
    const handler = fake.commands.get(command);
    return handler ? handler(...args) : undefined;
  },
};

// ---- Enough more for vscode-languageclient itself (the activation test runs the real client) ----

const enumOf = (...names: string[]): Record<string, number> => Object.fromEntries(names.map((n, i) => [n, i + 1]));

export const DiagnosticSeverity = { Error: 0, Warning: 1, Information: 2, Hint: 3 };
export const DiagnosticTag = enumOf("Unnecessary", "Deprecated");
export const CodeActionTriggerKind = enumOf("Invoke", "Automatic");
export const CompletionItemKind = new Proxy({} as Record<string, number>, { get: () => 0 });
export const CompletionItemTag = enumOf("Deprecated");
export const CompletionTriggerKind = { Invoke: 0, TriggerCharacter: 1, TriggerForIncompleteCompletions: 2 };
export const DocumentHighlightKind = { Text: 0, Read: 1, Write: 2 };
export const FileType = { Unknown: 0, File: 1, Directory: 2, SymbolicLink: 64 };
export const FoldingRangeKind = enumOf("Comment", "Imports", "Region");
export const InlineCompletionTriggerKind = { Invoke: 0, Automatic: 1 };
export const SignatureHelpTriggerKind = enumOf("Invoke", "TriggerCharacter", "ContentChange");
export const SymbolKind = new Proxy({} as Record<string, number>, { get: () => 0 });
export const SymbolTag = enumOf("Deprecated");
export const TextDocumentSaveReason = enumOf("Manual", "AfterDelay", "FocusOut");
export const NotebookCellKind = enumOf("Markup", "Code");
export const ProgressLocation = { SourceControl: 1, Window: 10, Notification: 15 };
export const LogLevel = { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 };
export const InlayHintKind = enumOf("Type", "Parameter");

export class CodeActionKind {
  static readonly Empty = new CodeActionKind("");
  static readonly QuickFix = new CodeActionKind("quickfix");
  static readonly Refactor = new CodeActionKind("refactor");
  static readonly RefactorExtract = new CodeActionKind("refactor.extract");
  static readonly RefactorInline = new CodeActionKind("refactor.inline");
  static readonly RefactorRewrite = new CodeActionKind("refactor.rewrite");
  static readonly Source = new CodeActionKind("source");
  static readonly SourceOrganizeImports = new CodeActionKind("source.organizeImports");
  constructor(readonly value: string) {}
  append(part: string): CodeActionKind {
    return new CodeActionKind(this.value ? `${this.value}.${part}` : part);
  }
  contains(other: CodeActionKind): boolean {
    return this.value === "" || other.value === this.value || other.value.startsWith(`${this.value}.`);
  }
  intersects(other: CodeActionKind): boolean {
    return this.contains(other) || other.contains(this);
  }
}

/** A data holder: keeps its constructor arguments under the names the client reads. */
function holder(...names: string[]) {
  return class {
    [key: string]: unknown;
    constructor(...args: unknown[]) {
      names.forEach((name, i) => {
        this[name] = args[i];
      });
    }
  };
}

export class CancellationError extends Error {}
export const CallHierarchyItem = holder("kind", "name", "detail", "uri", "range", "selectionRange");
export const CallHierarchyIncomingCall = holder("from", "fromRanges");
export const CallHierarchyOutgoingCall = holder("to", "fromRanges");
export const CodeLens = holder("range", "command");
export const CodeAction = holder("title", "kind");
export const Color = holder("red", "green", "blue", "alpha");
export const ColorInformation = holder("range", "color");
export const ColorPresentation = holder("label");
export const CompletionItem = holder("label", "kind");
export const CompletionList = holder("items", "isIncomplete");
export const Diagnostic = holder("range", "message", "severity");
export const DiagnosticRelatedInformation = holder("location", "message");
export const DocumentHighlight = holder("range", "kind");
export const DocumentLink = holder("range", "target");
export const DocumentSymbol = holder("name", "detail", "kind", "range", "selectionRange");
export const FoldingRange = holder("start", "end", "kind");
export const Hover = holder("contents", "range");
export const InlayHint = holder("position", "label", "kind");
export const InlayHintLabelPart = holder("value");
export const InlineCompletionItem = holder("insertText", "range", "command");
export const InlineCompletionList = holder("items");
export const InlineValueEvaluatableExpression = holder("range", "expression");
export const InlineValueText = holder("range", "text");
export const InlineValueVariableLookup = holder("range", "variableName", "caseSensitiveLookup");
export const LinkedEditingRanges = holder("ranges", "wordPattern");
export const Location = holder("uri", "range");
export const ParameterInformation = holder("label", "documentation");
export const RelativePattern = holder("baseUri", "pattern");
export const SelectionRange = holder("range", "parent");
export const SemanticTokens = holder("data", "resultId");
export const SemanticTokensEdit = holder("start", "deleteCount", "data");
export const SemanticTokensEdits = holder("edits", "resultId");
export const SignatureHelp = holder();
export const SignatureInformation = holder("label", "documentation");
export const SnippetString = holder("value");
export const SnippetTextEdit = holder("range", "snippet");
export const SymbolInformation = holder("name", "kind", "containerName", "location");
export const TextEdit = holder("range", "newText");
export const TypeHierarchyItem = holder("kind", "name", "detail", "uri", "range", "selectionRange");
export const WorkspaceEdit = holder();

export class MarkdownString {
  constructor(public value = "") {}
  appendMarkdown(text: string): this {
    this.value += text;
    return this;
  }
  appendText(text: string): this {
    this.value += text;
    return this;
  }
  appendCodeblock(code: string): this {
    this.value += `\n\`\`\`\n${code}\n\`\`\`\n`;
    return this;
  }
}


/** Providers the client registered, by kind (`registerCodeLensProvider` → `CodeLens`). */
export const registered: Record<string, unknown[]> = {};

export const languages = new Proxy({} as Record<string, unknown>, {
  get: (_target, key: string) => {
    if (key === "match") return () => 10;
    if (key === "createDiagnosticCollection") {
      return () => {
        const entries = new Map<string, unknown[]>();
        return {
          set: (uri: Uri | [Uri, unknown[]][], diagnostics?: unknown[]) => {
            if (Array.isArray(uri)) for (const [u, d] of uri) entries.set(u.toString(), d);
            else entries.set(uri.toString(), diagnostics ?? []);
          },
          get: (uri: Uri) => entries.get(uri.toString()),
          delete: (uri: Uri) => entries.delete(uri.toString()),
          clear: () => entries.clear(),
          forEach: (f: (uri: Uri, d: unknown[]) => void) => entries.forEach((d, u) => f(Uri.parse(u), d)),
          has: (uri: Uri) => entries.has(uri.toString()),
          dispose: () => entries.clear(),
          entries,
        };
      };
    }
    if (key.startsWith("register")) {
      return (_selector: unknown, provider: unknown) => {
        (registered[key.replace(/^register|Provider$|sProvider$/g, "")] ??= []).push(provider);
        return new Disposable();
      };
    }
    return undefined;
  },
});
