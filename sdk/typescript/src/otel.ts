/**
 * Export as OpenTelemetry spans over OTLP/HTTP, in the same shape as the Python SDK:
 * attributes `rollout.kind`, `rollout.start`, `rollout.end` (the events as JSON), GenAI
 * semantic-convention mirrors, and point events as span events carrying `rollout.event`.
 */

import { ROOT_CONTEXT, SpanStatusCode, TraceFlags, trace as otelTrace, type Context } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider, BatchSpanProcessor, type IdGenerator, type SpanExporter, type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";

import type { SpanNode } from "./client.js";
import type { Limits } from "./taxonomy.js";

export const DEFAULT_ENDPOINT = "http://localhost:4318";

export interface ExportOptions {
  serviceName: string;
  environment?: string;
  endpoint?: string;
  apiKey?: string;
  headers?: Record<string, string>;
  exporter?: SpanExporter;
  spanProcessors?: SpanProcessor[];
  limits: Limits;
}

class PresetIds implements IdGenerator {
  traceId: string | null = null;
  spanId: string | null = null;

  generateTraceId(): string {
    const value = this.traceId ?? "00000000000000000000000000000001";
    this.traceId = null;
    return value;
  }

  generateSpanId(): string {
    const value = this.spanId ?? "0000000000000001";
    this.spanId = null;
    return value;
  }
}

function hrTime(ns: bigint): [number, number] {
  return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
}

function parseHeaders(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of (text ?? "").split(",")) {
    const at = item.indexOf("=");
    if (at > 0) out[decodeURIComponent(item.slice(0, at).trim())] = decodeURIComponent(item.slice(at + 1).trim());
  }
  return out;
}

export class OtelExport {
  private readonly ids = new PresetIds();
  private readonly provider: BasicTracerProvider;

  constructor(options: ExportOptions) {
    const resource: Record<string, string> = { "service.name": options.serviceName };
    if (options.environment) resource["deployment.environment.name"] = options.environment;
    const exporter = options.exporter ?? new OTLPTraceExporter({
      url: OtelExport.tracesUrl(options.endpoint),
      headers: OtelExport.headers(options.apiKey, options.headers),
    });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes(resource),
      idGenerator: this.ids,
      spanLimits: { eventCountLimit: options.limits.maxEventsPerSpan + 16 },
      spanProcessors: [new BatchSpanProcessor(exporter), ...(options.spanProcessors ?? [])],
    });
  }

  static tracesUrl(endpoint?: string): string {
    let url = endpoint ?? process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    if (!endpoint && url) return url;
    url = (endpoint ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? DEFAULT_ENDPOINT).replace(/\/+$/, "");
    return url.endsWith("/v1/traces") ? url : `${url}/v1/traces`;
  }

  static headers(apiKey?: string, headers?: Record<string, string>): Record<string, string> {
    const found = headers ?? parseHeaders(process.env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ??
      process.env.OTEL_EXPORTER_OTLP_HEADERS);
    return apiKey ? { ...found, Authorization: `Bearer ${apiKey}` } : { ...found };
  }

  static async check(url: string, headers: Record<string, string>, timeoutMs: number) {
    try {
      const answer = await fetch(url, {
        method: "POST", body: JSON.stringify({ resourceSpans: [] }),
        headers: { ...headers, "Content-Type": "application/json" },
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (answer.status === 401 || answer.status === 403) {
        return { ok: false, message: `collector ${url}: credentials rejected (HTTP ${answer.status})`, endpoint: url };
      }
      if (!answer.ok) return { ok: false, message: `collector ${url}: answered HTTP ${answer.status}`, endpoint: url };
      return { ok: true, message: `collector ${url}: accepting spans`, endpoint: url };
    } catch (error) {
      return { ok: false, message: `collector ${url}: not reachable (${(error as Error).name})`, endpoint: url };
    }
  }

  export(node: SpanNode): void {
    const start = (node.startEvent?.data ?? {}) as Record<string, unknown>;
    const end = (node.endEvent?.data ?? {}) as Record<string, unknown>;
    const usage = (end.usage ?? {}) as Record<string, unknown>;
    const attributes: Record<string, string | number | boolean> = { "rollout.kind": node.kind };
    const mirror: Record<string, unknown> = {
      "gen_ai.operation.name": { llm: "chat", tool: "execute_tool", trace: "invoke_agent" }[node.kind as string],
      "gen_ai.agent.name": start.agent_name, "gen_ai.request.model": start.model,
      "gen_ai.provider.name": start.provider, "gen_ai.usage.input_tokens": usage.input_tokens,
      "gen_ai.usage.output_tokens": usage.output_tokens, "gen_ai.tool.name": start.tool_name,
      "gen_ai.tool.call.id": start.tool_call_id, "gen_ai.conversation.id": start.conversation_id,
      "enduser.id": start.user_id, "session.id": start.session_id,
      "rollout.span_type": start.span_type, "rollout.external_trace_id": start.external_trace_id,
    };
    for (const [key, value] of Object.entries(mirror)) {
      if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") attributes[key] = value;
    }
    if (node.startEvent) attributes["rollout.start"] = JSON.stringify(node.startEvent);
    if (node.endEvent) attributes["rollout.end"] = JSON.stringify(node.endEvent);
    let context: Context = ROOT_CONTEXT;
    if (node.parentSpanId) {
      context = otelTrace.setSpanContext(ROOT_CONTEXT, {
        traceId: node.traceId, spanId: node.parentSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: false,
      });
    }
    this.ids.traceId = node.traceId;
    this.ids.spanId = node.spanId;
    const span = this.provider.getTracer("benchflow.tracing").startSpan(
      node.name, { attributes, startTime: hrTime(node.startNs) }, context);
    for (const event of node.events) {
      const ns = BigInt(Date.parse(event.ts)) * 1_000_000n + BigInt(Number(event.ts.slice(23, 26)) * 1000);
      span.addEvent(event.type, { "rollout.event": JSON.stringify(event) }, hrTime(ns));
    }
    if (end.status === "error") span.setStatus({ code: SpanStatusCode.ERROR, message: String(end.error ?? "").slice(0, 500) });
    span.end(hrTime(node.endNs ?? node.startNs));
  }

  async flush(): Promise<void> {
    await this.provider.forceFlush();
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}
