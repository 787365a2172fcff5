// wrapAISDK on the real Vercel AI SDK (`ai` 5 and 6, the second installed as `ai-v6`),
// its models replaced by the SDK's own mocks (`ai/test`), so no network is needed:
// streamText's chunks, tools, usage, failures and aborts, generateObject, and the spans
// as they reach an OTLP/HTTP collector.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { describe, test } from "node:test";

import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import * as ai5 from "ai";
import * as ai6 from "ai-v6";
import * as test5 from "ai/test";
import * as test6 from "ai-v6/test";
import { z } from "zod";

import { eventMetadata, wrapAISDK } from "../dist/src/ai-sdk.js";
import { EVENT_TYPES, Rollout } from "../dist/src/index.js";

const TRACE = "0af7651916cd43dd8448eb211c80319c";

/** Each AI SDK major with its mock model and the stream parts its model interface speaks. */
const VERSIONS = {
  "ai 5": {
    ai: ai5, test: test5, Mock: test5.MockLanguageModelV2,
    usage: (input, output) => ({ inputTokens: input, outputTokens: output, totalTokens: input + output }),
    reason: (unified) => unified,
  },
  "ai 6": {
    ai: ai6, test: test6, Mock: test6.MockLanguageModelV3,
    usage: (input, output) => ({ inputTokens: { total: input }, outputTokens: { total: output } }),
    reason: (unified) => ({ unified, raw: unified }),
  },
};

function make(options = {}) {
  const memory = new InMemorySpanExporter();
  const rollout = new Rollout({
    agentName: "agent", exporter: new InMemorySpanExporter(),
    spanProcessors: [new SimpleSpanProcessor(memory)], ...options,
  });
  return { rollout, memory };
}

/** Every event, read back from the finished spans with their ids. */
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

for (const [label, v] of Object.entries(VERSIONS)) {
  const text = (id, ...pieces) => [
    { type: "text-start", id }, ...pieces.map((delta) => ({ type: "text-delta", id, delta })),
    { type: "text-end", id }];
  const finish = (reason, input, output) => ({ type: "finish", finishReason: v.reason(reason),
    usage: v.usage(input, output) });
  const streaming = (...calls) => {
    let n = 0;
    return new v.Mock({ provider: "mock", modelId: "mock-1", doStream: async () => {
      const parts = calls[Math.min(n++, calls.length - 1)];
      if (parts instanceof Error) throw parts;
      return { stream: v.ai.simulateReadableStream({
        chunks: [{ type: "stream-start", warnings: [] }, ...parts] }) };
    } });
  };

  describe(`wrapAISDK on ${label}`, () => {
    test("streamText inside a trace: stream_start, one chunk per delta, stream_end with usage", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      const model = streaming([...text("t1", "Your order ", "has shipped."), finish("stop", 12, 5)]);
      const seen = [];
      const answer = await rollout.trace("support_agent", async (trace) => {
        trace.message({ role: "user", content: "Where is my order?" });
        const result = wrapped.streamText({ model, prompt: "Where is my order?",
          onChunk: ({ chunk }) => { seen.push(chunk.type); } });
        let out = "";
        for await (const piece of result.textStream) out += piece;
        return out;
      }, { traceId: TRACE });
      await rollout.flush();
      assert.equal(answer, "Your order has shipped.");
      assert.deepEqual(seen, ["text-delta", "text-delta"], "the caller's own onChunk still runs");
      const events = eventsOf(memory);
      assert.deepEqual(events.map((e) => e.type), ["trace.start", "message", "llm.stream_start",
        "span.update", "llm.stream_chunk", "llm.stream_chunk", "llm.stream_end", "trace.end"]);
      assert.ok(events.every((e) => e.trace_id === TRACE && EVENT_TYPES.includes(e.type)));
      const [root, , start, input, first, second, end] = events;
      assert.equal(start.parent_span_id, root.span_id);
      assert.ok([input, first, second, end].every((e) => e.span_id === start.span_id));
      assert.deepEqual(start.data, { span_type: "llm", stream: true, model: "mock-1", provider: "mock" });
      assert.equal(input.data.input, "Where is my order?");
      assert.deepEqual([first.data, second.data], [{ index: 0, content: "Your order " },
        { index: 1, content: "has shipped." }]);
      assert.equal(end.data.status, "ok");
      assert.equal(end.data.output, "Your order has shipped.");
      assert.equal(end.data.n_chunks, 2);
      assert.deepEqual(end.data.usage, { input_tokens: 12, output_tokens: 5, total_tokens: 17 });
    });

    test("streamText with a tool: tool.call and tool.result under the LLM span, usage over both steps", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      const model = streaming(
        [{ type: "tool-call", toolCallId: "call_1", toolName: "lookup_order",
          input: JSON.stringify({ order_id: "4421" }) }, finish("tool-calls", 10, 4)],
        [...text("t2", "It shipped."), finish("stop", 20, 3)]);
      const lookupOrder = v.ai.tool({ description: "Look an order up",
        inputSchema: z.object({ order_id: z.string() }),
        execute: async ({ order_id }) => ({ order_id, status: "shipped" }) });
      await rollout.trace("support_agent", async () => {
        const result = wrapped.streamText({ model, prompt: "Where is order 4421?",
          tools: { lookup_order: lookupOrder }, stopWhen: v.ai.stepCountIs(3) });
        await result.consumeStream();
        assert.equal(await result.text, "It shipped.");
      });
      await rollout.flush();
      const events = eventsOf(memory);
      assert.deepEqual(events.map((e) => e.type), ["trace.start", "llm.stream_start", "span.update",
        "tool.call", "tool.result", "llm.stream_chunk", "llm.stream_end", "trace.end"]);
      const llm = events[1];
      const [call, result] = [events[3], events[4]];
      assert.equal(call.parent_span_id, llm.span_id);
      assert.equal(call.name, "lookup_order");
      assert.deepEqual(call.data.arguments, { order_id: "4421" });
      assert.equal(result.data.tool_call_id, "call_1");
      assert.deepEqual(result.data.output, { order_id: "4421", status: "shipped" });
      const end = events[6];
      assert.equal(end.data.output, "It shipped.");
      assert.deepEqual(end.data.usage, { input_tokens: 30, output_tokens: 7, total_tokens: 37 });
    });

    test("streamText whose model call fails: the LLM span ends with the error, the trace too", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      const model = streaming(new Error("model unavailable"));
      const errors = [];
      await rollout.trace("t", async () => {
        const result = wrapped.streamText({ model, prompt: "hi", maxRetries: 0,
          onError: ({ error }) => { errors.push(error.message); } });
        for await (const _ of result.textStream) assert.fail("no text expected");
      });
      await rollout.flush();
      assert.deepEqual(errors, ["model unavailable"], "the caller's own onError still runs");
      const events = eventsOf(memory);
      assert.deepEqual(events.map((e) => e.type), ["trace.start", "llm.stream_start", "span.update",
        "error", "llm.stream_end", "trace.end"]);
      assert.equal(events[3].data.message, "model unavailable");
      assert.equal(events[4].data.status, "error");
      assert.equal(events[5].data.status, "ok");
    });

    test("streamText aborted mid-stream: the LLM span ends, marked aborted, with the chunks so far", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      const model = streaming([...text("t3", "one", "two", "three"), finish("stop", 3, 3)]);
      const abort = new AbortController();
      await rollout.trace("t", async () => {
        const result = wrapped.streamText({ model, prompt: "count", abortSignal: abort.signal });
        for await (const piece of result.textStream) if (piece === "one") abort.abort();
      });
      await rollout.flush();
      const events = eventsOf(memory);
      const end = events.find((e) => e.type === "llm.stream_end");
      assert.ok(end, "the LLM span ended");
      assert.equal(end.data.status, "error");
      assert.match(end.data.error, /^AbortError/);
      assert.ok(end.data.n_chunks >= 1 && end.data.output.startsWith("one"));
      assert.ok(events.findIndex((e) => e.type === "llm.stream_end")
        < events.findIndex((e) => e.type === "trace.end"));
    });

    test("streamText with an error part mid-stream: the error is recorded, the rest of the stream too", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      const [open, first, second, close] = text("t5", "par", "tial");
      const model = streaming([open, first, { type: "error", error: new Error("provider hiccup") },
        second, close, finish("stop", 4, 2)]);
      await rollout.trace("t", async () => {
        await wrapped.streamText({ model, prompt: "hi", onError: () => undefined }).consumeStream();
      });
      await rollout.flush();
      const events = eventsOf(memory);
      assert.deepEqual(events.map((e) => e.type), ["trace.start", "llm.stream_start", "span.update",
        "llm.stream_chunk", "error", "llm.stream_chunk", "llm.stream_end", "trace.end"]);
      const end = events[6];
      assert.equal(end.data.status, "error");
      assert.equal(end.data.output, "partial");
      assert.deepEqual(end.data.usage, { input_tokens: 4, output_tokens: 2, total_tokens: 6 });
    });

    test("generateText with a tool: the tool's call and result under the LLM span", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      let n = 0;
      const model = new v.Mock({ provider: "mock", modelId: "mock-1", doGenerate: async () => (n++ === 0
        ? { content: [{ type: "tool-call", toolCallId: "call_7", toolName: "lookup_order",
          input: JSON.stringify({ order_id: "7" }) }], finishReason: v.reason("tool-calls"),
          usage: v.usage(8, 2), warnings: [] }
        : { content: [{ type: "text", text: "Order 7 shipped." }], finishReason: v.reason("stop"),
          usage: v.usage(15, 4), warnings: [] }) });
      const lookupOrder = v.ai.tool({ inputSchema: z.object({ order_id: z.string() }),
        execute: async ({ order_id }) => ({ order_id, status: "shipped" }) });
      await rollout.trace("t", async () => {
        const result = await wrapped.generateText({ model, prompt: "Order 7?",
          tools: { lookup_order: lookupOrder }, stopWhen: v.ai.stepCountIs(3) });
        assert.equal(result.text, "Order 7 shipped.");
      });
      await rollout.flush();
      const events = eventsOf(memory);
      assert.deepEqual(events.map((e) => e.type), ["trace.start", "span.start", "span.update",
        "tool.call", "tool.result", "span.end", "trace.end"]);
      assert.equal(events[3].parent_span_id, events[1].span_id);
      assert.deepEqual(events[3].data.arguments, { order_id: "7" });
      assert.deepEqual(events[4].data.output, { order_id: "7", status: "shipped" });
      assert.equal(events[5].data.output, "Order 7 shipped.");
      assert.deepEqual(events[5].data.usage, { input_tokens: 23, output_tokens: 6, total_tokens: 29 });
    });

    test("generateObject: an LLM span with the object as output and the usage", async () => {
      const { rollout, memory } = make();
      const wrapped = wrapAISDK(v.ai, { client: rollout });
      const model = new v.Mock({ provider: "mock", modelId: "mock-1", doGenerate: async () => ({
        content: [{ type: "text", text: JSON.stringify({ status: "shipped", eta_days: 2 }) }],
        finishReason: v.reason("stop"), usage: v.usage(9, 6), warnings: [] }) });
      let object;
      await rollout.trace("t", async () => {
        ({ object } = await wrapped.generateObject({ model, prompt: "Order status?",
          schema: z.object({ status: z.string(), eta_days: z.number() }) }));
      });
      await rollout.flush();
      assert.deepEqual(object, { status: "shipped", eta_days: 2 });
      const events = eventsOf(memory);
      assert.deepEqual(events.map((e) => e.type), ["trace.start", "span.start", "span.update",
        "span.end", "trace.end"]);
      assert.equal(events[1].parent_span_id, events[0].span_id);
      assert.equal(events[1].name, "generateObject");
      assert.equal(events[1].data.span_type, "llm");
      assert.deepEqual(events[3].data.output, { status: "shipped", eta_days: 2 });
      assert.deepEqual(events[3].data.usage, { input_tokens: 9, output_tokens: 6, total_tokens: 15 });
    });

    test("streamText outside a trace is a trace of its own, exported over OTLP/HTTP", async () => {
      const received = [];
      const server = createServer((req, res) => {
        let body = "";
        req.on("data", (piece) => { body += piece; });
        req.on("end", () => {
          received.push(body);
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end("{}");
        });
      });
      await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
      const rollout = new Rollout({ agentName: "agent", endpoint: `http://127.0.0.1:${server.address().port}` });
      try {
        const wrapped = wrapAISDK(v.ai, { client: rollout });
        const result = wrapped.streamText({
          model: streaming([...text("t4", "Hel", "lo"), finish("stop", 5, 2)]), prompt: "hi",
          experimental_telemetry: { metadata: eventMetadata({ agentName: "support_agent",
            userId: "user_123", traceId: TRACE }) } });
        assert.equal(await new Response(result.textStream.pipeThrough(new TextEncoderStream())).text(), "Hello");
        await rollout.shutdown();
      } finally {
        server.close();
      }
      const spans = received.flatMap((body) => JSON.parse(body).resourceSpans ?? [])
        .flatMap((r) => r.scopeSpans).flatMap((s) => s.spans);
      const attr = (span, key) => span.attributes.find((a) => a.key === key)?.value.stringValue;
      const byKind = Object.fromEntries(spans.map((s) => [attr(s, "rollout.kind"), s]));
      assert.deepEqual(Object.keys(byKind).sort(), ["llm", "trace"]);
      const { trace, llm } = byKind;
      assert.ok(spans.every((s) => s.traceId === TRACE));
      assert.equal(llm.parentSpanId, trace.spanId);
      assert.equal(trace.name, "support_agent");
      assert.equal(JSON.parse(attr(trace, "rollout.start")).data.user_id, "user_123");
      assert.equal(JSON.parse(attr(llm, "rollout.start")).type, "llm.stream_start");
      const chunks = llm.events.map((e) => JSON.parse(e.attributes.find((a) => a.key === "rollout.event")
        .value.stringValue)).filter((e) => e.type === "llm.stream_chunk");
      assert.deepEqual(chunks.map((e) => e.data.content), ["Hel", "lo"]);
      const end = JSON.parse(attr(llm, "rollout.end"));
      assert.equal(end.type, "llm.stream_end");
      assert.equal(end.data.output, "Hello");
      assert.deepEqual(end.data.usage, { input_tokens: 5, output_tokens: 2, total_tokens: 7 });
    });
  });
}
