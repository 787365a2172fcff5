"""A task may not pull host files in through symbolic links: loading refuses them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchflow.errors import ConfigError, TaskEscapeError
from benchflow.job.config import parse_job_config
from benchflow.job.datasets import resolve_datasets
from benchflow.task import load_task

def _task(root: Path, name: str = "t") -> Path:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "verifier" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "task.md").write_text("---\n---\nDo it.\n")
    return task


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "id_rsa"
    path.parent.mkdir()
    path.write_text("PRIVATE KEY\n")
    return path


@pytest.mark.parametrize("linked", ["task.md", "instruction", "environment", "environment/data",
                                    "verifier/test.sh", "oracle"])
def test_a_link_leading_out_of_the_task_is_refused(tmp_path, secret, linked):
    task = _task(tmp_path / "tasks")
    if linked == "task.md":
        (task / "task.md").unlink()
        (task / "task.md").symlink_to(secret)
    elif linked == "instruction":  # the legacy layout's instruction
        (task / "task.md").unlink()
        (task / "task.toml").write_text('version = "1.0"\n')
        (task / "instruction.md").symlink_to(secret)
    elif linked == "environment":
        os.rename(task / "environment", tmp_path / "env")
        (task / "environment").symlink_to(tmp_path / "env")
    elif linked == "oracle":
        (task / "oracle").symlink_to(secret.parent)
    else:
        (task / linked).unlink(missing_ok=True)
        (task / linked).symlink_to(secret)
    with pytest.raises(TaskEscapeError) as caught:
        load_task(task)
    message = str(caught.value)
    assert message.startswith(f"{task / linked.replace('instruction', 'instruction.md')}: is a "
                              "symbolic link to ")
    assert "outside the task folder" in message and "\n" not in message


def test_links_within_the_task_are_fine(tmp_path):
    task = _task(tmp_path)
    (task / "environment" / "copy").symlink_to("Dockerfile")
    (task / "notes").symlink_to("verifier")
    assert load_task(task).name == "t"


def test_a_dataset_with_an_escaping_task_is_refused_not_run(tmp_path, secret):
    _task(tmp_path / "bench", "good")
    bad = _task(tmp_path / "bench", "bad")
    (bad / "task.md").unlink()
    (bad / "task.md").symlink_to(secret)
    config = parse_job_config({"agents": [{"name": "nop"}],
                               "datasets": [{"path": str(tmp_path / "bench")}]}, "job.yaml")
    with pytest.raises(ConfigError, match="bad/task.md: is a symbolic link"):
        resolve_datasets(config)


def test_a_registry_task_escaping_its_repository_is_refused(tmp_path, secret, monkeypatch):
    from benchflow.job import registry

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "tasks").symlink_to(secret.parent)  # a committed link to a host folder
    task = registry.RegistryTask(name="t", git_url="file:///x", path="tasks/t")
    monkeypatch.setattr(registry, "fetch_repo", lambda url, commit, cache: (repo, "0" * 40))
    with pytest.raises(ConfigError, match="symbolic link out of its repository"):
        registry.fetch_task(task)


def test_run_and_check_exit_2_with_one_line(tmp_path, secret):
    task = _task(tmp_path)
    (task / "task.md").unlink()
    (task / "task.md").symlink_to(secret)
    for args in (["tasks", "check", str(task)], ["run", str(task), "-a", "nop",
                                                  "--jobs-dir", str(tmp_path / "jobs")]):
        proc = subprocess.run([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                               *args], capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "COLUMNS": "300"})
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert len(lines) == 1 and f"{task / 'task.md'}: is a symbolic link" in lines[0], lines
        assert "PRIVATE KEY" not in proc.stdout + proc.stderr
