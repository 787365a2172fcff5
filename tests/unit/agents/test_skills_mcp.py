"""Skills and MCP servers: resolution, placement script, desugaring, trajectory stamping,
MCP config files and what reaches ACP's session/new."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from acp.schema import (
    AgentCapabilities,
    HttpMcpServer,
    InitializeResponse,
    McpCapabilities,
    McpServerStdio,
    SseMcpServer,
)

from benchflow.acp.handshake import acp_mcp_servers, mcp_transports
from benchflow.agents.manifest import AgentManifest
from benchflow.config import Role, Scene, Turn
from benchflow.errors import ConfigError
from benchflow.mcp import McpServer, load_mcp_config, merge_servers
from benchflow.skills import discover_skills, load_skill, resolve_layers, skills_from_paths
from benchflow.steps import desugar
from benchflow.task import load_task
from benchflow.trajectory import iter_events
from benchflow.trajectory.writer import TrajectoryWriter

SKILLS_SH = Path(__file__).parents[3] / "benchflow" / "agents" / "scripts" / "skills.sh"


def skill(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\n---\n")
    return folder


# -- skills ---------------------------------------------------------------------------------

def test_a_folder_is_one_skill_or_a_folder_of_skills(tmp_path):
    one = skill(tmp_path / "single", "alpha")
    skill(tmp_path / "many", "b-two")
    skill(tmp_path / "many", "a-one")
    (tmp_path / "many" / "not-a-skill").mkdir()
    assert [s.name for s in discover_skills(one)] == ["alpha"]
    assert [s.name for s in discover_skills(tmp_path / "many")] == ["a-one", "b-two"]
    assert discover_skills(tmp_path / "missing") == []
    assert load_skill(one).source == one.resolve()


def test_a_path_without_any_skill_is_a_config_error_naming_it(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=rf"skill {empty}: neither a skill folder"):
        skills_from_paths([empty])
    with pytest.raises(ConfigError, match="no SKILL.md in that folder"):
        load_skill(empty)


def test_unusable_skill_folder_name_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="not a usable skill name"):
        load_skill(skill(tmp_path, "-bad"))


def test_later_layers_win_by_name(tmp_path):
    task = load_skill(skill(tmp_path / "task", "shared"))
    role = load_skill(skill(tmp_path / "role", "shared"))
    extra = load_skill(skill(tmp_path / "task", "extra"))
    merged = resolve_layers([[task, extra], [role]])
    assert list(merged) == ["shared", "extra"]
    assert merged["shared"].source == role.source


def test_desugar_gives_each_step_its_roles_skills():
    scenes = [Scene(name="one", roles=[Role(name="a", agent="x"), Role(name="b", agent="x")],
                    turns=[Turn(role="a"), Turn(role="b"), Turn(role="a")])]
    steps = desugar(scenes, "do it", skills={(0, "a"): ("s1",), (0, "b"): ("s2", "s3")})
    assert [s.skills for s in steps] == [("s1",), ("s2", "s3"), ("s1",)]
    assert [s.skills for s in desugar(scenes, "do it")] == [(), (), ()]


def test_writer_stamps_skills_only_while_set(tmp_path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        writer.record("agent_message", text="before", update={})
        writer.context["skills"] = ["s1", "s2"]
        writer.record("agent_message", text="during", update={})
        writer.record("agent_message", text="own", update={}, skills=["mine"])
        writer.context.pop("skills")
        writer.record("agent_message", text="after", update={})
    assert [(e.text, e.skills) for e in iter_events(path)] == [
        ("before", None), ("during", ["s1", "s2"]), ("own", ["mine"]), ("after", None)]


@pytest.mark.parametrize(("value", "ok"), [("~/.claude/skills", ".claude/skills"),
                                           (".agents/skills/", ".agents/skills"),
                                           ("../etc", None), ("/root/skills", None), (".", None)])
def test_manifest_skills_dir_stays_inside_the_home(value, ok):
    data = {"name": "x", "version": "1", "launch": {"argv": ["x"]}, "skills_dir": value}
    if ok is None:
        with pytest.raises(ValueError, match="inside the agent user's home"):
            AgentManifest.model_validate(data)
    else:
        assert AgentManifest.model_validate(data).skills_dir == ok


def test_task_skills_keys_and_scene_paths(tmp_path):
    task = tmp_path / "t"
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM scratch\n")
    (task / "verifier" / "test.sh").write_text("#!/bin/sh\n")
    skill(task / "skills", "from-task")
    (task / "task.md").write_text(
        "---\nsandbox:\n  skills_dir: /skills\n  mcp_servers:\n"
        "    - {name: files, command: mcp-files, args: [--root, /app]}\n"
        "agents:\n  a: {skills: [extra]}\n"
        "scenes:\n  - {name: s, skills_out: /app/skills, skills: [/abs/shared],"
        " turns: [{role: a}]}\n---\nDo it.\n")
    loaded = load_task(task)
    assert loaded.skills_folder == task.resolve() / "skills"
    assert loaded.config.sandbox.skills_dir == "/skills"
    assert loaded.config.sandbox.mcp_servers == [
        McpServer(name="files", command="mcp-files", args=["--root", "/app"])]
    assert loaded.scenes is not None
    (scene,) = loaded.scenes.to_scenes("scripted", None)
    assert scene.skills_out == "/app/skills"
    assert scene.skills == [Path("/abs/shared")]
    assert scene.roles[0].skills == [task.resolve() / "extra"]


@pytest.mark.skipif(os.geteuid() != 0, reason="skills.sh chowns to root")
@pytest.mark.parametrize("hostile", ["$(touch {canary})", "'; touch {canary} #", "`touch {canary}`"])
def test_skills_script_treats_hostile_names_as_data(hostile, tmp_path):
    canary = tmp_path / "pwned"
    src, stage, target = tmp_path / "src", tmp_path / "stage", tmp_path / "home" / "skills"
    name = hostile.format(canary=canary).replace("/", "_")
    skill(src, name)
    out = subprocess.run(["sh", str(SKILLS_SH), "stage", str(src), str(stage)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [name]
    placed = subprocess.run(["sh", str(SKILLS_SH), "place", str(stage), str(target), name],
                            capture_output=True, text=True, timeout=30)
    assert placed.returncode == 0, placed.stderr
    assert (target / name / "SKILL.md").is_file()
    assert oct((target / name / "SKILL.md").stat().st_mode & 0o777) == "0o644"
    assert not canary.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="skills.sh chowns to root")
def test_placing_an_unstaged_skill_fails_and_replaces_the_old_set(tmp_path):
    stage, target = tmp_path / "stage", tmp_path / "skills"
    skill(stage, "kept")
    skill(target, "stale")
    ok = subprocess.run(["sh", str(SKILLS_SH), "place", str(stage), str(target), "kept"],
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and sorted(p.name for p in target.iterdir()) == ["kept"]
    bad = subprocess.run(["sh", str(SKILLS_SH), "place", str(stage), str(target), "nope"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 4 and "nope is not staged" in bad.stderr


# -- MCP ----------------------------------------------------------------------------------

def test_claude_style_mcp_config(tmp_path):
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "mcp-files", "args": ["/app"], "env": {"ROOT": "/app"}},
        "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Key": "k"}},
        "events": {"type": "sse", "url": "https://events.example/sse"},
    }}))
    files, docs, events = load_mcp_config(path)
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio", "mcp-files", ["/app"], {"ROOT": "/app"})
    assert (docs.transport, docs.acp_kind, docs.headers) == ("streamable-http", "http",
                                                             {"X-Key": "k"})
    assert (events.transport, events.url) == ("sse", "https://events.example/sse")


@pytest.mark.parametrize(("content", "message"), [
    ("{", "cannot read MCP config"),
    ('{"servers": {}}', "expected an object with an `mcpServers` object"),
    ('{"mcpServers": {"x": 3}}', r"mcpServers\.x: expected an object"),
    ('{"mcpServers": {"x": {"type": "stdio"}}}', r"mcpServers\.x: .*needs `command`"),
    ('{"mcpServers": {"x": {"type": "sse"}}}', r"mcpServers\.x: .*needs `url`"),
    ('{"mcpServers": {"x": {"command": "c", "colour": 1}}}', r"mcpServers\.x: colour"),
])
def test_bad_mcp_config_names_file_and_server(tmp_path, content, message):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as info:
        load_mcp_config(path)
    assert str(path) in str(info.value)


def test_merge_servers_later_wins():
    a = McpServer(name="x", command="a")
    b = McpServer(name="x", command="b")
    c = McpServer(name="y", transport="sse", url="http://h/sse")
    assert merge_servers([a, c], [b]) == [b, c]


def init_response(**caps: bool) -> InitializeResponse:
    return InitializeResponse(protocol_version=1, agent_capabilities=AgentCapabilities(
        mcp_capabilities=McpCapabilities(**caps)))


def test_transports_follow_the_agents_capabilities():
    assert mcp_transports(InitializeResponse(protocol_version=1)) == {"stdio"}
    assert mcp_transports(init_response(http=True)) == {"stdio", "http"}
    assert mcp_transports(init_response(http=True, sse=True)) == {"stdio", "http", "sse"}


def test_servers_in_acp_schema_and_dropped_by_transport():
    stdio = McpServer(name="s", command="c", args=["-v"], env={"K": "v"})
    http = McpServer(name="h", transport="http", url="http://h/mcp", headers={"A": "b"})
    sse = McpServer(name="e", transport="sse", url="http://h/sse")
    sent, dropped = acp_mcp_servers([stdio, http, sse], frozenset({"stdio", "http"}))
    assert dropped == [sse]
    first, second = sent
    assert isinstance(first, McpServerStdio)
    assert (first.command, first.args, [(e.name, e.value) for e in first.env]) == (
        "c", ["-v"], [("K", "v")])
    assert isinstance(second, HttpMcpServer) and second.type == "http"
    assert [(h.name, h.value) for h in second.headers] == [("A", "b")]
    sent, dropped = acp_mcp_servers([sse], frozenset({"stdio", "sse"}))
    assert isinstance(sent[0], SseMcpServer) and dropped == []


# -- ACPX routing -------------------------------------------------------------------------

def test_acpx_prefix_routes_a_manifest_agent():
    from benchflow.agents.acpx_driver import AcpxDriver
    from benchflow.agents.registry import get_driver

    driver = get_driver("acpx/scripted")
    assert isinstance(driver, AcpxDriver)
    assert (driver.name, driver.inner.name, driver.skills_dir) == (
        "acpx/scripted", "scripted", ".scripted/skills")


@pytest.mark.parametrize(("name", "message"), [
    ("acpx/oracle", "ACPX routes registered ACP agents"),
    ("acpx/nosuch", "nosuch"),
])
def test_acpx_of_a_non_acp_or_unknown_agent_is_a_config_error(name, message):
    from benchflow.agents.registry import check_credentials, get_driver

    with pytest.raises(ConfigError, match=message):
        get_driver(name)
    with pytest.raises(ConfigError, match=message):
        check_credentials(name)


def test_routed_agent_names_are_path_safe():
    from benchflow.config import RolloutConfig

    config = RolloutConfig(task_path=Path("t"), scenes=[
        Scene.single(agent="acpx/gemini"), Scene.single(agent="nop")])
    assert config.agent_name == "acpx-gemini+nop"
