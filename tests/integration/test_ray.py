"""Jobs on a real local Ray cluster: a head node and a second node process on this machine
(`ray start`, stopped after), the Docker backend shared by both, and the latency-only fake
cloud backend registered in code. Run with `make test-ray` (slow: not in `make test`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import yaml

from benchflow.job.config import parse_job_config
from benchflow.job.models import JobResult
from benchflow.job.runner import make_job, prepare_job, start_new_job
from benchflow.rollout.events import RolloutEventKind
from benchflow.rollout.result import RolloutResult
from benchflow.sandbox import registry

from .conftest import TASKS, job_containers, reap

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.docker]

RAY = str(Path(sys.executable).parent / "ray")
BENCH = TASKS.parent / "labs" / "benchmarks"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "raylet|gcs_server"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and one more node; yields the address; stops both."""
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    # a cluster on 127.0.0.1 only, for this test: no token file written to ~/.ray
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    env = dict(os.environ)
    subprocess.run([RAY, "start", "--head", f"--port={port}", "--num-cpus=2",
                    "--include-dashboard=false", f"--temp-dir={temp}"],
                   check=True, capture_output=True, env=env, timeout=120)
    address = f"127.0.0.1:{port}"
    try:
        subprocess.run([RAY, "start", f"--address={address}", "--num-cpus=2"],
                       check=True, capture_output=True, env=env, timeout=120)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([RAY, "stop", "--force"], capture_output=True, env=env, timeout=120)
        deadline = time.monotonic() + 30
        while _ray_processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        assert not _ray_processes(), _ray_processes()


def _job(tmp_path: Path, name: str, address: str, **extra) -> dict:
    return {"name": name, "jobs_dir": str(tmp_path / "jobs"), "executor": "ray",
            "ray_address": address, "ray_workers": 2, "agents": [{"name": "oracle"}],
            "datasets": [{"path": str(TASKS), "tasks": ["hello-world"]}], **extra}


def _run(config_data: dict, listener=None) -> tuple[JobResult, object]:
    prepared = prepare_job(parse_job_config(config_data))
    start_new_job(prepared)
    job = make_job(prepared, listener=listener)
    return anyio.run(job.run), job


def _results(job_dir: Path) -> list[RolloutResult]:
    return [RolloutResult.model_validate_json(p.read_text())
            for p in job_dir.glob("*/*/*/result.json")]


def test_docker_job_on_two_nodes_matches_a_local_run(tmp_path, cluster, job_label):
    name = f"{job_label}-ray20"
    result, _ = _run(_job(tmp_path, name, cluster, n_attempts=20, n_concurrent_trials=6))
    results = _results(tmp_path / "jobs" / name)
    assert sorted(r.attempt for r in results) == list(range(1, 21))  # each exactly once
    assert all(r.reward == 1.0 for r in results)
    local_data = _job(tmp_path, f"{name}-local", cluster, n_attempts=20, n_concurrent_trials=6)
    local_data["executor"] = "local"
    local, _ = _run(local_data)
    assert (result.total_trials, result.completed_trials, result.failed_trials,
            result.pass_rate, result.mean_reward, result.pass_at_k) == (
        local.total_trials, local.completed_trials, local.failed_trials,
        local.pass_rate, local.mean_reward, local.pass_at_k)
    saved = JobResult.model_validate_json((tmp_path / "jobs" / name / "result.json").read_text())
    assert saved == result
    trajectory = Path(results[0].trajectory_path)
    assert trajectory.is_file() and trajectory.is_relative_to(tmp_path / "jobs" / name)
    assert not job_containers(name)


def test_200_trials_on_a_fake_cloud_backend(tmp_path, cluster, job_label, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import latency_fake

    monkeypatch.setattr(latency_fake, "CREATE_SEC", 0.2)
    monkeypatch.setattr(latency_fake, "RTT_SEC", 0.01)
    monkeypatch.setitem(registry._REGISTERED, "latency-fake", latency_fake.LatencyProvider)
    name = f"{job_label}-ray200"
    result, _ = _run(_job(tmp_path, name, cluster, n_attempts=200, n_concurrent_trials=50,
                          environment={"type": "latency-fake"}))
    results = _results(tmp_path / "jobs" / name)
    assert len(results) == 200 and len({r.attempt for r in results}) == 200
    assert result.completed_trials == 200 and result.mean_reward == 1.0


def test_a_killed_worker_has_its_trials_retried(tmp_path, cluster, job_label):
    name = f"{job_label}-raykill"
    killed: list[int] = []
    job_holder: list = []

    def kill_one(event) -> None:
        if event.kind is RolloutEventKind.END and not killed:
            actor = job_holder[0]._actors[0]
            pid = ray.get(actor.pid.remote())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    data = _job(tmp_path, name, cluster, n_attempts=8, n_concurrent_trials=4)
    data["agents"] = [{"name": "slow", "execute": "sleep 3"}]  # scores 0: no hello.txt
    prepared = prepare_job(parse_job_config(data))
    start_new_job(prepared)
    job = make_job(prepared, listener=kill_one)
    job_holder.append(job)
    result = anyio.run(job.run)
    assert killed
    results = _results(tmp_path / "jobs" / name)
    assert sorted(r.attempt for r in results) == list(range(1, 9))
    assert all(r.error is None for r in results), [r.error for r in results]
    assert any(e.type == "worker_lost" for r in results for e in r.retried_errors)
    assert result.failed_trials == 0
    assert not job_containers(name)  # the dead worker's sandboxes were removed too


def test_sigint_on_the_driver_then_resume(tmp_path, cluster, job_label):
    name = f"{job_label}-raysig"
    data = _job(tmp_path, name, cluster, n_attempts=6, n_concurrent_trials=2)
    data["agents"] = [{"name": "slow", "execute": "sleep 4"}]
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(data))
    benchflow = str(Path(sys.executable).parent / "benchflow")
    proc = subprocess.Popen([benchflow, "jobs", "run", str(job_file)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    job_dir = tmp_path / "jobs" / name
    try:
        deadline = time.monotonic() + 60
        while not job_containers(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert job_containers(name), "no sandbox started"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        reap(proc)
    assert proc.returncode == 130, out
    assert not job_containers(name), out
    saved = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert saved.cancelled and saved.completed_trials < 6
    done = subprocess.run([benchflow, "jobs", "resume", str(job_dir)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    resumed = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert resumed.total_trials == 6 and resumed.failed_trials == 0 and not resumed.cancelled
    assert sorted(r.attempt for r in _results(job_dir)) == list(range(1, 7))
    assert not job_containers(name)
