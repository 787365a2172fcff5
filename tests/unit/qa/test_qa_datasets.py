"""QA datasets: loading and validation, and `benchflow run data.jsonl` without any sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.errors import ConfigError, TaskInvalidError, TaskNotFoundError
from benchflow.model_server import ModelServer, load_script
from benchflow.task.qa import load_qa_items, select_items
from benchflow.verify.answers import extract_answer

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "tasks" / "qa-example.jsonl"
SCRIPT = ROOT / "tasks" / "qa-example.script.yaml"
runner = CliRunner()


def _write(tmp_path: Path, lines: list[str], name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_aliases_and_metadata(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        json.dumps({"task_id": 7, "query": "q?", "ground_truth": "a", "level": "easy",
                    "kwargs": {"seed_path": "/d"}}),
        "",
        json.dumps({"id": "x/y", "input": "i?"}),
    ])
    first, second = load_qa_items(path)
    assert (first.id, first.question, first.answer) == ("7", "q?", "a")
    assert first.metadata == {"level": "easy"} and first.kwargs == {"seed_path": "/d"}
    assert first.source == f"{path}:1"
    assert second.source == f"{path}:3" and not second.has_answer
    assert second.folder_name == "x_y"


def test_json_file_of_items(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"items": [{"id": "a", "question": "q", "expected": "e"}]}))
    assert [i.answer for i in load_qa_items(path)] == ["e"]


@pytest.mark.parametrize("lines, where, field", [
    (['{"question": "q"}'], ":1", "`id`"),
    (['{"id": "a", "question": "q"}', '{"id": "b"}'], ":2", "`question`"),
    (['{"id": "a", "question": "q"}', '{"id": "a", "query": "r"}'], ":2", "duplicates"),
    (['{"id": "a", "question": "q"}', '{"id": "b", "question": '], ":2", "not a valid JSON"),
    (['["a"]'], ":1", "JSON object"),
])
def test_bad_items_name_file_line_and_field(tmp_path: Path, lines: list[str], where: str,
                                            field: str) -> None:
    path = _write(tmp_path, lines)
    with pytest.raises(TaskInvalidError) as info:
        load_qa_items(path)
    assert f"{path}{where}" in str(info.value) and field in str(info.value)


def test_missing_file_and_selection(tmp_path: Path) -> None:
    with pytest.raises(TaskNotFoundError):
        load_qa_items(tmp_path / "none.jsonl")
    items = load_qa_items(EXAMPLE)
    assert len(items) == 12
    assert [i.id for i in select_items(items, ["multiply", "pi-digits"])] == ["multiply",
                                                                               "pi-digits"]
    assert len(select_items(items, limit=3)) == 3
    with pytest.raises(ConfigError, match="'nope'"):
        select_items(items, ["nope"])


def test_answer_pattern() -> None:
    assert extract_answer("Thinking...\nANSWER: 42", r"ANSWER:\s*(\S+)") == "42"
    assert extract_answer("no marker", r"ANSWER:\s*(\S+)") == "no marker"
    assert extract_answer("  Paris \n", None) == "Paris"


def test_bad_dataset_exits_2_before_anything_runs(tmp_path: Path) -> None:
    path = _write(tmp_path, ['{"id": "a", "question": "q"}', '{"id": "a", "question": "r"}'])
    result = runner.invoke(app, ["run", str(path), "-a", "model", "-m", "m",
                                 "--model-base-url", "http://127.0.0.1:9/v1",
                                 "--jobs-dir", str(tmp_path / "jobs")])
    assert result.exit_code == 2
    assert f"{path}:2" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "jobs").exists()


@pytest.mark.parametrize("args, message", [
    (["--metric", "f1"], "did you mean 'f1_score'"),
    (["--tool", "browser"], "unknown tool 'browser'"),
    (["--answer-pattern", "("], "answer_pattern"),
])
def test_bad_options_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["run", str(EXAMPLE), "-a", "model", "-m", "m",
                                 "--model-base-url", "http://127.0.0.1:9/v1",
                                 "--jobs-dir", str(tmp_path / "jobs"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_newcomer_command_runs_without_any_sandbox(tmp_path: Path) -> None:
    with ModelServer(load_script(SCRIPT)) as server:
        result = runner.invoke(app, [
            "run", str(EXAMPLE), "-a", "model", "-m", "scripted-qa", "--model-base-url",
            f"{server.url}/v1", "--metric", "f1_score", "--jobs-dir", str(tmp_path / "jobs"),
            "--job-name", "qa", "-t", "multiply", "-t", "capital-france", "-t", "open-ended",
            "--env", "daytona"])  # a sandbox would need Daytona: none is started
        served = len(server.requests)
    assert result.exit_code == 0, result.output
    root = tmp_path / "jobs" / "qa" / "model" / "qa-example"
    results = {p.parent.name: json.loads(p.read_text()) for p in root.glob("*/result.json")}
    assert set(results) == {"multiply__1", "capital-france__1", "open-ended__1"}
    assert results["multiply__1"]["answer"] == "15 * 27 = 405"
    # f1: pred [15, 27, 405] vs gold [405]: P = 1/3, R = 1 -> 0.5
    assert results["multiply__1"]["rewards"] == {"reward": 0.5, "f1_score": 0.5}
    assert results["capital-france__1"]["reward"] == 1.0
    assert results["open-ended__1"]["reward"] is None
    assert results["open-ended__1"]["error"] is None
    assert results["multiply__1"]["tokens"]["input"] > 0
    assert served == 3
    events = [json.loads(line) for line in
              (root / "multiply__1" / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events] == ["header", "user_message", "usage", "agent_message"]
    assert events[1]["text"] == "Calculate 15 * 27."


def test_job_file_qa_dataset(tmp_path: Path) -> None:
    import yaml

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": "qa-job", "jobs_dir": str(tmp_path / "jobs"),
        "agents": [{"name": "model", "model": "scripted-qa"}],
        "model_endpoint": {"script": str(SCRIPT)},
        "datasets": [{"qa": str(EXAMPLE), "metric": "numeric_match",
                      "extra_metrics": ["exact_match"], "tasks": ["multiply", "speed-of-light"]}],
    }))
    result = runner.invoke(app, ["jobs", "run", str(job)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "jobs" / "qa-job" / "model" / "qa-example"
    rewards = {p.parent.name: json.loads(p.read_text())["rewards"]
               for p in root.glob("*/result.json")}
    assert rewards == {"multiply__1": {"reward": 1.0, "numeric_match": 1.0, "exact_match": 0.0},
                       "speed-of-light__1": {"reward": 1.0, "numeric_match": 1.0,
                                             "exact_match": 0.0}}
    # the scripted model ran on the loopback, per rollout: its requests are in the rollout
    assert (root / "multiply__1" / "model_server" / "requests.jsonl").exists()


def test_job_file_bad_qa_metric_exits_2(tmp_path: Path) -> None:
    import yaml

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": "qa-job", "jobs_dir": str(tmp_path / "jobs"),
        "agents": [{"name": "model", "model": "m"}],
        "datasets": [{"qa": str(EXAMPLE), "metric": "exact"}]}))
    result = runner.invoke(app, ["jobs", "run", str(job)])
    assert result.exit_code == 2
    assert "datasets[0]" in result.output and "exact_match" in result.output


def test_model_agent_settings(tmp_path: Path) -> None:
    from benchflow.agents.model_agent import DEFAULT_SYSTEM_PROMPT, ModelAgentConfig, check_tools

    prompt = tmp_path / "system.txt"
    prompt.write_text("Answer in one word.")
    assert ModelAgentConfig(system_prompt_file=prompt).resolved_system_prompt() == \
        "Answer in one word."
    assert ModelAgentConfig().resolved_system_prompt() == DEFAULT_SYSTEM_PROMPT
    with pytest.raises(ValueError, match="not both"):
        ModelAgentConfig(system_prompt="a", system_prompt_file=prompt)
    with pytest.raises(ConfigError, match="system_prompt_file"):
        ModelAgentConfig(system_prompt_file=tmp_path / "none.txt").resolved_system_prompt()
    with pytest.raises(ConfigError, match="did you mean 'read_file'"):
        check_tools(["read_files"])


def test_system_prompt_reaches_the_model(tmp_path: Path) -> None:
    import anyio

    from benchflow.agents.model_agent import ModelAgentConfig
    from benchflow.config import ModelEndpoint
    from benchflow.job import Job
    from benchflow.job.qa_trials import qa_trials
    from benchflow.task.qa import QaScoring

    script = load_script(SCRIPT)
    with ModelServer(script, log_dir=tmp_path / "log") as server:
        items = select_items(load_qa_items(EXAMPLE), ["binary-ten"])
        trials = qa_trials(EXAMPLE, items, agent="model", model="scripted-qa",
                           scoring=QaScoring(metric="exact_match"),
                           endpoint=ModelEndpoint.remote(server.url),
                           model_agent=ModelAgentConfig(tools=[], system_prompt="BE BRIEF",
                                                        price_per_mtok=(1.0, 2.0)))
        job = Job("sys", tmp_path / "jobs", trials)
        anyio.run(job.run)
        body = json.loads((tmp_path / "log" / "requests.jsonl").read_text().splitlines()[0])
    messages = body["body"]["messages"]
    assert messages[0] == {"role": "system", "content": "BE BRIEF"}
    result = job.results[0]
    assert result.reward == 1.0
    assert result.tokens is not None
    assert result.cost == pytest.approx((result.tokens.input + 2 * result.tokens.output) / 1e6)


def test_tasks_check_validates_a_qa_file(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["tasks", "check", str(EXAMPLE)])
    assert ok.exit_code == 0
    assert "12 QA items ok (11 with a ground truth)" in " ".join(ok.output.split())
    bad = _write(tmp_path, ['{"id": "a"}'])
    result = runner.invoke(app, ["tasks", "check", str(bad)])
    assert result.exit_code == 2 and f"{bad}:1" in result.output


def test_an_acp_agent_on_a_qa_item_takes_the_endpoints_key(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """claude with a model endpoint needs no key of its own on a QA item (as on a task)."""
    from benchflow.config import ModelEndpoint, RolloutConfig, Scene
    from benchflow.rollout.qa import QaRollout
    from benchflow.task.qa import QaScoring
    from benchflow.task.qa_tasks import qa_task

    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "BENCHFLOW_PROVIDER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "q", "question": "Say hi", "answer": "hi"}) + "\n")
    script = tmp_path / "model.yaml"
    script.write_text("name: hi\nsteps:\n  - text: hi\n")
    task = qa_task(load_qa_items(data)[0], data, QaScoring(metric="exact_match"))
    scenes = [Scene.single(agent="claude")]
    QaRollout(RolloutConfig(task_path=task.path, scenes=scenes,
                            model_endpoint=ModelEndpoint(script=script)), task=task
              )._resolve_drivers()
    with pytest.raises(ConfigError, match="needs credentials"):
        QaRollout(RolloutConfig(task_path=task.path, scenes=scenes), task=task
                  )._resolve_drivers()
