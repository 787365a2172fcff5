"""An agent endpoint (FastAPI) instrumented with benchflow's tracing SDK.

Each attempt benchflow POSTs becomes one trace whose id is the attempt's `traceId`:
the user message, a `task` span, a streamed model call (an LLM span with usage), a tool
call and its result, the assistant's answer and a final `benchmark.score` signal.
During `benchflow run -a http` the spans go to benchflow's trace listener
(`http://127.0.0.1:4318`, the SDK's default) and land in each attempt's
`trace_events.jsonl`.

Run it with no model API at all (benchflow's scripted model server stands in):

    pip install 'benchflow[otel]' fastapi uvicorn openai
    benchflow model-server examples/traced-agent/model.yaml --port 8800 &
    python examples/traced-agent/app.py --port 8765 --token secret-token \
        --model-base-url http://127.0.0.1:8800/v1
    benchflow run tasks/qa-example.jsonl -a http --max-tasks 3 \
        --agent-endpoint http://127.0.0.1:8765/rollout/eval \
        --header 'Authorization: Bearer secret-token'

The `lookup_account` tool returns a customer's e-mail address; the client's scrubber
replaces every e-mail address before anything leaves the process, so none reaches
benchflow's files.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import anyio
from fastapi import FastAPI, Header, HTTPException
from openai import OpenAI

from benchflow.tracing import Rollout, usage_from_openai

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
ACCOUNTS = {"default": {"email": "jane.doe@example.com", "plan": "pro", "open_tickets": 2}}


def scrub(text: str) -> str:
    """The client's scrubber: no e-mail address leaves the process."""
    return EMAIL.sub("[email]", text)


def lookup_account(account: str) -> dict[str, Any]:
    """A stand-in for a real tool (a CRM lookup)."""
    return dict(ACCOUNTS.get(account, ACCOUNTS["default"]))


def score_answer(output: str) -> float:
    return 1.0 if output.strip() else 0.0


def create_app(token: str | None = None, *, model_base_url: str | None = None,
               model: str = "gpt-4.1-mini", client: Rollout | None = None) -> FastAPI:
    """The endpoint; with `token`, requests must carry `Authorization: Bearer <token>`."""
    client = client or Rollout(agent_name="benchmark_agent", environment="benchmark",
                               scrubber=scrub)
    openai_client = OpenAI(base_url=model_base_url, api_key="unused") if model_base_url \
        else OpenAI()
    app = FastAPI()

    def authorize(authorization: str | None) -> None:
        if token is not None and authorization != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="unauthorized")

    @app.get("/rollout/eval")
    async def health(authorization: str | None = Header(default=None)) -> dict[str, str]:
        """`rollout check` asks here: 200 with a good token, 401 without."""
        authorize(authorization)
        return {"status": "ok"}

    def solve(payload: dict[str, Any], traceparent: str | None) -> dict[str, Any]:
        attempt = payload.get("attempt", {})
        task = payload.get("task", {})
        with client.trace(
            "benchmark_agent",
            trace_id=attempt.get("traceId"),
            traceparent=traceparent,
            external_trace_id=attempt.get("id"),
            attributes={"benchmark_id": payload.get("benchmark", {}).get("id"),
                        "run_id": payload.get("run", {}).get("id")},
            context=payload.get("trace", {}).get("context", {}),
        ) as trace:
            instruction = str(task.get("instruction") or "")
            trace.message(role="user", content=instruction)
            trace.message(role="system", content="route: answer directly", internal=True)
            with trace.span("task", name="solve_benchmark_task") as task_span:
                task_span.record_input(task)
                with trace.llm("openai.chat.completions", model=model, provider="openai",
                               stream=True) as llm:
                    llm.record_input({"instruction": instruction})
                    stream = openai_client.chat.completions.create(
                        model=model, messages=[{"role": "user", "content": instruction}],
                        stream=True, stream_options={"include_usage": True})
                    for chunk in stream:
                        if chunk.choices and chunk.choices[0].delta.content:
                            llm.record_chunk(chunk.choices[0].delta.content)
                        if chunk.usage is not None:
                            llm.set_usage(**usage_from_openai(chunk))
                    output = llm.text
                with trace.tool("lookup_account", tool_call_id="call_1",
                                arguments={"account": "default"}) as call:
                    account = lookup_account("default")
                    call.record_output(account)
                task_span.record_output({"output": output, "plan": account["plan"]})
            score = score_answer(output)
            trace.message(role="assistant", content=output)
            trace.signal("benchmark.score", score)
        client.flush()  # the attempt's spans are exported before benchflow gets the answer
        return {"output": output, "score": {"score": score}, "passed": score >= 0.8}

    @app.post("/rollout/eval")
    async def run_benchmark_task(payload: dict[str, Any],
                                 authorization: str | None = Header(default=None),
                                 traceparent: str | None = Header(default=None)
                                 ) -> dict[str, Any]:
        authorize(authorization)
        return await anyio.to_thread.run_sync(solve, payload, traceparent)

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN'")
    parser.add_argument("--model-base-url", default=None,
                        help="an OpenAI-compatible API (default: OpenAI's, OPENAI_API_KEY)")
    parser.add_argument("--model", default="gpt-4.1-mini")
    args = parser.parse_args()
    uvicorn.run(create_app(args.token, model_base_url=args.model_base_url, model=args.model),
                host=args.host, port=args.port)


if __name__ == "__main__":
    main()
