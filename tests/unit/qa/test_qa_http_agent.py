"""The http agent on QA items: no sandbox, the item's kwargs as `task.input`, the QA metric
scores the endpoint's output and its own score is kept beside it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.rollout.result import RolloutResult
from benchflow.sandbox.ledger import LEDGER_NAME
from tests.reference_endpoint import serve

ITEMS = [
    # the reference endpoint answers the question's first line reversed
    {"id": "right", "question": "olleh", "answer": "hello", "kwargs": {"lang": "en", "n": 1},
     "split": "dev"},  # any other field is metadata
    {"id": "wrong", "question": "dlrow", "answer": "planet", "kwargs": {}},
]


@pytest.fixture(scope="module")
def endpoint():
    with serve() as url:
        yield url


def test_http_agent_answers_qa_items_without_a_sandbox(tmp_path: Path, endpoint: str) -> None:
    data = tmp_path / "items.jsonl"
    data.write_text("\n".join(json.dumps(item) for item in ITEMS) + "\n")
    out = CliRunner().invoke(app, [
        "run", str(data), "-a", "http", "--agent-endpoint", f"{endpoint}/eval?score=number",
        "--metric", "exact_match", "--env", "docker",
        "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "qa-http"])
    job_dir = tmp_path / "jobs" / "qa-http"
    results = {r.task_name: r for r in (
        RolloutResult.model_validate_json(p.read_text())
        for p in job_dir.glob("*/*/*/result.json"))}
    assert set(results) == {"right", "wrong"}, out.output
    right, wrong = results["right"], results["wrong"]
    assert right.error is None and wrong.error is None, out.output
    assert right.answer == "hello" and right.reward == 1.0
    assert wrong.answer == "world" and wrong.reward == 0.0
    # the endpoint scored both 1.0 itself: kept beside the metric, not instead of it
    assert right.rewards["endpoint_score"] == wrong.rewards["endpoint_score"] == 1.0
    assert not (job_dir / LEDGER_NAME).exists()  # no sandbox was ever created
    payloads = {p["attempt"]["id"]: p for p in httpx.get(f"{endpoint}/received").json()}
    sent = payloads[right.rollout_name]["task"]
    assert sent["instruction"] == "olleh"
    assert sent["input"] == {"lang": "en", "n": 1}
    assert sent["metadata"]["split"] == "dev" and sent["metadata"]["item_id"] == "right"
    assert payloads[right.rollout_name]["attempt"]["traceId"] == right.trace_id
    assert out.exit_code == 0, out.output
