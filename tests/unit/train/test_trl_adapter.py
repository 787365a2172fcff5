"""`TrlSpec.rollout_func` without TRL: a fake trainer object and a vLLM-style server on
127.0.0.1. Each prompt becomes a benchflow rollout (the model agent on a QA item, no
sandbox); the returned fields are the server's tokens, or a masked placeholder with the
reason recorded; bad prompts and specs are errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.train import qa_train_tasks
from benchflow.train.trl import TrlSpec, benchflow_reward

PROMPT = [5, 6, 7]
COMPLETION = [40, 41, 2]


class _Policy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    tokens: ClassVar[bool] = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "Paris"},
                                  "logprobs": {"content": [{"token": f"t{t}", "logprob": -0.5}
                                                           for t in COMPLETION]}}
        payload: dict[str, Any] = {"object": "chat.completion", "choices": [choice],
                                   "usage": {"prompt_tokens": 3, "completion_tokens": 3}}
        if self.tokens and body.get("return_token_ids"):
            choice["token_ids"] = COMPLETION
            payload["prompt_token_ids"] = PROMPT
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def policy() -> Iterator[type[_Policy]]:
    handler = type("Policy", (_Policy,), {"tokens": True})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    yield handler
    server.shutdown()
    server.server_close()


def _tasks(tmp_path: Path, questions: list[str]) -> Any:
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answer": "Paris"})
                            + "\n" for i, q in enumerate(questions)))
    return qa_train_tasks(data, model="policy", metric="exact_match")


TRAINER = SimpleNamespace(state=SimpleNamespace(global_step=3),
                          processing_class=SimpleNamespace(eos_token_id=2), args=None)


def _prompts(*texts: str) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": t}] for t in texts]


def test_each_prompt_is_a_rollout_whose_sample_is_the_servers_tokens(tmp_path, policy):
    spec = TrlSpec(_tasks(tmp_path, ["Capital of France?", "Capital of Italy?"]),
                   policy=ModelEndpoint(base_url=policy.url, model="policy"),
                   jobs_dir=tmp_path / "jobs", concurrency=4)
    out = spec.rollout_func(_prompts("Capital of France?", "Capital of France?",
                                     "Capital of Italy?", "Capital of Italy?"), TRAINER)
    assert out["prompt_ids"] == [PROMPT] * 4 and out["completion_ids"] == [COMPLETION] * 4
    assert out["logprobs"] == [[-0.5] * 3] * 4 and out["env_mask"] == [[1, 1, 1]] * 4
    assert out["benchflow_credit"] == out["benchflow_reward"] == [1.0] * 4
    assert out["benchflow_rollout"] == ["model/qa/q0__1", "model/qa/q0__2",
                                        "model/qa/q1__1", "model/qa/q1__2"]
    (record,) = spec.history
    assert record.step == 3 and record.job_dir.name.startswith("grpo-step00003-")
    assert (record.job_dir / "model/qa/q0__2/model_calls.jsonl").is_file()
    assert not record.unusable
    assert benchflow_reward([None] * 4, out["benchflow_credit"]) == [1.0] * 4


def test_rollouts_without_token_data_are_masked_placeholders(tmp_path, policy):
    policy.tokens = False  # a server that ignores the token options
    spec = TrlSpec(_tasks(tmp_path, ["Capital of France?"]),
                   policy=ModelEndpoint(base_url=policy.url, model="policy"),
                   jobs_dir=tmp_path / "jobs")
    out = spec.rollout_func(_prompts("Capital of France?"), TRAINER)
    assert out["completion_ids"] == [[2]] and out["env_mask"] == [[0]]
    assert out["benchflow_credit"] == [None]
    assert spec.history[0].unusable == {"model/qa/q0__1": "no_token_data"}


def test_bad_prompts_and_specs_are_config_errors(tmp_path, policy):
    tasks = _tasks(tmp_path, ["Capital of France?"])
    spec = TrlSpec(tasks, policy=ModelEndpoint(base_url=policy.url, model="policy"),
                   jobs_dir=tmp_path / "jobs")
    with pytest.raises(ConfigError, match="no task has the instruction"):
        spec.rollout_func(_prompts("Something else?"), TRAINER)
    with pytest.raises(ConfigError, match="same instruction"):
        TrlSpec([*tasks, *tasks])
    with pytest.raises(ConfigError, match="vllm_mode='server'"):
        TrlSpec(tasks).policy_endpoint(SimpleNamespace(args=SimpleNamespace(use_vllm=False)))
    served = TrlSpec(tasks, model="m").policy_endpoint(SimpleNamespace(args=SimpleNamespace(
        vllm_server_base_url=None, use_vllm=True, vllm_mode="server",
        vllm_server_host="10.0.0.5", vllm_server_port=8001)))
    assert (served.base_url, served.model, served.request_tokens) == (
        "http://10.0.0.5:8001", "m", "vllm")
