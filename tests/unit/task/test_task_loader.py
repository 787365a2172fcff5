"""load_task's layout choice, not-found errors, is_task_dir, content_hash and git_commit_id."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchflow.errors import TaskInvalidError, TaskNotFoundError
from benchflow.task import is_task_dir, load_task


def test_task_md_wins_over_task_toml(native) -> None:
    folder = native("both", frontmatter="task:\n  name: from-md\n", body="native prompt\n")
    (folder / "task.toml").write_text('[task]\nname = "from-toml"\n[agent]\ntimeout_sec = 1\n')
    (folder / "instruction.md").write_text("legacy prompt\n")
    task = load_task(folder)
    assert (task.layout, task.name, task.instruction) == ("native", "from-md", "native prompt")
    assert task.config.agent.timeout_sec == 600


def test_broken_task_toml_is_ignored_when_task_md_exists(native) -> None:
    folder = native("both-broken")
    (folder / "task.toml").write_text("[[[ not toml")
    assert load_task(str(folder)).layout == "native"


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(TaskNotFoundError, match=r"no-such: no such task folder: check the path"):
        load_task(tmp_path / "no-such")


def test_path_is_a_file(native) -> None:
    folder = native("file")
    with pytest.raises(
        TaskNotFoundError, match=r"task\.md: is a file, not a task folder: pass the folder"
    ):
        load_task(folder / "task.md")


def test_folder_without_task_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        TaskNotFoundError,
        match=r"empty: not a task folder: it holds neither task\.md nor task\.toml; add task\.md",
    ):
        load_task(tmp_path / "empty")


def test_null_byte_path_is_not_found() -> None:
    with pytest.raises(TaskNotFoundError, match="no such task folder"):
        load_task("bad\0path")


def test_task_md_that_is_a_folder_does_not_count(tmp_path: Path) -> None:
    (tmp_path / "odd" / "task.md").mkdir(parents=True)
    assert is_task_dir(tmp_path / "odd") is False
    with pytest.raises(TaskNotFoundError):
        load_task(tmp_path / "odd")


def test_is_task_dir(native, legacy, tmp_path: Path) -> None:
    assert is_task_dir(native("n")) is True
    assert is_task_dir(str(legacy("l"))) is True
    assert is_task_dir(tmp_path) is False
    assert is_task_dir(tmp_path / "missing") is False
    assert is_task_dir("nul\0byte") is False


def test_errors_use_the_path_as_given(
    native, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    native("rel", frontmatter="sandbox:\n  memroy_mb: 1\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskInvalidError) as info:
        load_task("rel")
    assert (
        str(info.value)
        == "rel/task.md: unknown key 'sandbox.memroy_mb' — did you mean 'memory_mb'?"
    )


def test_content_hash_is_stable_and_sensitive(native, tmp_path: Path) -> None:
    folder = native("hashed")
    task = load_task(folder)
    first = task.content_hash()
    assert len(first) == 64 and first == task.content_hash()
    copy = shutil.copytree(folder, tmp_path / "copy")
    assert load_task(copy).content_hash() == first  # location-independent
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert task.content_hash() == first  # caches do not change the task
    (folder / "verifier" / "test.sh").write_text("exit 1\n")
    changed = task.content_hash()
    assert changed != first
    (folder / "verifier" / "test.sh").rename(folder / "verifier" / "test2.sh")
    assert task.content_hash() != changed  # renames count
    (folder / "link").symlink_to(folder / "missing-target")
    assert len(task.content_hash()) == 64  # a dangling symlink does not raise


def test_git_commit_id(native, tmp_path: Path) -> None:
    folder = native("in-git")
    task = load_task(folder)
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert task.git_commit_id() is None  # tmp_path is not a repository
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(tmp_path),
    }
    for argv in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(folder), *argv], check=True, env=env, capture_output=True)
    head = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert task.git_commit_id() == head


def test_git_commit_id_without_git(native, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(native("no-git"))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert task.git_commit_id() is None


def test_git_commit_id_cached_per_folder_when_asked(native, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    import threading

    from benchflow.task import _files

    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=f"{len(calls):040x}\n", stderr="")

    monkeypatch.setattr(_files.subprocess, "run", fake_run)
    monkeypatch.setattr(_files, "_git_heads", {})
    task = load_task(native("cached-git"))
    assert task.git_commit_id() == f"{1:040x}"  # no max age: always asks git
    assert task.git_commit_id() == f"{2:040x}"
    heads: list[str | None] = []
    threads = [threading.Thread(target=lambda: heads.append(task.git_commit_id(60.0)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert heads == [f"{3:040x}"] * 8 and len(calls) == 3  # one git for eight callers
    (key, (at, head)), = _files._git_heads.items()
    _files._git_heads[key] = (at - 61.0, head)  # looked up over a minute ago: stale
    assert task.git_commit_id(60.0) == f"{4:040x}"
    assert task.recent_git_commit_id(60.0) == (True, f"{4:040x}")  # known: no git, no block
    _files._git_heads[key] = (at - 61.0, head)
    assert task.recent_git_commit_id(60.0) == (False, None)  # stale: git must run
    assert len(calls) == 4
