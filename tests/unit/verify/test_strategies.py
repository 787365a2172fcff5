"""Verifier strategies at load time and their pure parts: the document in both layouts,
the script command, rewardkit's command, the agent judge's strict score parser."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchflow.errors import RewardInvalidError, TaskInvalidError
from benchflow.task import load_task
from benchflow.rollout.agent_judge import build_prompt, parse_judge_scores
from benchflow.verify.rubric import Criterion, Rubric
from benchflow.verify.runner import rewardkit_command, script_command


def native(tmp_path: Path, verifier_md: str | None, test_sh: bool = True) -> Path:
    task = tmp_path / "t"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "verifier").mkdir()
    (task / "task.md").write_text("---\ntask: {name: t}\n---\nDo it.\n")
    if test_sh:
        (task / "verifier" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    if verifier_md is not None:
        (task / "verifier" / "verifier.md").write_text(verifier_md)
    return task


def legacy(tmp_path: Path, verifier_toml: str, test_sh: bool = False) -> Path:
    task = tmp_path / "l"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "tests").mkdir()
    if test_sh:
        (task / "tests" / "test.sh").write_text("true\n")
    (task / "instruction.md").write_text("Do it.\n")
    (task / "task.toml").write_text(f'version = "1.0"\n{verifier_toml}')
    return task


def test_native_commands_need_no_test_sh_and_default_to_it(tmp_path: Path):
    task = load_task(native(tmp_path, "---\ncommand: python3 check.py\n---\n", test_sh=False))
    assert script_command(task) == "python3 check.py"
    assert script_command(load_task(native(tmp_path / "b", None))) == "./test.sh"
    assert script_command(load_task(native(tmp_path / "c", "---\ncommand: test.sh\n---\n"))) \
        == "./test.sh"
    with pytest.raises(TaskInvalidError, match="test.sh"):  # no command, no test.sh
        load_task(native(tmp_path / "d", "---\nstrategy: script\n---\n", test_sh=False))


def test_legacy_verifier_tables_declare_every_strategy(tmp_path: Path):
    task = load_task(legacy(tmp_path, '[verifier]\ntype = "agent-judge"\n'
                                      '[verifier.options]\nagent = "claude"\n'
                                      'rubric = "rubric.toml"\n'))
    doc = task.verifier_doc
    assert (doc.strategy, doc.agent, doc.rubric) == ("agent-judge", "claude", "rubric.toml")
    assert script_command(load_task(legacy(tmp_path / "b", '[verifier]\ncommand = "sh x.sh"\n'))) \
        == "sh x.sh"
    plain = load_task(legacy(tmp_path / "c", "", test_sh=True))
    assert plain.verifier_doc.strategy == "script" and script_command(plain) is None
    assert load_task(legacy(tmp_path / "d", '[verifier]\ntype = "test-script"\n',
                            test_sh=True)).verifier_doc.strategy == "script"
    with pytest.raises(TaskInvalidError, match="agnet"):
        load_task(legacy(tmp_path / "e", '[verifier]\ntype = "agent-judge"\n'
                                         '[verifier.options]\nagnet = "claude"\n'))


def test_strategies_other_than_script_refuse_steps_and_separate_verifiers(tmp_path: Path):
    with pytest.raises(TaskInvalidError, match="reward-kit verifier scores"):
        load_task(legacy(tmp_path, '[verifier]\ntype = "reward-kit"\n'
                                   'environment_mode = "separate"\n'))


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_rewardkit_command_quotes_its_values(tests_dir: str, requirement: str):
    command = rewardkit_command(tests_dir, requirement)
    assert shlex.quote(tests_dir) in command and shlex.quote(requirement) in command


RUBRIC = Rubric((Criterion("form", "Three lines.", 2.0), Criterion("topic", "The sea.", 1.0)))


@pytest.mark.parametrize(("text", "expected"), [
    ('{"scores": {"form": 1, "topic": 0.5}, "reasoning": "ok"}', {"form": 1.0, "topic": 0.5}),
    ('I looked.\n```json\n{"scores": {"form": 0, "topic": 1.0}}\n```',
     {"form": 0.0, "topic": 1.0}),
])
def test_judge_scores_in_the_declared_shape(text: str, expected: dict):
    assert parse_judge_scores(text, ["form", "topic"]) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("four out of five", "no JSON object with `scores`"),
    ('{"form": 1, "topic": 1}', "no JSON object with `scores`"),
    ('{"scores": {"form": 1}}', "missing: ['topic']"),
    ('{"scores": {"form": 1, "topic": 1, "rhyme": 0}}', "unknown: ['rhyme']"),
    ('{"scores": {"form": 1, "topic": 1.5}}', "'topic' is 1.5"),
    ('{"scores": {"form": true, "topic": 1}}', "'form' is True"),
    ('{"scores": {"form": "high", "topic": 1}}', "'form' is 'high'"),
])
def test_malformed_judge_scores_are_reward_invalid(text: str, message: str):
    with pytest.raises(RewardInvalidError) as info:
        parse_judge_scores(text, ["form", "topic"])
    assert message in str(info.value)
    assert info.value.error_type == "verifier_reward_invalid"


def test_the_judge_prompt_declares_the_shape():
    prompt = build_prompt(RUBRIC, instruction="Write a haiku.", notes="Be fair.",
                          workdir="/app")
    assert '{"scores": {"form": <0..1>, "topic": <0..1>}' in prompt
    assert "Write a haiku." in prompt and "Be fair." in prompt and "(weight 2)" in prompt
