/**
 * benchflow's agent-side tracing SDK for TypeScript: the same event taxonomy and export as
 * the Python SDK (`benchflow.tracing`), with a callback API.
 *
 * ```ts
 * const rollout = new Rollout({ agentName: "support_agent", environment: "production" });
 * await rollout.trace("support_agent", async (trace) => {
 *   trace.message({ role: "user", content: "Where is my order?" });
 *   await trace.span("llm", async (span) => { span.setUsage({ input_tokens: 120 }); },
 *     { name: "model.call", model: "gpt-4.1-mini", provider: "openai" });
 *   trace.signal("order_resolved", true);
 * }, { traceId: payload.attempt.traceId });
 * await rollout.shutdown();
 * ```
 */

export {
  LLMNode, Rollout, SpanNode, TraceNode, normalizeTraceId,
  type BeforeSend, type RolloutOptions, type Scrubber, type SpanOptions, type TraceOptions, type Usage,
} from "./client.js";
export { DEFAULT_ENDPOINT } from "./otel.js";
export {
  CAPTURE_TYPES, DEFAULT_LIMITS, END_TYPES, EVENT_TYPES, POINT_TYPES, START_TYPES,
  type Limits, type TraceEvent,
} from "./taxonomy.js";
