"""Turn snapshots, fork and regrade, through the CLI, with the scripted agent in Docker.

One coder/reviewer rollout of `tasks/coder-reviewer` runs with `--snapshot-turns`; then:
- `benchflow fork ... --at-turn 1 --role reviewer=scripted:OTHER` starts from exactly the
  files the original had before turn 1 (hash check against the original's own record),
  runs the other reviewer and the coder's last turn (which gets its earlier turn as
  history), verifies, and names its parent;
- `benchflow jobs regrade` scores the final workspace again, beside the old reward, with
  the task's verifier and with another task folder's;
- bad input is exit 2 with one line and nothing written;
- `benchflow jobs rm` removes the job with its snapshot images.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import docker
import pytest
import yaml

from benchflow.rollout.result import RolloutResult
from benchflow.rollout.snapshots import read_snapshots
from benchflow.trajectory import UserMessageEvent, WorkspaceChangesEvent, iter_events

from .conftest import TASKS
from .test_scenes import assert_no_container, cli

pytestmark = [pytest.mark.docker]

CODER_REVIEWER = TASKS / "coder-reviewer"


def image_exists(name: str) -> bool:
    try:
        docker.from_env().images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def rollout_dir(jobs: Path, job: str) -> Path:
    (result,) = (jobs / job).glob("*/*/*/result.json")
    return result.parent


def state_before(folder: Path, turn: int) -> dict[str, str]:
    """The workspace (path -> sha256) before `turn`, from the rollout's own record: the
    files before its first turn, then each earlier turn's changes."""
    files = {p: v["sha256"] for p, v in json.loads(
        (folder / "workspace_start.json").read_text()).items()}
    for event in iter_events(folder / "trajectory" / "acp_trajectory.jsonl"):
        if isinstance(event, WorkspaceChangesEvent) and (event.turn or 0) < turn:
            for change in event.changes:
                if change.change == "deleted":
                    files.pop(change.path, None)
                else:
                    files[change.path] = change.sha256 or ""
    return files


@pytest.fixture(scope="module")
def original(tmp_path_factory, job_label) -> tuple[Path, Path, str]:
    """The snapshotted coder/reviewer rollout: (jobs dir, rollout folder, job name)."""
    jobs = tmp_path_factory.mktemp("fork-jobs")
    job = f"{job_label}-orig"
    done = cli("run", str(CODER_REVIEWER), "-a", "scripted", "-m",
               str(CODER_REVIEWER / "scripted.yaml"), "--snapshot-turns", "--jobs-dir",
               str(jobs), "--job-name", job, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = rollout_dir(jobs, job)
    yield jobs, folder, job
    if (jobs / job).exists():  # the rm test did not run: leave no images behind
        cli("jobs", "rm", str(jobs / job))


def test_snapshots_are_taken_before_each_turn_and_after_the_last(original):
    _, folder, _ = original
    record = read_snapshots(folder)
    assert record is not None and record.backend == "docker" and record.n_steps == 3
    assert [s.step for s in record.snapshots] == [0, 1, 2, 3]
    assert record.baseline is not None  # scripted is not trusted: hardened
    assert all(image_exists(s.name) for s in record.snapshots)


def test_fork_at_turn_1_with_another_reviewer(original, tmp_path, job_label):
    jobs, folder, job = original
    other = tmp_path / "other-reviewer.yaml"
    other.write_text(yaml.safe_dump({"roles": {"reviewer": {"turns": [{"actions": [
        {"type": "shell", "command": "sha256sum fizzbuzz.py"},
        {"type": "write_file", "path": "/app/review.md",
         "content": "Second opinion: multiples of 15 must return FizzBuzz.\n"},
        {"type": "message", "text": "other reviewer done"}]}]}}}))
    fork_jobs = tmp_path / "forks"
    done = cli("fork", str(folder), "--at-turn", "1", "--role", f"reviewer=scripted:{other}",
               "--jobs-dir", str(fork_jobs), "--job-name", f"{job_label}-fork", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    forked = rollout_dir(fork_jobs, f"{job_label}-fork")
    result = RolloutResult.model_validate_json((forked / "result.json").read_text())
    assert result.error is None, result.error
    assert result.parent is not None
    assert (result.parent.rollout, result.parent.turn) == (
        f"{job}/scripted/tasks/coder-reviewer__1", 1)
    assert result.reward == 1.0  # it scores: the coder's revision, reviewed by another
    assert_no_container(f"{job_label}-fork", result.rollout_name)

    # the fork starts from the very files the original had before turn 1
    start = {p: v["sha256"] for p, v in json.loads(
        (forked / "workspace_start.json").read_text()).items()}
    assert start == state_before(folder, 1)
    assert "fizzbuzz.py" in start
    # turns 1.. ran again (0 did not), the reviewer being the other one
    events = list(iter_events(forked / "trajectory" / "acp_trajectory.jsonl"))
    prompts = [e for e in events if isinstance(e, UserMessageEvent)]
    assert [(p.role, p.turn, p.session_turn) for p in prompts] == [
        ("reviewer", 1, 0), ("coder", 2, 0)]
    assert any(getattr(e, "text", "") == "other reviewer done" for e in events)
    # the coder's first prompt after the fork carries its earlier turn
    coder_prompt = prompts[1].text
    assert coder_prompt.startswith("[benchflow] This conversation continues")
    assert "## Turn 0" in coder_prompt and "First draft of fizzbuzz.py written." in coder_prompt
    assert coder_prompt.endswith("Read /app/review.md and revise fizzbuzz.py accordingly.")
    review = [e for e in events if isinstance(e, WorkspaceChangesEvent) and e.role == "reviewer"]
    assert [c.path for c in review[0].changes] == ["review.md"]


@pytest.mark.parametrize("args, message", [
    (["--at-turn", "7"], "--at-turn 7: out of range; this rollout has turns 0..2"),
    (["--at-turn", "1", "--role", "ghost=scripted"], "has no role 'ghost'"),
    (["--at-turn", "-1"], "--at-turn -1: out of range"),
])
def test_bad_fork_input_is_exit_2_one_line_nothing_written(original, tmp_path, args,
                                                             message):
    _, folder, _ = original
    out = tmp_path / "forks"
    done = cli("fork", str(folder), *args, "--jobs-dir", str(out), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_rollout_without_snapshots_cannot_be_forked(original, tmp_path):
    _, folder, _ = original
    copy = tmp_path / "copy" / "j" / "scripted" / "tasks" / "coder-reviewer__1"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("snapshots.json"))
    done = cli("fork", str(copy), "--at-turn", "1", "--jobs-dir", str(tmp_path / "o"),
               timeout=60)
    assert done.returncode == 2 and "no turn snapshots to fork from" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_regrade_scores_the_final_workspace_again_beside_the_old_reward(original, tmp_path):
    jobs, folder, job = original
    before = (folder / "result.json").read_text()
    done = cli("jobs", "regrade", str(jobs / job), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reward 1.0 -> 1.0" in done.stdout
    # another verifier: one that fails everything
    strict = tmp_path / "strict-task"
    shutil.copytree(CODER_REVIEWER, strict)
    (strict / "verifier" / "test.sh").write_text(
        "#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    done = cli("jobs", "regrade", str(jobs / job), "--task-dir", str(strict), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reward 1.0 -> 0.0" in done.stdout
    lines = [json.loads(line) for line in (folder / "regrades.jsonl").read_text().splitlines()]
    assert [(line["old_reward"], line["reward"]) for line in lines] == [(1.0, 1.0), (1.0, 0.0)]
    assert all((folder / line["folder"] / "result.json").is_file() for line in lines)
    assert (folder / "result.json").read_text() == before  # never over the old rewards


def test_jobs_rm_removes_the_job_with_its_snapshots(original):
    jobs, folder, job = original
    record = read_snapshots(folder)
    assert record is not None
    names = [s.name for s in record.snapshots]
    assert all(image_exists(n) for n in names)
    done = cli("jobs", "rm", str(jobs / job), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"and {len(names)} snapshot(s)" in done.stdout
    assert not (jobs / job).exists()
    assert not any(image_exists(n) for n in names)
