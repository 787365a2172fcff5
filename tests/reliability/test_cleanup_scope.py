"""Cleanup and resume touch only what is theirs: a live job is never harmed.

On the suite's own Docker daemon: job A (`x/N`) runs a long agent; job B (`y/N`, the
same name in another folder) and job C (`z/M`) crash with their sandboxes left behind
(their processes are killed). Resuming B, then `sandbox cleanup` (no argument), then
`sandbox cleanup --job N` must remove B's and C's leftovers and never A's sandbox, which
ends only when A is cancelled, as `cancelled`, not as an agent killed by exit 137.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from benchflow.sandbox.owner import LABEL_JOB_ID, read_job_id

from .conftest import (
    benchflow,
    benchflow_bg,
    benchflow_env,
    job_file,
    make_task,
    running_containers,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _crash_with_leftover(daemon, tmp_path: Path, folder: str, name: str, tasks: Path) -> str:
    """Start a job whose agent sleeps, SIGKILL it once its sandbox runs; its job id."""
    spec = job_file(tmp_path / f"{folder}.yaml", name=name, jobs_dir=tmp_path / folder,
                    tasks=tasks, execute="sleep ${BF_SLEEP:-0}")
    proc = benchflow_bg(daemon, ["jobs", "run", str(spec)],
                        benchflow_env(daemon, BF_SLEEP="600"), tmp_path / f"{folder}.log")
    job_dir = tmp_path / folder / name
    wait_for(lambda: read_job_id(job_dir) is not None and running_containers(
        daemon, {LABEL_JOB_ID: read_job_id(job_dir) or "-"}), f"{folder}/{name}'s sandbox", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return read_job_id(job_dir) or ""


def test_cleanup_and_resume_never_touch_a_live_job(second_daemon, tmp_path):
    tasks = tmp_path / "tasks"
    make_task(tasks)
    env = benchflow_env(second_daemon, BF_SLEEP="600")
    spec_a = job_file(tmp_path / "a.yaml", name="N", jobs_dir=tmp_path / "x", tasks=tasks,
                      execute="sleep ${BF_SLEEP:-0}")
    live = benchflow_bg(second_daemon, ["jobs", "run", str(spec_a)], env, tmp_path / "a.log")
    try:
        a_dir = tmp_path / "x" / "N"
        wait_for(lambda: read_job_id(a_dir) is not None and running_containers(
            second_daemon, {LABEL_JOB_ID: read_job_id(a_dir) or "-"}), "job A's sandbox", live)
        a_id = read_job_id(a_dir)
        (a_box,) = running_containers(second_daemon, {LABEL_JOB_ID: a_id})

        b_id = _crash_with_leftover(second_daemon, tmp_path, "y", "N", tasks)
        assert b_id != a_id  # one name, two job instances
        resumed = benchflow(second_daemon, ["jobs", "resume", str(tmp_path / "y" / "N")],
                            benchflow_env(second_daemon, BF_SLEEP="0"))
        assert resumed.returncode == 0, resumed.stderr
        assert running_containers(second_daemon, {LABEL_JOB_ID: a_id}) == [a_box]

        c_id = _crash_with_leftover(second_daemon, tmp_path, "z", "M", tasks)
        swept = benchflow(second_daemon, ["sandbox", "cleanup"], env)
        assert swept.returncode == 0, swept.stderr
        assert "removed 1 sandbox(es)" in swept.stdout
        assert f"{a_box.name}: live: its job runs in process {live.pid}" in swept.stdout
        assert not second_daemon.client().containers.list(
            all=True, filters={"label": f"{LABEL_JOB_ID}={c_id}"})

        named = benchflow(second_daemon, ["sandbox", "cleanup", "--job", "N", "--jobs-dir",
                                          str(tmp_path / "x")], env)
        assert named.returncode == 0 and "removed 0 sandbox(es)" in named.stdout, named.stdout
        assert running_containers(second_daemon, {LABEL_JOB_ID: a_id}) == [a_box]

        refused = benchflow(second_daemon, ["sandbox", "cleanup", "--all"], env)
        assert refused.returncode == 2 and "--force" in refused.stderr
        assert running_containers(second_daemon, {LABEL_JOB_ID: a_id}) == [a_box]
    finally:
        live.send_signal(signal.SIGINT)
        live.wait(timeout=300)
    result = json.loads(next((tmp_path / "x" / "N").glob("*/*/*/result.json")).read_text())
    assert result["error"]["type"] == "cancelled", result["error"]
    assert not second_daemon.client().containers.list(all=True)


def test_all_force_removes_everything(second_daemon, tmp_path):
    tasks = tmp_path / "tasks"
    make_task(tasks)
    _crash_with_leftover(second_daemon, tmp_path, "w", "K", tasks)
    assert second_daemon.client().containers.list(all=True)
    swept = benchflow(second_daemon, ["sandbox", "cleanup", "--all", "--force"],
                      benchflow_env(second_daemon))
    assert swept.returncode == 0, swept.stderr
    assert not second_daemon.client().containers.list(all=True)
