/**
 * The event taxonomy (the same as the Python SDK's `benchflow.tracing`) and payload bounds.
 *
 * Every event: {type, ts, seq, trace_id, span_id, parent_span_id, name, data}.
 */

export const START_TYPES = ["trace.start", "span.start", "llm.stream_start", "tool.call"] as const;
export const END_TYPES = ["trace.end", "span.end", "llm.stream_end", "tool.result"] as const;
export const POINT_TYPES = [
  "message", "span.update", "llm.stream_chunk", "feedback", "user.signal", "identity.update",
  "metric", "error", "eval.result",
] as const;
export const EVENT_TYPES = [...START_TYPES, ...END_TYPES, ...POINT_TYPES] as const;
export const CAPTURE_TYPES = [
  "metric", "error", "eval.result", "message", "feedback", "user.signal", "identity.update",
  "span.update",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
export type CaptureType = (typeof CAPTURE_TYPES)[number];

export interface TraceEvent {
  type: string;
  ts: string;
  seq: number;
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  data: Record<string, unknown>;
}

/** Bounds on a trace's payloads (the Python SDK's `Limits`, same defaults). */
export interface Limits {
  maxStringChars: number;
  maxEventBytes: number;
  maxEventsPerSpan: number;
  maxDepth: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxStringChars: 16_384,
  maxEventBytes: 65_536,
  maxEventsPerSpan: 1_000,
  maxDepth: 12,
};

/** An epoch time in ns (bigint) as ISO 8601 UTC with microseconds. */
export function iso(ns: bigint): string {
  const ms = Number(ns / 1_000_000n);
  const micros = Number((ns / 1_000n) % 1_000_000n);
  return new Date(ms).toISOString().slice(0, 19) + "." + String(micros).padStart(6, "0") + "Z";
}

const origin = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();

/** Now, in epoch nanoseconds (monotonic within the process). */
export function nowNs(): bigint {
  return origin + process.hrtime.bigint();
}

/** `value` as JSON data (objects with toJSON, Maps, Sets handled; others stringified). */
export function toJsonable(value: unknown, depth = 0, maxDepth = 12): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (typeof value === "bigint") return Number(value);
  if (depth >= maxDepth) return String(value);
  if (Array.isArray(value) || value instanceof Set) {
    return [...value].map((v) => toJsonable(v, depth + 1, maxDepth));
  }
  if (value instanceof Map) {
    return toJsonable(Object.fromEntries(value), depth + 1, maxDepth);
  }
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "object") {
    const withJson = value as { toJSON?: () => unknown };
    if (typeof withJson.toJSON === "function") return toJsonable(withJson.toJSON(), depth + 1, maxDepth);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v !== undefined && typeof v !== "function") out[k] = toJsonable(v, depth + 1, maxDepth);
    }
    return out;
  }
  return String(value);
}

export function mapStrings(value: unknown, fn: (s: string) => string): unknown {
  if (typeof value === "string") return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, fn));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = mapStrings(v, fn);
    return out;
  }
  return value;
}

/** `event` cut to `limits`; an event that lost something has `data.truncated = true`. */
export function boundEvent(event: TraceEvent, limits: Limits): TraceEvent {
  let cut = false;
  let data = mapStrings(event.data, (text) => {
    if (text.length <= limits.maxStringChars) return text;
    cut = true;
    return text.slice(0, limits.maxStringChars) +
      `…[truncated ${text.length - limits.maxStringChars} chars]`;
  }) as Record<string, unknown>;
  const json = JSON.stringify(data);
  if (json.length > limits.maxEventBytes) {
    data = { preview: json.slice(0, Math.floor(limits.maxEventBytes / 2)), original_bytes: json.length };
    cut = true;
  }
  if (cut) data.truncated = true;
  return { ...event, data };
}
