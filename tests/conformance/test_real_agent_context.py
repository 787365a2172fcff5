"""A real agent (claude) receives a given skill and the task's MCP server.

Claude Code runs against the scripted model server (one reply: a final message) on the
`mcp-tool` fixture task, whose image has a stdio MCP server, with a skill given as
`--skill` would. What the agent did with them is read from what it sent to the model:
its first request lists the skill (name and description) and the MCP server's tool
(`mcp__ledger__secret_code`). Not in the default run (the first run installs Claude Code
from npm):

    pytest -m slow tests/conformance/test_real_agent_context.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.rollout import Rollout
from tests.conformance import offline

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.anyio]

MCP_TASK = Path(__file__).parents[1] / "integration" / "fixtures" / "tasks" / "mcp-tool"
DESCRIPTION = "Convert a temperature between Celsius and Fahrenheit exactly."


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_claude_sees_the_skill_and_the_mcp_tool(tmp_path, job_label):
    skill = tmp_path / "skills" / "temperature-conversion"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: temperature-conversion\ndescription: {DESCRIPTION}\n---\n"
        "Multiply Celsius by 9/5 and add 32.\n")
    script = tmp_path / "reply.yaml"
    script.write_text("name: reply-only\nsteps:\n  - text: Nothing to do.\n")
    rollout = Rollout(RolloutConfig(
        task_path=MCP_TASK, scenes=[Scene.single(agent="claude")], jobs_dir=tmp_path / "jobs",
        job_name=job_label, skills=[skill], model_endpoint=ModelEndpoint(script=script)))
    result = await rollout.run()
    assert result.error is None, result.error
    bodies = [json.dumps(r.get("body")) for r in offline.requests(rollout.paths.root)]
    assert bodies, "the agent sent no request to the model"
    assert any("mcp__ledger__secret_code" in b for b in bodies), bodies[0][:2000]
    assert any("temperature-conversion" in b and DESCRIPTION in b for b in bodies), \
        bodies[0][:2000]


async def test_claude_through_acpx_runs_the_offline_script(tmp_path, job_label):
    """`acpx/claude`: the same two-step script as the direct conformance run, through ACPX."""
    rollout = Rollout(RolloutConfig(
        task_path=offline.TASK, scenes=[Scene.single(agent="acpx/claude")],
        jobs_dir=tmp_path / "jobs", job_name=job_label,
        model_endpoint=ModelEndpoint(script=offline.MODEL_SCRIPT)))
    result = await rollout.run()
    assert result.error is None, result.error
    assert result.reward == 1.0
    evts = offline.events(rollout.paths.root)
    calls = offline.tool_calls(evts)
    assert any(c.status == "completed" and c.mentions("12") for c in calls.values()), calls
    assert offline.FINAL_MESSAGE in offline.final_text(evts)
