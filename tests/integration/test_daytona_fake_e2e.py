"""Whole rollouts on the daytona backend, against the SDK fake whose sandboxes are local
containers: the oracle scores 1.0, nop 0.0, failures are typed, nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import daytona
import docker
import pytest

import benchflow
from benchflow.config import RolloutConfig, Scene
from benchflow.sandbox.registry import get_provider
from tests.fakes import daytona_sdk
from tests.integration.conftest import job_containers, reap

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
FAKE = {"client_factory": "tests.fakes.daytona_sdk:FakeAsyncDaytona"}


@pytest.fixture(autouse=True)
def _reset_fake():
    daytona_sdk.reset()
    yield
    daytona_sdk.reset()


def _config(tmp_path: Path, job_label: str, agent: str, task: str = "hello-world") -> RolloutConfig:
    return RolloutConfig(task_path=REPO / "tasks" / task, scenes=[Scene.single(agent=agent)],
                         environment="daytona", provider_config=FAKE, jobs_dir=tmp_path / "jobs",
                         job_name=job_label)


def _containers(job_label: str) -> list:
    return job_containers(job_label, daytona_sdk.FAKE_LABEL)


def _agents_sleeping(containers: list, n: int) -> bool:
    """`n` running containers, each with the slow agent's `sleep 300` started."""
    running = [c for c in containers if c.status == "running"]
    return len(running) >= n and all(
        any("sleep 300" in row[-1] for row in c.top().get("Processes") or []) for c in running)


@pytest.mark.parametrize(("task", "agent", "reward"), [
    ("hello-world", "oracle", 1.0), ("hello-world", "nop", 0.0),
    ("hello-world-legacy", "oracle", 1.0),
])
async def test_oracle_and_nop_score_on_daytona(tmp_path, job_label, task, agent, reward):
    result = await benchflow.run(_config(tmp_path, job_label, agent, task))
    assert result.error is None, result.error
    assert result.reward == reward
    assert "create" in daytona_sdk.FakeAsyncDaytona.calls
    assert "delete" in daytona_sdk.FakeAsyncDaytona.calls
    assert _containers(job_label) == []
    # Daytona's share of the cost: the sandbox's lifetime at its rates (no model here)
    assert result.sandbox_cost is not None and result.sandbox_cost > 0
    assert result.cost == result.sandbox_cost


async def test_second_rollout_reuses_the_snapshot(tmp_path, job_label):
    await benchflow.run(_config(tmp_path, job_label, "oracle"))
    daytona_sdk.reset()
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.reward == 1.0
    assert "snapshot.get" in daytona_sdk.FakeAsyncDaytona.calls
    assert "snapshot.create" not in daytona_sdk.FakeAsyncDaytona.calls


async def test_create_500_is_a_retryable_start_error(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create"] = [
        daytona.DaytonaInternalServerError("500 boom", status_code=500)]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "environment_start_failed"
    assert _containers(job_label) == []


async def test_bad_credentials_are_not_retryable(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create"] = [
        daytona.DaytonaAuthenticationError("401 invalid API key", status_code=401)]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type != "environment_start_failed"
    assert "daytona rejected the request" in result.error.message


def _script(tmp_path: Path, *turns: dict) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"roles": {"agent": {"turns": list(turns)}}}))
    return path


FIX = {"actions": [  # tasks/fix-python-bug (hello-world's image has no python3 for the agent)
    {"type": "shell", "command": "sed -i 's|sum(values) / (len(values) + 1)|sum(values) / "
                                 "len(values)|' /app/stats.py"},
    {"type": "message", "text": "fixed"}]}


def _acp_config(tmp_path: Path, job_label: str, script: Path, **update: object) -> RolloutConfig:
    config = _config(tmp_path, job_label, "scripted", "fix-python-bug").model_copy(
        update={"scenes": [Scene.single(agent="scripted", model=str(script))]})
    return config.model_copy(update=update) if update else config


def _agent_messages(result) -> list[str]:
    lines = Path(result.trajectory_path).read_text().splitlines()[1:]
    return [e["text"] for e in map(json.loads, lines) if e["type"] == "agent_message"]


async def test_scripted_acp_agent_fixes_the_bug_over_session_commands(tmp_path, job_label):
    result = await benchflow.run(_acp_config(tmp_path, job_label, _script(tmp_path, FIX)))
    assert result.error is None, result.error
    assert (result.reward, result.n_tool_calls) == (1.0, 1)
    assert _agent_messages(result) == ["fixed"]
    calls = daytona_sdk.FakeAsyncDaytona.calls
    assert "process.execute_session_command" in calls
    assert "process.send_session_command_input" in calls
    assert calls.count("process.create_session") == calls.count("process.delete_session") >= 1
    assert _containers(job_label) == []


async def test_coder_reviewer_two_roles_three_steps_on_daytona(tmp_path, job_label):
    from benchflow.task import load_task

    task_dir = REPO / "tasks" / "coder-reviewer"
    scenes = load_task(task_dir).scenes.to_scenes("scripted", str(task_dir / "scripted.yaml"))
    config = _config(tmp_path, job_label, "scripted", "coder-reviewer").model_copy(
        update={"scenes": scenes})
    result = await benchflow.run(config)
    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 3, 6)
    calls = daytona_sdk.FakeAsyncDaytona.calls
    assert calls.count("process.create_session") == calls.count("process.delete_session") >= 3
    assert _containers(job_label) == []


async def test_a_dropped_log_stream_mid_session_is_reopened(tmp_path, job_label):
    script = _script(tmp_path, {"actions": [
        {"type": "stream", "count": 2000, "text": "u", "numbered": True}, *FIX["actions"]]})
    daytona_sdk.FakeAsyncDaytona.stream_drops.extend([
        daytona_sdk.StreamDrop("agent.py", 3),  # closed cleanly, too early
        daytona_sdk.StreamDrop("agent.py", 5, daytona.DaytonaError("close code 1011"))])
    config = _acp_config(tmp_path, job_label, script,
                         provider_config={**FAKE, "backoff_sec": 0.01})
    result = await benchflow.run(config)
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert daytona_sdk.FakeAsyncDaytona.stream_drops == []  # both drops happened mid-session
    streamed = [t for t in _agent_messages(result) if t.startswith("u")]
    assert streamed == [f"u{i}\n" for i in range(2000)]  # in order, none lost or doubled


async def test_a_log_stream_that_stays_down_fails_the_agent_typed(tmp_path, job_label):
    import anyio

    script = _script(tmp_path, {"actions": [{"type": "hang"}]})
    # mid-handshake, then at once on every re-open (a replay may come as one message)
    daytona_sdk.FakeAsyncDaytona.stream_drops.extend(
        daytona_sdk.StreamDrop("agent.py", after) for after in (2, 0, 0, 0, 0))
    config = _acp_config(tmp_path, job_label, script,
                         provider_config={**FAKE, "backoff_sec": 0.01, "stream_retries": 1})
    with anyio.fail_after(90):  # the agent hangs: only the lost stream can end the rollout
        result = await benchflow.run(config)
    assert result.error is not None
    assert result.error.type == "agent_execution_failed", result.error
    assert len(daytona_sdk.FakeAsyncDaytona.stream_drops) == 3  # the first try and one re-open
    assert _containers(job_label) == []


async def _box(job_label: str):
    from benchflow.sandbox.spec import SandboxSpec

    box = get_provider("daytona", FAKE).create(SandboxSpec(
        name="live", docker_image="debian:bookworm-slim", labels={"benchflow.job": job_label}))
    await box.start()
    return box


async def _read_all(stream) -> bytes:
    import anyio

    out = b""
    try:
        while True:
            out += await stream.receive()
    except anyio.EndOfStream:
        return out


async def test_live_process_input_is_not_echoed_and_env_stays_off_command_lines(job_label):
    box = await _box(job_label)
    try:
        async with await box.open_process(["sh", "-c", 'cat; echo "$TOKEN" >&2'],
                                          env={"TOKEN": "s3cret value"}) as proc:
            await proc.stdin.send("héllo\npartial".encode())
            await proc.stdin.send_eof()
            out, err = await _read_all(proc.stdout), await _read_all(proc.stderr)
            assert await proc.wait() == 0
        assert out == "héllo\npartial\n".encode()  # once (no echo); Daytona ends the line
        assert err == b"s3cret value\n"
        commands = [c.command for s in daytona_sdk.SessionCommands._sessions.values()
                    for c in s.commands.values()]
        assert not any("s3cret" in c for c in commands)
        listing = (await box.exec(["ls", "-A", "/tmp/.benchflow/daytona"])).stdout
        assert listing == b""  # the env file is gone once read
    finally:
        await box.stop()


async def test_live_process_stdin_goes_in_bounded_frames_and_is_byte_exact(job_label):
    box = await _box(job_label)
    try:
        data = ("ü" * 1_500_000 + "\n" + "x" * 10).encode()  # 3 MB
        async with await box.open_process(["sh", "-c", "wc -c; sleep 0.2"]) as proc:
            await proc.stdin.send(data[:7])  # ends inside a two-byte character
            await proc.stdin.send(data[7:])
            await proc.stdin.send_eof()
            out = await _read_all(proc.stdout)
            assert await proc.wait() == 0
        assert out.strip() == str(len(data)).encode()
        frames = daytona_sdk.FakeAsyncDaytona.calls.count("process.send_session_command_input")
        # "üüü" (the half character waits for the next send), the rest as 1 MiB characters
        # plus the remainder, then "eof"
        assert frames == 4
    finally:
        await box.stop()


async def test_live_process_sdk_failures_are_typed_and_leave_no_session(job_label):
    import anyio

    from benchflow.errors import ConfigError, SandboxExecError

    box = await _box(job_label)
    inject = daytona_sdk.FakeAsyncDaytona.inject
    try:
        inject["process.execute_session_command"] = [
            daytona.DaytonaBadRequestError("400 bad command", status_code=400)]
        with pytest.raises(ConfigError, match="daytona rejected the request"):
            await box.open_process(["cat"])
        assert daytona_sdk.FakeAsyncDaytona.calls.count("process.delete_session") == 1
        inject["process.send_session_command_input"] = [
            daytona.DaytonaInternalServerError("500 boom", status_code=500)]
        async with await box.open_process(["cat"]) as proc:
            with pytest.raises(anyio.BrokenResourceError) as info:
                await proc.stdin.send(b"x\n")
            assert isinstance(info.value.__cause__, SandboxExecError)
            assert info.value.__cause__.retryable
        assert not any(key[0] == box.sandbox_id for key in daytona_sdk.SessionCommands._sessions)
    finally:
        await box.stop()


async def test_the_fake_echoes_input_unless_suppressed(job_label):
    """What `suppress_input_echo` protects the adapter from: the daemon's echo."""
    box = await _box(job_label)
    try:
        process = box._box.process
        await process.create_session("echo-test")
        started = await process.execute_session_command("echo-test", daytona.SessionExecuteRequest(
            command="head -n 1", run_async=True))
        await process.send_session_command_input("echo-test", started.cmd_id, "ping")
        out: list[str] = []
        await process.get_session_command_logs_async("echo-test", started.cmd_id, out.append,
                                                     out.append)
        assert "".join(out) == "ping\nping\n"  # the echo, then head's own output
        command = await process.get_session_command("echo-test", started.cmd_id)
        assert command.exit_code == 0
        with pytest.raises(daytona.DaytonaError):
            await process.send_session_command_input("echo-test", started.cmd_id, "late")
        await process.delete_session("echo-test")
    finally:
        await box.stop()


async def test_cleanup_removes_a_jobs_leftovers(tmp_path, job_label):
    client = daytona_sdk.FakeAsyncDaytona()
    await client.create(daytona.CreateSandboxFromImageParams(
        image="debian:bookworm-slim", labels={"benchflow.managed": "true",
                                              "benchflow.job": job_label}))
    assert len(_containers(job_label)) == 1
    removed = await get_provider("daytona", FAKE).cleanup(job_label)
    assert len(removed) == 1 and _containers(job_label) == []


def _ledger(tmp_path: Path, job_label: str) -> list:
    from benchflow.sandbox import ledger

    return list(ledger.read(tmp_path / "jobs" / job_label / ledger.LEDGER_NAME))


async def test_ledger_records_before_and_after_create_and_the_delete(tmp_path, job_label):
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.reward == 1.0
    entries = _ledger(tmp_path, job_label)
    assert [e.event for e in entries] == ["creating", "created", "deleted"]
    assert entries[0].sandbox_id is None and entries[1].sandbox_id == entries[2].sandbox_id
    assert {e.rollout for e in entries} == {result.rollout_name}
    assert {e.create_token for e in entries[:2]} == {entries[0].create_token}


async def test_ambiguous_create_deletes_the_duplicate(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create.after"] = [
        daytona.DaytonaTimeoutError("read timeout after the request went out")]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "environment_start_failed"
    events = [e.event for e in _ledger(tmp_path, job_label)]
    assert events == ["creating", "duplicate_deleted"]
    assert _containers(job_label) == []


async def test_rate_limited_creates_back_off_and_succeed(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create"] = [
        daytona.DaytonaRateLimitError("429", status_code=429) for _ in range(2)]
    config = _config(tmp_path, job_label, "oracle").model_copy(
        update={"provider_config": {**FAKE, "backoff_sec": 0.05}})
    result = await benchflow.run(config)
    assert result.error is None and result.reward == 1.0
    assert daytona_sdk.FakeAsyncDaytona.calls.count("create") == 3


async def test_provider_limiter_bounds_concurrent_sandboxes(tmp_path, job_label):
    import anyio

    from benchflow.sandbox.spec import SandboxSpec

    provider = get_provider("daytona", {**FAKE, "max_sandboxes": 1, "creates_per_sec": 100})
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


def test_sigint_leaves_no_daytona_sandbox_behind(tmp_path, job_label):
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
        "environment": {"type": "daytona", "provider_config": FAKE}}))
    env = {**os.environ, "DAYTONA_API_KEY": "fake-key", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                             "jobs", "run", str(job_file)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _agents_sleeping(_containers(job_label), 2):  # both rollouts in their agent phase
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
    assert _containers(job_label) == []
    entries = _ledger(tmp_path, job_label)
    created = {e.sandbox_id for e in entries if e.event == "created"}
    assert len(created) == 2  # both recorded; both gone (the cancel's cleanup deletes by label)
    client = docker.from_env()
    for sandbox_id in created:
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(sandbox_id)


async def test_cleanup_by_ledger_ids_finds_sandboxes_without_the_job_label(tmp_path, job_label):
    from benchflow.sandbox import ledger

    client = daytona_sdk.FakeAsyncDaytona()
    box = await client.create(daytona.CreateSandboxFromImageParams(
        image="debian:bookworm-slim", labels={"benchflow.job": job_label}))  # no managed label
    path = tmp_path / ledger.LEDGER_NAME
    for event, sandbox_id in (("creating", None), ("created", box.id)):
        ledger.record(path, ledger.LedgerEntry(event=event, provider="daytona", rollout="r",
                                               sandbox_id=sandbox_id, create_token="t"))
    assert ledger.unaccounted(path, "daytona") == [box.id]
    assert ledger.unaccounted(path, "modal") == []
    provider = get_provider("daytona", FAKE)
    assert await provider.cleanup(job_label) == []  # not labelled as benchflow's
    assert await provider.cleanup_ids(ledger.unaccounted(path, "daytona")) == [box.id]
    assert _containers(job_label) == []
    assert await provider.cleanup_ids([box.id]) == []  # already gone: not an error
