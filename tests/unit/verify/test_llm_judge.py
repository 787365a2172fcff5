"""LLM-judge verifier parts: verifier.md, rubrics (native, legacy toml/json, [verifier.judge]),
the prompt, score parsing and combination."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchflow.errors import TaskInvalidError, VerifierError
from benchflow.task import load_task
from benchflow.task.verifier_doc import parse_verifier_doc
from benchflow.verify.llm_judge import build_prompt, combine, parse_scores
from benchflow.verify.rubric import judge_verifier, parse_rubric

ROOT = Path(__file__).resolve().parents[3]


def test_native_example_task_is_judged() -> None:
    judge = judge_verifier(load_task(ROOT / "tasks" / "haiku-judge"))
    assert judge is not None and judge.with_script and judge.script_weight == 0.25
    assert [(c.name, c.weight) for c in judge.rubric.criteria] == [
        ("form", 2.0), ("topic", 1.0), ("imagery", 1.0)]
    assert judge.rubric.files == ("/app/haiku.txt",)
    assert "Grade the file" in judge.rubric.prose and "Syllable counts" in judge.context
    assert judge_verifier(load_task(ROOT / "tasks" / "hello-world")) is None


def _legacy(tmp_path: Path, toml_extra: str, rubric: tuple[str, str] | None) -> Path:
    task = tmp_path / "legacy"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "instruction.md").write_text("Write a poem to /app/poem.txt.\n")
    (task / "task.toml").write_text('version = "1.0"\n' + toml_extra)
    if rubric:
        (task / "tests" / rubric[0]).write_text(rubric[1])
    return task


def test_legacy_rubric_json_and_judge_table_without_test_sh(tmp_path: Path) -> None:
    task = _legacy(tmp_path, '[verifier]\ntype = "llm-judge"\n[verifier.judge]\n'
                   'model = "grader"\ninput_dir = "/work"\n',
                   ("rubric.json", json.dumps({"criteria": [
                       {"id": "clarity", "text": "It is clear.", "weight": 3}]})))
    judge = judge_verifier(load_task(task))
    assert judge is not None and not judge.with_script
    assert judge.model == "grader" and judge.input_dir == "/work"
    assert judge.rubric.criteria[0].name == "clarity" and judge.rubric.criteria[0].weight == 3


def test_legacy_judge_without_rubric_is_invalid(tmp_path: Path) -> None:
    task = load_task(_legacy(tmp_path, '[verifier]\ntype = "llm-judge"\n', None))
    with pytest.raises(TaskInvalidError, match="rubric.toml"):
        judge_verifier(task)


def test_a_judge_with_a_separate_verifier_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskInvalidError, match="llm-judge verifier scores"):
        load_task(_legacy(tmp_path, '[verifier]\ntype = "llm-judge"\n'
                          'environment_mode = "separate"\n', None))


def test_a_task_without_test_sh_or_judge_is_still_invalid(tmp_path: Path) -> None:
    with pytest.raises(TaskInvalidError, match="test.sh"):
        load_task(_legacy(tmp_path, "", None))


@pytest.mark.parametrize("data, message", [
    ({}, "criteria"),
    ({"criteria": [{"name": "a"}]}, "description"),
    ({"criteria": [{"name": "a b", "description": "d"}]}, "name"),
    ({"criteria": [{"name": "a", "description": "d", "weight": 0}]}, "weight"),
    ({"criteria": [{"name": "a", "description": "d"}], "files": ["rel.txt"]}, "absolute"),
])
def test_bad_rubrics(data: dict, message: str) -> None:
    with pytest.raises(TaskInvalidError, match=message):
        parse_rubric(data, "r.toml")


def test_verifier_doc_rejects_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "verifier.md"
    path.write_text("---\nstrategy: llm-judge\nrubrik: x\n---\n")
    with pytest.raises(TaskInvalidError, match="rubrik"):
        parse_verifier_doc(path)
    path.write_text("---\nstrategy: reward-kits\n---\n")
    with pytest.raises(TaskInvalidError, match="strategy"):
        parse_verifier_doc(path)
    for strategy in ("script", "llm-judge", "reward-kit", "agent-judge", "ors-episode"):
        path.write_text(f"---\nstrategy: {strategy}\n---\n")
        doc = parse_verifier_doc(path)
        assert doc is not None and doc.strategy == strategy


def test_prompt_scores_and_combination() -> None:
    judge = judge_verifier(load_task(ROOT / "tasks" / "haiku-judge"))
    assert judge is not None
    prompt = build_prompt(judge, instruction="Write a haiku.", agent_message="Done: waves",
                          files={"/app/haiku.txt": "a\nb\nc\n"})
    for part in ("Write a haiku.", "Done: waves", "### /app/haiku.txt", "`form` (weight 2)",
                 "Syllable counts", '"imagery": <0..1>'):
        assert part in prompt
    scores = parse_scores('ok ```json\n{"scores": {"form": 1, "topic": {"score": 0.5}, '
                          '"imagery": "8/10"}}\n```', ["form", "topic", "imagery"])
    assert scores == {"form": 1.0, "topic": 0.5, "imagery": 0.8}
    assert parse_scores("form: 1\ntopic - 0.5", ["form", "topic"]) == {"form": 1.0, "topic": 0.5}
    with pytest.raises(VerifierError, match="imagery"):
        parse_scores('{"scores": {"form": 1}}', ["form", "imagery"])
    judge_rewards = {"judge": 0.8, "judge.form": 1.0}
    assert combine(judge, judge_rewards, None) == {"reward": 0.8, **judge_rewards}
    both = combine(judge, judge_rewards, {"reward": 0.0, "lines": 2.0})
    assert both["reward"] == pytest.approx(0.75 * 0.8) and both["script"] == 0.0
    assert both["lines"] == 2.0
