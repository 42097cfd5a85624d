// Generated from jaxlsp/server/wire.py by editors/vscode/scripts/wire_ts.py: do not edit.
// Run `python editors/vscode/scripts/wire_ts.py` after changing wire.py (a test checks it).

export type Name = string;

export type Dims = Record<Name, number>;

export type Id = string;

export type Device = string;

export type EntrypointKind = "function" | "linen" | "nnx" | "equinox";

export type FieldKind = "field" | "positionalOnly" | "positional" | "varPositional" | "keywordOnly" | "varKeyword";

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

/**
 * `ClientCapabilities.experimental.jaxlsp`: the client's opt-ins.
 */
export interface ClientExperimentalCapabilities {
  openGraph?: boolean;
}

/**
 * `ServerCapabilities.experimental.jaxlsp`.
 */
export interface ExperimentalCapabilities {
  version: number;
  discover: boolean;
  traceGraph: boolean;
  environment: boolean;
  openGraph: boolean;
  costs: boolean;
  diff: boolean;
  values: boolean;
  commands: string[];
}

export interface TextDocumentIdentifier {
  uri: string;
}

export const DISCOVER = "jaxlsp/discover";

/**
 * `jaxlsp/discover` request params.
 */
export interface DiscoverParams {
  textDocument: TextDocumentIdentifier;
}

export interface SetupField {
  name: string;
  annotation: string | null;
  default: string | null;
  kind: FieldKind;
}

export interface EntrypointItem {
  name: string;
  kind: EntrypointKind;
  range: Range;
  bodyRange: Range;
  decorators: string[];
  fields: SetupField[];
  reason: string;
  cell?: number;
}

/**
 * How many items a `jaxlsp/discover` answer left out: the file's totals and the limit.
 */
export interface DiscoverTruncated {
  entrypoints: number;
  drivers: number;
  limit: number;
}

/**
 * `jaxlsp/discover` response.
 */
export interface DiscoverResult {
  entrypoints: EntrypointItem[];
  drivers: EntrypointItem[];
  truncated?: DiscoverTruncated;
}

export const TRACE_GRAPH_COMMAND = "jaxlsp.traceGraph";

/**
 * The single argument of the `jaxlsp.traceGraph` command.
 */
export interface TraceGraphArguments {
  uri: string;
  name: Name;
  profile?: Name;
  answers?: Record<Name, unknown>;
  save?: boolean;
  costs?: boolean;
  cell?: number;
  example?: string;
  values?: boolean;
  dims?: Dims;
  compiled?: boolean;
  time?: boolean;
  repeat?: number;
}

export const TRACE_WITH_VALUES_COMMAND = "jaxlsp.traceWithValues";

export const TRACE_COMPILED_COMMAND = "jaxlsp.traceCompiled";

export const OPEN_GRAPH_COMMAND = "jaxlsp.openGraph";

/**
 * The single argument of the `jaxlsp.openGraph` command (the "Open graph" lens, and the
 * code action on a non-finite value's diagnostic, which selects its node).
 */
export interface OpenGraphArguments {
  traceId: Id;
  nodeId?: Id;
}

export const TRACE = "jaxlsp/trace";

/**
 * `jaxlsp/trace` request params.
 */
export interface TraceParams {
  textDocument: TextDocumentIdentifier;
  name: Name;
  profile?: Name;
  answers?: Record<Name, unknown>;
  save?: boolean;
  costs?: boolean;
  cell?: number;
  example?: string;
  values?: boolean;
  compiled?: boolean;
  dims?: Dims;
  time?: boolean;
  repeat?: number;
}

export interface TraceSummary {
  ops: number;
  values: number;
  groups: number;
  parameters: number;
  outputs: string[];
}

export interface TraceCoverage {
  complete: boolean;
  notes: string[];
}

/**
 * The first equation whose inputs are finite and whose output is not.
 */
export interface FirstNonFinite {
  nodeId: string;
  valueId: string;
  primitive: string;
  kind: string;
  message: string;
  location?: Location;
}

/**
 * What a values run found (`jaxlsp/trace` with `values`).
 */
export interface ValuesSummary {
  values: number;
  seconds: number;
  validation: "verified" | "partial" | "mismatch";
  mismatch?: string;
  firstNonFinite?: FirstNonFinite;
  zeroGradients?: string[];
}

/**
 * The collectives of one kind that one module's line caused.
 */
export interface CollectiveGroup {
  kind: string;
  where: string;
  scope: string;
  count: number;
  bytes: number;
}

/**
 * One module of the compiled program, on one device (FLOPs and bytes estimated).
 */
export interface CompiledModuleRow {
  scope: string;
  flops: number;
  bytes: number;
  collectiveBytes: number;
  collectives: number;
}

/**
 * What XLA made of the program (`jaxlsp/trace` with `compiled`).
 */
export interface CompiledSummary {
  collectives: string;
  text: string[];
  error?: string;
  groups?: CollectiveGroup[];
  modules?: CompiledModuleRow[];
  peakBytes?: number;
  devices?: number;
}

export interface TimeModule {
  module: string;
  seconds: number;
}

/**
 * What a timed run measured (`jaxlsp/trace` with `time`); the graph's `time` has it all.
 */
export interface TimeSummary {
  step: number;
  busy: number;
  attributed: number;
  repeat: number;
  device: string;
  modules: TimeModule[];
}

/**
 * `jaxlsp/trace` response (and `jaxlsp.traceGraph`'s) when a graph was made.
 */
export interface TraceResult {
  traceId: string;
  summary: TraceSummary;
  coverage: TraceCoverage;
  freshness: string;
  interpreter: string;
  interpreterRoute: string;
  profile: string | null;
  saved?: string;
  inputsFrom?: string;
  values?: ValuesSummary;
  compiled?: CompiledSummary;
  time?: TimeSummary;
  replayed?: number;
}

/**
 * A runnable example that reaches the target: trace again with this `example`.
 */
export interface ExampleChoice {
  example: string;
  kind: "test" | "script" | "module";
  path: string;
  static: boolean;
  via?: string;
}

/**
 * One missing piece of a profile (docs/recipes.md, "Needs input").
 */
export interface NeedsInputItem {
  path: string;
  kind: "dimension" | "shape" | "value" | "inputs";
  message: string;
  name?: string;
  usedAt?: string[];
  param?: string;
  annotation?: string | null;
}

/**
 * `jaxlsp/trace` response when the profile lacks inputs.
 */
export interface NeedsInputResult {
  needsInput: NeedsInputItem[];
  proposal: string;
  profile: string;
  errors?: Record<string, string>;
  examples?: ExampleChoice[];
}

export const TRACE_FINISHED = "jaxlsp/traceFinished";

/**
 * The `jaxlsp/traceFinished` notification.
 */
export interface TraceFinished {
  uri: string;
  name: string;
  ok: boolean;
  traceId?: string;
  error?: string;
}

export const LIVE_STATUS = "jaxlsp/liveStatus";

/**
 * One target of `jaxlsp/liveStatus`: `fresh` (its newest graph is of the saved text),
 * `queued`, `tracing`, `failed` (`reason`: the cause) or `notLive` (`reason`: why).
 */
export interface LiveTarget {
  uri: string;
  name: string;
  state: "fresh" | "queued" | "tracing" | "failed" | "notLive";
  reason?: string;
  traceId?: string;
  waiting?: boolean;
}

/**
 * The `jaxlsp/liveStatus` notification: every live target, sent when one changes.
 */
export interface LiveStatus {
  enabled: boolean;
  targets: LiveTarget[];
  started: number;
}

export const GRAPH = "jaxlsp/graph";

export interface GraphParams {
  traceId: Id;
  group?: Id;
  cursor?: Id;
  limit?: number;
}

export interface ValueRef {
  id: string;
  shape: (number | string)[];
  dtype: string;
  weakType: boolean;
  type: string;
  stats?: Record<string, unknown>;
}

export interface NodeItem {
  id: string;
  kind: "node";
  primitive: string;
  scope: string;
  outputs: ValueRef[];
  source?: Record<string, unknown>;
}

export interface GroupCounts {
  nodes: number;
  groups: number;
}

export interface GroupItem {
  id: string;
  kind: "group";
  groupKind: string;
  label: string;
  counts: GroupCounts;
}

export interface GraphPage {
  items: (NodeItem | GroupItem)[];
  nextCursor?: string;
}

export const NODE = "jaxlsp/node";

export interface NodeParams {
  traceId: Id;
  nodeId: Id;
}

export interface Location {
  uri: string;
  range: Range;
}

export interface NodeDetail {
  id: string;
  kind: "node";
  primitive: string;
  params: Record<string, unknown>;
  inputs: ValueRef[];
  outputs: ValueRef[];
  scope: string;
  group: string | null;
  transforms: string[];
  frames: Location[];
}

export const VALUES = "jaxlsp/values";

/**
 * `jaxlsp/values` request params: statistics (and small arrays) of an existing trace's
 * values; the trace's target runs again with values when the trace has none yet.
 */
export interface ValuesParams {
  traceId: Id;
  values?: Id[];
  nodes?: Id[];
  inline?: boolean;
  dims?: Dims;
}

export interface InlineArray {
  shape: number[];
  dtype: string;
  data?: unknown;
  omitted?: string;
  error?: string;
}

export interface GradientNorm {
  module: string;
  norm: number;
  parameters: number;
  zero: number;
}

export interface Gradients {
  parameters: Record<string, unknown>[];
  modules: GradientNorm[];
  zero: string[];
}

/**
 * `jaxlsp/values` response.
 */
export interface ValuesResult {
  traceId: string;
  seconds: number;
  validation: Record<string, unknown>;
  executed: Record<string, number>;
  stats: Record<string, Record<string, unknown> | null>;
  firstNonFinite?: FirstNonFinite;
  gradients?: Gradients;
  arrays?: Record<string, InlineArray>;
}

export const NODES_AT = "jaxlsp/nodesAt";

export interface NodesAtParams {
  textDocument: TextDocumentIdentifier;
  position: Position;
}

export interface NodesAtResult {
  traceId: string | null;
  nodeIds: string[];
}

export const EXPORT = "jaxlsp/export";

export interface ExportParams {
  traceId: Id;
  format?: "json" | "dot" | "html";
}

export interface ExportResult {
  uri: string;
}

export const REVEAL_SOURCE = "jaxlsp/revealSource";

export interface RevealSourceParams {
  traceId: Id;
  nodeId: Id;
  frame?: number;
}

export interface RevealSourceResult {
  location: Location;
}

export const OPEN_GRAPH = "jaxlsp/openGraph";

export interface OpenGraphParams {
  traceId: Id;
  nodeId?: Id;
}

export interface OpenGraphResult {
  url: string;
}

export const CURSOR_MOVED = "jaxlsp/cursorMoved";

/**
 * The `jaxlsp/cursorMoved` notification (client to server; no answer).
 */
export interface CursorMovedParams {
  textDocument: TextDocumentIdentifier;
  position: Position;
}

export const ENVIRONMENT = "jaxlsp/environment";

/**
 * `jaxlsp/environment` request params (all optional); also the `jaxlsp.checkEnvironment`
 * command's single optional argument, with `uri` for `textDocument`.
 */
export interface EnvironmentParams {
  textDocument?: TextDocumentIdentifier;
  name?: Name;
  device?: Device;
  refresh?: boolean;
}

export const CHECK_ENVIRONMENT_COMMAND = "jaxlsp.checkEnvironment";

/**
 * The `jaxlsp.checkEnvironment` command's single optional argument.
 */
export interface CheckEnvironmentArguments {
  uri?: string;
  name?: Name;
  device?: Device;
}

export interface EnvironmentProblem {
  severity: "error" | "warning";
  message: string;
  fix: string;
  package?: string;
  requirement?: string;
}

/**
 * `jaxlsp/environment` response (and `jaxlsp.checkEnvironment`'s).
 */
export interface EnvironmentResult {
  python: string;
  route: string;
  ok: boolean;
  pythonVersion: string | null;
  packages: Record<string, string | null>;
  backends: string[];
  plugins: string[];
  device: string;
  needs: string[];
  problems: EnvironmentProblem[];
  message: string;
  cached: boolean;
  install?: string;
  installed?: boolean;
}

export const COSTS = "jaxlsp/costs";

/**
 * `jaxlsp/costs` request params.
 */
export interface CostsParams {
  traceId: Id;
  limit?: number;
}

export interface CostFigures {
  flops: number;
  bytes: number;
  transcendentals: number;
}

export interface ModuleCosts {
  scope: string;
  params: number;
  paramBytes: number;
  flops: number;
  bytes: number;
  transcendentals: number;
  share: number;
  forward: CostFigures;
  backward: CostFigures;
  ops: number;
}

export interface ModuleBytes {
  scope: string;
  bytes: number;
}

export interface MemoryPeak {
  peakBytes: number;
  node: string | null;
  live: string[];
  byModule: ModuleBytes[];
  inputBytes: number;
  unsized: number;
}

export interface ModuleResiduals {
  scope: string;
  bytes: number;
  count: number;
}

export interface ResidualsInfo {
  values: string[];
  bytes: number;
  byModule: ModuleResiduals[];
  inputBytes: number;
  recomputedOps: number;
  recomputedFlops: number | null;
}

export interface PrecisionRow {
  scope: string;
  conversions: Record<string, number>;
  products: Record<string, number>;
  nodes: string[];
}

/**
 * `jaxlsp/costs` response.
 */
export interface CostsResult {
  traceId: string;
  measured: boolean;
  gradient: boolean;
  total: CostFigures;
  bodyOnce: CostFigures;
  unknown: number;
  modules: ModuleCosts[];
  notes: string[];
  measurement: Record<string, unknown> | null;
  memory: MemoryPeak;
  residuals: ResidualsInfo | null;
  precision: PrecisionRow[];
  text: string;
}

export const DIFF = "jaxlsp/diff";

/**
 * `jaxlsp/diff` request params: the newer graph (a trace or a graph file) and the older one
 * (a trace or a file; neither: the trace before `traceId` of the same target).
 */
export interface DiffParams {
  traceId?: Id;
  uri?: string;
  base?: Id;
  baseUri?: string;
  limit?: number;
}

export interface DiffNode {
  id: string;
  primitive: string;
  scope: string;
}

export interface DiffField {
  field: string;
  before: string;
  after: string;
}

export interface DiffChange {
  id: string;
  baseId: string;
  primitive: string;
  scope: string;
  fields: DiffField[];
  text: string;
}

export interface DiffPort {
  label: string;
  before: string | null;
  after: string | null;
}

export interface DiffCounts {
  added: number;
  removed: number;
  changed: number;
  matched: number;
}

/**
 * `jaxlsp/diff` response.
 */
export interface DiffResult {
  same: boolean;
  summary: string;
  counts: DiffCounts;
  added: DiffNode[];
  removed: DiffNode[];
  changed: DiffChange[];
  inputs: DiffPort[];
  outputs: DiffPort[];
  truncated: boolean;
  traceId: string | null;
  base: string;
}

/**
 * `CodeLens.data` between `textDocument/codeLens` and `codeLens/resolve`.
 */
export interface LensData {
  uri: string;
  name: string;
  kind: EntrypointKind;
}

export const LIST_TRUSTED_COMMAND = "jaxlsp.listTrusted";

export const REVOKE_TRUST_COMMAND = "jaxlsp.revokeTrust";

export const LEARN_SHAPES_COMMAND = "jaxlsp.learnShapes";

/**
 * The `jaxlsp.learnShapes` command's single optional argument: a folder whose tests (and the
 * scripts the docs run) are run, or a file: the examples whose imports reach it; absent: the
 * workspace folder. `budget`: seconds the whole run may take (default 900).
 */
export interface LearnShapesArguments {
  uri?: string;
  budget?: number;
}

export interface LearnedExample {
  text: string;
  outcome: "finished" | "stopped" | "failed" | "exited" | "timeout" | "error" | "cached";
  message: string;
  learned: number;
  seconds: number;
}

/**
 * `jaxlsp.learnShapes` response: what was learned, from which examples, what failed.
 */
export interface LearnShapesResult {
  learned: number;
  targets: string[];
  examples: LearnedExample[];
  failures: string[];
  ran: number;
  cached: number;
  seconds: number;
  stopped?: "cancelled" | "out of time";
}
