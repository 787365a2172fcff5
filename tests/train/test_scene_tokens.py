"""A real two-role scene (tasks/coder-reviewer: coder -> reviewer -> coder, the model agent
in both roles, a Docker sandbox) against the tiny policy server through benchflow's relay
with token capture; `export --format tokens --role coder` gives only the coder's calls,
every mask-1 token one the server generated for a coder call, none of the reviewer's."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchflow import RolloutConfig  # noqa: E402
from benchflow.config import ModelEndpoint  # noqa: E402
from benchflow.job.export import ExportFilters, export_job  # noqa: E402
from benchflow.rollout import Rollout  # noqa: E402
from benchflow.rollout.scenes import task_scenes  # noqa: E402
from benchflow.task import load_task  # noqa: E402

from .tiny_policy import PolicyServer, tiny_model, tiny_tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
JOB = f"scene-tokens-{uuid.uuid4().hex[:8]}"
pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(900)]


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env().ping()
    except Exception:  # noqa: BLE001 - any failure means "no daemon"
        return False
    return True


@pytest.fixture
def policy() -> Any:
    tokenizer = tiny_tokenizer()
    server = PolicyServer(tokenizer, tiny_model(len(tokenizer)), max_tokens=6).start()
    yield server
    server.stop()


async def test_only_the_coders_tokens_carry_mask_1(tmp_path: Path, policy: PolicyServer
                                                   ) -> None:
    if not _docker_answers():
        pytest.skip("no Docker daemon answers")
    task = load_task(REPO / "tasks" / "coder-reviewer")
    config = RolloutConfig(
        task_path=task.path, scenes=task_scenes(task, "model", "tiny"),
        jobs_dir=tmp_path / "jobs", job_name=JOB, capture_model_calls=True,
        model_endpoint=ModelEndpoint(base_url=policy.url, model="tiny", request_tokens="vllm"))
    rollout = Rollout(config, task=task)
    result = await rollout.run()
    assert result.error is None, result.error
    calls = [json.loads(line) for line in rollout.paths.model_calls.read_text().splitlines()]
    assert [c["role"] for c in calls] == ["coder", "reviewer", "coder"]
    assert all(c["token_data"] == "exact" for c in calls)
    generated = {c["role"]: [] for c in calls}
    for call, gen in zip(calls, policy.generations, strict=True):
        assert call["completion_token_ids"] == gen.completion_ids  # recorded unchanged
        assert call["prompt_token_ids"] == gen.prompt_ids
        generated[call["role"]].append(gen)

    out = tmp_path / "coder.jsonl"
    stats = export_job(config.jobs_dir / JOB, "tokens", out,
                       ExportFilters(roles=("coder",), errors="include"))
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    assert stats.lines == len(samples) >= 1
    assert {s["metadata"]["role"] for s in samples} == {"coder"}
    coder_outputs = [g.completion_ids for g in generated["coder"]]
    trained = []
    for sample in samples:
        ids, mask = sample["completion_ids"], sample["loss_mask"]
        run: list[int] = []
        for token, m in zip(ids, mask, strict=True):
            if m:
                run.append(token)
            elif run:
                trained.append(run)
                run = []
        if run:
            trained.append(run)
    assert trained == coder_outputs  # each coder call's output, in order, and nothing else
    reviewer = generated["reviewer"][0]
    assert all(s["prompt_ids"] != reviewer.prompt_ids for s in samples)
