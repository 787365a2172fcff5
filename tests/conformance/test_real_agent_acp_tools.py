"""A real agent (claude) uses the tool server's `web:search` over MCP.

A QA item run as a job file asks for it (`agents: [{name: claude, tools: [web:search]}]`):
benchflow starts the rollout's tool server on the model-only network's gateway, with the
item's `kwargs` (its corpus) in the session, and gives it to Claude Code as the MCP server
`benchflow`. The scripted model server plays the model: it calls
`mcp__benchflow__web_search`, then answers. Asserted: the tool was offered to the model;
the call is a completed tool call in the trajectory with the search result as output; that
result is what claude sent back to the model; the answer scores. Not in the default run
(the first run installs Claude Code from npm):

    make test-acp-tools     # pytest -m slow tests/conformance/test_real_agent_acp_tools.py
"""

from __future__ import annotations

import json

import pytest
import yaml

from benchflow.cli.jobs import run_job_file
from benchflow.rollout.result import RolloutResult
from tests.conformance import offline

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOOL = "mcp__benchflow__web_search"
QUERY = "lighthouse keeper cat"


def test_claude_searches_the_items_corpus_through_the_tool_servers_mcp(tmp_path, job_label):
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
            {"tool": TOOL, "args": {"query": QUERY}}, {"text": "keeper.md"}]}]}))
    job_name = f"{job_label}-claude-tools"
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "name": job_name, "jobs_dir": str(tmp_path / "jobs"),
        "model_endpoint": {"script": str(script)},
        "agents": [{"name": "claude", "tools": ["web:search"]}],
        "datasets": [{"qa": str(data), "metric": "exact_match"}]}))
    assert run_job_file(job) == 0
    (path,) = (tmp_path / "jobs" / job_name).glob("*/*/*/result.json")
    result = RolloutResult.model_validate_json(path.read_text())
    folder = path.parent
    assert result.error is None, result.error
    assert result.answer == "keeper.md" and result.reward == 1.0
    requests = offline.requests(folder)
    assert any(TOOL in json.dumps(r.get("body")) for r in requests), "the tool was not offered"
    calls = offline.tool_calls(offline.events(folder))
    searched = [c for c in calls.values() if c.mentions(QUERY)]
    assert searched, calls
    assert searched[0].status == "completed", searched[0]
    assert "1. keeper.md (score" in searched[0].output and "Biscuit" in searched[0].output
    sent_back = [text for r in requests for text in offline.tool_results("anthropic",
                                                                         r.get("body") or {})]
    assert any("1. keeper.md (score" in text for text in sent_back), sent_back
    assert "(web:search; network model-only)" in (folder / "rollout.log").read_text()
