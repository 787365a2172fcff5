"""The LLM-judge verifier on real containers, the judge being the scripted model server."""

from __future__ import annotations

import json

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.config import ModelEndpoint
from benchflow.model_server import ModelServer, parse_script
from benchflow.rollout import Rollout

from .conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

JUDGE = parse_script({"answers": [
    # the judge sees the file: the oracle's haiku is about the sea
    {"regex": r"### /app/haiku\.txt\s*```\s*Waves fold into foam",
     "text": '{"scores": {"form": 1, "topic": 1, "imagery": 0.5}, "reasoning": "fine"}'},
    {"match": "(this file does not exist", "text":
     '{"scores": {"form": 0, "topic": 0, "imagery": 0}, "reasoning": "no file"}'},
    {"match": "Write a poem", "text": '{"scores": {"clarity": 0.9}}'},
]})


async def test_judge_and_script_combine_on_the_example_task(tmp_path, job_label):
    with ModelServer(JUDGE) as server:
        results = {}
        for agent in ("oracle", "nop"):
            config = RolloutConfig(task_path=TASKS / "haiku-judge",
                                   scenes=[Scene.single(agent=agent)], jobs_dir=tmp_path,
                                   job_name=job_label, harden=True,
                                   judge_endpoint=ModelEndpoint.remote(server.url, "judge"))
            rollout = Rollout(config)
            results[agent] = (await rollout.run(), rollout.paths)
    oracle, paths = results["oracle"]
    assert oracle.error is None, oracle.error
    # judge: (2*1 + 1 + 0.5) / 4 = 0.875; script 1; headline 0.25*1 + 0.75*0.875
    assert oracle.rewards == {"reward": pytest.approx(0.90625), "script": 1.0,
                              "judge": 0.875, "judge.form": 1.0, "judge.topic": 1.0,
                              "judge.imagery": 0.5}
    assert (paths.verifier_dir / "hardening.json").exists()
    reply = (paths.verifier_dir / "judge" / "reply.txt").read_text()
    assert json.loads(reply)["reasoning"] == "fine"
    assert "Waves fold into foam" in (paths.verifier_dir / "judge" / "prompt.md").read_text()
    nop, _ = results["nop"]
    assert nop.error is None and nop.reward == 0.0 and nop.rewards["judge"] == 0.0


async def test_judge_only_legacy_task_hardens_then_judges(tmp_path, job_label):
    task = tmp_path / "poem"
    for folder in ("environment", "tests", "solution"):
        (task / folder).mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "instruction.md").write_text("Write a poem to /app/poem.txt.\n")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ntype = "llm-judge"\n'
                                    '[verifier.judge]\ninput_dir = "/app"\n')
    (task / "tests" / "rubric.toml").write_text(
        '[[criteria]]\nname = "clarity"\ndescription = "The poem is clear."\n')
    (task / "solution" / "solve.sh").write_text("echo 'roses are red' > /app/poem.txt\n")
    with ModelServer(JUDGE) as server:
        config = RolloutConfig(task_path=task, scenes=[Scene.single(agent="oracle")],
                               jobs_dir=tmp_path / "jobs", job_name=job_label, harden=True,
                               judge_endpoint=ModelEndpoint.remote(server.url, "judge"))
        rollout = Rollout(config)
        result = await rollout.run()
    assert result.error is None, result.error
    assert result.rewards == {"reward": 0.9, "judge": 0.9, "judge.clarity": 0.9}
    assert (rollout.paths.verifier_dir / "hardening.json").exists()
    prompt = (rollout.paths.verifier_dir / "judge" / "prompt.md").read_text()
    assert "### /app/poem.txt" in prompt and "roses are red" in prompt


async def test_no_judge_endpoint_is_a_clear_error(tmp_path, job_label):
    config = RolloutConfig(task_path=TASKS / "haiku-judge", scenes=[Scene.single(agent="oracle")],
                           jobs_dir=tmp_path, job_name=job_label)
    result = await Rollout(config).run()
    assert result.error is not None and "judge endpoint" in result.error.message
