"""Verifier strategies end to end on real containers: the script strategy's `command`
(native `cd /verifier && <command>`, legacy `[verifier] command`), and the workspace lock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.rollout import Rollout

from .conftest import FIXTURES, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

COMMAND = ('pwd > /logs/verifier/cwd.txt && stat -c %U /app/hello.txt > /logs/verifier/owner.txt'
           ' && ls > /logs/verifier/listing.txt && echo 0.75 > /logs/verifier/reward.txt')


def native_task(tmp_path: Path, frontmatter: str, test_sh: bool = False) -> Path:
    task = tmp_path / "native-command"
    shutil.copytree(TASKS / "hello-world", task)
    if not test_sh:
        (task / "verifier" / "test.sh").unlink()
    (task / "verifier" / "verifier.md").write_text(f"---\n{frontmatter}---\nNotes.\n")
    (task / "verifier" / "data.txt").write_text("seen from the verifier folder\n")
    return task


async def run_oracle(task: Path, tmp_path: Path, job: str, agent: str = "oracle",
                     **kw: object):
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent=agent)],
                           jobs_dir=tmp_path / "jobs", job_name=job, harden=True, **kw)
    rollout = Rollout(config)
    return rollout, await rollout.run()


async def test_a_native_command_runs_from_the_verifier_folder(tmp_path: Path, job_label: str):
    import json

    task = native_task(tmp_path, f"strategy: script\ncommand: {json.dumps(COMMAND)}\n")
    rollout, result = await run_oracle(task, tmp_path, job_label)

    assert result.error is None, result.error
    assert result.reward == 0.75
    logs = rollout.paths.logs_dir / "verifier"
    assert (logs / "cwd.txt").read_text().strip() == "/verifier"
    assert "data.txt" in (logs / "listing.txt").read_text()
    # the workspace was locked to root before the verifier ran
    assert (logs / "owner.txt").read_text().strip() == "root"


async def test_the_default_command_is_the_folders_test_sh(tmp_path: Path, job_label: str):
    task = native_task(tmp_path, "strategy: script\n", test_sh=True)
    _, result = await run_oracle(task, tmp_path, job_label)
    assert result.error is None, result.error
    assert result.reward == 1.0


async def test_a_failing_command_is_a_verifier_error_naming_it(tmp_path: Path, job_label: str):
    task = native_task(tmp_path, "command: \"exit 3\"\n")
    _, result = await run_oracle(task, tmp_path, job_label)
    assert result.error is not None and result.error.type == "verifier_failed"
    assert "exit 3" in result.error.message and result.reward is None


async def test_a_legacy_command(tmp_path: Path, job_label: str):
    task = tmp_path / "legacy-command"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "tests").mkdir()
    (task / "tests" / "score.sh").write_text("#!/bin/sh\npwd > /logs/verifier/cwd.txt\n"
                                             "echo 1 > /logs/verifier/reward.txt\n")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ncommand = "sh score.sh"\n')
    rollout, result = await run_oracle(task, tmp_path, job_label, agent="nop")
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert (rollout.paths.logs_dir / "verifier" / "cwd.txt").read_text().strip() == "/tests"


REWARD_KIT = FIXTURES / "tasks" / "reward-kit"
BUGGY_SOLVE = """#!/bin/sh
cat > /app/greet.py <<'PY'
def greet(name):
    return "Hi" if name == "Linus" else f"Hello, {name}!"
PY
echo '{"greeting": "Hello, World!"}' > /app/out.json
"""


def reward_kit_task(tmp_path: Path, verifier_md: str | None = None, solve: str | None = None
                    ) -> Path:
    task = tmp_path / "reward-kit"
    shutil.copytree(REWARD_KIT, task)
    if verifier_md is not None:
        (task / "verifier" / "verifier.md").write_text(verifier_md)
    if solve is not None:
        (task / "oracle" / "solve.sh").write_text(solve)
    return task


@pytest.mark.parametrize(("solve", "expected"), [
    (None, {"behaviour": 1.0, "files": 1.0, "reward": 1.0}),
    (BUGGY_SOLVE, {"behaviour": 0.7778, "files": 1.0, "reward": 0.0}),
], ids=["oracle", "two-of-three-names"])
async def test_reward_kit_scores_as_harbors_rewardkit_does(solve, expected, tmp_path: Path,
                                                          job_label: str):
    ours = reward_kit_task(tmp_path / "ours", solve=solve)
    rollout, result = await run_oracle(ours, tmp_path / "ours", job_label)
    assert result.error is None, result.error
    assert result.rewards == expected
    assert (rollout.paths.logs_dir / "verifier" / "reward-details.json").is_file()
    # Harbor's own invocation (`rewardkit /tests`, here the native /verifier) on the same task
    harbors = reward_kit_task(tmp_path / "harbor", solve=solve, verifier_md=(
        "---\ncommand: rewardkit /verifier --workspace /app --output "
        "/logs/verifier/reward.json\n---\n"))
    _, reference = await run_oracle(harbors, tmp_path / "harbor", job_label)
    assert reference.error is None, reference.error
    assert reference.rewards == result.rewards


ORS_TASK = FIXTURES / "tasks" / "ors-guess"


def guesses_script(tmp_path: Path, numbers: list[int]) -> Path:
    import yaml

    steps = [{"tool": "guess", "args": {"number": n}} for n in numbers]
    path = tmp_path / "guesses.yaml"
    path.write_text(yaml.safe_dump({"name": "guesser", "models": ["guesser"], "steps": [
        *steps, {"text": "done"}]}))
    return path


@pytest.mark.parametrize(("numbers", "expected"), [
    ([5, 8, 7], {"reward": round(1 / 3, 6), "ors.steps": 3.0, "ors.finished": 1.0}),
    ([2], {"reward": 0.0, "ors.steps": 1.0, "ors.finished": 0.0}),
], ids=["finished-at-the-third-try", "gave-up"])
async def test_an_ors_episode_ends_with_the_environments_reward(numbers, expected,
                                                               tmp_path: Path, job_label: str):
    import json

    from benchflow.agents.model_agent import ModelAgent, ModelAgentConfig
    from benchflow.config import ModelEndpoint

    script = guesses_script(tmp_path, numbers)
    config = RolloutConfig(task_path=ORS_TASK, scenes=[Scene.single(agent="model",
                                                                    model="guesser")],
                           model_endpoint=ModelEndpoint(script=script),
                           jobs_dir=tmp_path / "jobs", job_name=job_label)
    rollout = Rollout(config, drivers={"model": ModelAgent(ModelAgentConfig(tools=[]))})
    result = await rollout.run()
    assert result.error is None, result.error
    assert result.rewards == expected
    events = [json.loads(x) for x in rollout.paths.trajectory.read_text().splitlines()[1:]]
    outputs = [e["update"]["rawOutput"]["output"] for e in events
               if e["type"] == "tool_call_update"]
    assert len(outputs) == len(numbers)  # the script's "done" never ran past the finish
    if expected["ors.finished"]:
        assert outputs[-1].startswith("right") and "episode finished" in outputs[-1]
    prompt = next(e for e in events if e["type"] == "user_message")["text"]
    assert "whole number from 1 to 10" in prompt  # the environment's own prompt


AGENT_JUDGE = FIXTURES / "tasks" / "agent-judge"
POEM = "Waves fold into foam"


def judge_task(tmp_path: Path, actions: list[dict]) -> Path:
    """The agent-judge fixture judged by the scripted agent playing `actions`."""
    import json

    task = tmp_path / "agent-judge"
    shutil.copytree(AGENT_JUDGE, task)
    script = tmp_path / "judge-script.json"
    script.write_text(json.dumps({"turns": [{"actions": actions}]}))
    (task / "verifier" / "verifier.md").write_text(
        f"---\nstrategy: agent-judge\nagent: scripted\nmodel: {json.dumps(str(script))}\n"
        "rubric: rubrics/verifier.toml\n---\nRead /app/poem.txt and score it.\n")
    return task


def judge_outputs(rollout: Rollout) -> list[str]:
    import json

    path = rollout.paths.verifier_dir / "judge" / "trajectory" / "acp_trajectory.jsonl"
    events = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    return [json.dumps(e["update"].get("rawOutput")) for e in events
            if e["type"] == "tool_call_update" and e["update"].get("rawOutput")]


async def test_an_agent_judge_scores_as_its_own_read_only_user(tmp_path: Path, job_label: str):
    task = judge_task(tmp_path, [
        {"type": "shell", "command": "id -un; echo vandalised > /app/poem.txt; "
                                     "touch /app/planted; cat /app/poem.txt; true"},
        {"type": "message", "text": 'Scores: {"scores": {"form": 1, "topic": 0.5}, '
                                    '"reasoning": "A haiku, half about the sea."}'}])
    rollout, result = await run_oracle(task, tmp_path, job_label)
    assert result.error is None, result.error
    assert result.rewards == {"reward": round((2 * 1 + 0.5) / 3, 6), "judge.form": 1.0,
                              "judge.topic": 0.5}
    shell = judge_outputs(rollout)[0]
    assert "bf-judge" in shell and "Permission denied" in shell  # its own user, read-only
    assert POEM in shell  # the solver's poem, unchanged
    # the judge's trajectory is its own; the solver's holds no judge event
    assert "bf-judge" not in rollout.paths.trajectory.read_text()
    assert (rollout.paths.verifier_dir / "judge" / "scores.json").is_file()


@pytest.mark.parametrize("answer", [
    "It is a fine poem, I would give it four out of five.",
    '{"scores": {"form": 1}}',
    '{"scores": {"form": 1, "topic": 7}}',
    '{"scores": {"form": 1, "topic": 1, "rhyme": 1}}',
], ids=["no-json", "missing-criterion", "out-of-range", "unknown-criterion"])
async def test_malformed_judge_scores_are_a_typed_error(answer, tmp_path: Path, job_label: str):
    task = judge_task(tmp_path, [{"type": "message", "text": answer}])
    _, result = await run_oracle(task, tmp_path, job_label)
    assert result.error is not None and result.error.type == "verifier_reward_invalid"
    assert result.reward is None and "judge" in result.error.message
