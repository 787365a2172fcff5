"""Multi-container tasks (Harbor's environment/docker-compose.yaml) on the real daemon.

`fixtures/tasks/compose-sidecar` adds a `secret-store` service (a key-value store over TCP,
healthy only after a slow start) beside `main`; `main` depends on it being healthy. The
oracle reads the secret from it and sets `done` there; the verifier queries the service
itself. Checked: the score plain and hardened, that the verifier really asks the service,
the group's network under a `none` policy, main's environment (its values never in the
generated files), and that every container, network and generated file of a rollout goes, at
the end and after the benchflow process is SIGKILLed (`sandbox cleanup`).

`fixtures/tasks/compose-collect` is Harbor's sidecar-artifacts shape: a `ledger` service
holds the evidence (its own log file and an in-memory counter a `[[verifier.collect]]` hook
snapshots into a file), carried to a separate verifier as artifacts taken from the service.
Checked: the score plain and hardened, that files the agent fakes in main never stand in for
the service's, and the service operations themselves (exec, download, stopping main).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import docker
import pytest

from benchflow import RolloutConfig, Scene
from benchflow.agents.command import CommandAgent
from benchflow.rollout import Rollout
from benchflow.rollout.result import RolloutResult
from benchflow.sandbox.docker.compose import LABEL_GROUP, ComposeSandbox
from benchflow.sandbox.labels import LABEL_JOB, LABEL_ROLLOUT
from benchflow.sandbox.spec import SandboxSpec

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(900)]

TASK = Path(__file__).parent / "fixtures" / "tasks" / "compose-sidecar"
COLLECT = Path(__file__).parent / "fixtures" / "tasks" / "compose-collect"
BENCHFLOW = Path(sys.executable).parent / "benchflow"
TOKEN = "tok-$HOME-${PATH}-$$-4711"
KV = ('kv() { exec 3<>/dev/tcp/secret-store/8000; printf "%s\\n" "$*" >&3; '
      'IFS= read -r r <&3; exec 3<&-; printf "%s" "$r"; }; ')


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def leftovers(label: str) -> tuple[list[str], list[str]]:
    client = docker.from_env()
    containers = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    networks = [n.name for n in client.networks.list(filters={"label": label})]
    return containers, networks


async def rollout(jobs: Path, job: str, *, harden: bool, agent: str = "oracle",
                  script: str | None = None, task: Path = TASK) -> tuple[RolloutResult, Rollout]:
    drivers = {agent: CommandAgent(agent, script)} if script else {}
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent)], harden=harden,
                           jobs_dir=jobs, job_name=job, dataset_name="on" if harden else "off")
    run = Rollout(config, drivers=drivers)
    return await run.run(), run


@pytest.mark.parametrize("harden", [False, True])
async def test_the_oracle_scores_one_with_a_sidecar_the_verifier_queries(harden, tmp_path,
                                                                        job_label):
    result, run = await rollout(tmp_path, job_label, harden=harden)
    assert (result.reward, result.error) == (1.0, None), (result.error, run.paths.root)
    out = (run.paths.logs_dir / "verifier" / "stdout.txt").read_text()
    assert "service: secret=bf-sidecar-secret-4711 done=yes" in out
    assert leftovers(f"{LABEL_ROLLOUT}={run.rollout_name}") == ([], [])


async def test_the_verifier_scores_what_the_service_holds(tmp_path, job_label):
    """The right file without telling the service: 0, because test.sh asks the service."""
    script = "echo bf-sidecar-secret-4711 > /app/secret.txt\n"
    result, run = await rollout(tmp_path, job_label, harden=True, agent="file-only",
                                script=script)
    assert (result.reward, result.error) == (0.0, None), (result.error, run.paths.root)
    assert "done=;" in (run.paths.logs_dir / "verifier" / "stdout.txt").read_text()


async def test_a_none_policy_keeps_the_services_on_an_internal_network(tmp_path, job_label):
    spec = SandboxSpec(name="compose-sidecar", environment_dir=TASK / "environment",
                       compose_file=TASK / "environment" / "docker-compose.yaml",
                       workdir="/app", storage_mb=None, memory_mb=512, network_policy="none",
                       isolate_services=True, labels={LABEL_JOB: job_label},
                       build_log_path=tmp_path / "build.log", env={"BF_TOKEN": TOKEN})
    sandbox = ComposeSandbox(spec)
    await sandbox.start()
    try:
        # main gets the value as given (no interpolation of it); the files never hold it
        got = await sandbox.exec(["printenv", "BF_TOKEN"], timeout=60)
        assert got.stdout.decode() == TOKEN + "\n", got.text()
        assert sandbox._dir is not None
        files = list(Path(sandbox._dir.name).iterdir())
        assert files and not [f for f in files if "4711" in f.read_text()]
        client = docker.from_env()
        network = client.networks.get(f"{sandbox.project}_default")
        assert network.attrs["Internal"] is True
        assert network.attrs["Labels"][LABEL_GROUP] == sandbox.project
        main = client.containers.get(sandbox.container_id)
        assert list(main.attrs["NetworkSettings"]["Networks"]) == [network.name]
        got = await sandbox.exec(["bash", "-c", KV + "kv GET secret"], timeout=60)
        assert got.stdout.decode() == "bf-sidecar-secret-4711", got.text()
    finally:
        await sandbox.stop(delete=True)
    label = f"com.docker.compose.project={sandbox.project}"
    assert leftovers(label) == ([], [])


async def test_sandbox_cleanup_removes_a_killed_runs_services_and_network(tmp_path):
    task = tmp_path / "compose-sidecar"
    shutil.copytree(TASK, task)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\nsleep 600\n")
    job = f"pytest-compose-kill-{uuid.uuid4().hex[:8]}"
    label = f"{LABEL_JOB}={job}"
    # its temporary folder under tmp_path: the kill leaves the compose files there
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([str(BENCHFLOW), "run", str(task), "-a", "oracle", "--jobs-dir",
                             str(tmp_path / "jobs"), "--job-name", job],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    try:
        # until the agent phase opened its trajectory: compose is done, the oracle sleeps
        with anyio.fail_after(600):
            while not list((tmp_path / "jobs").glob(f"{job}/**/acp_trajectory.jsonl")):
                assert proc.poll() is None, "benchflow ended before its agent phase"
                await anyio.sleep(0.5)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    containers, networks = leftovers(label)
    assert len(containers) == 2 and len(networks) == 1  # the kill left them behind
    assert list((tmp_path / "tmp").glob("bf-compose-*/overlay.json"))  # and its files
    done = subprocess.run([str(BENCHFLOW), "sandbox", "cleanup", "--job", job, "--jobs-dir",
                           str(tmp_path / "jobs")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert leftovers(label) == ([], [])
    assert not list((tmp_path / "tmp").iterdir())  # the files went with them


@pytest.mark.parametrize("harden", [False, True])
async def test_the_oracle_scores_one_from_evidence_taken_out_of_a_sidecar(harden, tmp_path,
                                                                          job_label):
    result, run = await rollout(tmp_path, job_label, harden=harden, task=COLLECT)
    assert (result.reward, result.error) == (1.0, None), (result.error, run.paths.root)
    # docker here has no storage quota: the disk watchdog's note is the one warning
    assert [w for w in result.warnings if "disk watchdog" not in w] == []
    out = (run.paths.logs_dir / "verifier" / "stdout.txt").read_text()
    assert "ledger: 3 entries, 3 distinct, orders=3; receipt: 3 orders" in out
    kept = run.paths.root / "artifacts"  # as Harbor keeps them: the source path under it
    assert (kept / "var/log/ledger/entries.log").read_text().split() == ["apple", "banana",
                                                                          "cherry"]
    assert (kept / "tmp/stats.txt").read_text().strip() == "orders=3"
    assert (kept / "app/receipt.txt").read_text().strip() == "3 orders"
    assert (kept / "app/receipt.sha256").read_text().endswith("  receipt.txt\n")  # main's hook
    log = run.paths.log.read_text()
    assert log.index("collect hook in main") < log.index("main stopped before taking "
                                                         "evidence from ledger")
    assert leftovers(f"{LABEL_ROLLOUT}={run.rollout_name}") == ([], [])


async def test_files_faked_in_main_never_stand_in_for_the_sidecars(tmp_path, job_label):
    """The ledger's files, written in the agent's container instead: the verifier gets the
    service's (none: nothing was added there), so 0."""
    script = ("mkdir -p /var/log/ledger && printf 'a\\nb\\nc\\n' > /var/log/ledger/entries.log"
              " && echo orders=3 > /tmp/stats.txt && echo '3 orders' > /app/receipt.txt\n")
    result, run = await rollout(tmp_path, job_label, harden=True, agent="fake-ledger",
                                script=script, task=COLLECT)
    assert (result.reward, result.error) == (0.0, None), (result.error, run.paths.root)
    out = (run.paths.logs_dir / "verifier" / "stdout.txt").read_text()
    assert "FAIL: entries.log was not collected from the ledger service" in out
    assert ("artifact /var/log/ledger/entries.log did not exist in service 'ledger'; the "
            "separate verifier ran without it") in result.warnings
    kept = run.paths.root / "artifacts"
    assert (kept / "tmp/stats.txt").read_text().strip() == "orders=0"  # the hook's snapshot


async def test_service_operations_reach_the_sidecar_also_after_main_stopped(tmp_path,
                                                                            job_label):
    environment = COLLECT / "environment"
    spec = SandboxSpec(name="compose-collect", environment_dir=environment,
                       compose_file=environment / "docker-compose.yaml", workdir="/app",
                       storage_mb=None, memory_mb=512, labels={LABEL_JOB: job_label},
                       build_log_path=tmp_path / "build.log")
    sandbox = ComposeSandbox(spec)
    await sandbox.start()
    try:
        add = await sandbox.exec(["bash", "-c", "exec 3<>/dev/tcp/ledger/8000; "
                                  "echo 'ADD pear' >&3; read -r r <&3; echo $r"], timeout=60)
        assert add.stdout.decode().strip() == "OK", add.text()
        stats = await sandbox.service_exec("ledger", "/srv/stats > /tmp/s.txt; cat /tmp/s.txt",
                                           timeout=30)
        assert (stats.ok, stats.stdout.decode().strip()) == (True, "orders=1"), stats.text()
        who = await sandbox.service_exec("ledger", "id -u", user="nobody", timeout=30)
        assert who.stdout.decode().strip() == "65534"
        failed = await sandbox.service_exec("ledger", "exit 3", timeout=30)
        assert (failed.exit_code, failed.timed_out) == (3, False)
        slow = await sandbox.service_exec("ledger", "sleep 60", timeout=1)
        assert slow.timed_out and not slow.ok
        assert await sandbox.service_download("ledger", "/nowhere", tmp_path / "x") is False
        assert sandbox.main_can_write("ledger", "/var/log/ledger/entries.log") is None

        await sandbox.stop_main()
        client = docker.from_env()
        assert client.containers.get(sandbox.container_id).status == "exited"
        assert (await sandbox.service_exec("ledger", "/srv/stats", timeout=30)).ok
        got = tmp_path / "ledger"
        assert await sandbox.service_download("ledger", "/var/log/ledger", got) is True
        assert (got / "entries.log").read_text() == "pear\n"
        assert await sandbox.service_download("ledger", "/tmp/s.txt", tmp_path / "s.txt")
        assert (tmp_path / "s.txt").read_text().strip() == "orders=1"
    finally:
        await sandbox.stop(delete=True)
    assert leftovers(f"com.docker.compose.project={sandbox.project}") == ([], [])
