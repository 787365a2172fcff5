"""`--capture-model-calls` / `capture_model_calls` without a model endpoint is refused
before anything starts, with a message naming the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig
from benchflow.rollout.model_endpoint import RolloutNetwork

REPO = Path(__file__).resolve().parents[3]


def test_rollout_network_refuses_capture_without_endpoint(tmp_path: Path) -> None:
    config = RolloutConfig(task_path=REPO / "tasks" / "hello-world",
                           scenes=[Scene.single(agent="oracle")],
                           capture_model_calls=True)
    with pytest.raises(ConfigError, match="--model-server SCRIPT or --model-base-url"):
        RolloutNetwork(config, allow_internet=True, job_name="j", log_dir=tmp_path,
                       capture_path=tmp_path / "model_calls.jsonl")


def test_cli_refuses_capture_without_endpoint(tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("benchflow")
    run = subprocess.run([str(cli), "run", str(REPO / "tasks" / "hello-world"),
                          "--capture-model-calls", "--jobs-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "--capture-model-calls" in run.stderr and "--model-server" in run.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("switch", [True, False])
def test_job_file_switch_reaches_the_rollout_config(switch: bool) -> None:
    from benchflow.job.datasets import TaskEntry
    from benchflow.job.plan import rollout_config

    job = JobConfig.model_validate({"agents": [{"name": "oracle"}],
                                    "datasets": [{"path": str(REPO / "tasks")}],
                                    "capture_model_calls": switch})
    entry = TaskEntry(name="hello-world", path=REPO / "tasks" / "hello-world")
    config = rollout_config(job, [Scene.single(agent="oracle")], "tasks", entry, 1)
    assert config.capture_model_calls is switch
