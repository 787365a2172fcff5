"""The tool server's tools for ACP agents, through whole rollouts in Docker.

The scripted ACP agent calls `web:search` (over a local corpus on the host) through the
MCP server `benchflow` that each rollout's own tool server serves on the sandbox
network's gateway. What a user checks afterwards: the answer (cut from the search
result) scores; the trajectory holds the call as a completed tool call with its result;
each QA item's `kwargs` reached its session (item b searches its own corpus); under
`model-only` the sandbox reached the server (its port allowed, nothing else changed);
a tool not given is a failed call; the server is gone after the rollout.

The agent's MCP client is the `mcp` SDK of the task image (the `mcp-tool` fixture's image:
python3 and mcp), as for stdio servers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import yaml

from benchflow.cli.jobs import run_job_file
from benchflow.config import RolloutConfig, Scene
from benchflow.rollout import Rollout
from benchflow.rollout.result import RolloutResult
from benchflow.sandbox.docker import DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.tools.acp import AcpTools
from benchflow.trajectory import AgentMessageEvent, ToolCallEvent, ToolCallUpdateEvent, iter_events

from .conftest import FIXTURES

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


MCP_TASK = FIXTURES / "tasks" / "mcp-tool"
DOCS_A = {"keeper.md": "# The lighthouse\nThe lighthouse keeper's cat is called Biscuit.\n",
          "bakery.md": "# The bakery\nThe baker sells rye bread every morning.\n",
          "harbour.md": "# The harbour\nFishing boats leave the harbour at dawn.\n"}
DOCS_B = {"lamp.md": "# A lamp\nThe lighthouse lamp is cleaned every week.\n",
          "cat-notes.md": "# Notes\nThe keeper's cat sleeps near the lighthouse stairs.\n"}
QUERY = "lighthouse keeper cat"


def corpus(root: Path, docs: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in docs.items():
        (root / name).write_text(text)
    return root


def search_script(path: Path, *extra: dict) -> Path:
    """The scripted agent's script: search, and echo the result (the answer is cut out)."""
    actions = [{"type": "mcp", "server": "benchflow", "tool": "web_search",
                "arguments": {"query": QUERY, "top_k": 2}, "echo": True}, *extra]
    path.write_text(yaml.safe_dump({"turns": [{"actions": actions, "repeat": True}]}))
    return path


async def python_mcp_image() -> str:
    """The `mcp-tool` fixture task's image (python3 and the mcp SDK), built once."""
    spec = SandboxSpec(name="mcp-tool", environment_dir=MCP_TASK / "environment",
                       extra_ca_certs=get_settings().extra_ca_certs)
    return await DockerSandbox(spec).prepare_image()


def tool_calls(trajectory: Path) -> tuple[list[ToolCallEvent], list[ToolCallUpdateEvent]]:
    events = list(iter_events(trajectory))
    return ([e for e in events if isinstance(e, ToolCallEvent)],
            [e for e in events if isinstance(e, ToolCallUpdateEvent)
             and e.update.get("status") in ("completed", "failed")])


def test_qa_items_search_their_own_corpus_over_mcp_under_model_only(tmp_path, job_label):
    import anyio

    image = anyio.run(python_mcp_image)
    docs_a, docs_b = corpus(tmp_path / "a", DOCS_A), corpus(tmp_path / "b", DOCS_B)
    data = tmp_path / "lighthouse.jsonl"
    data.write_text(
        json.dumps({"id": "a", "question": "Which document names the lighthouse keeper's "
                    "cat?", "answer": "keeper.md"}) + "\n"
        + json.dumps({"id": "b", "question": "Which document names the lighthouse keeper's "
                      "cat?", "answer": "cat-notes.md", "kwargs": {"corpus": str(docs_b)}})
        + "\n")
    tools_config = tmp_path / "tools.yaml"
    tools_config.write_text(yaml.safe_dump({"resources": {"web": {"corpus": str(docs_a)}}}))
    job_name = f"{job_label}-acp-tools"
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": job_name, "jobs_dir": str(tmp_path / "jobs"), "n_concurrent_trials": 2,
        "environment": {"network": "model-only"}, "tool_config": str(tools_config),
        "agents": [{"name": "scripted", "model": str(search_script(tmp_path / "s.yaml")),
                    "tools": ["web:search"]}],
        "datasets": [{"qa": str(data), "image": image, "metric": "exact_match",
                      "answer_pattern": r"^1\. (\S+)"}]}))
    assert run_job_file(job) == 0
    job_dir = tmp_path / "jobs" / job_name
    results = {r.task_name: (r, p.parent) for p in job_dir.glob("*/*/*/result.json")
               for r in [RolloutResult.model_validate_json(p.read_text())]}
    assert set(results) == {"a", "b"}
    for item, first in (("a", "keeper.md"), ("b", "cat-notes.md")):
        result, folder = results[item]
        assert result.error is None, result.error
        assert result.answer == first and result.reward == 1.0
        assert result.n_tool_calls == 1
        started, finished = tool_calls(folder / "trajectory" / "acp_trajectory.jsonl")
        assert [e.update["rawInput"] for e in started] == [
            {"server": "benchflow", "tool": "web_search",
             "arguments": {"query": QUERY, "top_k": 2}}]
        (done,) = finished
        assert done.update["status"] == "completed"
        assert done.update["rawOutput"]["tools"] == ["web_search"]  # the session's tools only
        text = done.update["rawOutput"]["result"]
        assert text.startswith(f"1. {first} (score")
        assert "Biscuit" in text if item == "a" else "stairs" in text
        log = (folder / "rollout.log").read_text()
        assert re.search(r"tool server for the ACP agents: http://[\d.]+:\d+/mcp\?session="
                         r"[0-9a-f]+ \(web:search; network model-only\)", log), log


@pytest.mark.anyio
async def test_task_rollout_merges_servers_refuses_tools_not_given_and_stops_the_server(
        tmp_path, job_label):
    docs = corpus(tmp_path / "docs", DOCS_A)
    play = search_script(tmp_path / "s.yaml", {
        "type": "mcp", "server": "benchflow", "tool": "doc_read",
        "arguments": {"path": "keeper.md"}}, {
        "type": "mcp", "server": "ledger", "tool": "secret_code", "arguments": {"seed": 6},
        "save_to": "/app/code.txt"})
    rollout = Rollout(RolloutConfig(
        task_path=MCP_TASK, scenes=[Scene.single(agent="scripted", model=str(play))],
        jobs_dir=tmp_path / "jobs", job_name=job_label, network="public",
        acp_tools=AcpTools(tools=["web:search"],
                           resource_init_configs={"web": {"content": {"corpus": str(docs)}}})))
    result = await rollout.run()
    assert result.error is None, result.error
    assert result.reward == 1.0  # the task's own stdio server answered beside ours
    _, finished = tool_calls(rollout.paths.trajectory)
    assert [e.update["status"] for e in finished] == ["completed", "failed", "completed"]
    assert finished[0].update["rawOutput"]["result"].startswith("1. keeper.md (score")
    messages = [e.text for e in iter_events(rollout.paths.trajectory)
                if isinstance(e, AgentMessageEvent)]
    assert any("no tool 'doc_read' in this session" in m for m in messages), messages
    url = re.search(r"tool server for the ACP agents: (http://\S+)/mcp",
                    rollout.paths.log.read_text())
    assert url is not None and "network public" in rollout.paths.log.read_text(), \
        rollout.paths.log.read_text()
    async with httpx.AsyncClient(trust_env=False) as http:
        with pytest.raises(httpx.ConnectError):  # stopped with the rollout
            await http.get(f"{url.group(1)}/health", timeout=5)
