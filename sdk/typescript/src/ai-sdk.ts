/**
 * Vercel AI SDK integration: `wrapAISDK(ai, { client })` returns the same functions, each
 * call recorded as an LLM span (usage, model, output) with its tool calls as tool spans.
 *
 * Inside `rollout.trace(...)` the span joins that trace; otherwise each call is a trace of
 * its own, named and identified by `experimental_telemetry.metadata` built with
 * `eventMetadata({ agentName, userId, conversationId, externalTraceId, traceId })`.
 */

import type { LLMNode, Rollout, SpanNode, TraceOptions } from "./client.js";

const PREFIX = "rollout.";

export interface EventMetadata {
  agentName?: string;
  userId?: string;
  sessionId?: string;
  conversationId?: string;
  externalTraceId?: string;
  traceId?: string;
}

/** Telemetry metadata (flat strings, as the AI SDK requires) naming the trace of a call. */
export function eventMetadata(meta: EventMetadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(meta)) if (typeof value === "string") out[PREFIX + key] = value;
  return out;
}

function readMetadata(options: Record<string, unknown>): EventMetadata {
  const telemetry = (options.experimental_telemetry ?? {}) as { metadata?: Record<string, unknown> };
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(telemetry.metadata ?? {})) {
    if (key.startsWith(PREFIX) && typeof value === "string") out[key.slice(PREFIX.length)] = value;
  }
  return out as EventMetadata;
}

function modelInfo(model: unknown): { model?: string; provider?: string } {
  if (typeof model === "string") return { model };
  const m = (model ?? {}) as { modelId?: string; provider?: string };
  return { model: m.modelId, provider: m.provider };
}

function usageOf(usage: unknown): Record<string, number> {
  const u = (usage ?? {}) as Record<string, unknown>;
  const pick = (...keys: string[]) => keys.map((k) => u[k]).find((v) => typeof v === "number") as number | undefined;
  const out: Record<string, number> = {};
  const input = pick("inputTokens", "promptTokens");
  const output = pick("outputTokens", "completionTokens");
  const total = pick("totalTokens");
  if (input !== undefined) out.input_tokens = input;
  if (output !== undefined) out.output_tokens = output;
  if (total !== undefined) out.total_tokens = total;
  return out;
}

interface ToolCallLike { toolCallId?: string; toolName?: string; input?: unknown; args?: unknown }
interface ToolResultLike { toolCallId?: string; output?: unknown; result?: unknown }

async function recordTools(llm: LLMNode, result: Record<string, unknown>): Promise<void> {
  const steps = (result.steps as Record<string, unknown>[] | undefined) ?? [result];
  for (const step of steps) {
    const results = (step.toolResults as ToolResultLike[] | undefined) ?? [];
    for (const call of (step.toolCalls as ToolCallLike[] | undefined) ?? []) {
      const found = results.find((r) => r.toolCallId === call.toolCallId);
      await llm.tool(call.toolName ?? "tool", (tool) => {
        if (found) tool.recordOutput(found.output ?? found.result);
      }, { toolCallId: call.toolCallId, arguments: call.input ?? call.args });
    }
  }
}

function inTrace<T>(client: Rollout, meta: EventMetadata, fn: (parent: SpanNode) => Promise<T>): Promise<T> {
  const active = client.currentSpan();
  if (active) return fn(active);
  const options: TraceOptions = {
    traceId: meta.traceId, userId: meta.userId, sessionId: meta.sessionId,
    conversationId: meta.conversationId, externalTraceId: meta.externalTraceId,
  };
  return client.trace(meta.agentName ?? client.agentName ?? "ai-sdk", fn, options);
}

type AnyFn = (options: Record<string, unknown>) => unknown;

/** The AI SDK module `ai` with generateText, generateObject and streamText traced. */
export function wrapAISDK<T extends object>(ai: T, { client }: { client: Rollout }): T {
  const source = ai as unknown as Record<string, AnyFn>;
  const wrapped: Record<string, unknown> = { ...source };

  for (const name of ["generateText", "generateObject"] as const) {
    if (typeof source[name] !== "function") continue;
    wrapped[name] = (options: Record<string, unknown>) =>
      inTrace(client, readMetadata(options), (parent) => parent.llm(name, async (llm) => {
        llm.recordInput(options.messages ?? options.prompt);
        const result = (await source[name](options)) as Record<string, unknown>;
        llm.recordOutput(name === "generateText" ? result.text : result.object);
        llm.setUsage(usageOf(result.totalUsage ?? result.usage));
        await recordTools(llm, result);
        return result;
      }, { ...modelInfo(options.model), name }));
  }

  if (typeof source.streamText === "function") {
    // The span's body runs synchronously up to streamText's return (async functions run
    // until their first await), so the stream result is there when inTrace returns; the
    // span ends when the stream finishes (onFinish) or fails (onError).
    wrapped.streamText = (options: Record<string, unknown>) => {
      let stream: unknown;
      const traced = inTrace(client, readMetadata(options), (parent) => parent.llm("streamText", (llm) =>
        new Promise<void>((done, fail) => {
          llm.recordInput(options.messages ?? options.prompt);
          const onChunk = options.onChunk as AnyFn | undefined;
          const onFinish = options.onFinish as AnyFn | undefined;
          const onError = options.onError as AnyFn | undefined;
          stream = source.streamText({
            ...options,
            onChunk: (event: Record<string, unknown>) => {
              const chunk = event.chunk as { type?: string; text?: string; textDelta?: string };
              if (chunk?.type === "text-delta" || chunk?.type === "text") llm.recordChunk(chunk.text ?? chunk.textDelta);
              return onChunk?.(event);
            },
            onFinish: async (event: Record<string, unknown>) => {
              llm.setUsage(usageOf(event.totalUsage ?? event.usage));
              await recordTools(llm, event);
              await onFinish?.(event);
              done();
            },
            onError: async (event: Record<string, unknown>) => {
              await onError?.(event);
              fail(event.error ?? event);
            },
          });
        }), { ...modelInfo(options.model), name: "streamText", stream: true }));
      traced.catch(() => undefined); // the stream's consumer sees the error itself
      return stream;
    };
  }
  return wrapped as T;
}
