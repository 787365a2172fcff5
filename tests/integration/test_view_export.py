"""The viewer, the exporters and model-call capture on real jobs (Docker): the scripted ACP
agent on tasks/coder-reviewer (two roles) through `benchflow run`, and command agents that
call the scripted model server from inside a model-only sandbox with capture on."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchflow import Role, Rollout, RolloutConfig, Scene, Turn
from benchflow.agents.command import CommandAgent
from benchflow.config import ModelEndpoint
from benchflow.job.export import ExportFilters, export_job
from benchflow.trajectory.exporters import AtifTrajectory

from .conftest import FIXTURES, TASKS

pytestmark = [pytest.mark.docker]

BENCHFLOW_CLI = Path(sys.executable).with_name("benchflow")
CODER_REVIEWER = TASKS / "coder-reviewer"


def run_coder_reviewer(jobs: Path, name: str) -> Path:
    """A real job: the scripted agent plays coder and reviewer on tasks/coder-reviewer."""
    run = subprocess.run(
        [str(BENCHFLOW_CLI), "run", str(CODER_REVIEWER), "-a", "scripted", "-m",
         str(CODER_REVIEWER / "scripted.yaml"), "--jobs-dir", str(jobs), "--job-name", name],
        capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return jobs / name


@pytest.fixture(scope="module")
def coder_reviewer_job(tmp_path_factory: pytest.TempPathFactory, job_label: str) -> Path:
    return run_coder_reviewer(tmp_path_factory.mktemp("jobs"), f"{job_label}-view")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_of_a_real_two_role_job(coder_reviewer_job: Path, tmp_path: Path) -> None:
    sft = tmp_path / "sft.jsonl"
    run = subprocess.run([str(BENCHFLOW_CLI), "export", str(coder_reviewer_job), "--format",
                          "sft", "-o", str(sft)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    records = lines(sft)
    assert [(r["metadata"]["role"], r["metadata"]["reward"]) for r in records] == [
        ("coder", 1.0), ("reviewer", 1.0)]
    coder, reviewer = (r["messages"] for r in records)
    assert [m["content"] for m in coder if m["role"] == "user"][1] == (
        "Read /app/review.md and revise fizzbuzz.py accordingly.")
    for messages in (coder, reviewer):
        asked = [c["id"] for m in messages for c in m.get("tool_calls", [])]
        answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert asked == answered and asked
    outputs = [m["content"] for m in reviewer if m["role"] == "tool"]
    assert outputs[0] == "['Fizz', 'Buzz', 'Fizz']\n"  # the reviewer's shell call, paired
    assert "FizzBuzz\n" in [m["content"] for m in coder if m["role"] == "tool"]

    atif = tmp_path / "atif.jsonl"
    export_job(coder_reviewer_job, "atif", atif)
    for record in lines(atif):
        AtifTrajectory.model_validate(record)

    for filters, n in [(ExportFilters(roles=("reviewer",)), 1),
                       (ExportFilters(min_reward=2.0), 0),
                       (ExportFilters(agents=("scripted",), datasets=("tasks",)), 2),
                       (ExportFilters(agents=("claude",)), 0)]:
        out = tmp_path / "filtered.jsonl"
        assert export_job(coder_reviewer_job, "sharegpt", out, filters).lines == n, filters
        assert len(lines(out)) == n


def test_view_routes_on_a_real_job(coder_reviewer_job: Path) -> None:
    from starlette.testclient import TestClient

    from benchflow.view import create_app

    client = TestClient(create_app(coder_reviewer_job.parent))
    assert f"{coder_reviewer_job.name}/index.html" in client.get("/").text
    job = client.get(f"/jobs/{coder_reviewer_job.name}/index.html").text
    assert "coder-reviewer" in job and "100%" in job
    trial = client.get(f"/jobs/{coder_reviewer_job.name}/scripted/tasks/coder-reviewer__1/"
                       "index.html").text
    assert trial.count('data-role="coder"') == 2 and trial.count('data-role="reviewer"') == 1
    assert "[&#39;Fizz&#39;, &#39;Buzz&#39;, &#39;Fizz&#39;]" in trial


CALL_MODEL = textwrap.dedent("""\
    python3 - <<'EOF'
    import json, os, urllib.request
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hello from " + os.environ["WHO"]}],
            "tools": [{"type": "function", "function": {"name": "bash", "parameters": {
                "type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}}}]}
    req = urllib.request.Request(os.environ["BENCHFLOW_PROVIDER_BASE_URL"] + "/v1/chat/completions",
        data=json.dumps(body).encode(), headers={"Content-Type": "application/json",
        "Authorization": "Bearer " + os.environ["BENCHFLOW_PROVIDER_API_KEY"]})
    print(urllib.request.urlopen(req, timeout=30).read().decode())
    EOF
    echo 42 > /app/answer.txt
    """)
MODEL_SCRIPT = {"name": "capture", "steps": [{"shell": "ls"}, {"text": "done"}]}


@pytest.mark.anyio
async def test_capture_through_the_scripted_model_server(tmp_path: Path, job_label: str) -> None:
    script = tmp_path / "model.yaml"
    script.write_text(json.dumps(MODEL_SCRIPT))
    drivers = {name: CommandAgent(name, CALL_MODEL, env={"WHO": name})
               for name in ("cmd-coder", "cmd-reviewer")}
    scenes = [Scene(name="pair", roles=[Role(name="coder", agent="cmd-coder"),
                                        Role(name="reviewer", agent="cmd-reviewer")],
                    turns=[Turn(role="coder"), Turn(role="reviewer")])]
    config = RolloutConfig(task_path=FIXTURES / "tasks" / "scenes-answer", scenes=scenes,
                           jobs_dir=tmp_path / "jobs", job_name=f"{job_label}-capture",
                           model_endpoint=ModelEndpoint(script=script),
                           capture_model_calls=True)
    rollout = Rollout(config, drivers=drivers)
    result = await rollout.run()
    assert result.error is None and result.reward == 1.0, result.error
    calls = lines(rollout.paths.model_calls)
    assert [(c["role"], c["turn"], c["scene"]) for c in calls] == [
        ("coder", 0, "pair"), ("reviewer", 1, "pair")]
    assert [c["request"]["messages"][0]["content"] for c in calls] == [
        "hello from cmd-coder", "hello from cmd-reviewer"]
    assert all(c["source"] == "model_server" and c["status"] == 200 for c in calls)
    reply = calls[0]["response"]["choices"][0]["message"]
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}

    out = tmp_path / "calls.jsonl"
    stats = export_job(rollout.paths.root.parent.parent.parent, "sft", out,
                       source="model-calls")
    examples = lines(out)
    assert stats.lines == 2 and [e["metadata"]["role"] for e in examples] == ["coder", "reviewer"]
    assert examples[0]["messages"][-1]["tool_calls"] == reply["tool_calls"]
    assert examples[0]["tools"][0]["function"]["name"] == "bash"


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(900)
async def test_capture_with_a_real_agent(tmp_path: Path, job_label: str) -> None:
    """Claude Code (npm, in the sandbox) against the scripted model server, capture on:
    every call it made is in model_calls.jsonl, attributed, reassembled and key-free, and
    `--from model-calls` turns them into SFT examples ending in the scripted final answer."""
    from tests.conformance import offline

    rollout = Rollout(RolloutConfig(
        task_path=offline.TASK, scenes=[Scene.single(agent="claude")],
        jobs_dir=tmp_path / "jobs", job_name=f"{job_label}-real-capture",
        model_endpoint=ModelEndpoint(script=offline.MODEL_SCRIPT), capture_model_calls=True))
    result = await rollout.run()
    assert result.error is None and result.reward == 1.0, result.error
    calls = lines(rollout.paths.model_calls)
    steps = [c for c in calls if c["path"].startswith("/v1/messages") and c["stream"]]
    assert len(steps) == 3 and {(c["role"], c["turn"]) for c in steps} == {("agent", 0)}
    assert steps[-1]["response"]["content"][-1] == {"type": "text",
                                                    "text": offline.FINAL_MESSAGE}
    assert "12" in " ".join(offline.tool_results("anthropic", steps[-1]["request"]))
    assert all(c["usage"]["output_tokens"] > 0 for c in steps)
    assert "sk-ant" not in rollout.paths.model_calls.read_text()

    out = tmp_path / "calls.jsonl"
    export_job(rollout.paths.root.parent.parent.parent, "sft", out, source="model-calls")
    examples = lines(out)
    assert examples[-1]["messages"][-1] == {"role": "assistant",
                                            "content": offline.FINAL_MESSAGE}
    assert [m["role"] for m in examples[-1]["messages"]][:2] == ["system", "user"]
