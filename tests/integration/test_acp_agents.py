"""The scripted ACP agent through the manifest driver and a real DockerSandbox.

One sandbox (the fix-python-bug task image: debian with python3) is shared by the
driver-level tests; the rollout-level tests start their own. The scripted agent's
packages reach the container as wheels fetched on the host: no network inside.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from benchflow import RolloutConfig
from benchflow.acp import AgentExitedError
from benchflow.agents import python_wheels
from benchflow.agents.acp_driver import CREATE_USER_SCRIPT, AcpAgentDriver, AcpConnection
from benchflow.agents.base import AgentContext, AgentUser
from benchflow.agents.catalog import get_manifest
from benchflow.agents.image_cache import commit_agent_image, prepare_agent_image
from benchflow.config import Role, Scene, Turn
from benchflow.errors import AgentTimeout
from benchflow.paths import RolloutPaths
from benchflow.rollout import Rollout
from benchflow.sandbox.docker import LABEL_JOB, DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.steps import Step
from benchflow.task import Task, load_task
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter, iter_events, load
from tests.integration.conftest import REPO, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

TASK_DIR = TASKS / "fix-python-bug"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def sandbox_for(task: Task, job: str, name: str = "acp-agents") -> DockerSandbox:
    """A docker sandbox of `task`'s image, labelled with the test session's job."""
    return DockerSandbox(SandboxSpec(
        name=name, environment_dir=task.environment_dir, workdir=task.config.sandbox.workdir,
        extra_ca_certs=get_settings().extra_ca_certs, labels={LABEL_JOB: job}))


def context_for(sandbox: DockerSandbox, task: Task, root: Path,
                user: AgentUser | None = None,
                python_paths: dict[str, str | None] | None = None) -> AgentContext:
    """An AgentContext writing under `root`, with a fresh trajectory."""
    paths = RolloutPaths(root)
    writer = TrajectoryWriter(paths.trajectory, TrajectoryHeader(job_name="t", rollout_name="r"))
    return AgentContext(sandbox=sandbox, task=task, paths=paths, workdir=sandbox.workdir,
                        agent_user=None, instruction_path="/tmp/instruction.md",
                        trajectory=writer, created_user=user,
                        python_paths=dict(python_paths or {}))


def close_ctx(ctx: AgentContext) -> None:
    if ctx.trajectory is not None:
        ctx.trajectory.close()


def write_script(folder: Path, *turns: dict[str, Any], role: str = "coder") -> Path:
    path = folder / f"script-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps({"roles": {role: {"turns": list(turns)}}}))
    return path


def step(role: Role, prompt: str, turn: int = 0) -> Step:
    return Step(scene="main", scene_index=0, turn_index=turn, role=role, prompt=prompt)


class Rig:
    """The shared sandbox with the scripted agent installed."""

    def __init__(self, sandbox: DockerSandbox, task: Task, installed: AgentContext,
                 wheel_uploads: tuple[int, int]) -> None:
        self.sandbox, self.task = sandbox, task
        self.user, self.python_paths = installed.created_user, installed.python_paths
        self.wheel_uploads = wheel_uploads
        """Uploads of the agent's Python packages by the first and the second install."""
        self.driver = AcpAgentDriver(get_manifest("scripted"))
        self.opened: list[AgentContext] = []

    def ctx(self, root: Path) -> AgentContext:
        ctx = context_for(self.sandbox, self.task, root, self.user, self.python_paths)
        self.opened.append(ctx)
        return ctx

    def close(self) -> None:
        while self.opened:
            close_ctx(self.opened.pop())


@pytest.fixture(scope="module")
async def rig(job_label: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    task = load_task(TASK_DIR)
    sandbox = sandbox_for(task, job_label)
    await sandbox.start()
    try:
        ctx = context_for(sandbox, task, tmp_path_factory.mktemp("install"))
        driver = AcpAgentDriver(get_manifest("scripted"))
        uploads: list[str] = []
        upload_tree = python_wheels.upload_tree

        async def counted(sandbox: DockerSandbox, src: Path, dst: str) -> None:
            uploads.append(dst)
            await upload_tree(sandbox, src, dst)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(python_wheels, "upload_tree", counted)
            await driver.install(ctx)
            first = len(uploads)
            await driver.install(ctx)
        close_ctx(ctx)
        yield Rig(sandbox, task, ctx, (first, len(uploads) - first))
    finally:
        await sandbox.stop()


@pytest.fixture(autouse=True)
def _close_trajectories(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "rig" in request.fixturenames:
        request.getfixturevalue("rig").close()


async def test_install_creates_the_agent_user_and_is_idempotent(rig: Rig, tmp_path: Path):
    assert rig.wheel_uploads == (1, 0)  # the second install takes the fast path
    user = rig.user
    assert (user.name, user.home) == ("agent", "/home/agent")
    probe = await rig.sandbox.exec(
        ["sh", "-c", 'touch "$HOME/x" && stat -c %U "$PWD" && echo "$HOME"'],
        user="agent", cwd=rig.sandbox.workdir, env={"HOME": user.home})
    assert probe.ok, probe.text()
    assert probe.stdout.decode().split() == ["agent", "/home/agent"]


@pytest.mark.parametrize("hostile", ["$(touch /tmp/pwned)", "-o", "a;touch /tmp/pwned", "`id`"])
async def test_create_user_treats_hostile_names_as_data(rig: Rig, hostile: str):
    script = CREATE_USER_SCRIPT.read_text()
    result = await rig.sandbox.exec(["sh", "-c", script, "create_user", hostile, "/srv/x"],
                                    user="root")
    assert result.exit_code == 2, result.text()
    assert not (await rig.sandbox.exec(["test", "-e", "/tmp/pwned"], user="root")).ok


async def test_create_user_fixes_an_unusable_home_and_skips_system_folders(rig: Rig):
    script = CREATE_USER_SCRIPT.read_text()
    result = await rig.sandbox.exec(["sh", "-c", script, "create_user", "nobody", "/usr"],
                                    user="root")
    assert result.ok, result.text()
    info = json.loads(result.stdout.decode().splitlines()[-1])
    assert info["home"] == "/home/nobody" and info["uid"] == 65534  # passwd says /nonexistent
    assert b"not giving system folder /usr" in result.stderr
    owner = await rig.sandbox.exec(["stat", "-c", "%U", "/usr", "/home/nobody"], user="root")
    assert owner.stdout.decode().split() == ["root", "nobody"]


async def test_single_turn_runs_as_the_agent_user_in_the_workdir(rig: Rig, tmp_path: Path):
    script = write_script(tmp_path, {"actions": [
        {"type": "shell", "command": "id -un > whoami.txt && pwd >> whoami.txt"},
        {"type": "usage", "input_tokens": 7, "output_tokens": 3, "cost": 0.25},
        {"type": "message", "text": "done"}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script))
    async with rig.driver.connect(ctx, role, "main") as conn:
        outcome = await conn.prompt(step(role, "fix it"))
    assert (outcome.stop_reason, outcome.n_tool_calls) == ("end_turn", 1)
    assert outcome.agent_text == "done"
    assert (outcome.input_tokens, outcome.output_tokens, outcome.cost) == (7, 3, 0.25)
    out = await rig.sandbox.exec(["cat", f"{rig.sandbox.workdir}/whoami.txt"], user="root")
    assert out.stdout.decode().split() == ["agent", rig.sandbox.workdir]
    events = load(ctx.paths.trajectory)
    assert [e.type for e in events if e.type in ("user_message", "agent_message")] == [
        "user_message", "agent_message"]
    stderr = ctx.paths.agent_dir / "coder.stderr.txt"  # made at the first stderr bytes
    assert stderr.stat().st_size > 0 if stderr.exists() else not ctx.paths.agent_dir.exists()


async def test_multi_turn_session_remembers(rig: Rig, tmp_path: Path):
    script = write_script(tmp_path, {"actions": [{"type": "message", "text": "one"}]},
                          {"actions": [{"type": "recall"}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script))
    async with rig.driver.connect(ctx, role, "main") as conn:
        assert isinstance(conn, AcpConnection)
        first = await conn.prompt(step(role, "first prompt"))
        second = await conn.prompt(step(role, "second prompt", turn=1))
    assert first.agent_text == "one"
    assert json.loads(second.agent_text) == ["first prompt"]


async def test_crash_is_agent_execution_failed(rig: Rig, tmp_path: Path):
    script = write_script(tmp_path, {"actions": [
        {"type": "stderr", "text": "out of cheese"}, {"type": "crash", "exit_code": 3}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script))
    with pytest.raises(AgentExitedError) as info:
        async with rig.driver.connect(ctx, role, "main") as conn:
            await conn.prompt(step(role, "go"))
    assert info.value.error_type == "agent_execution_failed"
    assert info.value.exit_code == 3 and "out of cheese" in info.value.stderr_tail


async def test_hang_hits_the_idle_timeout_and_cancel_is_recorded(rig: Rig, tmp_path: Path):
    script = write_script(tmp_path, {"actions": [{"type": "message", "text": "thinking"},
                                                 {"type": "hang"}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script), idle_timeout_sec=1)
    with pytest.raises(AgentTimeout) as info:  # real time: the agent hangs for good
        async with rig.driver.connect(ctx, role, "main") as conn:
            await conn.prompt(step(role, "go"))
    assert info.value.error_type == "agent_execution_timeout"
    assert info.value.phase == "agent_idle"
    (error,) = [e for e in load(ctx.paths.trajectory) if e.type == "error"]
    assert error.cancel_sent is True and error.stop_reason == "cancelled"
    left = await rig.sandbox.exec(["sh", "-c", "grep -l 'agent[.]py' /proc/[0-9]*/cmdline || true"],
                                  user="root")
    assert b"/proc/" not in left.stdout, "the agent process outlived its session"


async def test_five_megabyte_line(rig: Rig, tmp_path: Path):
    script = write_script(tmp_path, {"actions": [{"type": "huge_message", "bytes": 5_000_000},
                                                 {"type": "message", "text": "!"}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script))
    async with rig.driver.connect(ctx, role, "main") as conn:
        outcome = await conn.prompt(step(role, "go"))
    assert len(outcome.agent_text) == 1_000_000 and outcome.agent_text.endswith("y!")
    (message,) = [e for e in load(ctx.paths.trajectory) if e.type == "agent_message"]
    assert len(message.text) == 5_000_001


async def test_ten_thousand_updates_in_order_none_lost(rig: Rig, tmp_path: Path):
    script = write_script(tmp_path, {"actions": [
        {"type": "stream", "count": 10_000, "text": "u", "numbered": True}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script))
    async with rig.driver.connect(ctx, role, "main") as conn:
        outcome = await conn.prompt(step(role, "stream"))
    expected = "".join(f"u{i}\n" for i in range(10_000))
    assert outcome.agent_text == expected
    raw = [e for e in iter_events(ctx.paths.trajectory) if e.type == "agent_message"]
    assert len(raw) == 10_000 and "".join(e.text for e in raw) == expected
    assert [e.seq for e in raw] == sorted(e.seq for e in raw)


async def test_secrets_reach_the_agent_but_no_command_line_or_kept_file(rig: Rig, tmp_path: Path):
    secret = f"sk-secret-{secrets.token_hex(8)}"
    script = write_script(tmp_path, {"actions": [
        {"type": "shell", "via": "local", "command": 'echo "len=${#MY_API_KEY}"'},
        {"type": "shell", "command": "cat /proc/[0-9]*/cmdline | tr '\\000' ' '"},
        {"type": "message", "text": "checked"}]})
    ctx = rig.ctx(tmp_path / "out")
    role = Role(name="coder", agent="scripted", model=str(script),
                env={"MY_API_KEY": secret})
    async with rig.driver.connect(ctx, role, "main") as conn:
        await conn.prompt(step(role, "go"))
        cmdlines = await rig.sandbox.exec(
            ["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\000' ' '"], user="root")
        tmp_files = await rig.sandbox.exec(["ls", "-a", "/tmp"], user="root")
    updates = [e for e in load(ctx.paths.trajectory) if e.type == "tool_call_update"]
    outputs = [json.dumps(u.model_dump(mode="json")) for u in updates]
    assert any(f"len={len(secret)}" in o for o in outputs), outputs  # the agent had the key
    assert any("agent.py" in o for o in outputs)  # the cmdline listing really ran
    assert b"agent.py" in cmdlines.stdout and secret.encode() not in cmdlines.stdout
    assert b".benchflow-env-" not in tmp_files.stdout  # the env file is gone once sourced
    for path in ctx.paths.root.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


async def test_rollout_with_the_scripted_agent(tmp_path: Path, job_label: str):
    script = write_script(tmp_path, {"actions": [{"type": "message", "text": "hi"}]},
                          role="agent")
    config = RolloutConfig(task_path=TASK_DIR, jobs_dir=tmp_path, job_name=job_label,
                           scenes=[Scene.single(agent="scripted-agent", model=str(script))],
                           verifier_disabled=True)
    result = await Rollout(config).run()
    assert result.error is None, result.error
    assert result.n_prompts == 1
    assert result.agent_install_cache in ("hit", "saved")  # docker commits the install


async def test_rollout_idle_timeout_is_agent_execution_timeout(tmp_path: Path, job_label: str):
    script = write_script(tmp_path, {"actions": [{"type": "hang"}]}, role="agent")
    scene = Scene(roles=[Role(name="agent", agent="scripted", model=str(script),
                              idle_timeout_sec=1)], turns=[Turn(role="agent")])
    config = RolloutConfig(task_path=TASK_DIR, jobs_dir=tmp_path, job_name=job_label,
                           scenes=[scene], verifier_disabled=True)
    result = await Rollout(config).run()
    assert result.error is not None and result.error.type == "agent_execution_timeout"


@pytest.fixture
def unlayered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The scripted agent without `install.layer` (as a third-party manifest may be): on
    docker it is cached with the snapshot of its set, not as a layer."""
    folder = tmp_path / "agents" / "scripted-unlayered"
    shutil.copytree(REPO / "agents" / "scripted", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    toml = (folder / "agent.toml").read_text().replace('name = "scripted"',
                                                       'name = "scripted-unlayered"')
    toml = toml.replace('aliases = ["scripted-agent"]', "aliases = []")
    (folder / "agent.toml").write_text(re.sub(r"(?m)^layer = true.*$", "", toml))
    monkeypatch.setenv("BENCHFLOW_AGENTS_PATH", str(folder.parent))
    assert not get_manifest("scripted-unlayered").install.layer
    return "scripted-unlayered"


async def test_installed_agent_image_is_cached_and_reused(tmp_path: Path, job_label: str,
                                                          unlayered: str):
    task = load_task(TASK_DIR)
    client = docker.from_env()
    earlier = await prepare_agent_image(sandbox_for(task, job_label, "acp-cache"), [unlayered])
    if earlier is not None and earlier.hit:  # left by an earlier run: start from a clean slate
        client.images.remove(earlier.tag, force=True)
    first = sandbox_for(task, job_label, "acp-cache")
    plan = await prepare_agent_image(first, [unlayered])
    assert plan is not None and not plan.hit
    assert await prepare_agent_image(sandbox_for(task, job_label), ["scripted"]) is None  # a layer
    try:
        await first.start()
        ctx_a = context_for(first, task, tmp_path / "a")
        await AcpAgentDriver(get_manifest(unlayered)).install(ctx_a)
        close_ctx(ctx_a)
        assert await commit_agent_image(first, plan)
        await first.stop()
        second = sandbox_for(task, job_label, "acp-cache")
        again = await prepare_agent_image(second, [unlayered])
        assert again is not None and again.hit and again.tag == plan.tag
        assert second.image == plan.tag
        await second.start()
        try:
            marker = await second.exec(["sh", "-c", "ls /opt/benchflow/python/*/.complete"],
                                       user="root")
            assert marker.ok  # the wheels came with the image
            ctx = context_for(second, task, tmp_path / "b")
            await AcpAgentDriver(get_manifest(unlayered)).install(ctx)
            close_ctx(ctx)
            assert b"create user" in (ctx.paths.setup_dir / "stdout.txt").read_bytes()
        finally:
            await second.stop()
        labels = client.images.get(plan.tag).labels
        assert labels.get(LABEL_JOB, "") == ""
    finally:
        await first.stop()
        client.images.remove(plan.tag, force=True)
