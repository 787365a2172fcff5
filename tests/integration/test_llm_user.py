"""An LLM user from a task's frontmatter drives rounds in a real container."""

from __future__ import annotations

import json
import shutil

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.model_server import ModelServer, parse_script
from benchflow.rollout import Rollout

from .conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_frontmatter_llm_user_prompts_then_stops(tmp_path, job_label):
    script = parse_script({"answers": [{"match": "Write your first message", "steps": [
        {"text": "Please write hello.txt."}, {"text": "DONE"}]}]})
    with ModelServer(script) as server:
        task = tmp_path / "hello-user"
        shutil.copytree(TASKS / "hello-world", task)
        text = (task / "task.md").read_text()
        block = (f"user:\n  type: llm\n  persona: a busy maintainer\n  model: persona\n"
                 f"  base_url: {server.url}/v1\n  max_rounds: 4\n")
        (task / "task.md").write_text(text.replace("sandbox:\n", block + "sandbox:\n", 1))
        config = RolloutConfig(task_path=task, scenes=[Scene.single(agent="oracle")],
                               jobs_dir=tmp_path / "jobs", job_name=job_label)
        rollout = Rollout(config)
        result = await rollout.run()
        served = server.requests
    assert result.error is None, result.error
    assert result.reward == 1.0
    rounds = [json.loads(line) for line in rollout.paths.user_rounds.read_text().splitlines()]
    assert [r["prompt"] for r in rounds] == ["Please write hello.txt."]
    assert rounds[0]["rewards"] == {"reward": 1.0}
    assert len(served) == 2  # the opening message, then DONE after round 0
