"""The traced example endpoint (FastAPI + benchflow.tracing) against `benchflow run -a http`:
each attempt's trace lands in its rollout folder, and the same spans reach OpenTelemetry's
in-memory exporter with the same ids. No Docker: the dataset is a QA file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.model_server import ModelServer
from benchflow.rollout.result import RolloutResult
from benchflow.traces import TRACE_EVENTS, read_events, span_tree
from tests.served import EXAMPLES, free_port, load_module, serve_app

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from benchflow.tracing import Rollout  # noqa: E402

TOKEN = "tr4ced-endpoint-t0ken"
ROOT = Path(__file__).parents[2]
EXAMPLE = EXAMPLES / "traced-agent"


@pytest.fixture(scope="module")
def example():
    return load_module(EXAMPLE / "app.py", "traced_agent_example")


def all_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode(errors="replace") for p in folder.rglob("*")
                     if p.is_file())


def test_each_attempt_folder_holds_its_trace(tmp_path, example):
    port = free_port()
    memory = InMemorySpanExporter()
    client = Rollout(agent_name="benchmark_agent", environment="benchmark",
                     scrubber=example.scrub, endpoint=f"http://127.0.0.1:{port}",
                     span_processors=[SimpleSpanProcessor(memory)])
    model = ModelServer(EXAMPLE / "model.yaml")
    model.start()
    try:
        endpoint_app = example.create_app(TOKEN, model_base_url=f"{model.url}/v1",
                                          client=client)
        with serve_app(endpoint_app) as url:
            run = CliRunner().invoke(app, [
                "run", str(ROOT / "tasks" / "qa-example.jsonl"), "-a", "http",
                "--agent-endpoint", f"{url}/rollout/eval",
                "--header", f"Authorization: Bearer {TOKEN}", "--max-tasks", "2",
                "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "traced",
                "--trace-listen", f"127.0.0.1:{port}"])
    finally:
        model.stop()
        client.shutdown()
    assert run.exit_code == 0, run.output
    job = tmp_path / "jobs" / "traced"
    results = [RolloutResult.model_validate_json(p.read_text())
               for p in job.glob("*/*/*/result.json")]
    assert len(results) == 2
    exported = memory.get_finished_spans()
    for result in results:
        folder = job / result.rollout_name
        events = read_events(folder / TRACE_EVENTS)
        assert {e["trace_id"] for e in events} == {result.trace_id}
        types = [e["type"] for e in events]
        assert types[0] == "trace.start" and types[-1] == "trace.end"
        assert types.index("message") < types.index("span.start") < types.index(
            "llm.stream_start") < types.index("llm.stream_chunk") < types.index(
            "llm.stream_end") < types.index("tool.call") < types.index("tool.result") \
            < types.index("span.end") < types.index("user.signal")
        assert [e["data"]["internal"] for e in events if e["type"] == "message"] \
            == [False, True, False]
        (root,) = span_tree(events)
        assert root.kind == "trace" and root.start["data"]["external_trace_id"] \
            == result.rollout_name
        (task,) = root.children
        assert task.name == "solve_benchmark_task"
        assert [(c.kind, c.name) for c in task.children] == [
            ("llm", "openai.chat.completions"), ("tool", "lookup_account")]
        llm, tool = task.children
        assert llm.usage and llm.usage["input_tokens"] > 0 and llm.usage["output_tokens"] > 0
        assert llm.end["data"]["output"] == "Here is my answer to the task."
        assert tool.start["data"]["tool_call_id"] == "call_1"
        assert tool.end["data"]["output"]["email"] == "[email]"
        signal = next(e for e in events if e["type"] == "user.signal")
        assert signal["data"] == {"name": "benchmark.score", "value": 1.0}
        assert result.rewards and result.rewards["endpoint_score"] == 1.0
        # the same spans, with the same ids, at OpenTelemetry's in-memory exporter
        mine = {format(s.context.span_id, "016x"): s for s in exported
                if format(s.context.trace_id, "032x") == result.trace_id}
        filed = {e["span_id"]: e["parent_span_id"] for e in events if e["type"].endswith(
            ("start", "tool.call"))}
        assert {k: (format(s.parent.span_id, "016x") if s.parent else None)
                for k, s in mine.items()} == filed
    text = all_text(job)
    assert "jane.doe@example.com" not in text and TOKEN not in text
    counts = json.loads((job / "trace_listener.json").read_text())
    assert counts["matched_spans"] == 8 and counts["malformed_requests"] == 0
    # the viewer shows the tree beside the attempt's result
    pytest.importorskip("jinja2")
    from benchflow.view.render import Pages

    html = Pages(tmp_path / "jobs").trial(job, job / results[0].rollout_name)
    assert html is not None and "Agent trace" in html
    tree = html[html.index("Agent trace"):]
    assert tree.index("solve_benchmark_task") < tree.index("openai.chat.completions") \
        < tree.index("lookup_account") < tree.index("benchmark.score")
    # and `benchflow export --include-trace` carries it
    out = tmp_path / "export.jsonl"
    done = CliRunner().invoke(app, ["export", str(job), "-o", str(out), "--include-trace"])
    assert done.exit_code == 0, done.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2
    for line in lines:
        trace_ids = {e["trace_id"] for e in line["trace_events"]}
        assert trace_ids == {line["metadata"]["trace_id"]}
