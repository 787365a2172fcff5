"""Sandbox limits benchflow enforces on real Docker: processes, disk, downloads.

The shared daemon here has overlay2 on ext4 (no storage quota), the case where a task's
`storage_mb` used to be dropped silently: the disk watchdog must stop the agent instead,
and say so in result.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchflow.cli.jobs import run_job_file

pytestmark = pytest.mark.docker


def _task(root: Path, sandbox: str) -> Path:
    task = root / "tasks" / "limits"
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "verifier" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "task.md").write_text(f"---\nagent: {{timeout_sec: 600}}\nsandbox: {sandbox}\n---\n"
                                  "Stay within the limits.\n")
    return task.parent


def _run(tmp_path: Path, name: str, tasks: Path, execute: str, **environment: object) -> dict:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "name": name, "jobs_dir": str(tmp_path / "jobs"), "retry": {"max_attempts": 0},
        "environment": {"extra_ca_certs": [], **environment},
        "agents": [{"name": "sh", "execute": execute}], "datasets": [{"path": str(tasks)}]}))
    run_job_file(spec)
    (trial,) = (tmp_path / "jobs" / name).glob("sh/tasks/limits__1")
    return {"result": json.loads((trial / "result.json").read_text()), "dir": trial}


def test_a_fork_bomb_stops_at_the_tasks_pids_limit(tmp_path, job_name):
    tasks = _task(tmp_path, "{pids_limit: 64}")
    out = _run(tmp_path, job_name, tasks,
               "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max\n"
               "perl -e 'my @kids; for (1..200) { my $p = fork(); last unless defined $p;"
               " if ($p == 0) { sleep 30; exit 0 } push @kids, $p }"
               " print \"started \", scalar(@kids), \"\\n\"; kill 9, @kids'\n")
    stdout = (out["dir"] / "command" / "stdout.txt").read_text().split()
    assert stdout[0] == "64"
    assert int(stdout[stdout.index("started") + 1]) < 200  # forks failed at the limit


def test_the_disk_watchdog_stops_an_agent_past_storage_mb(tmp_path, job_name):
    tasks = _task(tmp_path, "{storage_mb: 64}")
    out = _run(tmp_path, job_name, tasks,
               "for i in $(seq 1 3000); do\n"
               "  head -c 1048576 /dev/urandom > /tmp/fill.$i; echo $i; sleep 0.02\n"
               "done\n")
    result = out["result"]
    assert result["error"]["type"] == "environment_resource_exhausted", result["error"]
    assert "storage_mb=64" in result["error"]["message"]
    assert any("disk watchdog" in w for w in result["warnings"])
    written = (out["dir"] / "command" / "stdout.txt").read_text().split()
    assert 64 <= int(written[-1]) < 3000  # stopped soon after the limit, output kept


def test_a_download_past_its_limit_is_cut_and_recorded(tmp_path, job_name):
    tasks = _task(tmp_path, "{}")
    out = _run(tmp_path, job_name, tasks,
               "echo small > /logs/agent/a-small.txt\n"
               "head -c 3145728 /dev/zero > /logs/agent/b-big.bin\n",
               max_download_mb=1)
    result = out["result"]
    assert any("download of /logs stopped at 1 MB" in w and "b-big.bin" in w
               for w in result["warnings"]), result["warnings"]
    logs = out["dir"] / "logs" / "agent"
    assert (logs / "a-small.txt").read_text() == "small\n"
    assert not (logs / "b-big.bin").exists()


# -- agent output ---------------------------------------------------------------------------


def test_a_large_output_is_read_whole_and_kept_on_disk(tmp_path, job_name):
    """256 MiB of stdout: the old reader (quadratic) ran past any sane agent timeout."""
    tasks = _task(tmp_path, "{}")
    out = _run(tmp_path, job_name, tasks, "head -c 268435456 /dev/zero | tr '\\0' a\n")
    assert out["result"]["error"] is None, out["result"]["error"]
    stdout = out["dir"] / "command" / "stdout.txt"
    assert stdout.stat().st_size == 256 << 20
    with stdout.open("rb") as fh:
        fh.seek(-16, 2)
        assert fh.read() == b"a" * 16


def test_a_timed_out_agents_partial_output_is_kept(tmp_path, job_name):
    tasks = _task(tmp_path, "{}")
    (tasks / "limits" / "task.md").write_text("---\nagent: {timeout_sec: 4}\n---\nLoop.\n")
    out = _run(tmp_path, job_name, tasks,
               "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.01; done\n")
    assert out["result"]["error"]["type"] == "agent_execution_timeout"
    lines = (out["dir"] / "command" / "stdout.txt").read_text().splitlines()
    assert lines[:2] == ["line 1", "line 2"] and len(lines) > 10
