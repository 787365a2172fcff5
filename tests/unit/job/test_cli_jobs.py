"""`benchflow jobs run|resume|summary` in-process: exit codes, messages, no tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from benchflow.cli.jobs import app, run_job_file
from benchflow.job.models import JobResult

runner = CliRunner()


def write_job(tmp_path: Path, dataset: Path, **extra: object) -> Path:
    data = {"name": "cli-job", "jobs_dir": str(tmp_path / "jobs"),
            "agents": [{"name": "oracle"}], "datasets": [{"path": str(dataset)}], **extra}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def output(result) -> str:
    return result.output + (getattr(result, "stderr", "") or "")


@pytest.mark.parametrize(("extra", "expected"), [
    ({"n_attempt": 2}, "n_attempt: unknown key"),
    ({"agents": [{"name": "x", "execute": "e", "env": {"K": "${BENCHFLOW_TEST_UNSET_VAR}"}}]},
     "agents[0].env.K: ${BENCHFLOW_TEST_UNSET_VAR} is not set"),
    ({"mcp_servers": [{"name": "m", "command": "x", "env": {"K": "${BENCHFLOW_TEST_UNSET_VAR}"}}]},
     "mcp_servers 'm' env K = '${BENCHFLOW_TEST_UNSET_VAR}': the host variable "
     "BENCHFLOW_TEST_UNSET_VAR is not set"),
    ({"datasets": [{"path": "DATASET", "tasks": ["alpha", "nope"]}]}, "'nope'"),
    ({"datasets": [{"path": "DATASET", "tasks": ["bad name"]}]}, "datasets[0].tasks"),
    ({"agents": [{"name": "no-such-agent"}]}, "no-such-agent"),
])
def test_bad_input_exits_2_with_a_message_and_starts_nothing(tmp_path, dataset, extra, expected):
    for spec in extra.get("datasets", []):
        spec["path"] = str(dataset)
    job_file = write_job(tmp_path, dataset, **extra)
    result = runner.invoke(app, ["run", str(job_file)])
    text = output(result)
    assert result.exit_code == 2, text
    assert expected in text and "Traceback" not in text
    assert not (tmp_path / "jobs").exists()


def test_run_job_file_returns_the_exit_code(tmp_path):
    assert run_job_file(tmp_path / "missing.yaml") == 2


def test_run_resume_and_summary(tmp_path, dataset, behaviour):
    job_file = write_job(tmp_path, dataset, metrics=[{"type": "mean"}, {"type": "max"}])
    result = runner.invoke(app, ["run", str(job_file), "--env", "fake", "-k", "2", "-n", "3"])
    assert result.exit_code == 0, output(result)
    job_dir = tmp_path / "jobs" / "cli-job"
    saved = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert saved.total_trials == 6 and saved.metrics == {"mean": 1.0, "max": 1.0}
    assert "mean 1.000" in output(result)

    again = runner.invoke(app, ["run", str(job_file), "--env", "fake"])
    assert again.exit_code == 2 and "already exists" in output(again)

    (job_dir / "oracle" / "bench" / "alpha__2" / "result.json").unlink()
    resumed = runner.invoke(app, ["resume", str(job_dir)])
    assert resumed.exit_code == 0, output(resumed)
    assert "5 trial(s) already finished; running 1" in output(resumed)
    assert behaviour.starts == 7

    summary = runner.invoke(app, ["summary", str(job_dir)])
    assert summary.exit_code == 0
    assert "oracle" in summary.output and "bench" in summary.output and "100%" in summary.output
    assert runner.invoke(app, ["summary", str(tmp_path / "nope")]).exit_code == 2


def test_a_trial_error_exits_1(tmp_path, dataset, behaviour):
    behaviour.exit_codes = {"execute.sh": 1}
    job_file = write_job(tmp_path, dataset, agents=[{"name": "cmd", "execute": "exit 1"}],
                         datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    result = runner.invoke(app, ["run", str(job_file), "--env", "fake"])
    assert result.exit_code == 1, output(result)
    assert "agent_execution_failed" in output(result)


def test_max_tasks_and_otel_from_the_job_file(tmp_path, dataset, behaviour, monkeypatch):
    asked: list[bool] = []

    def fake_recorder(enabled: bool, job_name: str) -> None:
        asked.append(enabled)

    monkeypatch.setattr("benchflow.cli.jobs.recorder", fake_recorder)
    job_file = write_job(tmp_path, dataset, otel=True,
                         datasets=[{"path": str(dataset), "max_tasks": 2}])
    result = runner.invoke(app, ["run", str(job_file), "--env", "fake"])
    assert result.exit_code == 0, output(result)
    saved = JobResult.model_validate_json(
        (tmp_path / "jobs" / "cli-job" / "result.json").read_text())
    assert saved.total_trials == 2  # alpha and bravo, not charlie
    assert asked == [True]


def test_max_tasks_must_be_positive(tmp_path, dataset):
    job_file = write_job(tmp_path, dataset, datasets=[{"path": str(dataset), "max_tasks": 0}])
    result = runner.invoke(app, ["run", str(job_file)])
    assert result.exit_code == 2 and "datasets[0].max_tasks" in output(result)
