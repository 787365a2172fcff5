"""Whole rollouts on the modal backend, against the SDK fake whose sandboxes are local
containers: oracle 1.0, nop 0.0, an ACP agent through live processes (hardened), the
agent install cache on `snapshot_filesystem`, typed failures, nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest
from modal import exception

import benchflow
from benchflow.config import RolloutConfig, Scene
from benchflow.sandbox import ledger
from benchflow.sandbox.registry import get_provider
from tests.fakes import modal_sdk
from tests.integration.conftest import reap

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
FAKE = modal_sdk.PROVIDER_CONFIG


@pytest.fixture(autouse=True)
def _reset_fake(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))  # the snapshot index
    modal_sdk.reset()
    yield
    modal_sdk.reset()
    modal_sdk.remove_snapshots()


def _config(tmp_path: Path, job_label: str, agent: str, task: str = "hello-world",
            **update: object) -> RolloutConfig:
    config = RolloutConfig(task_path=REPO / "tasks" / task, scenes=[Scene.single(agent=agent)],
                           environment="modal", provider_config=FAKE,
                           jobs_dir=tmp_path / "jobs", job_name=job_label)
    return config.model_copy(update=update) if update else config


def _left(job_label: str) -> list:
    return modal_sdk.containers(**{"benchflow.job": job_label})


def _agents_sleeping(containers: list, n: int) -> bool:
    """`n` running containers, each with the slow agent's `sleep 300` started."""
    running = [c for c in containers if c.status == "running"]
    return len(running) >= n and all(
        any("sleep 300" in row[-1] for row in c.top().get("Processes") or []) for c in running)


def _ledger(tmp_path: Path, job_label: str) -> list[ledger.LedgerEntry]:
    return list(ledger.read(tmp_path / "jobs" / job_label / ledger.LEDGER_NAME))


@pytest.mark.parametrize(("task", "agent", "reward"), [
    ("hello-world", "oracle", 1.0), ("hello-world", "nop", 0.0),
    ("hello-world-legacy", "oracle", 1.0),
])
async def test_oracle_and_nop_score_on_modal(tmp_path, job_label, task, agent, reward):
    result = await benchflow.run(_config(tmp_path, job_label, agent, task))
    assert result.error is None, result.error
    assert result.reward == reward
    calls = modal_sdk.Sandbox.calls
    assert calls.count("sandbox.create") == 1 and calls.count("sandbox.terminate") == 1
    assert _left(job_label) == []
    assert result.agent_install_cache is None  # no registered agent


async def test_region_verbose_and_the_sandbox_cost(tmp_path, job_label):
    config = _config(tmp_path, job_label, "oracle").model_copy(update={"provider_config": {
        **FAKE, "app_name": "rollout-my-app", "regions": ["us-east", "us-west"],
        "verbose": True, "price_per_cpu_hour": 36.0, "price_per_gib_hour": 0.0}})
    result = await benchflow.run(config)
    assert result.error is None, result.error
    assert modal_sdk.created == [{"region": ["us-east", "us-west"], "verbose": True}]
    # one core at 36 USD/h is a cent a second: a positive cost, and all of `cost` (no model)
    assert result.sandbox_cost is not None and result.sandbox_cost > 0
    assert result.cost == result.sandbox_cost
    assert result.sandbox_cost <= 0.01 * result.durations.total_sec + 1e-6


async def test_second_rollout_reuses_the_image(tmp_path, job_label):
    first = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert first.reward == 1.0
    modal_sdk.reset()
    second = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert second.reward == 1.0
    assert "sandbox.create" in modal_sdk.Sandbox.calls
    assert "image.build" not in modal_sdk.Sandbox.calls


def _script(tmp_path: Path, *turns: dict) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"roles": {"agent": {"turns": list(turns)}}}))
    return path


FIX = {"actions": [
    {"type": "shell", "command": "sed -i 's|sum(values) / (len(values) + 1)|sum(values) / "
                                 "len(values)|' /app/stats.py"},
    {"type": "message", "text": "fixed"}]}


def _acp_config(tmp_path: Path, job_label: str, script: Path, **update: object) -> RolloutConfig:
    scene = Scene.single(agent="scripted", model=str(script))
    return _config(tmp_path, job_label, "scripted", "fix-python-bug", scenes=[scene], **update)


async def test_acp_agent_runs_hardened_over_live_processes_and_the_install_is_snapshotted(
        tmp_path, job_label):
    script = _script(tmp_path, FIX)
    first = await benchflow.run(_acp_config(tmp_path, job_label, script))
    assert first.error is None, first.error
    assert (first.reward, first.hardened, first.n_tool_calls) == (1.0, True, 1)
    assert first.agent_install_cache == "saved"
    assert "sandbox.snapshot_filesystem" in modal_sdk.Sandbox.calls
    modal_sdk.reset()
    second = await benchflow.run(_acp_config(tmp_path, job_label, script, attempt=2))
    assert second.error is None, second.error
    assert (second.reward, second.agent_install_cache) == (1.0, "hit")
    assert "image.from_id" in modal_sdk.Sandbox.calls
    assert "sandbox.snapshot_filesystem" not in modal_sdk.Sandbox.calls
    assert _left(job_label) == []


async def test_a_dropped_stream_mid_session_is_resumed(tmp_path, job_label):
    script = _script(tmp_path, {"actions": [
        {"type": "stream", "count": 2000, "text": "u", "numbered": True},
        {"type": "shell", "command": FIX["actions"][0]["command"]}]})
    modal_sdk.Sandbox.stream_drops.extend(
        modal_sdk.StreamDrop("agent.py", after, exception.ServiceError("stream reset"))
        for after in (3, 5))
    config = _acp_config(tmp_path, job_label, script,
                         provider_config={**FAKE, "backoff_sec": 0.01})
    result = await benchflow.run(config)
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert modal_sdk.Sandbox.stream_drops == []  # both drops happened mid-session
    lines = Path(result.trajectory_path).read_text().splitlines()[1:]
    streamed = [e["text"] for e in map(json.loads, lines)
                if e["type"] == "agent_message" and e["text"].startswith("u")]
    assert streamed == [f"u{i}\n" for i in range(2000)]  # in order, none lost or doubled


async def test_a_stream_that_stays_down_fails_the_agent_typed(tmp_path, job_label):
    script = _script(tmp_path, {"actions": [{"type": "hang"}]})
    modal_sdk.Sandbox.stream_drops.extend(
        modal_sdk.StreamDrop("agent.py", 2, exception.ServiceError("gone")) for _ in range(5))
    config = _acp_config(tmp_path, job_label, script,
                         provider_config={**FAKE, "backoff_sec": 0.01, "stream_retries": 1})
    result = await benchflow.run(config)
    assert result.error is not None
    assert result.error.type == "agent_execution_failed", result.error
    assert len(modal_sdk.Sandbox.stream_drops) == 3  # the first try and one resume
    assert _left(job_label) == []


async def test_create_500_is_a_retryable_start_error(tmp_path, job_label):
    modal_sdk.Sandbox.inject["sandbox.create"] = [exception.InternalError("500 boom")]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "environment_start_failed"
    assert result.error.retryable
    assert _left(job_label) == []


async def test_bad_credentials_are_not_retryable(tmp_path, job_label):
    modal_sdk.Sandbox.inject["sandbox.create"] = [exception.AuthError("Token missing")]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "config_invalid"
    assert not result.error.retryable and "modal rejected the request" in result.error.message


async def test_ledger_records_before_and_after_create_and_the_delete(tmp_path, job_label):
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.reward == 1.0
    entries = _ledger(tmp_path, job_label)
    assert [e.event for e in entries] == ["creating", "created", "deleted"]
    assert entries[0].sandbox_id is None and entries[1].sandbox_id == entries[2].sandbox_id
    assert {e.provider for e in entries} == {"modal"}
    assert {e.rollout for e in entries} == {result.rollout_name}


async def test_ambiguous_create_terminates_the_duplicate(tmp_path, job_label):
    modal_sdk.Sandbox.inject["sandbox.create.after"] = [
        exception.ServiceError("deadline exceeded after the request went out")]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "environment_start_failed"
    assert [e.event for e in _ledger(tmp_path, job_label)] == ["creating", "duplicate_deleted"]
    assert _left(job_label) == []


async def test_rate_limited_creates_back_off_and_succeed(tmp_path, job_label):
    modal_sdk.Sandbox.inject["sandbox.create"] = [
        exception.ResourceExhaustedError("rate limit: 5 creates/s") for _ in range(2)]
    config = _config(tmp_path, job_label, "oracle",
                     provider_config={**FAKE, "backoff_sec": 0.05})
    result = await benchflow.run(config)
    assert result.error is None and result.reward == 1.0
    assert modal_sdk.Sandbox.calls.count("sandbox.create") == 3


async def test_exec_timeouts_in_the_sandbox_and_at_the_sdk_deadline(tmp_path, job_label):
    from benchflow.sandbox.spec import SandboxSpec

    box = get_provider("modal", FAKE).create(SandboxSpec(
        name="timeouts", docker_image="debian:bookworm-slim",
        labels={"benchflow.job": job_label}))
    await box.start()
    try:
        late = await box.exec(["sh", "-c", "sleep 30; echo late"], timeout=0.5)
        assert late.timed_out and late.exit_code == 124 and late.stdout == b""
        modal_sdk.Sandbox.inject["process.wait"] = [exception.ExecTimeoutError("deadline")]
        cut = await box.exec(["true"], timeout=5)
        assert cut.timed_out and cut.exit_code == -1
        assert (await box.exec(["true"])).ok
    finally:
        await box.stop()


async def test_delete_failure_is_recorded_and_cleanup_reclaims_it(tmp_path, job_label):
    modal_sdk.Sandbox.inject["sandbox.terminate"] = [exception.InternalError("503 on terminate")]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.reward == 1.0  # a teardown failure never changes the reward
    assert result.teardown_error is not None
    assert result.teardown_error.type == "environment_teardown_failed"
    assert len(_left(job_label)) == 1
    path = tmp_path / "jobs" / job_label / ledger.LEDGER_NAME
    left = ledger.unaccounted(path, "modal")
    assert len(left) == 1
    provider = get_provider("modal", FAKE)
    assert await provider.cleanup_ids(left) == left
    assert _left(job_label) == []
    assert await provider.cleanup_ids(left) == []  # already gone: not an error


async def test_cleanup_removes_a_jobs_leftovers_and_only_them(tmp_path, job_label):
    app = await modal_sdk.App.lookup.aio("benchflow", create_if_missing=True)
    image = modal_sdk.Image.from_registry("debian:bookworm-slim")
    mine = await modal_sdk.Sandbox.create.aio(
        "sleep", "infinity", app=app, image=image,
        tags={"benchflow.managed": "true", "benchflow.job": job_label})
    other = await modal_sdk.Sandbox.create.aio(
        "sleep", "infinity", app=app, image=image,
        tags={"benchflow.managed": "true", "benchflow.job": f"{job_label}-other"})
    try:
        removed = await get_provider("modal", FAKE).cleanup(job_label)
        assert removed == [mine.object_id]
        assert _left(job_label) == []
        assert len(_left(f"{job_label}-other")) == 1
    finally:
        await other.terminate.aio()


def test_sandbox_cleanup_cli_takes_the_backend_and_settings_from_the_job_folder(
        tmp_path, job_label, monkeypatch):
    import anyio
    from typer.testing import CliRunner

    from benchflow.cli.main import app as cli

    async def leave_one() -> str:
        app = await modal_sdk.App.lookup.aio("benchflow", create_if_missing=True)
        box = await modal_sdk.Sandbox.create.aio(
            "sleep", "infinity", app=app, image=modal_sdk.Image.from_registry("debian:bookworm-slim"),
            tags={"benchflow.managed": "true", "benchflow.job": job_label})
        return box.object_id

    left = anyio.run(leave_one)
    job_dir = tmp_path / "jobs" / job_label
    job_dir.mkdir(parents=True)
    (job_dir / "config.json").write_text(json.dumps({
        "name": job_label, "agents": [{"name": "oracle"}],
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}],
        "environment": {"type": "modal", "provider_config": FAKE}}))
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-fake")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-fake")
    runner = CliRunner()
    bad = runner.invoke(cli, ["sandbox", "cleanup", "--job", job_label, "--jobs-dir",
                              str(tmp_path / "jobs"), "--provider-config", "[1]"])
    assert bad.exit_code == 2 and "--provider-config: give a JSON object" in bad.output
    assert len(_left(job_label)) == 1
    done = runner.invoke(cli, ["sandbox", "cleanup", "--job", job_label, "--jobs-dir",
                               str(tmp_path / "jobs")])
    assert done.exit_code == 0, done.output
    assert f"removed 1 sandbox(es): {left}" in done.output
    assert _left(job_label) == []


async def test_provider_limiter_bounds_concurrent_sandboxes(tmp_path, job_label):
    import anyio

    from benchflow.sandbox.spec import SandboxSpec

    provider = get_provider("modal", {**FAKE, "max_sandboxes": 1, "creates_per_sec": 100})
    spec = SandboxSpec(name="limit", docker_image="debian:bookworm-slim",
                       labels={"benchflow.job": job_label})
    first, second = provider.create(spec), provider.create(spec)
    await first.start()
    try:
        with anyio.move_on_after(1.5) as scope:
            await second.start()
        assert scope.cancelled_caught  # waits for a free slot
        await first.stop()
        with anyio.fail_after(30):
            await second.start()
        assert second.sandbox_id is not None
    finally:
        await first.stop()
        await second.stop()


async def test_creates_are_paced_to_the_rate_limit(tmp_path, job_label):
    import anyio

    from benchflow.sandbox.limits import limits_for

    limits = limits_for("modal-pace-test", 10, 5.0)
    started = anyio.current_time()
    for _ in range(4):
        await limits.pace()
    assert anyio.current_time() - started >= 0.6  # 4 creates at 5/s: 3 gaps of 0.2 s


def test_sigint_leaves_no_modal_sandbox_behind(tmp_path, job_label):
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    from benchflow.job.models import JobResult

    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "name": job_label, "jobs_dir": str(tmp_path / "jobs"), "n_attempts": 3,
        "n_concurrent_trials": 2, "agents": [{"name": "slow", "execute": "sleep 300"}],
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}],
        "environment": {"type": "modal", "provider_config": FAKE}}))
    env = {**os.environ, "MODAL_TOKEN_ID": "ak-fake", "MODAL_TOKEN_SECRET": "as-fake",
           "PYTHONPATH": str(REPO), "BENCHFLOW_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                             "jobs", "run", str(job_file)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _agents_sleeping(_left(job_label), 2):  # both rollouts in their agent phase
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        reap(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    job = JobResult.model_validate_json((tmp_path / "jobs" / job_label / "result.json").read_text())
    assert job.cancelled
    assert _left(job_label) == []
    created = {e.sandbox_id for e in _ledger(tmp_path, job_label) if e.event == "created"}
    assert len(created) == 2
    client = docker.from_env()
    for sandbox_id in created:
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(f"fake-modal-{sandbox_id.removeprefix('sb-')}")


def test_cleanup_now_terminates_a_jobs_sandboxes_without_an_event_loop(job_label):
    import anyio

    async def make() -> str:
        app = await modal_sdk.App.lookup.aio("benchflow", create_if_missing=True)
        box = await modal_sdk.Sandbox.create.aio(
            "sleep", "infinity", app=app, image=modal_sdk.Image.from_registry("debian:bookworm-slim"),
            tags={"benchflow.managed": "true", "benchflow.job": job_label})
        return box.object_id

    made = anyio.run(make)
    assert len(_left(job_label)) == 1
    # what a second Ctrl-C runs while the process exits (job/signals.py::hard_exit)
    assert get_provider("modal", FAKE).cleanup_now(job_label) == [made]
    assert _left(job_label) == []


async def test_an_expired_snapshot_is_a_cache_miss_and_forgotten(tmp_path, job_label):
    from benchflow.sandbox.modal.snapshots import SnapshotIndex
    from benchflow.sandbox.spec import SandboxSpec

    box = get_provider("modal", FAKE).create(SandboxSpec(
        name="expired", docker_image="debian:bookworm-slim", labels={"benchflow.job": job_label}))
    index = SnapshotIndex(box.config)
    assert index.path == tmp_path / "cache" / "modal" / "snapshots.json"
    index.put("benchflow-agent/scripted:0123", "im-gone00000000000000000000")
    assert await box.snapshot_base() == "debian:bookworm-slim"
    assert not await box.snapshot_exists("benchflow-agent/scripted:0123")
    assert index.get("benchflow-agent/scripted:0123") is None
    assert not await box.snapshot_exists("never-saved")


async def test_a_public_sandbox_is_cut_off_for_the_none_policy(tmp_path, job_label):
    from benchflow.sandbox.base import PolicySandbox
    from benchflow.sandbox.spec import SandboxSpec

    box = get_provider("modal", FAKE).create(SandboxSpec(
        name="isolate", docker_image="debian:bookworm-slim", labels={"benchflow.job": job_label}))
    assert isinstance(box, PolicySandbox)
    await box.start()
    try:
        interfaces = ["sh", "-c", "ls /sys/class/net"]
        assert b"eth0" in (await box.exec(interfaces)).stdout
        await box.apply_network_policy("public", None)
        assert b"eth0" in (await box.exec(interfaces)).stdout
        await box.apply_network_policy("none", None)
        assert (await box.exec(interfaces)).stdout.split() == [b"lo"]
    finally:
        await box.stop()


async def test_a_create_cancelled_in_flight_leaves_nothing_behind(tmp_path, job_label):
    import anyio

    from benchflow.sandbox.spec import SandboxSpec

    modal_sdk.Sandbox.latency_sec["sandbox.create.after"] = 30.0
    path = tmp_path / ledger.LEDGER_NAME
    box = get_provider("modal", FAKE).create(SandboxSpec(
        name="cancel", docker_image="debian:bookworm-slim", ledger_path=path,
        labels={"benchflow.job": job_label}))
    with anyio.move_on_after(2) as scope:
        await box.start()
    assert scope.cancelled_caught and box.sandbox_id is None
    assert [e.event for e in ledger.read(path)] == ["creating", "duplicate_deleted"]
    assert _left(job_label) == []


async def test_a_failed_terminate_frees_the_limiter_slot(tmp_path, job_label):
    import anyio

    from benchflow.errors import SandboxTeardownError
    from benchflow.sandbox.spec import SandboxSpec

    provider = get_provider("modal", {**FAKE, "max_sandboxes": 1, "creates_per_sec": 100})
    spec = SandboxSpec(name="slot", docker_image="debian:bookworm-slim",
                       labels={"benchflow.job": job_label})
    first, second = provider.create(spec), provider.create(spec)
    await first.start()
    modal_sdk.Sandbox.inject["sandbox.terminate"] = [exception.InternalError("503")]
    with pytest.raises(SandboxTeardownError):
        await first.stop()
    try:
        with anyio.fail_after(30):
            await second.start()  # not blocked by the sandbox that failed to go
    finally:
        await second.stop()
        await first.stop()  # the retry succeeds
    assert _left(job_label) == []


async def test_live_process_stdin_takes_more_than_the_sdks_buffer(tmp_path, job_label):
    import anyio

    from benchflow.sandbox.spec import SandboxSpec

    box = get_provider("modal", FAKE).create(SandboxSpec(
        name="stdin", docker_image="debian:bookworm-slim", labels={"benchflow.job": job_label}))
    await box.start()
    try:
        async with await box.open_process(["sh", "-c", "wc -c"]) as proc:
            await proc.stdin.send(b"z" * 20_000_000)  # over the SDK's 16 MiB per drain
            await proc.stdin.send_eof()
            out = b""
            with pytest.raises(anyio.EndOfStream):
                while True:
                    out += await proc.stdout.receive()
            assert await proc.wait() == 0
        assert out.strip() == b"20000000"
    finally:
        await box.stop()
