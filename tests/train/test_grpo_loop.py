"""The real loop: a tiny causal LM created here is trained for two GRPO steps by TRL on CPU,
with benchflow as its environment. Each completion is a benchflow rollout (the model agent
answering a QA item) against a small OpenAI-compatible server serving the trainer's own
model on 127.0.0.1; benchflow's relay asks it for token ids and logprobs and records
them; the reward is benchflow's verifier (the `similarity` answer metric).

The test checks that the weights changed and that every sample TRL trained on holds
exactly the tokens (and log-probabilities) the server produced. `make test-train`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

from benchflow.config import ModelEndpoint  # noqa: E402
from benchflow.rollout.result import RolloutResult  # noqa: E402
from benchflow.train import qa_train_tasks  # noqa: E402
from benchflow.train.trl import TrlSpec  # noqa: E402

from .tiny_policy import PolicyServer, tiny_model, tiny_tokenizer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]

ITEMS = [{"id": "hello", "question": "say hello", "answer": "hello world"},
         {"id": "colors", "question": "red green blue", "answer": "red"}]


@pytest.fixture
def policy() -> Any:
    server = PolicyServer(tiny_tokenizer()).start()
    yield server
    server.stop()


def test_two_grpo_steps_through_the_benchflow_adapter(tmp_path: Path, policy: PolicyServer
                                                      ) -> None:
    import torch
    from trl import GRPOConfig, GRPOTrainer

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    spec = TrlSpec(qa_train_tasks(data, model="tiny", metric="similarity"),
                   policy=ModelEndpoint(base_url=policy.url, model="tiny"),
                   jobs_dir=tmp_path / "jobs", concurrency=4, deadline_sec=600)
    returned: list[dict[str, list[Any]]] = []

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        out = spec.rollout_func(prompts, trainer)
        returned.append(out)
        return out

    tokenizer = policy.tokenizer
    model = tiny_model(len(tokenizer))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
                      num_generations=4, max_steps=2, learning_rate=5e-2, beta=0.0,
                      max_completion_length=8, logging_steps=1, save_strategy="no",
                      report_to=[], use_cpu=True, seed=0, weight_decay=0.0,
                      dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer,
                          train_dataset=spec.train_dataset, rollout_func=rollout_func,
                          reward_funcs=spec.reward_funcs)
    policy.model = trainer.model  # the server generates with the weights being trained
    trainer.train()

    # two steps, four rollouts each, every one a real benchflow rollout with a sample
    assert trainer.state.global_step == 2
    assert len(returned) == 2 and all(len(out["completion_ids"]) == 4 for out in returned)
    assert [len(r.rollouts) for r in spec.history] == [4, 4]
    assert all(not r.unusable for r in spec.history), [r.unusable for r in spec.history]
    # the relay asked for the token ids (the model agent itself never does)
    assert len(policy.requests) == 8
    assert all(r["return_token_ids"] is True and r["logprobs"] is True
               for r in policy.requests)

    # every sample TRL got holds exactly the server's tokens and log-probabilities
    produced = {(tuple(g.prompt_ids), tuple(g.completion_ids)): g.logprobs
                for g in policy.generations}
    assert len(produced) == 8
    got = set()
    for out in returned:
        for prompt, completion, logprobs, mask in zip(
                out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"],
                strict=True):
            key = (tuple(prompt), tuple(completion))
            assert key in produced, "a sample's tokens are not the server's"
            assert logprobs == produced[key]
            assert mask == [1] * len(completion)
            got.add(key)
    assert got == set(produced)

    # the rewards are benchflow's verifier's (similarity of the answer), per rollout
    for record, out in zip(spec.history, returned, strict=True):
        assert record.job_dir.is_dir()
        for rollout, credit in zip(out["benchflow_rollout"], out["benchflow_credit"],
                                   strict=True):
            result = RolloutResult.model_validate_json(
                (record.job_dir / rollout / "result.json").read_text())
            assert result.error is None and result.rewards is not None
            assert credit == result.reward == result.rewards["similarity"]

    # and the weights moved
    changed = [name for name, p in model.named_parameters()
               if not torch.equal(p.detach(), before[name])]
    assert changed, "no parameter changed in two GRPO steps"
