"""The http agent on real Docker tasks, against the reference endpoint on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from benchflow.cli.jobs import run_job_file
from benchflow.cli.main import app
from benchflow.rollout.result import RolloutResult
from benchflow.trace_ids import TRACE_ID
from benchflow.trajectory.reader import iter_events, read_header
from tests.reference_endpoint import load_example, serve

from .conftest import TASKS

pytestmark = pytest.mark.docker

TOKEN = "tok-int3gration-5ecret"


@pytest.fixture(scope="module")
def endpoint():
    with serve(token=TOKEN) as url:
        yield url


def all_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode(errors="replace") for p in folder.rglob("*")
                     if p.is_file())


def test_job_file_http_agent_on_a_container_task(tmp_path, job_label, endpoint, monkeypatch):
    monkeypatch.setenv("BF_AGENT_TOKEN", TOKEN)
    name = f"{job_label}-http-job"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "name": name, "jobs_dir": str(tmp_path / "jobs"),
        "verifier": {"disable": True},
        "agents": [{"name": "svc", "kind": "http", "endpoint": f"{endpoint}/eval?score=object",
                    "headers": {"Authorization": "Bearer ${BF_AGENT_TOKEN}",
                                "X-Literal": "literal-h3ader-value"},
                    "timeout_sec": 30}],
        "datasets": [{"path": str(TASKS), "tasks": ["hello-world"]}]}))
    assert run_job_file(job_file) == 0
    job_dir = tmp_path / "jobs" / name
    trial = job_dir / "svc" / "tasks" / "hello-world__1"
    result = RolloutResult.model_validate_json((trial / "result.json").read_text())
    assert result.error is None
    # the verifier is disabled: the endpoint's score is the reward
    assert result.reward == 1.0 and result.rewards == {"endpoint_score": 1.0, "passed": 1.0}
    payload = next(p for p in httpx.get(f"{endpoint}/received").json()
                   if p["attempt"]["traceId"] == result.trace_id)
    assert TRACE_ID.match(result.trace_id)
    assert payload["attempt"]["traceId"] == payload["trace"]["context"]["trace_id"] \
        == result.trace_id
    assert payload["run"]["id"] == payload["trace"]["context"]["run_id"] == result.run_id
    assert payload["attempt"]["id"] == result.rollout_name
    expected = load_example().solve(payload["task"]["instruction"])
    assert (trial / "logs" / "agent" / "output.txt").read_text() == expected
    header = read_header(trial / "trajectory" / "acp_trajectory.jsonl")
    assert (header.trace_id, header.run_id) == (result.trace_id, result.run_id)
    events = list(iter_events(trial / "trajectory" / "acp_trajectory.jsonl"))
    # the turn's record ends the trajectory: an endpoint changes nothing in the sandbox
    assert events[-1].type == "workspace_changes" and events[-1].changes == []
    assert events[-2].type == "agent_message" and events[-2].text == expected
    assert all(e.trace_id == result.trace_id and e.span_id for e in events)
    saved = json.loads((job_dir / "config.json").read_text())
    assert saved["agents"][0]["headers"] == {"Authorization": "Bearer ${BF_AGENT_TOKEN}",
                                             "X-Literal": "***"}
    text = all_text(job_dir)
    assert TOKEN not in text and "literal-h3ader-value" not in text


def test_cli_http_agent_with_the_task_verifier(tmp_path, job_label, endpoint, monkeypatch):
    monkeypatch.setenv("BF_AGENT_TOKEN", TOKEN)
    name = f"{job_label}-http-cli"
    out = CliRunner().invoke(app, [
        "run", str(TASKS), "-t", "hello-world", "-t", "fix-python-bug", "--max-tasks", "1",
        "-a", "http", "--agent-endpoint", f"{endpoint}/eval?score=number",
        "--header", "Authorization: Bearer ${BF_AGENT_TOKEN}", "--timeout-seconds", "20",
        "--jobs-dir", str(tmp_path / "jobs"), "--job-name", name])
    job_dir = tmp_path / "jobs" / name
    results = [RolloutResult.model_validate_json(p.read_text())
               for p in job_dir.glob("*/*/*/result.json")]
    assert len(results) == 1, out.output  # --max-tasks 1
    [result] = results
    # the endpoint wrote no hello.txt: the task's verifier scores 0, the endpoint's 1 is kept
    assert result.error is None and result.reward == 0.0, out.output
    assert result.rewards["endpoint_score"] == 1.0
    assert out.exit_code == 0
    assert TOKEN not in all_text(job_dir)


def test_cli_http_agent_error_is_typed(tmp_path, job_label, endpoint):
    name = f"{job_label}-http-err"
    out = CliRunner().invoke(app, [
        "run", str(TASKS / "hello-world"), "-a", "http",
        "--agent-endpoint", f"{endpoint}/eval?status=500",
        "--jobs-dir", str(tmp_path / "jobs"), "--job-name", name])
    [path] = (tmp_path / "jobs" / name).glob("*/*/*/result.json")
    result = RolloutResult.model_validate_json(path.read_text())
    assert result.error is not None and result.error.type == "agent_execution_failed"
    assert re.search(r"HTTP 401|HTTP 500", result.error.message)  # no token given: 401
    assert out.exit_code == 1


def test_cli_http_flags_are_checked(tmp_path):
    out = CliRunner().invoke(app, ["run", str(TASKS / "hello-world"), "-a", "http"])
    assert out.exit_code == 2 and "--agent-endpoint" in out.output
    out = CliRunner().invoke(app, ["run", str(TASKS / "hello-world"), "-a", "http",
                                   "--agent-endpoint", "http://127.0.0.1:1/x",
                                   "--header", "no-colon"])
    assert out.exit_code == 2 and "Name: value" in out.output


def test_traceparent_reaches_command_agents(tmp_path, job_label):
    name = f"{job_label}-traceparent"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "name": name, "jobs_dir": str(tmp_path / "jobs"), "verifier": {"disable": True},
        "agents": [{"name": "cmd", "execute": "echo \"$TRACEPARENT\" > /logs/agent/tp.txt\n"}],
        "datasets": [{"path": str(TASKS), "tasks": ["hello-world"]}]}))
    assert run_job_file(job_file) == 0
    trial = tmp_path / "jobs" / name / "cmd" / "tasks" / "hello-world__1"
    result = RolloutResult.model_validate_json((trial / "result.json").read_text())
    version, trace_id, span_id, flags = (trial / "logs" / "agent" / "tp.txt").read_text() \
        .strip().split("-")
    assert (version, trace_id, flags) == ("00", result.trace_id, "01")
    # the span of the step the command ran in: the command event carries the same
    [command] = [e for e in iter_events(trial / "trajectory" / "acp_trajectory.jsonl")
                 if e.type == "command"]
    assert command.span_id == span_id != result.span_id


def test_run_a_registry_dataset_by_name(tmp_path, job_label, endpoint, monkeypatch):
    import shutil
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=repo, check=True, capture_output=True, text=True).stdout.strip()

    repo = tmp_path / "repo"
    for task in ("hello-world", "fix-python-bug"):
        shutil.copytree(TASKS / task, repo / task)
    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-qm", "tasks")
    (tmp_path / "registry.json").write_text(json.dumps([{"name": "mini", "version": "1", "tasks": [
        {"name": t, "git_url": f"file://{repo}", "git_commit_id": git("rev-parse", "HEAD"),
         "path": t} for t in ("hello-world", "fix-python-bug")]}]))
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BENCHFLOW_REGISTRY", str(tmp_path / "registry.json"))
    monkeypatch.setenv("BF_AGENT_TOKEN", TOKEN)
    name = f"{job_label}-http-registry"
    out = CliRunner().invoke(app, [
        "run", "mini@1", "--max-tasks", "1", "-a", "http",
        "--agent-endpoint", f"{endpoint}/eval", "--header", "Authorization: Bearer ${BF_AGENT_TOKEN}",
        "--jobs-dir", str(tmp_path / "jobs"), "--job-name", name])
    [path] = (tmp_path / "jobs" / name).glob("*/*/*/result.json")
    result = RolloutResult.model_validate_json(path.read_text())
    assert (result.dataset_name, result.task_name) == ("mini", "hello-world"), out.output
    assert result.error is None and result.rewards["endpoint_score"] == 1.0


def test_otel_spans_of_a_real_run(tmp_path, job_label, endpoint, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    received: list[ExportTraceServiceRequest] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            request = ExportTraceServiceRequest()
            request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(request)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("BF_AGENT_TOKEN", TOKEN)
    name = f"{job_label}-http-otel"
    try:
        out = CliRunner().invoke(app, [
            "run", str(TASKS / "hello-world"), "-a", "http", "--otel",
            "--agent-endpoint", f"{endpoint}/eval",
            "--header", "Authorization: Bearer ${BF_AGENT_TOKEN}",
            "--jobs-dir", str(tmp_path / "jobs"), "--job-name", name])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    [path] = (tmp_path / "jobs" / name).glob("*/*/*/result.json")
    result = RolloutResult.model_validate_json(path.read_text())
    assert result.error is None, out.output
    spans = {s.name: s for req in received for rs in req.resource_spans
             for ss in rs.scope_spans for s in ss.spans}
    root = spans[f"rollout {result.rollout_name}"]
    assert root.trace_id.hex() == result.trace_id and root.span_id.hex() == result.span_id
    execution = spans["agent_execution"]
    assert execution.parent_span_id == root.span_id
    [step] = [s for n, s in spans.items() if n.startswith("step ")]
    assert step.parent_span_id == execution.span_id and step.trace_id == root.trace_id
    assert {"job " + name, "environment_setup", "agent_setup", "verifier"} <= set(spans)
    assert root.links[0].span_id == spans["job " + name].span_id
    assert TOKEN not in str(received)
