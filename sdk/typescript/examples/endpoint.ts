/**
 * An agent endpoint in TypeScript (node:http, no framework) instrumented with the SDK:
 * the TypeScript twin of examples/traced-agent/app.py.
 *
 *   npm run build
 *   node dist/examples/endpoint.js --port 8766 --token secret-token \
 *       --model-base-url http://127.0.0.1:8800/v1 [--otlp-endpoint http://127.0.0.1:4318]
 *
 * Each attempt: the user message, a `task` span, a streamed model call (OpenAI Chat
 * Completions over fetch) with usage, a `lookup_account` tool call, the answer, and a
 * `benchmark.score` signal. E-mail addresses are scrubbed before anything is exported.
 */

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";

import { Rollout } from "../src/index.js";

const { values: args } = parseArgs({
  options: {
    port: { type: "string", default: "8766" },
    host: { type: "string", default: "127.0.0.1" },
    token: { type: "string" },
    "model-base-url": { type: "string", default: "https://api.openai.com/v1" },
    model: { type: "string", default: "gpt-4.1-mini" },
    "otlp-endpoint": { type: "string" },
  },
});

const EMAIL = /[\w.+-]+@[\w-]+\.[\w.-]+/g;
const rollout = new Rollout({
  agentName: "benchmark_agent_ts",
  environment: "benchmark",
  endpoint: args["otlp-endpoint"],
  scrubber: (text) => text.replace(EMAIL, "[email]"),
});

function lookupAccount(account: string): Record<string, unknown> {
  return { account, email: "jane.doe@example.com", plan: "pro", open_tickets: 2 };
}

async function* streamChat(instruction: string): AsyncGenerator<{ text?: string; usage?: Record<string, number> }> {
  const answer = await fetch(`${args["model-base-url"]}/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${process.env.OPENAI_API_KEY ?? "unused"}` },
    body: JSON.stringify({
      model: args.model, stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: instruction }],
    }),
  });
  if (!answer.ok || !answer.body) throw new Error(`model answered HTTP ${answer.status}`);
  let buffer = "";
  for await (const piece of answer.body.pipeThrough(new TextDecoderStream())) {
    buffer += piece;
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (!line.startsWith("data:") || line === "data: [DONE]") continue;
      const chunk = JSON.parse(line.slice(5));
      const text = chunk.choices?.[0]?.delta?.content;
      const usage = chunk.usage
        ? { input_tokens: chunk.usage.prompt_tokens, output_tokens: chunk.usage.completion_tokens }
        : undefined;
      yield { text, usage };
    }
  }
}

async function solve(payload: Record<string, any>, traceparent?: string) {
  const attempt = payload.attempt ?? {};
  const task = payload.task ?? {};
  const output = await rollout.trace("benchmark_agent_ts", async (trace) => {
    const instruction = String(task.instruction ?? "");
    trace.message({ role: "user", content: instruction });
    const text = await trace.span("task", async (taskSpan) => {
      taskSpan.recordInput(task);
      const answer = await trace.llm("openai.chat.completions", async (llm) => {
        llm.recordInput({ instruction });
        for await (const chunk of streamChat(instruction)) {
          if (chunk.text) llm.recordChunk(chunk.text);
          if (chunk.usage) llm.setUsage(chunk.usage);
        }
        return llm.text;
      }, { model: args.model, provider: "openai", stream: true });
      const account = await trace.tool("lookup_account", (call) => {
        const found = lookupAccount("default");
        call.recordOutput(found);
        return found;
      }, { toolCallId: "call_1", arguments: { account: "default" } });
      taskSpan.recordOutput({ output: answer, plan: account.plan });
      return answer;
    }, { name: "solve_benchmark_task" });
    trace.message({ role: "assistant", content: text });
    trace.signal("benchmark.score", text.trim() ? 1.0 : 0.0);
    return text;
  }, {
    traceId: attempt.traceId, traceparent, externalTraceId: attempt.id,
    attributes: { benchmark_id: payload.benchmark?.id, run_id: payload.run?.id },
    context: payload.trace?.context,
  });
  await rollout.flush(); // exported before benchflow gets the answer
  const score = output.trim() ? 1.0 : 0.0;
  return { output, score: { score }, passed: score >= 0.8 };
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.url?.split("?")[0] !== "/rollout/eval") return reply(res, 404, { detail: "not found" });
  if (args.token && req.headers.authorization !== `Bearer ${args.token}`) {
    return reply(res, 401, { detail: "unauthorized" });
  }
  if (req.method === "GET") return reply(res, 200, { status: "ok" });
  let body = "";
  for await (const piece of req) body += piece;
  const traceparent = typeof req.headers.traceparent === "string" ? req.headers.traceparent : undefined;
  reply(res, 200, await solve(JSON.parse(body), traceparent));
}

const server = createServer((req, res) => {
  handle(req, res).catch((error) => reply(res, 500, { detail: String(error) }));
});
server.listen(Number(args.port), args.host, () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : args.port;
  console.log(`listening on http://${args.host}:${port}`);
});
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    server.close();
    rollout.shutdown().finally(() => process.exit(0));
  });
}
