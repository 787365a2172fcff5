"""OpenTelemetry spans from a finished rollout: tree shape and attributes (in-memory), and
once through the OTLP/HTTP exporter to a receiver on 127.0.0.1 decoding the protobuf."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import ErrorInfo, RolloutResult, Timestamps, Tokens
from benchflow.trace_ids import TraceIds, step_span_id, tool_call_span_id
from benchflow.telemetry.otel import OtelRecorder, otlp_recorder
from benchflow.trajectory.events import TrajectoryHeader
from benchflow.trajectory.writer import TrajectoryWriter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def finished_rollout(tmp_path: Path, *, error: bool = False) -> RolloutResult:
    ids = TraceIds.new("run_abc")
    path = tmp_path / "acp_trajectory.jsonl"
    step = step_span_id(ids.trace_id, 0, 0)
    with TrajectoryWriter(path, TrajectoryHeader(run_id=ids.run_id, trace_id=ids.trace_id,
                                                 span_id=ids.span_id)) as writer:
        writer.span_id = step
        ctx = {"scene": "main", "role": "coder", "turn": 0}
        writer.record("user_message", text="go", ts=at(3), **ctx)
        writer.record("tool_call", tool_call_id="c1", title="bash", status="pending",
                      update={}, ts=at(3.5), **ctx)
        writer.record("tool_call_update", tool_call_id="c1", status="completed", update={},
                      ts=at(4), **ctx)
        writer.record("agent_message", text="done", update={}, ts=at(4.5), **ctx)
    ts = Timestamps(started_at=at(0), environment_setup_started_at=at(0),
                    environment_setup_ended_at=at(1), agent_setup_started_at=at(1),
                    agent_setup_ended_at=at(2), agent_execution_started_at=at(2),
                    agent_execution_ended_at=at(5), ended_at=at(6))
    if not error:
        ts.verifier_started_at, ts.verifier_ended_at = at(5), at(6)
    return RolloutResult(
        job_name="j", rollout_name="scripted/tasks/hello__1", task_name="hello",
        dataset_name="tasks", agent_name="scripted", model="m1", attempt=1,
        run_id=ids.run_id, trace_id=ids.trace_id, span_id=ids.span_id,
        reward=None if error else 1.0, rewards=None if error else {"reward": 1.0},
        tokens=Tokens(input=10, output=5), cost=0.25, n_tool_calls=1, timestamps=ts,
        trajectory_path=str(path),
        error=ErrorInfo(type="agent_execution_timeout", message="too slow",
                        phase="agent_execution") if error else None)


def record(recorder: OtelRecorder, result: RolloutResult) -> None:
    recorder(RolloutEvent(RolloutEventKind.END, result.rollout_name, result))


def test_span_tree_and_attributes(tmp_path):
    exporter = InMemorySpanExporter()
    recorder = OtelRecorder(processor=SimpleSpanProcessor(exporter), job_name="j")
    result = finished_rollout(tmp_path)
    record(recorder, result)
    recorder.finish()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"job j", "rollout scripted/tasks/hello__1", "environment_setup",
                          "agent_setup", "agent_execution", "verifier",
                          "step main/coder/turn 0", "execute_tool bash"}
    root = spans["rollout scripted/tasks/hello__1"]
    hexid = lambda n, w: format(n, f"0{w}x")  # noqa: E731
    assert hexid(root.context.trace_id, 32) == result.trace_id
    assert hexid(root.context.span_id, 16) == result.span_id and root.parent is None
    assert root.links[0].context.span_id == spans["job j"].context.span_id
    for phase in ("environment_setup", "agent_setup", "agent_execution", "verifier"):
        assert spans[phase].parent.span_id == root.context.span_id
    step, tool = spans["step main/coder/turn 0"], spans["execute_tool bash"]
    assert step.parent.span_id == spans["agent_execution"].context.span_id
    assert hexid(step.context.span_id, 16) == step_span_id(result.trace_id, 0, 0)
    assert tool.parent.span_id == step.context.span_id
    assert hexid(tool.context.span_id, 16) == tool_call_span_id(result.trace_id, "c1")
    assert {s.context.trace_id for n, s in spans.items() if n != "job j"} == \
        {root.context.trace_id}
    a = root.attributes
    assert (a["benchflow.task.name"], a["benchflow.dataset.name"], a["gen_ai.agent.name"],
            a["gen_ai.request.model"], a["benchflow.reward"], a["gen_ai.usage.input_tokens"],
            a["gen_ai.usage.output_tokens"], a["benchflow.cost"], a["benchflow.run_id"]) == \
        ("hello", "tasks", "scripted", "m1", 1.0, 10, 5, 0.25, "run_abc")
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert step.attributes["benchflow.role"] == "coder"
    assert root.start_time == int(at(0).timestamp() * 1e9)
    assert tool.end_time == int(at(4).timestamp() * 1e9)


def test_error_type_and_no_verifier_span(tmp_path):
    exporter = InMemorySpanExporter()
    recorder = OtelRecorder(processor=SimpleSpanProcessor(exporter), job_name="j")
    record(recorder, finished_rollout(tmp_path, error=True))
    recorder.finish()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert "verifier" not in spans
    assert spans["agent_execution"].attributes["error.type"] == "agent_execution_timeout"
    assert spans["rollout scripted/tasks/hello__1"].status.status_code.name == "ERROR"


def test_telemetry_failure_never_raises(tmp_path, caplog):
    class Broken(InMemorySpanExporter):
        def export(self, spans):
            raise RuntimeError("collector down")

    recorder = OtelRecorder(processor=SimpleSpanProcessor(Broken()), job_name="j")
    result = finished_rollout(tmp_path)
    result.trajectory_path = str(tmp_path / "missing" / "file.jsonl")
    record(recorder, result)  # no exception
    recorder.finish()


def test_otlp_http_end_to_end(tmp_path):
    received: list[ExportTraceServiceRequest] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.append(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        recorder = otlp_recorder(f"http://127.0.0.1:{server.server_port}", "j")
        result = finished_rollout(tmp_path)
        record(recorder, result)
        recorder.finish()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    spans = [span for req in received for rs in req.resource_spans for ss in rs.scope_spans
             for span in ss.spans]
    names = {s.name for s in spans}
    assert "rollout scripted/tasks/hello__1" in names and "execute_tool bash" in names
    root = next(s for s in spans if s.name.startswith("rollout"))
    assert root.trace_id.hex() == result.trace_id and root.span_id.hex() == result.span_id
    attrs = {kv.key: kv.value for kv in root.attributes}
    assert attrs["benchflow.task.name"].string_value == "hello"
    assert attrs["benchflow.reward"].double_value == 1.0


def test_recorder_only_when_asked(monkeypatch):
    import subprocess
    import sys

    import pytest

    from benchflow.errors import ConfigError
    from benchflow.telemetry import recorder

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert recorder(False, "j") is None
    code = ("import sys, benchflow.telemetry, benchflow.cli.run; "
            "from benchflow.telemetry import recorder; assert recorder(False, 'j') is None; "
            "assert 'benchflow.telemetry.otel' not in sys.modules; "
            "assert 'opentelemetry.sdk' not in sys.modules")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    made = recorder(False, "j")
    assert isinstance(made, OtelRecorder)
    made.provider.shutdown()
    monkeypatch.setitem(sys.modules, "benchflow.telemetry.otel", None)  # the extra is missing
    with pytest.raises(ConfigError, match=r"benchflow\[otel\]"):
        recorder(True, "j")
