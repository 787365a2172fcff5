"""Real agents (claude, codex, gemini, opencode) use the tool server's `web:search` over MCP.

A QA item run as a job file asks for it (`agents: [{name: <agent>, tools: [web:search]}]`,
the four agents in one job, in parallel): benchflow starts each rollout's tool server on
the model-only network's gateway, with the item's `kwargs` (its corpus) in the session,
and gives it to the agent as the streamable-HTTP MCP server `benchflow` at session/new.
The scripted model server plays the model: it calls the offered tool matching
`*benchflow*web_search` (each agent prefixes MCP tools its own way, see `TOOL_NAMES`),
then answers. Asserted per agent: that name was offered and called; the call is a
completed tool call in the trajectory with the search result as output; that result is
what the agent sent back to the model; the answer scores. Not in the default run (the
first run installs the agents from npm):

    make test-acp-tools     # pytest -m slow tests/conformance/test_real_agent_acp_tools.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from benchflow.cli.jobs import run_job_file
from benchflow.rollout.result import RolloutResult
from tests.conformance import offline

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOOL_PATTERN = "*benchflow*web_search"
TOOL_NAMES = {  # agent -> (the name it offers the tool under, its wire API)
    "claude": ("mcp__benchflow__web_search", "anthropic"),
    "codex": ("mcp__benchflow__web_search", "openai-responses"),
    "gemini": ("mcp_benchflow_web_search", "gemini"),
    "opencode": ("benchflow_web_search", "openai-chat"),
}
QUERY = "lighthouse keeper cat"


@pytest.fixture(scope="module")
def runs(job_label: str, tmp_path_factory: pytest.TempPathFactory,
         request: pytest.FixtureRequest) -> dict[str, Path]:
    """The four agents' rollout folders, from one job run once for the module."""
    tmp_path = tmp_path_factory.mktemp("acp-tools")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in {"keeper.md": "The lighthouse keeper's cat is called Biscuit.",
                       "bakery.md": "The baker sells rye bread every morning.",
                       "harbour.md": "Fishing boats leave the harbour at dawn."}.items():
        (corpus / name).write_text(text)
    data = tmp_path / "lighthouse.jsonl"
    data.write_text(json.dumps({"id": "cat", "question": "Which document names the lighthouse "
                                "keeper's cat? Search the corpus.", "answer": "keeper.md",
                                "kwargs": {"corpus": str(corpus)}}) + "\n")
    script = tmp_path / "model.yaml"
    script.write_text(yaml.safe_dump({"name": "search-then-answer", "answers": [
        {"match": "lighthouse keeper", "steps": [
            {"tool": TOOL_PATTERN, "args": {"query": QUERY}}, {"text": "keeper.md"}]}]}))
    job_name = f"{job_label}-acp-tools"
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": job_name, "jobs_dir": str(tmp_path / "jobs"), "n_concurrent_trials": 4,
        "model_endpoint": {"script": str(script)},
        "agents": [{"name": agent, "tools": ["web:search"]} for agent in TOOL_NAMES],
        "datasets": [{"qa": str(data), "metric": "exact_match"}]}))
    started = time.monotonic()
    run_job_file(job)  # the per-agent tests below say which agent failed and why
    wall = time.monotonic() - started
    job_dir = tmp_path / "jobs" / job_name
    folders = {path.relative_to(job_dir).parts[0]: path.parent  # <agent>/<dataset>/<item>
               for path in job_dir.glob("*/*/*/result.json")}
    offline.report_durations(request, {
        agent: RolloutResult.model_validate_json((folder / "result.json").read_text())
        for agent, folder in sorted(folders.items())}, wall, "tool server over MCP")
    return folders


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("agent", sorted(TOOL_NAMES))
def test_agent_searches_the_items_corpus_through_the_tool_servers_mcp(agent: str, runs) -> None:
    folder = runs[agent]
    tool, api = TOOL_NAMES[agent]
    result = RolloutResult.model_validate_json((folder / "result.json").read_text())
    assert result.error is None, result.error
    assert result.answer == "keeper.md" and result.reward == 1.0
    requests = offline.requests(folder)
    called = [r["summary"] for r in requests if r["summary"].get("tool")]
    assert [(c["tool"], c["arguments"]) for c in called] == [(tool, {"query": QUERY})], called
    assert tool in called[0]["tools"], "the tool was not offered under its expected name"
    calls = offline.tool_calls(offline.events(folder))
    searched = [c for c in calls.values() if c.mentions(QUERY)]
    assert len(searched) == 1, calls
    assert searched[0].status == "completed", searched[0]
    assert "1. keeper.md (score" in searched[0].output and "Biscuit" in searched[0].output
    sent_back = [text for r in requests for text in offline.tool_results(api,
                                                                         r.get("body") or {})]
    assert any("1. keeper.md (score" in text for text in sent_back), sent_back
    assert "(web:search; network model-only)" in (folder / "rollout.log").read_text()
