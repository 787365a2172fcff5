"""Trainer adapter throughput: rollouts per second `TrlSpec.rollout_func` sustains with a
fake policy.

The policy is an OpenAI-compatible server on 127.0.0.1 that answers at once with canned
token ids and log-probabilities in vLLM's layout (no model), so what is measured is
benchflow's side of a GRPO step: one rollout per prompt (the model agent answering a QA
item, no sandbox), each call through a capturing relay, the verifier (an answer metric),
result files, and the token samples read back. Prints rollouts/s per concurrency.

    python labs/benchmarks/train_throughput.py [--rollouts 128] [--concurrency 8 32]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchflow.config import ModelEndpoint
from benchflow.train import qa_train_tasks
from benchflow.train.trl import TrlSpec

PROMPT_IDS = list(range(100, 164))
COMPLETION_IDS = [7, 8, 9, 10, 2]


class _FakePolicy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "Paris"}}
        payload: dict[str, Any] = {"object": "chat.completion", "model": body.get("model"),
                                   "usage": {"prompt_tokens": 64, "completion_tokens": 5,
                                             "total_tokens": 69}}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": f"token_id:{t}", "logprob": -0.5}
                                              for t in COMPLETION_IDS]}
        if body.get("return_token_ids"):
            choice["token_ids"] = COMPLETION_IDS
            payload["prompt_token_ids"] = PROMPT_IDS
        payload["choices"] = [choice]
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(rollouts: int, concurrencies: list[int], items: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePolicy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0),
                              processing_class=SimpleNamespace(eos_token_id=2))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "qa.jsonl"
            data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?",
                                                "answer": "Paris"}) + "\n"
                                    for i in range(items)))
            tasks = qa_train_tasks(data, model="fake", metric="exact_match")
            prompts = [[{"role": "user", "content": tasks[i % items].prompt}]
                       for i in range(rollouts)]
            for concurrency in concurrencies:
                spec = TrlSpec(tasks, policy=ModelEndpoint(base_url=url, model="fake"),
                               concurrency=concurrency, jobs_dir=Path(tmp) / "jobs")
                started = time.perf_counter()
                out = spec.rollout_func(prompts, trainer)
                wall = time.perf_counter() - started
                usable = sum(1 for s in spec.history[-1].samples if s is not None)
                exact = all(ids == COMPLETION_IDS for ids in out["completion_ids"])
                print(f"concurrency {concurrency:>3}: {rollouts} rollouts in {wall:6.2f} s = "
                      f"{rollouts / wall:6.1f} rollouts/s; samples {usable}/{rollouts}, "
                      f"tokens exact: {exact}, mean reward "
                      f"{sum(out['benchflow_reward']) / rollouts:.2f}")
                trainer.state.global_step += 1
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=128)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--items", type=int, default=16)
    args = parser.parse_args()
    main(args.rollouts, args.concurrency, args.items)
