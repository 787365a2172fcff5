"""The QA API with the tool server, as the AgentFlow spec writes it: answers found only in a
local PDF and a local web page, through doc:read and web:browse, by the model agent
driven by benchflow's scripted model server; the spec's full JSON config; quick_rollout
with sandbox_url; AgentRunner; literal keys never written out."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import yaml

from benchflow.errors import ToolServerError
from benchflow.model_server import ModelServer, load_script
from benchflow.qa import AgentRunner, load_config, load_tasks, quick_rollout, rollout
from benchflow.tools.server import ToolServer

from .conftest import PAGE_FACT, PDF_FACT

SECRET = "sk-literal-secret-never-written-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def model(tmp_path: Path, web_site: str) -> Iterator[ModelServer]:
    script = {"name": "scripted-tools", "models": ["scripted-tools"], "answers": [
        {"match": "project deadline", "steps": [
            {"tool": "doc_read", "args": {"path": "project_plan.pdf", "page": 2}},
            {"text": "March 15, 2025"}]},
        {"match": "lighthouse keeper's cat", "steps": [
            {"tool": "web_browse", "args": {"url": f"{web_site}/keeper.html"}},
            {"text": "Biscuit"}]},
        {"match": "capital of France", "text": "Paris"},
    ]}
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    with ModelServer(load_script(path)) as running:
        yield running


def dataset(tmp_path: Path, documents: Path) -> Path:
    data = tmp_path / "data.jsonl"
    items = [{"id": "doc_001", "question": "What is the project deadline mentioned in the "
              "document?", "answer": "March 15, 2025",
              "kwargs": {"seed_path": str(documents)}},
             {"id": "web_001", "question": "What is the lighthouse keeper's cat called? "
              "The page is on the local site.", "answer": "Biscuit"}]
    data.write_text("".join(json.dumps(i) + "\n" for i in items))
    return data


def tool_outputs(line: dict) -> dict[str, str]:
    return {c["title"].split()[0]: c["output"] for c in line["trajectory"]["tool_calls"]}


def test_answers_only_in_a_pdf_and_a_web_page(tmp_path, documents, web_site, model, caplog):
    port = free_port()
    config = {"data_path": str(dataset(tmp_path, documents)),
              "output_dir": str(tmp_path / "out"), "model_name": "scripted-tools",
              "api_key": SECRET, "base_url": f"{model.url}/v1", "max_turns": 5,
              "available_tools": ["doc:read", "web:browse"], "evaluation_metric": "exact_match",
              "resource_types": ["doc", "web"],
              "sandbox_server_url": f"http://127.0.0.1:{port}", "sandbox_auto_start": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING):
        summary = rollout(config_path=path)
    assert summary["average_score"] == 1.0 and summary["successful_tasks"] == 2
    lines = {json.loads(x)["task_id"]: json.loads(x)
             for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()}
    # the facts reached the model only through the tools' results
    assert PDF_FACT in tool_outputs(lines["doc_001"])["doc:read"]
    assert PAGE_FACT in tool_outputs(lines["web_001"])["web:browse"]
    warned = [r.getMessage() for r in caplog.records if "literal key" in r.getMessage()]
    assert len(warned) == 1 and "${OPENAI_API_KEY}" in warned[0]
    for file in (tmp_path / "out").rglob("*"):  # the literal key is in no output
        if file.is_file():
            assert SECRET not in file.read_text(errors="replace"), file
    # the auto-started server is gone
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_the_specs_full_json_config_loads_and_runs(tmp_path, documents, model, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the spec's relative paths, laid out as it names them
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "rag_system.txt").write_text("Answer with the fact only.")
    (tmp_path / "benchmark").mkdir()
    dataset(tmp_path, documents).rename(tmp_path / "benchmark" / "rag_benchmark.jsonl")
    spec_config = {
        "data_path": "benchmark/rag_benchmark.jsonl", "output_dir": "results/rag_eval",
        "model_name": "gpt-4.1-2025-04-14", "api_key": "sk-your-api-key",
        "base_url": "https://api.openai.com/v1", "max_turns": 50, "max_retries": 3,
        "max_workers": 4, "available_tools": ["web:search", "web:browse", "doc:read"],
        "system_prompt": "", "system_prompt_file": "prompts/rag_system.txt",
        "evaluate_results": True, "evaluation_metric": "f1_score",
        "evaluator_model_name": "gpt-4.1-2025-04-14", "evaluator_api_key": "sk-your-api-key",
        "evaluator_base_url": "https://api.openai.com/v1", "evaluator_temperature": 0.0,
        "evaluator_max_retries": 3, "resource_types": ["web", "doc"],
        "resource_init_configs": {"doc": {"content": {"seed_path": "/data/documents"}}},
        "sandbox_server_url": "http://127.0.0.1:18890", "sandbox_auto_start": False,
        "sandbox_timeout": 120, "benchmark_name": "rag_benchmark_v1", "number_of_tasks": None,
        "task_ids": None, "parallel": True, "save_results": True, "save_trajectories": True,
        "trajectory_only": False, "save_summary": True}
    path = tmp_path / "rag.json"
    path.write_text(json.dumps(spec_config))
    loaded = load_config(path)
    assert loaded.server_tools == ["web:search", "web:browse", "doc:read"]
    # the spec's port when it is free here (other test sessions may hold it)
    port = 18890
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        port = free_port()
    except OSError:
        pass
    # only the model endpoint is pointed elsewhere (the scripted server); the items' kwargs
    # name their documents, over the config's /data/documents
    with ToolServer(port=port) as tools:
        local = {**spec_config, "base_url": f"{model.url}/v1", "model_name": "scripted-tools",
                 "evaluator_base_url": f"{model.url}/v1", "sandbox_server_url": tools.url}
        path.write_text(json.dumps(local))
        summary = rollout(config_path=path)
    assert summary["benchmark_name"] == "rag_benchmark_v1"
    assert summary["successful_tasks"] == 2 and summary["average_score"] == 1.0
    assert Path(summary["results_file"]) == tmp_path / "results" / "rag_eval" / "results.jsonl"


def test_quick_rollout_with_sandbox_url_and_an_unreachable_server(tmp_path, documents, model):
    with ToolServer() as tools:
        result = quick_rollout("What is the project deadline mentioned in the document?",
                               tools=["doc:read"], model_name="scripted-tools", api_key="",
                               base_url=f"{model.url}/v1", max_turns=5, sandbox_url=tools.url,
                               kwargs={"seed_path": str(documents)})
    assert result["answer"] == "March 15, 2025" and result["success"]
    assert PDF_FACT in result["trajectory"]["tool_calls"][0]["output"]
    with pytest.raises(ToolServerError, match="unreachable"):
        quick_rollout("What is the capital of France?", tools=["web:search"],
                      model_name="scripted-tools", base_url=f"{model.url}/v1",
                      sandbox_url=f"http://127.0.0.1:{free_port()}")


def test_agent_runner_start_run_task_stop(tmp_path, documents, model):
    data = dataset(tmp_path, documents)
    path = tmp_path / "c.yaml"
    with ToolServer() as tools:
        path.write_text(yaml.safe_dump({
            "output_dir": str(tmp_path / "out"), "model_name": "scripted-tools",
            "base_url": f"{model.url}/v1", "available_tools": ["doc:read", "web:browse"],
            "sandbox_server_url": tools.url}))

        async def custom_run() -> list:
            runner = AgentRunner(load_config(path), worker_id="custom_runner")
            await runner.start()
            try:
                return [await runner.run_task(task) for task in load_tasks(str(data))]
            finally:
                await runner.stop()

        results = anyio.run(custom_run)
    assert [(r.task_id, r.predicted_answer, r.score, r.success) for r in results] == [
        ("doc_001", "March 15, 2025", 1.0, True), ("web_001", "Biscuit", 1.0, True)]
