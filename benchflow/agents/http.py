"""HTTP agents: an agent that is a service, reached by one POST per attempt.

The payload is the hosted-benchmark contract (docs/how-to/http-agents.md):

```json
{"benchmark": {"id": "<dataset>", "name": "<dataset>"},
 "run": {"id": "<run id>"},
 "attempt": {"id": "<rollout name>", "traceId": "<trace id>"},
 "task": {"instruction": "...", "input": {}, "metadata": {}},
 "trace": {"context": {"run_id": "...", "rollout_id": "...", "trace_id": "..."}}}
```

The response is `{"output": str}` plus optionally `score` (a number or `{"score": n}`)
or `passed`. The output becomes an `agent_message` in the trajectory and
`/logs/agent/output.txt` in the sandbox when there is one; the score goes to
`ctx.endpoint_score` and `ctx.endpoint_passed` for the rollout to record.

httpx exceptions are mapped here, once (`map_httpx_error`). Header values are
secrets: they are sent and never written, logged, or echoed back (an error body or
output quoting one has it replaced by `***`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from benchflow.agents.base import AgentConnection, AgentContext, StepOutcome
from benchflow.config import Role
from benchflow.errors import AgentExecutionError, AgentTimeout, BenchflowError
from benchflow.steps import Step

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

OUTPUT_PATH = "/logs/agent/output.txt"
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
"""Answers retried with backoff (rate limited, or a gateway between us and the agent)."""

_EXCERPT = 500
_REDACTED = "***"


@dataclass(frozen=True)
class EndpointAnswer:
    """A parsed response: the output, and the endpoint's own score when it gave one."""

    output: str
    score: float | None = None
    passed: bool | None = None


def parse_answer(body: bytes) -> EndpointAnswer:
    """Read `{"output": ..., "score": n | {"score": n}, "passed": bool}`.

    Raises:
        AgentExecutionError: the body is not JSON, not an object, or a field has the
            wrong type; the message says what was expected.
    """
    expected = ('expected a JSON object {"output": str, "score"?: number | {"score": number}, '
                '"passed"?: bool}')
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise AgentExecutionError(f"the agent endpoint's response is not JSON ({exc}); "
                                  f"{expected}") from None
    if not isinstance(data, dict):
        raise AgentExecutionError(f"the agent endpoint answered a JSON {type(data).__name__}; "
                                  f"{expected}")
    output = data.get("output")
    if not isinstance(output, str):
        raise AgentExecutionError(f"the agent endpoint's `output` is "
                                  f"{'missing' if output is None else type(output).__name__}; "
                                  f"{expected}")
    score = data.get("score")
    if isinstance(score, dict):
        score = score.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise AgentExecutionError(f"the agent endpoint's `score` is {score!r}; {expected}")
    passed = data.get("passed")
    if passed is not None and not isinstance(passed, bool):
        raise AgentExecutionError(f"the agent endpoint's `passed` is {passed!r}; {expected}")
    return EndpointAnswer(output=output, score=None if score is None else float(score),
                          passed=passed)


def endpoint_reward(answer: EndpointAnswer) -> float | None:
    """The reward an endpoint's answer implies: its score, else 1/0 from `passed`."""
    if answer.score is not None:
        return answer.score
    if answer.passed is not None:
        return 1.0 if answer.passed else 0.0
    return None


def build_payload(ctx: AgentContext, step: Step) -> dict[str, Any]:
    """The contract's payload for one attempt (a rollout's step)."""
    trace = ctx.trace
    run_id = trace.run_id if trace else None
    trace_id = trace.trace_id if trace else None
    attempt_id = ctx.rollout_name or ctx.task.name
    dataset = ctx.dataset_name or ""
    task_input = dict(ctx.task_input)
    metadata = {"task_name": ctx.task.name, **ctx.task_metadata}
    return {
        "benchmark": {"id": dataset, "name": dataset},
        "run": {"id": run_id},
        "attempt": {"id": attempt_id, "traceId": trace_id},
        "task": {"instruction": step.prompt, "input": task_input, "metadata": metadata},
        "trace": {"context": {"run_id": run_id, "rollout_id": attempt_id, "trace_id": trace_id}},
    }


def map_httpx_error(exc: Exception, url: str, timeout_sec: float) -> BenchflowError:
    """The benchflow error for an httpx exception (the one place they are mapped)."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return AgentTimeout("agent", timeout_sec, f"agent endpoint {url}: no answer within "
                            f"{timeout_sec:g} s ({type(exc).__name__})")
    if isinstance(exc, httpx.HTTPError | httpx.InvalidURL | httpx.CookieConflict
                  | httpx.StreamError):
        return AgentExecutionError(f"agent endpoint {url}: {type(exc).__name__}: {exc}")
    raise TypeError(f"not an httpx exception: {exc!r}")


class HttpAgent:
    """An `AgentDriver` POSTing each attempt to `endpoint`. Needs no sandbox of its own."""

    needs_sandbox = False

    def __init__(self, name: str, endpoint: str, headers: Mapping[str, str] | None = None,
                 timeout_sec: float = 60.0, max_retries: int = 3,
                 backoff_sec: float = 0.5) -> None:
        self.name = name
        self.endpoint = endpoint
        self.headers = dict(headers or {})
        self.timeout_sec = timeout_sec
        self.max_retries = max_retries
        self.backoff_sec = backoff_sec

    def __repr__(self) -> str:  # never the header values
        return f"HttpAgent({self.name!r}, {self.endpoint!r}, headers={sorted(self.headers)})"

    def scrub(self, text: str) -> str:
        """`text` with every header value replaced by `***`."""
        for value in self.headers.values():
            # the whole value, and a credential after its scheme ("Bearer <token>")
            for secret in (value, value.partition(" ")[2].strip()):
                if len(secret) >= 4:
                    text = text.replace(secret, _REDACTED)
        return text

    async def install(self, ctx: AgentContext) -> None:
        """Nothing to install: the agent runs elsewhere."""

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        """A session: one httpx client; each prompt is one POST."""
        import httpx

        async with httpx.AsyncClient(timeout=self.timeout_sec) as client:
            yield _HttpConnection(self, ctx, client)

    async def post(self, client: httpx.AsyncClient, payload: dict[str, Any],
                   trace_headers: Mapping[str, str] | None = None) -> httpx.Response:
        """POST `payload`, retrying transient answers and connection failures with backoff.

        `trace_headers` (W3C `traceparent`) go along, so an OpenTelemetry-instrumented
        endpoint's spans join the attempt's trace on their own.

        Raises:
            AgentTimeout: no answer within `timeout_sec`.
            AgentExecutionError: a non-2xx answer (after retries when transient), or the
                endpoint could not be reached.
        """
        import httpx

        attempt = 0
        while True:
            attempt += 1
            try:
                response = await client.post(self.endpoint, json=payload,
                                             headers={**(trace_headers or {}), **self.headers})
            except httpx.TimeoutException as exc:
                raise map_httpx_error(exc, self.endpoint, self.timeout_sec) from None
            except httpx.TransportError as exc:
                if attempt > self.max_retries:
                    raise map_httpx_error(exc, self.endpoint, self.timeout_sec) from None
                log.warning("agent endpoint %s: %s; retry %d", self.endpoint,
                            type(exc).__name__, attempt)
            except httpx.HTTPError as exc:
                raise map_httpx_error(exc, self.endpoint, self.timeout_sec) from None
            else:
                if response.is_success:
                    return response
                if response.status_code not in TRANSIENT_STATUSES or attempt > self.max_retries:
                    excerpt = self.scrub(response.text[:_EXCERPT])
                    raise AgentExecutionError(
                        f"agent endpoint {self.endpoint} answered HTTP {response.status_code}"
                        f"{' after retries' if attempt > 1 else ''}: {excerpt}")
                log.warning("agent endpoint %s answered HTTP %d; retry %d", self.endpoint,
                            response.status_code, attempt)
            await anyio.sleep(self.backoff_sec * 2 ** (attempt - 1))


class _HttpConnection:
    def __init__(self, agent: HttpAgent, ctx: AgentContext, client: httpx.AsyncClient) -> None:
        self.agent = agent
        self.ctx = ctx
        self.client = client

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        ctx, agent = self.ctx, self.agent
        started = time.monotonic()
        context = dict(scene=step.scene, role=step.role.name, turn=step.turn_index, round=round)
        if ctx.trajectory is not None:
            ctx.trajectory.record("user_message", text=step.prompt, **context)
        traceparent = ctx.env.get("TRACEPARENT")
        response = await agent.post(self.client, build_payload(ctx, step),
                                    {"traceparent": traceparent} if traceparent else None)
        answer = parse_answer(response.content)
        output = agent.scrub(answer.output)
        if ctx.trajectory is not None:
            ctx.trajectory.record("agent_message", text=output, update={
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": output}}, **context)
        if ctx.sandbox is not None:
            await ctx.sandbox.upload_bytes(output.encode(), OUTPUT_PATH, mode=0o644)
        reward = endpoint_reward(answer)
        if reward is not None:
            ctx.endpoint_score = reward
        if answer.passed is not None:
            ctx.endpoint_passed = answer.passed
        log.info("agent endpoint answered in %.2f s (score %s)", time.monotonic() - started,
                 reward)
        return StepOutcome(stop_reason="end_turn", agent_text=output)


__all__ = ["OUTPUT_PATH", "TRANSIENT_STATUSES", "EndpointAnswer", "HttpAgent", "build_payload",
           "endpoint_reward", "map_httpx_error", "parse_answer"]
