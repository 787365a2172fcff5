"""The manifest driver on a host-local sandbox: install errors, prompts, credentials.

The agent user is given (never created: a host-local sandbox would create it on the host).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from benchflow.agents.acp_driver import AcpAgentDriver, AgentUser
from benchflow.agents.base import AgentContext
from benchflow.agents.manifest import load_manifest
from benchflow.config import Role
from benchflow.errors import AgentInstallError, AgentInstallTimeout, ConfigError
from benchflow.paths import RolloutPaths
from benchflow.steps import Step
from benchflow.task import load_task
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter, load
from tests.fakes.local_sandbox import LocalSandbox

from .conftest import AGENTS, REPO, write_agent

pytestmark = pytest.mark.anyio

LOCAL_SCRIPTED = """
name = "local-scripted"
version = "1"
[install]
script = "install.sh.j2"
timeout_sec = @TIMEOUT@
[launch]
argv = ["@PYTHON@", "@AGENT@"]
handshake_timeout_sec = 30
[launch.env]
SCRIPTED_AGENT_SCRIPT = "{{ workdir }}/script.json"
[model]
select = "acp"
[[credentials]]
env = ["LOCAL_KEY"]
"""


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[AgentContext]:
    sandbox = LocalSandbox(tmp_path / "work")
    await sandbox.start()
    paths = RolloutPaths(tmp_path / "rollout")
    writer = TrajectoryWriter(paths.trajectory, TrajectoryHeader(job_name="t", rollout_name="r"))
    context = AgentContext(
        sandbox=sandbox, task=load_task(REPO / "tasks" / "hello-world"), paths=paths,
        workdir=str(sandbox.root), agent_user=None, instruction_path="/tmp/i.md",
        trajectory=writer,
        created_user=AgentUser(name="root", uid=0, home=str(tmp_path / "home")))
    try:
        yield context
    finally:
        writer.close()
        await sandbox.stop()


def driver(tmp_path: Path, script: str, timeout: float = 30) -> AcpAgentDriver:
    toml = (LOCAL_SCRIPTED.replace("@TIMEOUT@", repr(timeout)).replace("@PYTHON@", sys.executable)
            .replace("@AGENT@", str(AGENTS / "scripted" / "agent.py")))
    folder = write_agent(tmp_path / "agent", toml,
                         {"install.sh.j2": script})
    return AcpAgentDriver(load_manifest(folder))


async def test_install_failure_keeps_output_and_names_the_agent(ctx, tmp_path: Path) -> None:
    d = driver(tmp_path, "#!/bin/sh\necho building {{ name | q }}\necho broken >&2\nexit 7\n")
    with pytest.raises(AgentInstallError) as info:
        await d.install(ctx)
    assert "local-scripted" in str(info.value) and "code 7" in str(info.value)
    assert "building local-scripted" in (ctx.paths.setup_dir / "stdout.txt").read_text()
    assert "broken" in (ctx.paths.setup_dir / "stderr.txt").read_text()


async def test_install_timeout(ctx, tmp_path: Path) -> None:
    d = driver(tmp_path, "#!/bin/sh\nsleep 5\n", timeout=0.5)
    with pytest.raises(AgentInstallTimeout) as info:
        await d.install(ctx)
    assert info.value.error_type == "agent_install_timeout" and info.value.timeout_sec == 0.5


async def test_task_install_timeout_wins_when_the_task_sets_one(ctx, tmp_path: Path) -> None:
    d = driver(tmp_path, "#!/bin/sh\n", timeout=1000)
    assert d.install_timeout_sec(ctx) == 1000
    ctx.timeout_multiplier = 2.0
    assert d.install_timeout_sec(ctx) == 2000
    agent_settings = type(ctx.task.config.agent).model_validate({"install_timeout_sec": 42})
    ctx.task = dataclasses.replace(
        ctx.task, config=ctx.task.config.model_copy(update={"agent": agent_settings}))
    assert d.install_timeout_sec(ctx) == 84


async def test_connect_and_prompt_map_the_outcome(ctx, tmp_path: Path) -> None:
    (Path(ctx.workdir) / "script.json").write_text(
        '{"roles": {"coder": {"turns": [{"actions": ['
        '{"type": "usage", "input_tokens": 5, "output_tokens": 2, "cost": 0.5},'
        '{"type": "status"}]}]}}}')
    d = driver(tmp_path, "#!/bin/sh\necho ok\n")
    await d.install(ctx)
    role = Role(name="coder", agent="local-scripted", model="m-1",
                env={"LOCAL_KEY": "secret-value", "SCRIPTED_AGENT_STATE_DIR": str(tmp_path / "s")})
    async with d.connect(ctx, role, "main") as conn:
        outcome = await conn.prompt(Step(scene="main", scene_index=0, turn_index=0, role=role,
                                         prompt="hello"))
    assert (outcome.stop_reason, outcome.input_tokens, outcome.output_tokens, outcome.cost) == (
        "end_turn", 5, 2, 0.5)
    assert '"role": "coder"' in outcome.agent_text and '"model": "m-1"' in outcome.agent_text
    assert '"cwd": "' + ctx.workdir in outcome.agent_text
    for argv in ctx.sandbox.calls:
        assert "secret-value" not in " ".join(argv)
    assert "secret-value" not in ctx.paths.trajectory.read_text()
    types = [e.type for e in load(ctx.paths.trajectory)]
    assert types.index("user_message") < types.index("agent_message")


async def test_missing_credentials_fail_before_the_agent_starts(ctx, tmp_path: Path) -> None:
    d = driver(tmp_path, "#!/bin/sh\n")
    role = Role(name="coder", agent="local-scripted")
    with pytest.raises(ConfigError, match="LOCAL_KEY"):
        async with d.connect(ctx, role, "main"):
            pass
    assert ctx.sandbox.calls == []
