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

interface StreamPart extends ToolCallLike {
  type?: string; text?: string; delta?: string; textDelta?: string; error?: unknown;
  output?: unknown; usage?: unknown; totalUsage?: unknown;
}

/**
 * A pass-through transform, placed after the caller's own (`experimental_transform`), that
 * records the parts the caller's stream gets: text chunks, tool calls with their results,
 * errors, aborts and the total usage. Its flush runs however the stream closes (finished,
 * failed before the first step, aborted), so the span ends with the stream, which the
 * onFinish callback alone does not give (no onFinish without a finished step).
 */
function observeStream(llm: LLMNode, done: () => void): TransformStream<StreamPart, StreamPart> {
  const settle = new Map<string, (outcome: { output?: unknown; error?: unknown }) => void>();
  const tools: Promise<unknown>[] = [];
  return new TransformStream<StreamPart, StreamPart>({
    transform(part, controller) {
      controller.enqueue(part);
      switch (part.type) {
        case "text-delta":
          llm.recordChunk(part.text ?? part.delta ?? part.textDelta);
          break;
        case "tool-call": {
          const id = part.toolCallId ?? `call_${settle.size}`;
          tools.push(llm.tool(part.toolName ?? "tool", (tool) => new Promise<void>((resolve, reject) => {
            settle.set(id, ({ output, error }) => {
              if (error !== undefined) return reject(error);
              if (output !== undefined) tool.recordOutput(output);
              resolve();
            });
          }), { toolCallId: part.toolCallId, arguments: part.input ?? part.args }).catch(() => undefined));
          break;
        }
        case "tool-result":
        case "tool-error":
          settle.get(part.toolCallId ?? "")?.(part.type === "tool-error"
            ? { error: part.error ?? "tool error" } : { output: part.output ?? (part as { result?: unknown }).result });
          settle.delete(part.toolCallId ?? "");
          break;
        case "error":
          llm.recordError(part.error);
          break;
        case "abort":
          llm.recordError(Object.assign(new Error("the stream was aborted"), { name: "AbortError" }));
          break;
        case "finish":
          llm.setUsage(usageOf(part.totalUsage ?? part.usage));
          break;
      }
    },
    async flush() {
      for (const close of settle.values()) close({}); // calls the model made but nothing ran
      await Promise.all(tools);
      done();
    },
  });
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
    wrapped.streamText = (options: Record<string, unknown>) => {
      let result: unknown;
      // The span's body runs synchronously up to streamText's return (async functions run
      // until their first await), so the result is there when inTrace returns.
      const traced = inTrace(client, readMetadata(options), (parent) => parent.llm("streamText", (llm) =>
        new Promise<void>((done) => {
          llm.recordInput(options.messages ?? options.prompt);
          const own = options.experimental_transform;
          const transforms = own === undefined ? [] : Array.isArray(own) ? own : [own];
          result = source.streamText({
            ...options, experimental_transform: [...transforms, () => observeStream(llm, done)],
          });
        }), { ...modelInfo(options.model), name: "streamText", stream: true }));
      traced.catch(() => undefined); // the stream's consumer sees the error itself
      return result;
    };
  }
  return wrapped as T;
}
