"""Skills and MCP servers through whole rollouts, with the scripted ACP agent in Docker.

What a user checks afterwards: the skill is where the agent looks for it, readable but not
writable by the agent user; each step's trajectory events name the skills it had; skills a
scene writes serve the next scene (BYOS); a task's stdio MCP server reaches the agent at
session/new and its tool answers; a server of a transport the agent does not accept is left
out with a warning naming the agent.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from benchflow import McpServer, Role, RolloutConfig, Scene, Turn
from benchflow.rollout import Rollout
from benchflow.task import load_task
from benchflow.trajectory import AgentMessageEvent, ToolCallUpdateEvent, iter_events

from .conftest import FIXTURES, TASKS
from .test_scenes import (WRITE_42, assert_no_container, events_of, run_rollout, script, single,
                          tool_outputs)

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

ANSWER = FIXTURES / "tasks" / "scenes-answer"
MCP_TASK = FIXTURES / "tasks" / "mcp-tool"
SKILLS_HOME = "~/.scripted/skills"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def make_skill(root: Path, name: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: test\n---\n{body}\n")
    return folder


PROBE = (f"cat {SKILLS_HOME}/*/SKILL.md; ls {SKILLS_HOME}; "
         f"stat -c '%U %a' {SKILLS_HOME}/*/SKILL.md; "
         # the refused write's own message goes to stderr, which the agent may append after
         # stdout: silenced, so the output's order is the commands' order
         f"(echo x >> {SKILLS_HOME}/hello/SKILL.md) 2>/dev/null && echo WROTE || echo DENIED; "
         "id -un")


async def test_given_skill_is_placed_read_only_and_attributed(tmp_path, job_label):
    skill = make_skill(tmp_path / "skills", "hello", "say hello in French")
    play = script(tmp_path, [{"actions": [{"type": "shell", "command": PROBE}]}])
    result, paths = await run_rollout(ANSWER, single(play), tmp_path / "jobs", job_label,
                                      skills=[skill])
    assert result.error is None
    events = events_of(paths.trajectory)
    (output,) = tool_outputs(events)
    assert "say hello in French" in output
    assert "root 644" in output          # root-owned, not group/other writable
    assert "DENIED" in output and "WROTE" not in output
    assert output.strip().endswith("agent")  # it ran as the agent user
    assert {tuple(e.skills or ()) for e in events} == {("hello",)}


async def test_each_role_sees_only_its_skills(tmp_path, job_label):
    coder_skill = make_skill(tmp_path / "a", "coder-only", "for the coder")
    shared = make_skill(tmp_path / "b", "shared", "for everyone")
    play = tmp_path / "script.yaml"
    play.write_text(
        "roles:\n"
        f"  coder: {{turns: [{{actions: [{{type: shell, command: 'ls {SKILLS_HOME}'}}]}}]}}\n"
        f"  reviewer: {{turns: [{{actions: [{{type: shell, command: 'ls {SKILLS_HOME}'}}]}}]}}\n")
    scenes = [Scene(roles=[Role(name="coder", agent="scripted", model=str(play),
                                skills=[coder_skill]),
                           Role(name="reviewer", agent="scripted", model=str(play))],
                    turns=[Turn(role="coder"), Turn(role="reviewer")], skills=[shared])]
    result, paths = await run_rollout(ANSWER, scenes, tmp_path / "jobs", job_label)
    assert result.error is None
    events = events_of(paths.trajectory)
    coder = tool_outputs(events, role="coder")
    reviewer = tool_outputs(events, role="reviewer")
    assert coder[0].split() == ["coder-only", "shared"]
    assert reviewer[0].split() == ["shared"]
    assert {tuple(e.skills or ()) for e in events if e.role == "reviewer"} == {("shared",)}


async def test_byos_scene_two_uses_the_skill_scene_one_wrote(tmp_path, job_label):
    task = TASKS / "byos"
    loaded = load_task(task)
    assert loaded.scenes is not None
    scenes = loaded.scenes.to_scenes("scripted", str(task / "scripted.yaml"))
    result, paths = await run_rollout(task, scenes, tmp_path / "jobs", job_label)
    assert result.error is None and result.reward == 1.0
    events = events_of(paths.trajectory)
    assert {tuple(e.skills or ()) for e in events if e.scene == "write-skill"} == {()}
    assert {tuple(e.skills or ()) for e in events if e.scene == "solve"} == {("ledger-balances",)}
    read = [e for e in events if isinstance(e, ToolCallUpdateEvent) and e.scene == "solve"]
    assert read, "the solver ran no tool"


async def test_byos_without_the_author_scene_fails(tmp_path, job_label):
    """The solver's script needs the skill: with scene 2 alone it is not there (reward 0)."""
    task = TASKS / "byos"
    play = task / "scripted.yaml"
    scenes = [Scene(name="solve", roles=[Role(name="solver", agent="scripted", model=str(play))],
                    turns=[Turn(role="solver")])]
    result, paths = await run_rollout(task, scenes, tmp_path / "jobs", job_label)
    assert result.error is None and result.reward == 0.0
    assert {tuple(e.skills or ()) for e in events_of(paths.trajectory)} == {()}


async def test_task_mcp_server_is_listed_and_called(tmp_path, job_label, caplog):
    play = script(tmp_path, [{"actions": [
        {"type": "mcp", "server": "ledger", "tool": "secret_code", "arguments": {"seed": 6},
         "save_to": "/app/code.txt", "echo": True}]}])
    with caplog.at_level(logging.WARNING, logger="benchflow.acp.session"):
        result, paths = await run_rollout(MCP_TASK, single(play), tmp_path / "jobs", job_label)
    assert result.error is None and result.reward == 1.0
    events = events_of(paths.trajectory)
    (done,) = [e for e in events if isinstance(e, ToolCallUpdateEvent)
               and isinstance(e.update.get("rawOutput"), dict)]
    assert done.update["rawOutput"] == {"tools": ["secret_code"], "result": "code-42"}
    warned = [r.getMessage() for r in caplog.records]
    assert any("does not accept MCP servers over sse" in m and "remote" in m
               and "scripted" in m for m in warned), warned


async def test_rollout_mcp_server_reaches_the_agent(tmp_path, job_label):
    """An MCP server given by the rollout (as `--mcp-config` does), not by the task."""
    play = script(tmp_path, [{"actions": [
        {"type": "mcp", "server": "mine", "tool": "secret_code", "arguments": {"seed": 2},
         "save_to": "/app/code.txt"}]}])
    server = McpServer(name="mine", command="python3", args=["/opt/mcp/server.py"])
    result, paths = await run_rollout(MCP_TASK, single(play), tmp_path / "jobs", job_label,
                                      mcp_servers=[server])
    assert result.error is None
    assert result.reward == 0.0  # code-14 is not the task's answer, but it came from the tool
    (done,) = [e for e in events_of(paths.trajectory) if isinstance(e, ToolCallUpdateEvent)
               and isinstance(e.update.get("rawOutput"), dict)]
    assert done.update["rawOutput"]["result"] == "code-14"


async def test_mcp_server_env_templates_resolve_from_the_host(tmp_path, job_label, monkeypatch):
    """`${VAR}` in a rollout's MCP server env comes from the host (the task's own server's
    `${BF_LEDGER_FACTOR:-7}` too); the host value is masked in the rollout's log."""
    monkeypatch.setenv("BF_LEDGER_FACTOR", "11")
    monkeypatch.setenv("BF_MINE_FACTOR", "13")
    monkeypatch.setenv("BF_MINE_TOKEN", "tok-mine-9d2e1f7a")
    play = script(tmp_path, [{"actions": [
        {"type": "mcp", "server": "ledger", "tool": "secret_code", "arguments": {"seed": 2},
         "save_to": "/app/code.txt"},
        {"type": "mcp", "server": "mine", "tool": "secret_code", "arguments": {"seed": 2},
         "save_to": "/app/mine.txt"}]}])
    server = McpServer(name="mine", command="python3", args=["/opt/mcp/server.py"],
                       env={"LEDGER_FACTOR": "${BF_MINE_FACTOR}", "TOKEN": "${BF_MINE_TOKEN}"})
    result, paths = await run_rollout(MCP_TASK, single(play), tmp_path / "jobs", job_label,
                                      mcp_servers=[server])
    assert result.error is None
    outputs = sorted(e.update["rawOutput"]["result"] for e in events_of(paths.trajectory)
                     if isinstance(e, ToolCallUpdateEvent)
                     and isinstance(e.update.get("rawOutput"), dict))
    assert outputs == ["code-22", "code-26"]
    assert '"${BF_MINE_FACTOR}"' in paths.config.read_text()  # saved as written
    for path in paths.root.rglob("*"):  # the host's token is in none of our files
        if path.is_file():
            assert b"tok-mine-9d2e1f7a" not in path.read_bytes(), path


async def test_acpx_routes_the_scripted_agent_with_session_memory(tmp_path, job_label):
    """`acpx/scripted`: ACPX (npm) keeps one session across a role's turns, and the
    trajectory records the agent's updates as a direct ACP session would."""
    play = script(tmp_path, [
        {"actions": [WRITE_42, {"type": "message", "text": "wrote it"}]},
        {"actions": [{"type": "recall"}]},
    ])
    scenes = [Scene(roles=[Role(name="agent", agent="acpx/scripted", model=str(play))],
                    turns=[Turn(role="agent"), Turn(role="agent", prompt="what did I ask?")])]
    result, paths = await run_rollout(ANSWER, scenes, tmp_path / "jobs", job_label)
    assert result.error is None and result.reward == 1.0
    assert result.agent_name == "acpx-scripted" and "/acpx-scripted/" in str(paths.root)
    assert (result.n_prompts, result.n_tool_calls) == (2, 1)
    events = [e for e in iter_events(paths.trajectory)]
    sessions = {e.session_id for e in events if e.session_id}
    assert len(sessions) == 1  # one ACP session behind both prompts
    recalled = [e.text for e in events if isinstance(e, AgentMessageEvent) and e.turn == 1]
    assert recalled == ['["Write the number 42 to `/app/answer.txt`."]'], recalled
    stderr = paths.agent_dir / "agent.acpx.stderr.txt"  # made at the first stderr bytes
    assert not stderr.exists() or stderr.stat().st_size > 0


async def test_mcp_server_unset_variable_fails_before_any_container(tmp_path, job_label,
                                                                    monkeypatch):
    monkeypatch.delenv("BF_MINE_UNSET", raising=False)
    server = McpServer(name="mine", command="python3", env={"K": "${BF_MINE_UNSET}"})
    rollout = Rollout(RolloutConfig(task_path=MCP_TASK, scenes=single(script(tmp_path, [])),
                                    jobs_dir=tmp_path / "jobs", job_name=job_label,
                                    mcp_servers=[server]))
    result = await rollout.run()
    assert result.error is not None and result.error.type == "config_invalid"
    assert "mcp_servers 'mine' env K" in result.error.message
    assert "BF_MINE_UNSET is not set" in result.error.message
    assert_no_container(job_label, result.rollout_name)
