"""MCP servers over streamable HTTP at session/new, with the real scripted agent on the host:
it calls a tool of benchflow's tool server through the `mcp` SDK; a server of a transport
it does not accept is left out, or fails the session when it is required."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchflow.errors import ConfigError
from benchflow.mcp import McpServer
from benchflow.tools.server import ToolServer
from tests.unit.acp.conftest import Harness

pytestmark = pytest.mark.anyio

FEED = McpServer(name="feed", transport="sse", url="http://127.0.0.1:9/sse")


async def test_the_agent_calls_a_tool_server_session_over_http(harness: Harness,
                                                                tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "keeper.md").write_text("The lighthouse keeper's cat is called Biscuit.")
    (corpus / "bakery.md").write_text("The baker sells rye bread.")
    (corpus / "harbour.md").write_text("Fishing boats leave the harbour at dawn.")
    harness.script({"actions": [{"type": "mcp", "server": "benchflow", "tool": "web_search",
                                 "arguments": {"query": "keeper cat"}, "echo": True}]})
    with ToolServer(open_sessions=False) as server:
        sid = await anyio.to_thread.run_sync(server.open_session, {
            "tools": ["web:search"], "kwargs": {"corpus": str(corpus)}})
        tools = McpServer(name="benchflow", transport="streamable-http", required=True,
                          url=f"{server.url}/mcp?session={sid}")
        async with harness.session(mcp_servers=[tools, FEED]) as session:
            assert session.mcp_servers == ["benchflow"]  # sse: not accepted, not required
            await session.prompt("search")
    (done,) = [e for e in harness.of_type("tool_call_update", merged=False)
               if e.update.get("status") == "completed"]
    assert done.update["rawOutput"]["tools"] == ["web_search"]
    assert done.update["rawOutput"]["result"].startswith("1. keeper.md (score")
    assert "Biscuit" in harness.of_type("agent_message")[-1].text


async def test_a_required_server_the_agent_does_not_accept_fails_the_session(
        harness: Harness) -> None:
    harness.script({"actions": [{"type": "message", "text": "never"}]})
    required = FEED.model_copy(update={"required": True})
    with pytest.raises(ConfigError, match="does not accept MCP servers over sse, so it "
                                          "cannot get the required MCP server 'feed'"):
        async with harness.session(mcp_servers=[required]):
            pass
