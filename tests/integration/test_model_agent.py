"""The model agent's tool loop in real containers, driven by the scripted model server."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest
import yaml

from benchflow import RolloutConfig, Scene
from benchflow.agents.model_agent import ModelAgent, ModelAgentConfig
from benchflow.config import ModelEndpoint
from benchflow.job import Job
from benchflow.job.qa_trials import qa_trials
from benchflow.rollout import Rollout
from benchflow.task.qa import QaScoring, load_qa_items

from .conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _script(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _events(root: Path) -> list[dict]:
    lines = (root / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


async def test_tool_loop_solves_hello_world_in_a_container(tmp_path, job_label):
    script = _script(tmp_path, {"steps": [
        {"tool": "write_file", "args": {"path": "/app/hello.txt", "content": "Hello, world!\n"}},
        {"shell": "cat /app/hello.txt; id -un"},
        {"tool": "read_file", "args": {"path": "/nonexistent"}},
        {"shell": "yes | head -c 50000"},
        {"text": "I wrote hello.txt."},
    ]})
    config = RolloutConfig(task_path=TASKS / "hello-world",
                           scenes=[Scene.single(agent="model", model="scripted")],
                           jobs_dir=tmp_path / "jobs", job_name=job_label,
                           model_endpoint=ModelEndpoint(script=script))
    rollout = Rollout(config, drivers={"model": ModelAgent(ModelAgentConfig(
        max_output_chars=1000))})
    result = await rollout.run()
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert result.n_tool_calls == 4
    assert result.tokens is not None and result.tokens.input > 0
    events = _events(rollout.paths.root)
    types = [e["type"] for e in events]
    assert types.count("tool_call") == 4 and types.count("tool_call_update") == 4
    updates = [e for e in events if e["type"] == "tool_call_update"]
    outputs = [u["update"]["rawOutput"]["output"] for u in updates]
    assert outputs[0].startswith("wrote 14 bytes")
    assert "Hello, world!" in outputs[1] and "agent" in outputs[1]  # ran as the agent user
    assert updates[2]["status"] == "failed" and "cannot read /nonexistent" in outputs[2]
    assert "characters truncated" in outputs[3] and len(outputs[3]) < 1200
    assert events[-2]["type"] == "agent_message" and events[-2]["text"] == "I wrote hello.txt."
    # then the turn's record of the workspace: the file the tool loop wrote
    assert events[-1]["type"] == "workspace_changes"
    assert [(c["path"], c["change"]) for c in events[-1]["changes"]] == [("hello.txt", "created")]
    assert docker.from_env().containers.list(
        all=True, filters={"label": f"benchflow.rollout={rollout.rollout_name}"}) == []


async def test_qa_item_with_tools_runs_in_a_sandbox_and_reads_answer_file(tmp_path, job_label):
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "os", "question": "Which OS family is the sandbox?",
                                "answer": "debian"}) + "\n")
    script = _script(tmp_path, {"answers": [{"match": "OS family", "steps": [
        {"shell": "mkdir -p /logs/agent && . /etc/os-release && echo $ID > /logs/agent/answer.txt"},
        {"text": "I think it is something else"}]}]})
    trials = qa_trials(data, load_qa_items(data), agent="model", model="scripted",
                       scoring=QaScoring(metric="exact_match", extra_metrics=("f1_score",)),
                       endpoint=ModelEndpoint(script=script),
                       model_agent=ModelAgentConfig(tools=["shell"]))
    job = Job(job_label, tmp_path / "jobs", trials)
    await job.run()
    (result,) = job.results
    assert result.error is None, result.error
    assert result.answer == "debian"
    assert result.rewards == {"reward": 1.0, "exact_match": 1.0, "f1_score": 1.0}


async def test_max_turns_stops_a_looping_model(tmp_path, job_label):
    script = _script(tmp_path, {"steps": [{"shell": "true"}] * 10})
    config = RolloutConfig(task_path=TASKS / "hello-world",
                           scenes=[Scene.single(agent="model", model="scripted")],
                           jobs_dir=tmp_path / "jobs", job_name=job_label,
                           model_endpoint=ModelEndpoint(script=script))
    result = await Rollout(config, drivers={"model": ModelAgent(ModelAgentConfig(
        max_turns=3, tools=["shell"]))}).run()
    assert result.error is None and result.reward == 0.0
    assert result.n_tool_calls == 3


async def test_any_agent_on_a_qa_item_gets_a_sandbox(tmp_path, job_label):
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "q", "question": "Say hi", "answer": "hi"}) + "\n")
    trials = qa_trials(data, load_qa_items(data), agent="nop", model=None,
                       scoring=QaScoring(metric="exact_match"))
    job = Job(job_label, tmp_path / "jobs", trials)
    await job.run()
    (result,) = job.results
    assert result.error is None, result.error
    assert result.answer == "" and result.reward == 0.0
    assert result.durations.environment_setup_sec is not None
