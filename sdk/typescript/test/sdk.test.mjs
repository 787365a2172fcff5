// The TypeScript SDK on Node's test runner: the taxonomy, nesting, hooks, limits, the
// OTLP/HTTP export, and wrapAISDK on the real `ai` package with its mock model.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import * as ai from "ai";
import { MockLanguageModelV2 } from "ai/test";

import { eventMetadata, wrapAISDK } from "../dist/src/ai-sdk.js";
import { EVENT_TYPES, Rollout, normalizeTraceId } from "../dist/src/index.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

function make(options = {}) {
  const memory = new InMemorySpanExporter();
  const rollout = new Rollout({
    agentName: "agent", environment: "test", exporter: new InMemorySpanExporter(),
    spanProcessors: [new SimpleSpanProcessor(memory)], ...options,
  });
  return { rollout, memory };
}

/** Every event, read back from the spans as benchflow's listener reads them. */
function eventsOf(memory) {
  const events = [];
  for (const span of memory.getFinishedSpans()) {
    const ids = { trace_id: span.spanContext().traceId, span_id: span.spanContext().spanId,
      parent_span_id: span.parentSpanContext?.spanId ?? null };
    for (const key of ["rollout.start", "rollout.end"]) {
      if (span.attributes[key]) events.push({ ...JSON.parse(span.attributes[key]), ...ids });
    }
    for (const event of span.events) events.push({ ...JSON.parse(event.attributes["rollout.event"]), ...ids });
  }
  return events.sort((a, b) => a.seq - b.seq);
}

test("the spec example gives the taxonomy, nested in order, with the payload's trace id", async () => {
  const { rollout, memory } = make();
  const result = await rollout.trace("support_agent", async (trace) => {
    trace.message({ role: "user", content: "Where is my order?" });
    await trace.span("llm", async (span) => {
      span.recordInput({ messages: [{ role: "user", content: "Where is my order?" }] });
      span.recordOutput({ content: "Your order has shipped." });
      span.setUsage({ input_tokens: 120, output_tokens: 24, total_tokens: 144 });
      await trace.tool("lookup_order", (call) => call.recordOutput({ status: "shipped" }),
        { toolCallId: "call_123", arguments: { order_id: "4421" } });
    }, { name: "model.call", model: "gpt-4.1-mini", provider: "openai" });
    trace.signal("order_resolved", true);
    return "done";
  }, { traceId: TRACE, userId: "cus_123" });
  await rollout.flush();
  assert.equal(result, "done");
  const events = eventsOf(memory);
  assert.deepEqual(events.map((e) => e.type), ["trace.start", "message", "span.start", "span.update",
    "tool.call", "tool.result", "span.end", "user.signal", "trace.end"]);
  assert.ok(events.every((e) => e.trace_id === TRACE && EVENT_TYPES.includes(e.type)));
  const [root, , llm, , tool] = events;
  assert.equal(root.parent_span_id, null);
  assert.equal(llm.parent_span_id, root.span_id);
  assert.equal(tool.parent_span_id, llm.span_id);
  assert.equal(llm.data.span_type, "llm");
  assert.deepEqual(events[6].data.usage, { input_tokens: 120, output_tokens: 24, total_tokens: 144 });
  assert.equal(events[5].data.tool_call_id, "call_123");
  const spans = Object.fromEntries(memory.getFinishedSpans().map((s) => [s.name, s]));
  assert.equal(spans["model.call"].attributes["gen_ai.usage.input_tokens"], 120);
  assert.equal(spans.support_agent.attributes["enduser.id"], "cus_123");
});

test("streamed chunks, traceparent, and ids shared with Python", async () => {
  const { rollout, memory } = make();
  await rollout.trace("t", async (trace) => {
    await trace.llm("chat", async (llm) => {
      for (const piece of ["Hel", "lo"]) llm.recordChunk(piece);
      llm.setUsage({ input_tokens: 5, output_tokens: 2 });
    }, { model: "m", stream: true });
  }, { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` });
  await rollout.flush();
  const events = eventsOf(memory);
  assert.deepEqual(events.map((e) => e.type), ["trace.start", "llm.stream_start", "llm.stream_chunk",
    "llm.stream_chunk", "llm.stream_end", "trace.end"]);
  assert.equal(events[0].parent_span_id, "00f067aa0ba902b7");
  assert.equal(events[4].data.output, "Hello");
  assert.equal(events[4].data.n_chunks, 2);
  assert.equal(events[4].data.usage.total_tokens, 7);
  // the same derivation as Python's normalize_trace_id("trace_123")
  assert.equal(normalizeTraceId("trace_123"), "ca195e92cffdc1667ce0073fad37865a");
  assert.equal(normalizeTraceId(TRACE.toUpperCase()), TRACE);
});

test("scrubber and beforeSend run before export; dropping a span re-parents its children", async () => {
  const { rollout, memory } = make({
    scrubber: (text) => text.replaceAll("sk-live-123", "[key]"),
    beforeSend: (event) => (event.type === "feedback" || event.name === "private" ? null : event),
  });
  await rollout.trace("t", async (trace) => {
    trace.message({ role: "user", content: "my key is sk-live-123" });
    trace.feedback("rating", 5);
    await trace.span("task", async () => {
      await trace.span("task", async () => {}, { name: "child" });
    }, { name: "private" });
  });
  await rollout.flush();
  const dumped = JSON.stringify(memory.getFinishedSpans().map((s) => [s.attributes, s.events]));
  assert.ok(!dumped.includes("sk-live-123") && dumped.includes("[key]"));
  const events = eventsOf(memory);
  assert.ok(!events.some((e) => e.type === "feedback"));
  assert.deepEqual(memory.getFinishedSpans().map((s) => s.name).sort(), ["child", "t"]);
  const child = events.find((e) => e.name === "child");
  assert.equal(child.parent_span_id, events[0].span_id);
});

test("errors mark the span and are rethrown; limits bound payloads", async () => {
  const { rollout, memory } = make({ limits: { maxStringChars: 10, maxEventsPerSpan: 2 } });
  await assert.rejects(rollout.trace("t", async (trace) => {
    trace.message({ role: "user", content: "x".repeat(25) });
    for (let n = 0; n < 4; n++) trace.signal("s", n);
    await trace.tool("flaky", () => { throw new Error("boom"); });
  }), /boom/);
  await rollout.flush();
  const events = eventsOf(memory);
  const message = events.find((e) => e.type === "message");
  assert.equal(message.data.content, "xxxxxxxxxx…[truncated 15 chars]");
  assert.equal(message.data.truncated, true);
  const result = events.find((e) => e.type === "tool.result");
  assert.equal(result.data.status, "error");
  const end = events.find((e) => e.type === "trace.end");
  assert.equal(end.data.dropped_events, 4);
  assert.throws(() => rollout.captureEvent("span.start", {}), /unknown type/);
});

test("OTLP/HTTP export reaches a collector with the same ids, and check() reads its answer", async () => {
  const bodies = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (piece) => { body += piece; });
    req.on("end", () => {
      bodies.push({ auth: req.headers.authorization, type: req.headers["content-type"], body });
      res.writeHead(req.headers.authorization === "Bearer good" ? 200 : 401,
        { "Content-Type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${server.address().port}`;
  try {
    const rollout = new Rollout({ agentName: "a", endpoint, apiKey: "good" });
    assert.equal((await rollout.check()).ok, true);
    assert.match((await new Rollout({ endpoint, apiKey: "bad" }).check()).message, /credentials rejected/);
    await rollout.trace("t", (trace) => trace.message({ role: "user", content: "hi" }), { traceId: TRACE });
    await rollout.shutdown();
  } finally {
    server.close();
  }
  const exported = bodies.filter((b) => b.body.includes("resourceSpans") && b.body.includes(TRACE));
  assert.equal(exported.length, 1);
  assert.equal(exported[0].auth, "Bearer good");
  const span = JSON.parse(exported[0].body).resourceSpans[0].scopeSpans[0].spans[0];
  assert.equal(span.traceId, TRACE);
  assert.equal(span.attributes.find((a) => a.key === "rollout.kind").value.stringValue, "trace");
});

test("wrapAISDK records generateText as an LLM span with usage", async () => {
  const { rollout, memory } = make();
  const wrapped = wrapAISDK(ai, { client: rollout });
  const model = new MockLanguageModelV2({
    provider: "mock", modelId: "mock-1",
    doGenerate: async () => ({
      content: [{ type: "text", text: "It shipped." }], finishReason: "stop", warnings: [],
      usage: { inputTokens: 11, outputTokens: 3, totalTokens: 14 },
    }),
  });
  const result = await wrapped.generateText({
    model, prompt: "Where is my order?",
    experimental_telemetry: { metadata: eventMetadata({ agentName: "support_agent", userId: "user_123",
      externalTraceId: "message_123", traceId: TRACE }) },
  });
  assert.equal(result.text, "It shipped.");
  await rollout.flush();
  const events = eventsOf(memory);
  assert.deepEqual(events.map((e) => e.type), ["trace.start", "span.start", "span.update", "span.end",
    "trace.end"]);
  assert.equal(events[0].name, "support_agent");
  assert.equal(events[0].data.user_id, "user_123");
  assert.ok(events.every((e) => e.trace_id === TRACE));
  assert.equal(events[1].data.model, "mock-1");
  assert.equal(events[3].data.output, "It shipped.");
  assert.deepEqual(events[3].data.usage, { input_tokens: 11, output_tokens: 3, total_tokens: 14 });
});
