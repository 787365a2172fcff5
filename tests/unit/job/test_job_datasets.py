"""Datasets of a job: local folders, registries over git, the tasks filter rules."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchflow.errors import ConfigError, TaskInvalidError
from benchflow.job import registry as registry_mod
from benchflow.job.config import RegistryRef, parse_job_config
from benchflow.job.datasets import resolve_datasets
from benchflow.job.registry import fetch_repo, load_registry

from .conftest import write_task


def config_for(*datasets: dict) -> object:
    return parse_job_config({"name": "j", "agents": [{"name": "oracle"}],
                             "datasets": list(datasets)})


def names(resolved) -> list[list[str]]:
    return [[t.name for t in d.tasks] for d in resolved]


# -- local ---------------------------------------------------------------------------------


def test_local_dataset_all_tasks_in_folder_order(dataset):
    resolved = resolve_datasets(config_for({"path": str(dataset)}))
    assert [d.name for d in resolved] == ["bench"]
    assert names(resolved) == [["alpha", "bravo", "charlie"]]
    assert all(t.task is not None and t.error is None for t in resolved[0].tasks)


def test_local_filter_keeps_order_and_drops_duplicates(dataset):
    resolved = resolve_datasets(config_for({"path": str(dataset),
                                            "tasks": ["charlie", "alpha", "charlie"]}))
    assert names(resolved) == [["charlie", "alpha"]]


def test_local_filter_lists_every_missing_name(dataset):
    with pytest.raises(ConfigError) as info:
        resolve_datasets(config_for({"path": str(dataset), "tasks": ["alpha", "zulu", "alpah"]}),
                         source="job.yaml")
    message = str(info.value)
    assert message.startswith("job.yaml: datasets[0]")
    assert "'zulu'" in message and "'alpah'" in message and "did you mean 'alpha'" in message


def test_missing_dataset_folder(tmp_path):
    with pytest.raises(ConfigError, match=r"datasets\[0\].*no such dataset folder"):
        resolve_datasets(config_for({"path": str(tmp_path / "nope")}))


def test_invalid_task_becomes_an_entry_with_its_error(dataset):
    (dataset / "bravo" / "verifier" / "test.sh").unlink()
    resolved = resolve_datasets(config_for({"path": str(dataset)}))
    bravo = resolved[0].tasks[1]
    assert bravo.name == "bravo" and bravo.task is None
    assert isinstance(bravo.error, TaskInvalidError)
    assert bravo.content_hash() is None
    assert [t.name for t in resolved[0].tasks] == ["alpha", "bravo", "charlie"]


def test_two_datasets_with_one_name_are_refused(tmp_path):
    write_task(tmp_path / "a" / "bench", "t1")
    write_task(tmp_path / "b" / "bench", "t2")
    with pytest.raises(ConfigError, match="several datasets are named bench"):
        resolve_datasets(config_for({"path": str(tmp_path / "a" / "bench")},
                                    {"path": str(tmp_path / "b" / "bench")}))


# -- registry ------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A git repository with tasks/{alpha,bravo} at commit 1 and a changed alpha at commit 2."""
    root = tmp_path / "repo"
    write_task(root / "tasks", "alpha")
    write_task(root / "tasks", "bravo")
    git("init", "-q", "-b", "main", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=root)
    first = git("rev-parse", "HEAD", cwd=root)
    (root / "tasks" / "alpha" / "task.md").write_text("---\ntask:\n  name: alpha\n---\nv2\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=root)
    return root, first, git("rev-parse", "HEAD", cwd=root)


@pytest.fixture
def registry(tmp_path: Path, repo) -> Path:
    root, first, second = repo
    url = f"file://{root}"

    def task(name: str, commit: str | None) -> dict:
        entry = {"name": name, "git_url": url, "path": f"tasks/{name}"}
        return {**entry, "git_commit_id": commit} if commit else entry

    path = tmp_path / "registry.json"
    path.write_text(json.dumps([
        {"name": "bench", "version": "1.0", "description": "d",
         "tasks": [task("alpha", first), task("bravo", first), task("ghost", first) | {
             "path": "tasks/ghost"}]},
        {"name": "bench", "version": "2.0", "tasks": [task("alpha", second)]},
        {"name": "bench", "version": "head", "tasks": [task("alpha", None)], "extra": "ignored"},
    ]))
    return path


def registry_dataset(path: Path, version: str | None, tasks: list[str] | None = None) -> dict:
    spec: dict = {"registry": {"path": str(path)}, "name": "bench"}
    if version is not None:
        spec["version"] = version
    if tasks is not None:
        spec["tasks"] = tasks
    return spec


def test_registry_tasks_are_fetched_at_the_pinned_commit(registry, repo, tmp_path):
    _, first, second = repo
    cache = tmp_path / "cache"
    v1 = resolve_datasets(config_for(registry_dataset(registry, "1.0", ["alpha", "bravo"])),
                          cache_dir=cache)
    v2 = resolve_datasets(config_for(registry_dataset(registry, "2.0")), cache_dir=cache)
    alpha1, alpha2 = v1[0].tasks[0], v2[0].tasks[0]
    assert v1[0].name == "bench" and names(v1) == [["alpha", "bravo"]]
    assert alpha1.git_commit_id == first and alpha2.git_commit_id == second
    assert alpha1.task is not None and "Write hello for alpha" in alpha1.task.instruction
    assert alpha2.task is not None and alpha2.task.instruction.strip() == "v2"
    assert alpha1.task.git_commit_id() == first  # the rollout records the same commit
    assert alpha1.path.is_relative_to(cache / "git")


def test_unpinned_registry_task_uses_the_remote_head(registry, repo, tmp_path):
    _, _, second = repo
    resolved = resolve_datasets(config_for(registry_dataset(registry, "head")),
                                cache_dir=tmp_path / "cache")
    assert resolved[0].tasks[0].git_commit_id == second


def test_registry_cache_is_reused(registry, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    resolve_datasets(config_for(registry_dataset(registry, "1.0", ["alpha"])), cache_dir=cache)

    def no_fetch(*args: object) -> None:
        raise AssertionError("fetched again")

    monkeypatch.setattr(registry_mod, "_checkout", no_fetch)
    again = resolve_datasets(config_for(registry_dataset(registry, "1.0", ["alpha", "bravo"])),
                             cache_dir=cache)
    assert names(again) == [["alpha", "bravo"]]


def test_registry_task_missing_from_its_repository_is_task_not_found(registry, tmp_path):
    resolved = resolve_datasets(config_for(registry_dataset(registry, "1.0", ["ghost"])),
                                cache_dir=tmp_path / "cache")
    ghost = resolved[0].tasks[0]
    assert ghost.task is None and ghost.error is not None
    assert ghost.error.error_type == "task_not_found"


@pytest.mark.parametrize(("version", "tasks", "match"), [
    (None, None, "has versions 1.0, 2.0, head: set `version`"),
    ("3.0", None, "no version '3.0'"),
    ("1.0", ["alpha", "zulu", "yankee"],
     r"datasets\[0\].tasks: task\(s\) not found in dataset bench 1.0: 'zulu', 'yankee'"),
])
def test_registry_selection_errors(registry, tmp_path, version, tasks, match):
    with pytest.raises(ConfigError, match=match):
        resolve_datasets(config_for(registry_dataset(registry, version, tasks)),
                         cache_dir=tmp_path / "cache")


def test_registry_unknown_dataset_and_bad_files(registry, tmp_path):
    with pytest.raises(ConfigError, match="no dataset named 'other'.*bench"):
        load_registry(RegistryRef(path=registry)).find("other", None)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="expected a JSON list"):
        load_registry(RegistryRef(path=bad))
    with pytest.raises(ConfigError, match="cannot be read"):
        load_registry(RegistryRef(path=tmp_path / "missing.json"))
    assert load_registry(RegistryRef(url=registry.as_uri())).datasets[0].name == "bench"


def test_bad_commit_and_unknown_repository(tmp_path, repo):
    root, _, _ = repo
    with pytest.raises(ConfigError, match="not a commit id"):
        fetch_repo(f"file://{root}", "main; rm -rf /", tmp_path / "cache")
    with pytest.raises(ConfigError, match="git"):
        fetch_repo(f"file://{tmp_path}/nothing", "a" * 40, tmp_path / "cache")
    assert not list((tmp_path / "cache" / "git").glob("*/.tmp-*"))
    with pytest.raises(ConfigError, match="not a repository URL"):
        fetch_repo("--upload-pack=touch /tmp/x", "a" * 40, tmp_path / "cache")
    with pytest.raises(ConfigError, match="git"):
        fetch_repo("ext::sh -c touch% /tmp/pwned-by-registry", "a" * 40, tmp_path / "cache")
    assert not Path("/tmp/pwned-by-registry").exists()
