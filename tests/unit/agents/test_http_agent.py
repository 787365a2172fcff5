"""The http agent against the reference endpoint (examples/http-agent) on 127.0.0.1."""

from __future__ import annotations

import inspect
from pathlib import Path

import httpx
import pytest

from benchflow.agents.base import AgentContext
from benchflow.agents.http import (
    HttpAgent,
    build_payload,
    endpoint_reward,
    map_httpx_error,
    parse_answer,
)
from benchflow.config import Scene
from benchflow.errors import AgentExecutionError, AgentTimeout, BenchflowError
from benchflow.paths import RolloutPaths
from benchflow.rollout.result import RolloutResult, record_endpoint_score
from benchflow.steps import desugar
from benchflow.task import load_task
from benchflow.trace_ids import TRACE_ID, TraceIds
from benchflow.trajectory.events import TrajectoryHeader
from benchflow.trajectory.reader import iter_events
from benchflow.trajectory.writer import TrajectoryWriter
from tests.reference_endpoint import load_example, serve

TASK = Path(__file__).parents[3] / "tasks" / "hello-world"
TOKEN = "tok-5e3cret-value"

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def endpoint() -> str:
    with serve(token=TOKEN) as url:
        yield url


@pytest.fixture
def make_ctx():
    made: list[AgentContext] = []

    def make(tmp_path: Path) -> AgentContext:
        made.append(_make_ctx(tmp_path))
        return made[-1]

    yield make
    for ctx in made:
        ctx.trajectory.close()


def _make_ctx(tmp_path: Path) -> AgentContext:
    task = load_task(TASK)
    ids = TraceIds.new("run_test")
    writer = TrajectoryWriter(tmp_path / "t.jsonl", TrajectoryHeader(
        run_id=ids.run_id, trace_id=ids.trace_id, span_id=ids.span_id))
    paths = RolloutPaths.for_trial(tmp_path / "jobs", "job", "http", "tasks", task.name, 1)
    return AgentContext(sandbox=None, task=task, paths=paths, workdir="/app",  # type: ignore[arg-type]
                        agent_user=None, instruction_path="/tmp/instruction.md",
                        trajectory=writer, trace=ids, dataset_name="tasks",
                        rollout_name="http/tasks/hello-world__1")


async def ask(ctx: AgentContext, url: str, headers: dict[str, str] | None = None,
              timeout: float = 10.0) -> HttpAgent:
    agent = HttpAgent("http", url, headers={"Authorization": f"Bearer {TOKEN}"}
                      if headers is None else headers, timeout_sec=timeout, backoff_sec=0.01)
    step = desugar([Scene.single(agent="http")], ctx.task.instruction)[0]
    async with agent.connect(ctx, step.role, step.scene) as connection:
        outcome = await connection.prompt(step)
    agent.last_outcome = outcome  # type: ignore[attr-defined]  # what the test reads
    return agent


async def test_payload_matches_the_contract_field_by_field(make_ctx, tmp_path, endpoint):
    ctx = make_ctx(tmp_path)
    await ask(ctx, f"{endpoint}/eval")
    received = httpx.get(f"{endpoint}/received").json()[-1]
    ids = ctx.trace
    assert set(received) == {"benchmark", "run", "attempt", "task", "trace"}
    assert received["benchmark"] == {"id": "tasks", "name": "tasks"}
    assert received["run"] == {"id": "run_test"}
    assert received["attempt"] == {"id": "http/tasks/hello-world__1", "traceId": ids.trace_id}
    assert received["task"] == {"instruction": ctx.task.instruction, "input": {},
                                "metadata": {"task_name": "hello-world"}}
    assert received["trace"] == {"context": {"run_id": "run_test",
                                             "rollout_id": "http/tasks/hello-world__1",
                                             "trace_id": ids.trace_id}}
    assert TRACE_ID.match(received["attempt"]["traceId"])
    assert received["attempt"]["traceId"] == received["trace"]["context"]["trace_id"]
    assert build_payload(ctx, desugar([Scene.single(agent="http")],
                                      ctx.task.instruction)[0]) == received


async def test_output_goes_to_the_trajectory_with_trace_ids(make_ctx, tmp_path, endpoint):
    ctx = make_ctx(tmp_path)
    agent = await ask(ctx, f"{endpoint}/eval")
    ctx.trajectory.close()
    events = list(iter_events(ctx.trajectory.path))
    expected = load_example().solve(ctx.task.instruction)
    assert [e.type for e in events] == ["user_message", "agent_message"]
    assert events[1].text == expected and agent.last_outcome.agent_text == expected
    assert all(e.trace_id == ctx.trace.trace_id for e in events)


@pytest.mark.parametrize(("form", "score", "passed"), [
    ("number", 1.0, None), ("object", 1.0, True), ("passed", 1.0, True), ("none", None, None)])
async def test_every_score_form(make_ctx, tmp_path, endpoint, form, score, passed):
    ctx = make_ctx(tmp_path)
    await ask(ctx, f"{endpoint}/eval?score={form}")
    assert ctx.endpoint_score == score
    assert ctx.endpoint_passed == passed


def test_parse_answer_forms_and_errors():
    assert parse_answer(b'{"output": "x", "score": 0.25}').score == 0.25
    assert parse_answer(b'{"output": "x", "score": {"score": 3}}').score == 3.0
    assert endpoint_reward(parse_answer(b'{"output": "x", "passed": false}')) == 0.0
    assert endpoint_reward(parse_answer(b'{"output": "x"}')) is None
    for bad, says in [(b"<html>", "not JSON"), (b"[1]", "JSON list"),
                      (b'{"score": 1}', "`output` is missing"),
                      (b'{"output": "x", "score": "high"}', "`score` is 'high'"),
                      (b'{"output": "x", "score": true}', "`score` is True"),
                      (b'{"output": "x", "passed": "yes"}', "`passed` is 'yes'")]:
        with pytest.raises(AgentExecutionError, match=says):
            parse_answer(bad)


def test_endpoint_score_becomes_reward_only_without_a_verifier():
    result = RolloutResult(job_name="j", rollout_name="r", task_name="t", dataset_name="d",
                           agent_name="http", attempt=1)
    record_endpoint_score(result, 0.5, True, verified=False)
    assert (result.reward, result.rewards) == (0.5, {"endpoint_score": 0.5, "passed": 1.0})
    result.reward, result.rewards = 0.0, {"reward": 0.0}
    record_endpoint_score(result, 0.9, None, verified=True)
    assert (result.reward, result.rewards) == (0.0, {"reward": 0.0, "endpoint_score": 0.9})


@pytest.mark.parametrize(("query", "error", "says"), [
    ("status=500", AgentExecutionError, "HTTP 500"),
    ("status=400", AgentExecutionError, "HTTP 400"),
    ("status=503", AgentExecutionError, "HTTP 503 after retries"),
    ("body=garbage", AgentExecutionError, "not JSON"),
    ("sleep=2", AgentTimeout, "no answer within 0.5 s"),
])
async def test_error_paths(make_ctx, tmp_path, endpoint, query, error, says):
    ctx = make_ctx(tmp_path)
    with pytest.raises(error, match=says) as info:
        # only the sleeping endpoint meets the short timeout (a 2 s answer against 0.5 s)
        await ask(ctx, f"{endpoint}/eval?{query}", timeout=0.5 if "sleep" in query else 60)
    assert TOKEN not in str(info.value)  # the body quoted the header: scrubbed
    assert info.value.error_type == ("agent_execution_timeout" if error is AgentTimeout
                                     else "agent_execution_failed")


async def test_wrong_token_is_a_401_failure(make_ctx, tmp_path, endpoint):
    with pytest.raises(AgentExecutionError, match="HTTP 401"):
        await ask(make_ctx(tmp_path), f"{endpoint}/eval", headers={"Authorization": "Bearer no"})


async def test_transient_answers_are_retried(make_ctx, tmp_path, endpoint):
    ctx = make_ctx(tmp_path)
    await ask(ctx, f"{endpoint}/eval?flaky=2&score=number")
    assert ctx.endpoint_score == 1.0
    attempts = [p for p in httpx.get(f"{endpoint}/received").json()
                if p["attempt"]["traceId"] == ctx.trace.trace_id]
    assert len(attempts) == 3


async def test_unreachable_endpoint_is_an_agent_failure(make_ctx, tmp_path):
    with pytest.raises(AgentExecutionError, match="ConnectError"):
        await ask(make_ctx(tmp_path), "http://127.0.0.1:9/eval")


async def test_header_values_are_scrubbed_from_output(make_ctx, tmp_path, endpoint):
    ctx = make_ctx(tmp_path)
    agent = await ask(ctx, f"{endpoint}/eval?echo_auth=1")
    ctx.trajectory.close()
    assert TOKEN not in ctx.trajectory.path.read_text()
    assert "(auth: ***)" in ctx.trajectory.path.read_text()
    assert agent.scrub(f"token {TOKEN}!") == "token ***!"
    assert TOKEN not in repr(agent)


def _httpx_exceptions() -> list[type[Exception]]:
    return [obj for _, obj in inspect.getmembers(httpx, inspect.isclass)
            if issubclass(obj, Exception) and obj.__module__.startswith("httpx")]


@pytest.mark.parametrize("exc_type", _httpx_exceptions(), ids=lambda t: t.__name__)
def test_every_httpx_exception_is_mapped(exc_type):
    request = httpx.Request("GET", "http://x")
    attempts = [lambda: exc_type("boom"), lambda: exc_type(),
                lambda: exc_type("boom", request=request, response=httpx.Response(500))]
    for attempt in attempts:
        try:
            exc = attempt()
            break
        except TypeError:
            continue
    mapped = map_httpx_error(exc, "http://x", 1.0)
    assert isinstance(mapped, BenchflowError) and mapped.error_type != "internal_error"
    expected = "agent_execution_timeout" if isinstance(exc, httpx.TimeoutException) else \
        "agent_execution_failed"
    assert mapped.error_type == expected
