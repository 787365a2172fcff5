"""Agent installs as layers (one docker volume per agent and version), composed per pairing.

Two registered agents: the scripted agent and a twin of it registered through
`BENCHFLOW_AGENTS_PATH` under another name (its description holds a token of this test
session, so its layer is new here and removed at the end). Each is installed alone, then
the pairing of both runs a coder/reviewer scene without installing anything, and neither
layer can be written from inside the sandbox, not even by root.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import docker.errors
import pytest

from benchflow import RolloutConfig
from benchflow.agents import layers
from benchflow.config import Role, Scene, Turn
from benchflow.rollout import Rollout
from benchflow.sandbox.docker import volumes as docker_volumes
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.docker import LABEL_JOB, DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.trajectory import load

from .conftest import REPO, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

TASK = TASKS / "fix-python-bug"
TWIN = "scripted-twin"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second registered agent (the scripted agent's files under another name), on
    BENCHFLOW_AGENTS_PATH; its layers are removed at the end."""
    folder = tmp_path_factory.mktemp("agents") / TWIN
    shutil.copytree(REPO / "agents" / "scripted", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    toml = (folder / "agent.toml").read_text()
    toml = toml.replace('name = "scripted"', f'name = "{TWIN}"')
    toml = toml.replace('aliases = ["scripted-agent"]', "aliases = []")
    toml = toml.replace("description = \"", f"description = \"(session {uuid.uuid4().hex}) ")
    (folder / "agent.toml").write_text(toml)
    client = docker.from_env()
    prefix = f"{layers.LAYER_PREFIX}{TWIN}-"
    before = {v.name for v in client.volumes.list(filters={"name": prefix})}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCHFLOW_AGENTS_PATH", str(folder.parent))
        yield TWIN
    for volume in client.volumes.list(filters={"name": prefix}):
        if volume.name not in before:
            volume.remove(force=True)


def script(folder: Path, text: str, role: str, extra: list[dict] | None = None) -> str:
    path = folder / f"{role}-{uuid.uuid4().hex[:6]}.json"
    actions = [*(extra or []), {"type": "message", "text": text}]
    path.write_text(json.dumps({"roles": {role: {"turns": [{"actions": actions}]}}}))
    return str(path)


def config(tmp_path: Path, job: str, roles: list[Role], **kwargs) -> RolloutConfig:
    scene = Scene(roles=roles, turns=[Turn(role=r.name) for r in roles])
    return RolloutConfig(task_path=TASK, jobs_dir=tmp_path, job_name=job, scenes=[scene],
                         verifier_disabled=True, **kwargs)


async def test_a_new_pairing_of_cached_agents_installs_nothing(
        tmp_path: Path, job_label: str, twin: str):
    # each agent alone: the twin's layer is new (two rollouts at once fill it once)
    alone = await Rollout(config(tmp_path, job_label, [
        Role(name="agent", agent="scripted", model=script(tmp_path, "a", "agent"))],
        attempt=1)).run()
    assert alone.error is None, alone.error
    assert alone.agent_install_cache in ("hit", "saved")
    results = []

    async def run_twin(attempt: int) -> None:
        results.append(await Rollout(config(tmp_path, job_label, [
            Role(name="agent", agent=twin, model=script(tmp_path, "b", "agent"))],
            attempt=attempt)).run())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_twin, 2)
        tg.start_soon(run_twin, 3)
    assert [r.error for r in results] == [None, None]
    assert sorted(r.agent_install_cache for r in results) == ["hit", "saved"]

    # the pairing, never seen: both layers mounted, nothing installed, both roles answer
    probe = {"type": "shell", "command": "touch /opt/benchflow/agents/scripted/x 2>&1; "
                                        f"ls /opt/benchflow/agents/{twin}/agent.py"}
    pairing = await Rollout(config(tmp_path, job_label, [
        Role(name="coder", agent="scripted", model=script(tmp_path, "coded", "coder", [probe])),
        Role(name="reviewer", agent=twin, model=script(tmp_path, "reviewed", "reviewer"))],
        attempt=4, preserve_env="always")).run()
    assert pairing.error is None, pairing.error
    assert pairing.agent_install_cache == "hit"
    assert pairing.n_prompts == 2
    events = load(Path(pairing.trajectory_path or ""))
    said = {(e.role, e.text) for e in events if e.type == "agent_message"}
    assert {("coder", "coded"), ("reviewer", "reviewed")} <= said
    client = docker.from_env()
    assert not client.images.list(name=f"benchflow-agent/scripted_{twin}")  # no pairing image
    assert not client.images.list(name=f"benchflow/{TASK.name}-scratch")  # the task's own image
    container = client.containers.get(pairing.sandbox_preserved or "")
    try:
        mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
        for agent in ("scripted", twin):
            mount = mounts[f"/opt/benchflow/agents/{agent}"]
            assert mount["Type"] == "volume" and mount["RW"] is False
            assert mount["Name"].startswith(f"{layers.LAYER_PREFIX}{agent}-1.0.0-")
        # read-only for everyone, root included (the kept container was stopped)
        container.start()
        written = container.exec_run(["touch", f"/opt/benchflow/agents/{twin}/x"], user="root")
        assert written.exit_code != 0 and b"Read-only file system" in written.output
        setup = (Path(pairing.trajectory_path or "").parents[1] / "setup" / "stdout.txt")
        assert setup.read_text().count("acp and pydantic import") == 2  # the fast paths ran
    finally:
        container.remove(force=True, v=True)


# -- the volume's fill: one at a time across processes, a crashed fill taken over -------


def _spec(job: str) -> SandboxSpec:
    task = TASKS / "hello-world"
    return SandboxSpec(name="layer-lock", environment_dir=task / "environment",
                       extra_ca_certs=get_settings().extra_ca_certs, labels={LABEL_JOB: job})


def _volume_files(client: docker.DockerClient, image: str, name: str) -> list[str]:
    out = client.containers.run(image, ["ls", "-A", "/v"], volumes={name: {"bind": "/v"}},
                                remove=True)
    return out.decode().split()


async def test_fill_waits_for_a_held_lock_and_takes_over_an_expired_one(
        job_label: str, monkeypatch: pytest.MonkeyPatch):
    client = docker.from_env()
    sandbox = DockerSandbox(_spec(job_label))
    image = await sandbox.prepare_image()
    name = f"bf-test-layer-{uuid.uuid4().hex[:10]}"
    lock = f"bf-fill-{name}"
    waiting = anyio.Event()
    real_wait = docker_volumes._wait_for_filler

    async def wait_and_tell(held: str) -> None:
        waiting.set()
        await real_wait(held)

    monkeypatch.setattr(docker_volumes, "_wait_for_filler", wait_and_tell)
    filled: list[list[str]] = []

    async def fill(box: Sandbox) -> None:
        listing = await box.exec(["ls", "-A", "/v"], user="root")
        filled.append(listing.stdout.decode().split())
        assert (await box.exec(["sh", "-c", "echo ok > /v/made"], user="root")).ok

    try:
        # held by another process (expires in an hour): no fill until it is done
        client.api.create_container(image, command=["true"], name=lock, labels={
            "benchflow.job": job_label, "benchflow.lock-expires": f"{time.time() + 3600:.0f}"})
        async with anyio.create_task_group() as tg:
            outcome: list[bool] = []

            async def fill_it() -> None:
                outcome.append(await sandbox.fill_volume(name, "/v", fill))

            tg.start_soon(fill_it)
            await waiting.wait()
            client.volumes.create(name + docker_volumes.COMPLETE_SUFFIX)  # the other finished
            client.api.remove_container(lock, force=True)
        assert outcome == [False] and filled == []
        assert await sandbox.volume_ready(name)
        client.volumes.get(name + docker_volumes.COMPLETE_SUFFIX).remove()
        docker_volumes._ready.discard(name)

        # a fill killed half-way: junk in the volume, an expired lock; taken over
        client.volumes.create(name)
        client.containers.run(image, ["touch", "/v/junk"], volumes={name: {"bind": "/v"}},
                              remove=True, labels={"benchflow.job": job_label})
        client.api.create_container(image, command=["true"], name=lock, labels={
            "benchflow.job": job_label, "benchflow.lock-expires": f"{time.time() - 1:.0f}"})
        failing = DockerSandbox(_spec(job_label))

        async def broken(box: Sandbox) -> None:
            raise RuntimeError("install failed")

        with pytest.raises(RuntimeError):
            await failing.fill_volume(name, "/v", broken)
        assert not await sandbox.volume_ready(name)  # a failed fill is not complete
        assert await sandbox.fill_volume(name, "/v", fill) is True
        assert filled == [[]]  # emptied before the fill
        assert await sandbox.volume_ready(name)
        assert _volume_files(client, image, name) == ["made"]
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(lock)  # released
    finally:
        for leftover in (lock,):
            try:
                client.api.remove_container(leftover, force=True)
            except docker.errors.NotFound:
                pass
        for volume in (name, name + docker_volumes.COMPLETE_SUFFIX):
            try:
                client.volumes.get(volume).remove(force=True)
            except docker.errors.NotFound:
                pass
