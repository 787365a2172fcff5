/**
 * The tracing client: `rollout.trace(name, async (trace) => ...)`, spans, model calls,
 * tools, messages and outcomes; every event goes through the scrubber and beforeSend,
 * then is bounded; a span is exported (OpenTelemetry, `otel.ts`) when it ends.
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { createHash, randomBytes } from "node:crypto";

import { OtelExport, type ExportOptions } from "./otel.js";
import {
  CAPTURE_TYPES, DEFAULT_LIMITS, boundEvent, iso, mapStrings, nowNs, toJsonable,
  type CaptureType, type Limits, type TraceEvent,
} from "./taxonomy.js";

export type Scrubber = (text: string) => string;
export type BeforeSend = (event: TraceEvent) => TraceEvent | null | undefined;

export interface RolloutOptions {
  /** Sent as `Authorization: Bearer <apiKey>` to the collector. */
  apiKey?: string;
  agentName?: string;
  environment?: string;
  /** An OTLP/HTTP collector (`/v1/traces` added); default OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else http://localhost:4318. */
  endpoint?: string;
  headers?: Record<string, string>;
  scrubber?: Scrubber;
  beforeSend?: BeforeSend;
  limits?: Partial<Limits>;
  /** An OpenTelemetry SpanExporter instead of OTLP/HTTP. */
  exporter?: ExportOptions["exporter"];
  /** More OpenTelemetry SpanProcessors that get every span too. */
  spanProcessors?: ExportOptions["spanProcessors"];
  enabled?: boolean;
}

export interface SpanOptions {
  name?: string;
  model?: string;
  provider?: string;
  input?: unknown;
  attributes?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface TraceOptions {
  traceId?: string;
  traceparent?: string;
  externalTraceId?: string;
  userId?: string;
  sessionId?: string;
  conversationId?: string;
  attributes?: Record<string, unknown>;
  context?: Record<string, unknown>;
  input?: unknown;
  tags?: string[];
  [field: string]: unknown;
}

export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
  cost?: number;
  [count: string]: number | undefined;
}

const current = new AsyncLocalStorage<SpanNode>();
const HEX32 = /^[0-9a-f]{32}$/;
const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

function newSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString("hex");
    if (/[^0]/.test(id)) return id;
  }
}

/** A W3C trace id for `value`: 32 hex kept, a UUID without dashes, anything else hashed (as in Python). */
export function normalizeTraceId(value?: string | null): string {
  if (value === undefined || value === null) {
    for (;;) {
      const id = randomBytes(16).toString("hex");
      if (/[^0]/.test(id)) return id;
    }
  }
  const compact = value.length === 36 ? value.replaceAll("-", "") : value;
  if (HEX32.test(compact.toLowerCase()) && /[^0]/.test(compact)) return compact.toLowerCase();
  return createHash("sha256").update(value).digest("hex").slice(0, 32);
}

function clean(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

type Kind = "trace" | "span" | "llm" | "tool";
const TYPES: Record<string, [string, string]> = {
  trace: ["trace.start", "trace.end"],
  span: ["span.start", "span.end"],
  llm: ["span.start", "span.end"],
  llmStream: ["llm.stream_start", "llm.stream_end"],
  tool: ["tool.call", "tool.result"],
};

/** A span of a trace (the trace itself, a step, a model call or a tool call). */
export class SpanNode {
  readonly spanId = newSpanId();
  readonly traceId: string;
  readonly parentSpanId: string | null;
  readonly startNs = nowNs();
  endNs: bigint | null = null;
  startEvent: TraceEvent | null;
  endEvent: TraceEvent | null = null;
  readonly events: TraceEvent[] = [];
  readonly dropped: boolean;
  ended = false;
  protected output: unknown = undefined;
  protected usage: Usage = {};
  protected status = "ok";
  protected error: string | undefined;
  private droppedEvents = 0;
  private readonly endType: string;
  protected readonly root: TraceNode;
  seq = 0;

  constructor(
    readonly client: Rollout, root: TraceNode | null, readonly parent: SpanNode | null,
    readonly name: string, readonly kind: Kind, types: [string, string],
    data: Record<string, unknown>, ids?: { traceId: string; parentSpanId: string | null },
  ) {
    this.root = root ?? (this as unknown as TraceNode);
    let exported = parent;
    while (exported && exported.dropped) exported = exported.parent;
    this.traceId = ids ? ids.traceId : this.root.traceId;
    this.parentSpanId = ids ? ids.parentSpanId : exported ? exported.spanId : null;
    this.endType = types[1];
    if (root) root.open.add(this);
    this.startEvent = client._prepare(this, types[0], data, this.startNs);
    this.dropped = this.startEvent === null;
  }

  /** @internal */
  nextSeq(): number {
    return this.root.seq++;
  }

  private isAncestorOf(node: SpanNode): boolean {
    for (let cursor: SpanNode | null = node; cursor; cursor = cursor.parent) {
      if (cursor === this) return true;
    }
    return false;
  }

  /** The innermost span open in this async context below this one (or this one). */
  protected owner(): SpanNode {
    const active = current.getStore();
    return active && !active.ended && this.isAncestorOf(active) ? active : this;
  }

  /** @internal */
  emit(type: string, data: Record<string, unknown>): void {
    if (this.ended) return;
    if (this.events.length >= this.client.limits.maxEventsPerSpan) {
      this.droppedEvents += 1;
      return;
    }
    const event = this.client._prepare(this, type, data, nowNs());
    if (event) this.events.push(event);
  }

  /** A visible message; `internal: true` marks hidden routing messages. */
  message(message: { role: string; content: unknown; internal?: boolean; name?: string;[k: string]: unknown }): void {
    this.owner().emit("message", clean({ internal: false, ...message }));
  }

  feedback(name: string, value: unknown, options: { comment?: string;[k: string]: unknown } = {}): void {
    this.owner().emit("feedback", clean({ name, value, ...options }));
  }

  signal(name: string, value: unknown = true, fields: Record<string, unknown> = {}): void {
    this.owner().emit("user.signal", clean({ name, value, ...fields }));
  }

  update(fields: Record<string, unknown>): void {
    this.emit("span.update", fields);
  }

  recordInput(value: unknown): void {
    this.emit("span.update", { input: value });
  }

  recordOutput(value: unknown): void {
    this.output = value;
  }

  setUsage(usage: Usage): void {
    const next = clean({ ...this.usage, ...usage }) as Usage;
    if (next.total_tokens === undefined && next.input_tokens !== undefined && next.output_tokens !== undefined) {
      next.total_tokens = next.input_tokens + next.output_tokens;
    }
    this.usage = next;
  }

  recordError(error: unknown): void {
    const kind = error instanceof Error ? error.name : "error";
    const message = error instanceof Error ? error.message : String(error);
    this.status = "error";
    this.error = `${kind}: ${message}`;
    this.emit("error", { error_type: kind, message });
  }

  /** A step (`type`: task, retrieval, planner, llm...) run by `fn`. */
  span<T>(type: string, fn: (span: SpanNode) => Promise<T> | T, options: SpanOptions = {}): Promise<T> {
    const { name, input, ...rest } = options;
    const parent = this.owner();
    const llmLike = type === "llm";
    const node = new SpanNode(this.client, this.root, parent, name ?? type, llmLike ? "llm" : "span",
      TYPES.span, clean({ span_type: type, ...rest }));
    if (input !== undefined) node.recordInput(input);
    return node.run(fn);
  }

  /** A model call; `stream: true` emits llm.stream_start / llm.stream_chunk / llm.stream_end. */
  llm<T>(name: string, fn: (llm: LLMNode) => Promise<T> | T,
    options: SpanOptions & { stream?: boolean; recordChunks?: boolean } = {}): Promise<T> {
    const { input, stream = false, recordChunks = true, name: _ignored, ...rest } = options;
    const node = new LLMNode(this.client, this.root, this.owner(), name,
      clean({ span_type: "llm", stream, ...rest }), stream, recordChunks);
    if (input !== undefined) node.recordInput(input);
    return node.run(fn);
  }

  /** A tool call: tool.call when it starts, tool.result when `fn` ends. */
  tool<T>(name: string, fn: (tool: SpanNode) => Promise<T> | T,
    options: { toolCallId?: string; arguments?: unknown; attributes?: Record<string, unknown> } = {}): Promise<T> {
    const node = new SpanNode(this.client, this.root, this.owner(), name, "tool", TYPES.tool,
      clean({ tool_name: name, tool_call_id: options.toolCallId, arguments: options.arguments,
        attributes: options.attributes }));
    (node as SpanNode & { toolCallId?: string }).toolCallId = options.toolCallId;
    return node.run(fn);
  }

  /** @internal Run `fn` as this span's body: the span ends when it settles. */
  async run<T>(fn: (node: never) => Promise<T> | T): Promise<T> {
    try {
      const result = await current.run(this, () => fn(this as never));
      return result;
    } catch (error) {
      this.recordError(error);
      throw error;
    } finally {
      this.end();
    }
  }

  protected endData(): Record<string, unknown> {
    const durationMs = Number((this.endNs ?? this.startNs) - this.startNs) / 1e6;
    const data = clean({
      output: this.output, usage: Object.keys(this.usage).length ? this.usage : undefined,
      status: this.status, error: this.error, duration_ms: durationMs,
      dropped_events: this.droppedEvents || undefined,
    });
    if (this.kind === "tool") {
      const id = (this as SpanNode & { toolCallId?: string }).toolCallId;
      if (id !== undefined) data.tool_call_id = id;
    }
    return data;
  }

  end(output?: unknown): void {
    if (this.ended) return;
    if (output !== undefined) this.output = output;
    this.endNs = nowNs();
    this.endEvent = this.client._prepare(this, this.endType, this.endData(), this.endNs);
    this.ended = true;
    this.root.open.delete(this);
    this.client._export(this);
  }
}

export class LLMNode extends SpanNode {
  private chunks: string[] = [];
  private nChunks = 0;

  constructor(client: Rollout, root: TraceNode, parent: SpanNode, name: string,
    data: Record<string, unknown>, readonly stream: boolean, private readonly recordChunks: boolean) {
    super(client, root, parent, name, "llm", stream ? TYPES.llmStream : TYPES.llm, data);
  }

  /** One streamed chunk; its text also forms the output. */
  recordChunk(content: unknown, fields: Record<string, unknown> = {}): void {
    if (typeof content === "string") this.chunks.push(content);
    this.nChunks += 1;
    if (this.recordChunks) this.emit("llm.stream_chunk", clean({ index: this.nChunks - 1, content, ...fields }));
  }

  get text(): string {
    return this.chunks.join("");
  }

  protected endData(): Record<string, unknown> {
    const data = super.endData();
    if (data.output === undefined && this.chunks.length) data.output = this.text;
    if (this.stream) data.n_chunks = this.nChunks;
    return data;
  }
}

export class TraceNode extends SpanNode {
  readonly open = new Set<SpanNode>();

  constructor(client: Rollout, name: string, data: Record<string, unknown>,
    ids: { traceId: string; parentSpanId: string | null }) {
    super(client, null, null, name, "trace", TYPES.trace, data, ids);
  }

  end(output?: unknown): void {
    for (const node of [...this.open].reverse()) {
      if (!node.ended) {
        (node as unknown as { status: string }).status = "unfinished";
        node.end();
      }
    }
    super.end(output);
  }
}

/** The tracing client of one agent. */
export class Rollout {
  readonly limits: Limits;
  readonly agentName?: string;
  readonly environment?: string;
  private exporter: OtelExport | null = null;
  private closed = false;

  constructor(private readonly options: RolloutOptions = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...(options.limits ?? {}) };
    this.agentName = options.agentName;
    this.environment = options.environment;
  }

  /** Where spans go (the OTLP/HTTP traces URL). */
  get endpoint(): string {
    return OtelExport.tracesUrl(this.options.endpoint);
  }

  /** Run `fn` as one trace (a request, a conversation turn, a benchmark attempt). */
  trace<T>(name: string, fn: (trace: TraceNode) => Promise<T> | T, options: TraceOptions = {}): Promise<T> {
    const { traceId, traceparent, externalTraceId, userId, sessionId, conversationId, input, ...rest } = options;
    const parent = TRACEPARENT.exec((traceparent ?? "").trim().toLowerCase());
    const given = traceId ?? parent?.[1];
    const normalized = normalizeTraceId(given);
    const node = new TraceNode(this, name, clean({
      source_trace_id: given && given.toLowerCase() !== normalized ? given : undefined,
      agent_name: this.agentName, environment: this.environment,
      external_trace_id: externalTraceId, user_id: userId, session_id: sessionId,
      conversation_id: conversationId, ...rest,
    }), { traceId: normalized, parentSpanId: parent && parent[1] === normalized ? parent[2] : null });
    if (input !== undefined) node.recordInput(input);
    return node.run(fn);
  }

  /** The span open in the current async context, if any. */
  currentSpan(): SpanNode | undefined {
    const active = current.getStore();
    return active && active.client === this && !active.ended ? active : undefined;
  }

  identifyUser(userId: string, traits?: Record<string, unknown>): void {
    this.captureEvent("identity.update", clean({ user_id: userId, traits }));
  }

  /** A low-level event (metric, error, eval.result...) in the current span, or a trace of its own. */
  captureEvent(type: CaptureType, data: Record<string, unknown> = {}, options: { name?: string } = {}): void {
    if (!(CAPTURE_TYPES as readonly string[]).includes(type)) {
      throw new Error(`captureEvent: unknown type ${JSON.stringify(type)}; one of ${CAPTURE_TYPES.join(", ")}`);
    }
    const payload = options.name ? { name: options.name, ...data } : { ...data };
    const active = this.currentSpan();
    if (active) {
      active.emit(type, payload);
      return;
    }
    void this.trace(options.name ?? type, (trace) => trace.emit(type, payload), { standalone: true });
  }

  /** @internal The event as it leaves: JSON data, scrubbed, beforeSend, bounded. */
  _prepare(node: SpanNode, type: string, data: Record<string, unknown>, ns: bigint): TraceEvent | null {
    if (this.options.enabled === false) return null;
    let event: TraceEvent = {
      type, ts: iso(ns), seq: node.nextSeq(), trace_id: node.traceId, span_id: node.spanId,
      parent_span_id: node.parentSpanId, name: node.name,
      data: toJsonable(data, 0, this.limits.maxDepth) as Record<string, unknown>,
    };
    try {
      const { scrubber, beforeSend } = this.options;
      if (scrubber) {
        event = { ...event, name: scrubber(event.name), data: mapStrings(event.data, scrubber) as Record<string, unknown> };
      }
      if (beforeSend) {
        const kept = beforeSend(event);
        if (!kept) return null;
        event = kept;
      }
    } catch {
      return null; // a failing privacy hook drops the event, never leaks it
    }
    return boundEvent(event, this.limits);
  }

  private otel(): OtelExport {
    if (!this.exporter) {
      this.exporter = new OtelExport({
        serviceName: this.agentName ?? "agent", environment: this.environment,
        endpoint: this.options.endpoint, apiKey: this.options.apiKey, headers: this.options.headers,
        exporter: this.options.exporter, spanProcessors: this.options.spanProcessors,
        limits: this.limits,
      });
    }
    return this.exporter;
  }

  /** @internal */
  _export(node: SpanNode): void {
    if (node.dropped || this.options.enabled === false || this.closed) return;
    try {
      this.otel().export(node);
    } catch (error) {
      console.warn(`tracing: could not export span ${node.name}: ${String(error)}`);
    }
  }

  /** Whether the collector answers and accepts the credentials (an empty export); never throws. */
  async check(timeoutMs = 5000): Promise<{ ok: boolean; message: string; endpoint: string }> {
    return OtelExport.check(this.endpoint, OtelExport.headers(this.options.apiKey, this.options.headers), timeoutMs);
  }

  /** Export every ended span now (short-lived processes, serverless handlers). */
  async flush(): Promise<void> {
    if (this.exporter) await this.exporter.flush();
  }

  /** Flush, then stop exporting. */
  async shutdown(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    this.closed = true;
    if (this.exporter) await this.exporter.shutdown();
  }
}
