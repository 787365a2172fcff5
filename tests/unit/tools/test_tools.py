"""The tool server over HTTP (in a thread on 127.0.0.1): search, browse, read, errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from benchflow.errors import ConfigError, ToolServerError
from benchflow.tools import ToolClient
from benchflow.tools.server import ToolServer

from .conftest import PAGE_FACT, PDF_FACT

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[ToolServer]:
    with ToolServer() as running:
        yield running


async def test_search_over_a_local_corpus_ranks_the_right_document_first(server, corpus):
    async with ToolClient(server.url) as client:
        session = await client.open(["web:search"],
                                    init_configs={"web": {"content": {"corpus": str(corpus)}}})
        result = await session.call("web:search", {"query": "tallest mountain on earth"})
        await session.close()
    assert not result.is_error
    lines = result.text.splitlines()
    assert lines[0].startswith("1. mountains.html"), result.text
    assert "Everest" in lines[1]


async def test_doc_read_by_page_and_section_with_the_items_seed_path(server, documents):
    async with ToolClient(server.url) as client:
        session = await client.open(["doc:read"],
                                    kwargs={"seed_path": str(documents / "project_plan.pdf")})
        page2 = await session.call("doc:read", {"page": 2})
        page9 = await session.call("doc:read", {"page": 9})
        other = await client.open(["doc:read"], init_configs={"doc": {"seed_path": str(documents)}})
        budget = await other.call("doc_read", {"path": "notes.md", "section": "budget"})
        escape = await other.call("doc:read", {"path": "../../../etc/hostname"})
    assert PDF_FACT in page2.text and "page one" not in page2.text
    assert page9.is_error and "1..2" in page9.text
    assert "42k" in budget.text and "Nothing here" not in budget.text
    assert escape.is_error and "under the seed path" in escape.text


async def test_browse_reads_the_article_and_honours_the_network_policy(server, web_site):
    async with ToolClient(server.url) as client:
        open_web = await client.open(["web:browse"])
        page = await open_web.call("web:browse", {"url": f"{web_site}/keeper.html"})
        closed = await client.open(["web:browse"], init_configs={"web": {
            "allow_internet": False, "allowed_hosts": ["example.org"]}})
        refused = await closed.call("web:browse", {"url": f"{web_site}/keeper.html"})
        metadata = await open_web.call("web:browse", {"url": "http://169.254.169.254/latest"})
    assert PAGE_FACT in page.text
    assert refused.is_error and "127.0.0.1 is not among them" in refused.text
    assert metadata.is_error and "link-local" in metadata.text


async def test_unknown_tools_and_unreachable_servers_are_typed_errors(server):
    async with ToolClient(server.url) as client:
        with pytest.raises(ConfigError, match="known tools: web:search, web:browse, doc:read"):
            await client.open(["web:serch"])
        reply = httpx.post(f"{server.url}/sessions", json={"tools": ["vm:dance"]})
        assert reply.status_code == 400 and "vm:screenshot" in reply.json()["error"]
    with anyio.fail_after(60):
        async with ToolClient("http://127.0.0.1:9") as client:
            with pytest.raises(ToolServerError, match="unreachable.*benchflow tools serve"):
                await client.open(["web:search"])


async def test_the_same_tools_over_mcp(server, documents):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with ToolClient(server.url) as client:
        session = await client.open(["doc:read"], kwargs={"seed_path": str(documents)})
    async with streamable_http_client(session.mcp_url) as (read, write, _), \
            ClientSession(read, write) as mcp:
        await mcp.initialize()
        listed = await mcp.list_tools()
        assert [t.name for t in listed.tools] == ["doc_read"]
        result = await mcp.call_tool("doc_read", {"path": "project_plan.pdf", "page": 2})
    assert not result.isError and PDF_FACT in result.content[0].text


def test_python_dash_m_serves_on_the_given_port(tmp_path: Path):
    import socket

    from benchflow.tools import ToolServerProcess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = ToolServerProcess(f"http://127.0.0.1:{port}")
    url = process.start()
    try:
        assert httpx.get(f"{url}/health", trust_env=False).json()["ok"] is True
    finally:
        process.stop()
