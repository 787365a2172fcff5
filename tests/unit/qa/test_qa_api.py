"""`benchflow.qa`: config loading, rollout() outputs and options, quick_rollout(), offline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from benchflow.errors import ConfigError
from benchflow.model_server import ModelServer, load_script
from benchflow.qa import load_config, load_tasks, quick_rollout, rollout

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "tasks" / "qa-example.jsonl"
SCRIPT = ROOT / "tasks" / "qa-example.script.yaml"


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(load_script(SCRIPT)) as running:
        yield running


def _config(tmp_path: Path, server: ModelServer, **extra: object) -> Path:
    data = {"data_path": str(EXAMPLE), "output_dir": str(tmp_path / "out"),
            "model_name": "scripted-qa", "base_url": f"{server.url}/v1", "max_workers": 4,
            **extra}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("data, message", [
    ({"evaluation_metrc": "f1_score"}, "did you mean 'evaluation_metric'"),
    ({"available_tools": ["web:serch"]}, "did you mean 'web:search'"),
    ({"available_tools": ["vm:dance"]}, "known tools: shell, read_file, write_file, web:search"),
    ({"resource_types": ["gpu"]}, "unknown resource type 'gpu'"),
    ({"evaluation_metric": "bleu"}, "unknown metric 'bleu'"),
    ({"sandbox_server_url": "127.0.0.1:18890"}, "not an http(s) URL"),
])
def test_bad_configs_name_the_key(tmp_path: Path, data: dict, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_env_reference_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("api_key: ${MY_KEY}\nevaluator_api_key: env:JUDGE_KEY\n")
    config = load_config(path)
    assert (config.api_key_env, config.evaluator_api_key_env) == ("MY_KEY", "JUDGE_KEY")


def test_load_tasks_from_list_and_file() -> None:
    assert [t.id for t in load_tasks([{"id": 1, "query": "q"}])] == ["1"]
    assert len(load_tasks(str(EXAMPLE))) == 12


def test_rollout_writes_the_three_files(tmp_path: Path, server: ModelServer) -> None:
    summary = rollout(config_path=_config(tmp_path, server, extra_metrics=["exact_match"]),
                      metric="f1_score")
    out = tmp_path / "out"
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 12
    by_id = {line["task_id"]: line for line in lines}
    assert by_id["multiply"]["predicted_answer"] == "15 * 27 = 405"
    assert by_id["multiply"]["score"] == 0.5
    assert by_id["multiply"]["rewards"]["exact_match"] == 0.0
    assert by_id["open-ended"]["score"] is None and by_id["open-ended"]["success"] is True
    assert by_id["hamlet-author"]["ground_truth"] == ["William Shakespeare", "Shakespeare"]
    trajectory = by_id["multiply"]["trajectory"]
    assert trajectory["messages"][0] == {"role": "user", "content": "Calculate 15 * 27."}
    assert trajectory["final_answer"] == "15 * 27 = 405" and trajectory["total_turns"] == 1
    report = json.loads((out / "evaluation.json").read_text())
    assert report["metric"] == "f1_score" and report["scored_tasks"] == 11
    assert report["average_score"] == pytest.approx(
        sum(i["score"] for i in report["items"] if i["score"] is not None) / 11)
    summaries = list(out.glob("summary_qa-example_*.json"))
    assert len(summaries) == 1
    written = json.loads(summaries[0].read_text())
    for key in ("benchmark_name", "total_tasks", "successful_tasks", "failed_tasks",
                "average_score", "metric", "total_time_seconds", "results_file",
                "evaluation_file", "timestamp"):
        assert key in written
    assert written["total_tasks"] == 12 and written["successful_tasks"] == 12
    assert summary["average_score"] == report["average_score"]


def test_options_are_honoured(tmp_path: Path, server: ModelServer) -> None:
    config = _config(tmp_path, server, save_summary=False, trajectory_only=True,
                     number_of_tasks=5, benchmark_name="mini")
    summary = rollout(config_path=config, task_ids=["multiply", "pi-digits", "binary-ten"],
                      max_tasks=2, evaluate=False)
    out = tmp_path / "out"
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [line["task_id"] for line in lines] == ["multiply", "pi-digits"]
    assert all(line["score"] is None for line in lines)
    assert set(lines[0]["trajectory"]) == {"task_id", "messages", "final_answer"}
    assert not (out / "evaluation.json").exists()
    assert not list(out.glob("summary_*.json"))
    assert summary["benchmark_name"] == "mini" and summary["evaluation_file"] is None

    rollout(config_path=_config(tmp_path, server, save_results=False, save_trajectories=False,
                                output_dir=str(tmp_path / "out2")), max_tasks=1)
    assert not (tmp_path / "out2" / "results.jsonl").exists()
    assert (tmp_path / "out2" / "evaluation.json").exists()


def test_unknown_task_id_is_a_config_error(tmp_path: Path, server: ModelServer) -> None:
    with pytest.raises(ConfigError, match="'nope'"):
        rollout(config_path=_config(tmp_path, server), task_ids=["nope"])


def test_quick_rollout(server: ModelServer) -> None:
    result = quick_rollout("What is the capital of France?", model_name="scripted-qa",
                           base_url=f"{server.url}/v1", answer="Paris")
    assert result["answer"] == "Paris" and result["success"] and result["error"] is None
    assert result["score"] == 1.0
    assert result["trajectory"]["messages"][-1] == {"role": "assistant", "content": "Paris"}
    with pytest.raises(ConfigError, match="unknown tool 'web:serch'"):
        quick_rollout("q", tools=["web:serch"], base_url=f"{server.url}/v1")
