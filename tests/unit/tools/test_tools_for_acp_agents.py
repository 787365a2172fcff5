"""The tool server's tools for ACP agents: the settings (`AcpTools`), the per-rollout
server that serves only the session its owner opened, the network policy they imply, and
how job files, the CLI and the QA API ask for them. The whole path through Docker is in
tests/integration/test_acp_tools.py."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx
import pytest
import yaml

from benchflow.agents.model_agent import ModelAgent
from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.job.config import parse_job_config
from benchflow.job.plan import agent_acp_tools
from benchflow.mcp import McpServer
from benchflow.qa.api import ToolServerScope, _acp_tools, _check_extras
from benchflow.qa.config import parse_config
from benchflow.rollout.acp_tools import open_acp_tools, server_defaults
from benchflow.rollout.model_endpoint import resolve_policy
from benchflow.tools.acp import AcpTools, acp_tools
from benchflow.tools.server import ToolServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def closed_server() -> Iterator[ToolServer]:
    with ToolServer(defaults={"web": {"backend": "bm25"}}, open_sessions=False) as running:
        yield running


# -- settings ------------------------------------------------------------------------------


def test_settings_are_the_config_file_under_the_init_configs(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"resources": {
        "web": {"corpus": "/a", "allow_internet": False}, "doc": {"seed_path": "/docs"}}}))
    tools = acp_tools(["web:search", "doc:read"], config_path=path,
                      resource_init_configs={"web": {"content": {"corpus": "/b"}}},
                      timeout_sec=30)
    assert tools == AcpTools(tools=["web:search", "doc:read"], timeout_sec=30,
                             resource_init_configs={
                                 "web": {"corpus": "/b", "allow_internet": False},
                                 "doc": {"seed_path": "/docs"}})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tools": ["web:serch"]}, "unknown tool 'web:serch' (did you mean 'web:search'?)"),
    ({"tools": ["web:search"], "resource_types": ["gpu"]}, "unknown resource type 'gpu'"),
    ({"tools": ["web:search"], "config_path": "missing.yaml"}, "missing.yaml"),
])
def test_bad_settings_are_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        acp_tools(**kwargs)


def test_the_defaults_follow_the_network_policy() -> None:
    assert server_defaults("model-only", "j")["web"] == {"allow_internet": False}
    assert "web" not in server_defaults("public", "j")
    assert server_defaults("public", "j")["code"] == {"labels": {"benchflow.job": "j"}}


def test_a_tool_server_implies_a_reachable_host() -> None:
    assert resolve_policy(None, False, None, tool_server=True) == "model-only"
    assert resolve_policy(None, False, None) == "none"
    assert resolve_policy(None, True, None, tool_server=True) == "public"
    with pytest.raises(ConfigError, match="no way to reach the tool server"):
        resolve_policy("none", True, None, tool_server=True)
    with pytest.raises(ConfigError, match="no way to reach the model endpoint"):
        resolve_policy("none", True, ModelEndpoint(base_url="http://x"), tool_server=True)


# -- the per-rollout server ----------------------------------------------------------------


async def test_a_closed_server_serves_only_the_sessions_opened_in_process(
        closed_server: ToolServer, corpus: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    session_id = await anyio.to_thread.run_sync(closed_server.open_session, {
        "tools": ["web:search"], "kwargs": {"corpus": str(corpus)}})
    async with httpx.AsyncClient(base_url=closed_server.url, trust_env=False) as http:
        opened = await http.post("/sessions", json={"tools": ["code:run"]})
        closed = await http.delete(f"/sessions/{session_id}")
    assert opened.status_code == 403 and closed.status_code == 403
    url = f"{closed_server.url}/mcp?session={session_id}"
    async with streamable_http_client(url) as (read, write, _), \
            ClientSession(read, write) as mcp:
        await mcp.initialize()
        listed = await mcp.list_tools()
        found = await mcp.call_tool("web_search", {"query": "tallest mountain"})
        other = await mcp.call_tool("code_run", {"code": "print(1)"})
    assert [t.name for t in listed.tools] == ["web_search"]
    assert found.content[0].text.startswith("1. mountains.html")  # the item's corpus
    assert other.isError and "no tool 'code_run' in this session" in other.content[0].text
    async with streamable_http_client(f"{closed_server.url}/mcp") as (read, write, _), \
            ClientSession(read, write) as mcp:
        await mcp.initialize()
        with pytest.raises(Exception, match="given sessions only"):
            await mcp.list_tools()


async def test_tool_servers_side_by_side_serve_mcp_without_errors(
        corpus: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A job runs rollouts in parallel, each with its own server (thread, event loop). The
    # MCP GET stream is refused (405, as MCP allows: the stateless server sends nothing
    # unasked): sse-starlette 2's shutdown event, bound to the first loop that waited on
    # it, failed the streams of every other server ("bound to a different event loop").
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    caplog.set_level(logging.WARNING)
    with ToolServer(open_sessions=False) as first, ToolServer(open_sessions=False) as second:
        for server in (first, second, first):
            session_id = await anyio.to_thread.run_sync(server.open_session, {
                "tools": ["web:search"], "kwargs": {"corpus": str(corpus)}})
            url = f"{server.url}/mcp/?session={session_id}"
            async with httpx.AsyncClient(trust_env=False) as http:
                stream = await http.get(url, headers={"Accept": "text/event-stream"})
            assert stream.status_code == 405 and stream.headers["allow"] == "POST", stream
            async with streamable_http_client(url) as (read, write, _), \
                    ClientSession(read, write) as mcp:
                await mcp.initialize()
                found = await mcp.call_tool("web_search", {"query": "tallest mountain"})
            assert found.content[0].text.startswith("1. mountains.html")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


async def test_open_session_refuses_an_unknown_tool(closed_server: ToolServer) -> None:
    with pytest.raises(ConfigError, match="unknown tool 'web:find'"):
        await anyio.to_thread.run_sync(closed_server.open_session, {"tools": ["web:find"]})


async def test_the_tools_need_an_acp_agent() -> None:
    rollout = SimpleNamespace(config=SimpleNamespace(acp_tools=AcpTools(tools=["web:search"])),
                              ctx=SimpleNamespace(tool_server=None), network=None,
                              drivers={"model": ModelAgent()})
    with pytest.raises(ConfigError, match="this rollout runs none"):
        await open_acp_tools(rollout)  # type: ignore[arg-type]


# -- how a run asks for them ---------------------------------------------------------------


def job(tmp_path: Path, agent: dict, **extra: object):
    return parse_job_config({"name": "j", "agents": [agent],
                             "datasets": [{"path": str(tmp_path)}], **extra}, "job.yaml")


def test_a_job_gives_an_acp_agent_tools_with_the_tool_config(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"resources": {"web": {"corpus": "/corpus"}}}))
    config = job(tmp_path, {"name": "claude", "tools": ["web:search"]}, tool_config=str(path))
    assert agent_acp_tools(config.agents[0], config) == AcpTools(
        tools=["web:search"], resource_init_configs={"web": {"corpus": "/corpus"}})
    model = job(tmp_path, {"name": "model", "tools": ["web:search"]})
    assert agent_acp_tools(model.agents[0], model) is None  # the model agent calls it itself
    orphan = job(tmp_path, {"name": "model"}, tool_config=str(path))
    with pytest.raises(ConfigError, match="no ACP agent here has any"):
        agent_acp_tools(orphan.agents[0], orphan)


@pytest.mark.parametrize(("agent", "message"), [
    ({"name": "claude", "tools": ["shell"]}, "an ACP agent has its own shell and files"),
    ({"name": "claude", "tools": ["web:serch"]}, "did you mean 'web:search'"),
    ({"name": "claude", "max_turns": 3}, "max_turns is a setting of the built-in `model`"),
])
def test_bad_agent_tools_name_the_agent_and_the_fix(tmp_path: Path, agent: dict,
                                                     message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        job(tmp_path, agent)
    assert "agents[0]" in str(info.value)


def test_the_command_line_tool_options_reach_the_job(tmp_path: Path) -> None:
    from benchflow.cli.run import run_job_data

    task = Path(__file__).parents[3] / "tasks" / "hello-world"
    data = run_job_data(task, agent="claude", model=None, attempts=1, concurrency=1,
                        jobs_dir=tmp_path / "jobs", job_name="j", env="docker",
                        force_build=False, preserve_env="never", ca_cert=None,
                        task_filter=None, scenes_file=None, network=None,
                        timeout_multiplier=1.0, max_retries=0, tools=["web:search"],
                        tool_config=tmp_path / "tools.yaml")
    assert data["agents"] == [{"name": "claude", "tools": ["web:search"]}]
    assert data["tool_config"] == tmp_path / "tools.yaml"


def test_the_qa_api_gives_an_acp_agent_the_server_tools(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(yaml.safe_dump({"resources": {"doc": {"roots": ["/"]}}}))
    config = parse_config({"agent": "claude", "available_tools": ["doc:read"],
                           "sandbox_config_path": "tools.yaml", "sandbox_timeout": 50,
                           "resource_init_configs": {"doc": {"seed_path": "/d"}}})
    assert _acp_tools(config, tmp_path) == AcpTools(
        tools=["doc:read"], timeout_sec=50,
        resource_init_configs={"doc": {"roots": ["/"], "seed_path": "/d"}})
    assert _acp_tools(config.model_copy(update={"agent": "model"}), tmp_path) is None
    with pytest.raises(ConfigError, match="shell are the model agent's sandbox tools"):
        _check_extras(parse_config({"agent": "claude", "available_tools": ["shell"]}))


async def test_the_qa_api_checks_no_external_server_for_an_acp_agent(tmp_path: Path) -> None:
    """Each of an ACP agent's rollouts starts its own server: nothing listens on the
    configured URL, and nothing needs to."""
    config = parse_config({"agent": "claude", "available_tools": ["web:search"],
                           "sandbox_server_url": "http://127.0.0.1:9"})
    async with ToolServerScope(config, tmp_path):
        pass
    from benchflow.errors import ToolServerError

    with pytest.raises(ToolServerError, match="127.0.0.1:9 is unreachable"):
        async with ToolServerScope(config.model_copy(update={"agent": "model"}), tmp_path):
            pass


def test_a_required_mcp_server_is_marked_and_others_are_not() -> None:
    assert not McpServer(name="m", command="x").required
    assert McpServer(name="m", transport="http", url="http://h/mcp", required=True).required
