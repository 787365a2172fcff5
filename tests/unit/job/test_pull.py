"""`benchflow datasets list|pull` against a local registry.json and a local git repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import benchflow.job.registry as registry_module
from benchflow.cli.main import app
from benchflow.errors import ConfigError
from benchflow.job.pull import looks_like_spec, parse_spec, pull, registry_ref

TASKS = Path(__file__).parents[3] / "tasks"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def registry(tmp_path: Path, monkeypatch) -> Path:
    repo = tmp_path / "repo"
    for name in ("hello-world", "fix-python-bug"):
        shutil.copytree(TASKS / name, repo / "tasks" / name)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "tasks", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([
        {"name": "bench", "version": "1.0", "description": "two tasks", "tasks": [
            {"name": n, "git_url": f"file://{repo}", "git_commit_id": commit,
             "path": f"tasks/{n}"} for n in ("hello-world", "fix-python-bug")]},
        {"name": "bench", "version": "2.0", "tasks": []}]))
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))
    return path


@pytest.fixture
def git_calls(monkeypatch) -> list[list[str]]:
    """Every git process the registry code starts."""
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(args, *a, **kw):
        calls.append(list(args))
        return real(args, *a, **kw)

    monkeypatch.setattr(registry_module.subprocess, "run", counting)
    return calls


def test_pull_twice_fetches_once(registry, git_calls):
    first = pull("bench@1.0", registry_ref(str(registry)))
    assert first.fetched and [t.name for t in first.tasks] == ["hello-world", "fix-python-bug"]
    assert all((t.path / "task.md").is_file() for t in first.tasks)
    assert any(c[:2] == ["git", "fetch"] for c in git_calls)
    mtime = first.lock_file.stat().st_mtime_ns
    git_calls.clear()
    second = pull("bench@1.0", registry_ref(str(registry)))
    assert not second.fetched and git_calls == []  # no git process at all
    assert second.tasks == first.tasks and first.lock_file.stat().st_mtime_ns == mtime


def test_cli_list_and_pull(registry, git_calls, monkeypatch):
    monkeypatch.setenv("BENCHFLOW_REGISTRY", str(registry))
    out = CliRunner().invoke(app, ["datasets", "list"])
    assert out.exit_code == 0 and "1.0" in out.output and "2.0" in out.output
    assert "two tasks" in out.output
    out = CliRunner().invoke(app, ["datasets", "pull", "bench@1.0"])
    assert out.exit_code == 0 and "2 task(s) pulled" in out.output
    git_calls.clear()
    out = CliRunner().invoke(app, ["datasets", "pull", "bench@1.0", "--registry", str(registry)])
    assert out.exit_code == 0 and "already cached" in out.output and git_calls == []


def test_bad_input_is_a_clear_error(registry, monkeypatch):
    monkeypatch.delenv("BENCHFLOW_REGISTRY", raising=False)
    with pytest.raises(ConfigError, match="BENCHFLOW_REGISTRY"):
        registry_ref(None)
    out = CliRunner().invoke(app, ["datasets", "pull", "bench", "--registry", str(registry)])
    assert out.exit_code == 2 and "has versions 1.0, 2.0" in out.output
    out = CliRunner().invoke(app, ["datasets", "pull", "nope@1", "--registry", str(registry)])
    assert out.exit_code == 2 and "no dataset named 'nope'" in out.output
    with pytest.raises(ConfigError, match="NAME@VERSION"):
        parse_spec("bad name")
    assert parse_spec("bench@1.0") == ("bench", "1.0") and parse_spec("b") == ("b", None)
    assert looks_like_spec("bench@1.0") and not looks_like_spec(str(TASKS))
