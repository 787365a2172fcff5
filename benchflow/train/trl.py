"""benchflow as the environment of TRL's `GRPOTrainer`, through its `rollout_func` (TRL 1.x:
`rollout_func(prompts, trainer) -> {"prompt_ids", "completion_ids", "logprobs", ...}`, every
other key forwarded to the reward functions, `env_mask` read as the loss mask).

```python
from trl import GRPOConfig, GRPOTrainer
from benchflow.train import qa_train_tasks
from benchflow.train.trl import TrlSpec

spec = TrlSpec(qa_train_tasks("data.jsonl", model="policy", metric="similarity"),
               role="agent")   # policy: the trainer's `trl vllm-serve` server by default
trainer = GRPOTrainer(model=..., args=GRPOConfig(use_vllm=True, vllm_mode="server", ...),
                      train_dataset=spec.train_dataset, rollout_func=spec.rollout_func,
                      reward_funcs=spec.reward_funcs)
```

Each prompt TRL hands over (its dataset rows are the tasks' instructions, repeated
`num_generations` times) becomes one benchflow rollout of that task against the policy
server, all of a step's rollouts one job (`jobs/<job_prefix>-step<N>-<id>/`). The
completion TRL trains on is the trainable role's token sample (`tokens.py`): token ids and
log-probabilities exactly as the server returned them through benchflow's relay, `env_mask`
1 on the model's own tokens and 0 on tool output and partner text; the reward is the role's
credit from benchflow's verifier. A rollout that gives no usable sample (an error, a
straggler cut at `deadline_sec`, no token data, a history rewrite that splits the sequence)
is returned as a one-token placeholder with mask 0 and reward None, which TRL leaves out of
the loss and the group baseline; each step's `StepRecord` in `history` says which and why.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.model_server.token_data import TokenDialect
from benchflow.train.batch import BatchItem, BatchReport, run_batch
from benchflow.train.tasks import TrainTask
from benchflow.trajectory.exporters.tokens import TokenSample

log = logging.getLogger(__name__)


@dataclass
class StepRecord:
    """One `rollout_func` call: its job folder, the batch report, the rollout behind each
    completion, and why completions were placeholders."""

    step: int
    job_dir: Path
    report: BatchReport
    rollouts: list[str] = field(default_factory=list)
    unusable: dict[str, str] = field(default_factory=dict)
    samples: list[TokenSample | None] = field(default_factory=list)


def _prompt_text(prompt: Any) -> str:
    """The instruction in a TRL prompt: a string, or the last user message's text."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return str(content)
    raise ConfigError(f"rollout_func: cannot read the task instruction from prompt {prompt!r}")


def benchflow_reward(completions: list[Any], benchflow_credit: list[float | None],
                     **_: Any) -> list[float | None]:
    """The reward TRL optimises: the trainable role's credit from benchflow's verifier
    (None for a placeholder: TRL leaves it out)."""
    return list(benchflow_credit)


class TrlSpec:
    """Wires benchflow tasks into `GRPOTrainer` (see the module docstring).

    Args:
        tasks: what the trainer samples (`train_tasks`, `qa_train_tasks`); instructions
            must be distinct (they are how a prompt finds its task).
        policy: the generation server; None: the trainer's vLLM server
            (`vllm_server_base_url`, or `vllm_server_host:port`) with model `model`.
        model: the model id to ask the server for (with `policy=None`).
        role: the trainable role; None: the rollout's only role with token data.
        request_tokens: how to ask the server for token ids (`vllm` | `sglang`).
        concurrency, max_pending, deadline_sec: the step's `RolloutBatch`.
        jobs_dir, job_prefix: where each step's job folder goes.
    """

    def __init__(self, tasks: Sequence[TrainTask], *, policy: ModelEndpoint | None = None,
                 model: str | None = None, role: str | None = None,
                 request_tokens: TokenDialect = "vllm", concurrency: int = 8,
                 max_pending: int | None = None, deadline_sec: float | None = None,
                 jobs_dir: Path = Path("jobs"), job_prefix: str = "grpo") -> None:
        self.tasks = list(tasks)
        if not self.tasks:
            raise ConfigError("TrlSpec: no tasks")
        self._by_prompt: dict[str, TrainTask] = {}
        for task in self.tasks:
            if task.prompt in self._by_prompt:
                raise ConfigError(f"TrlSpec: tasks {self._by_prompt[task.prompt].name!r} and "
                                  f"{task.name!r} have the same instruction; a prompt must "
                                  "name one task")
            self._by_prompt[task.prompt] = task
        self.policy, self.model, self.role = policy, model, role
        self.request_tokens: TokenDialect = request_tokens
        self.batch_options: dict[str, Any] = {"concurrency": concurrency,
                                              "max_pending": max_pending,
                                              "deadline_sec": deadline_sec,
                                              "roles": (role,) if role else ()}
        self.jobs_dir, self.job_prefix = jobs_dir, job_prefix
        self.history: list[StepRecord] = []

    # -- what GRPOTrainer takes --------------------------------------------------------

    @cached_property
    def train_dataset(self) -> Any:
        """A `datasets.Dataset`: `prompt` (the instruction as a user message) and
        `benchflow_task` (the task's name)."""
        from datasets import Dataset

        return Dataset.from_dict({
            "prompt": [[{"role": "user", "content": t.prompt}] for t in self.tasks],
            "benchflow_task": [t.name for t in self.tasks]})

    @property
    def reward_funcs(self) -> list[Any]:
        return [benchflow_reward]

    def policy_endpoint(self, trainer: Any) -> ModelEndpoint:
        """The endpoint rollouts call: `policy`, else the trainer's vLLM server.

        Raises:
            ConfigError: neither is there.
        """
        if self.policy is not None:
            endpoint = self.policy
        else:
            args = getattr(trainer, "args", None)
            url = getattr(args, "vllm_server_base_url", None)
            if url is None and getattr(args, "use_vllm", False) \
                    and getattr(args, "vllm_mode", None) == "server":
                url = f"http://{args.vllm_server_host}:{args.vllm_server_port}"
            if url is None:
                raise ConfigError("TrlSpec: give policy=ModelEndpoint(base_url=...) or train "
                                  "with use_vllm=True, vllm_mode='server' (the rollouts call "
                                  "the trainer's generation server)")
            endpoint = ModelEndpoint(base_url=url, model=self.model)
        if endpoint.request_tokens != self.request_tokens:
            endpoint = endpoint.model_copy(update={"request_tokens": self.request_tokens})
        return endpoint

    def rollout_func(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """One benchflow rollout per prompt; TRL's completion fields (module docstring)."""
        tasks = []
        for prompt in prompts:
            text = _prompt_text(prompt)
            if text not in self._by_prompt:
                raise ConfigError(f"rollout_func: no task has the instruction {text[:80]!r}")
            tasks.append(self._by_prompt[text])
        policy = self.policy_endpoint(trainer)
        seen: Counter[str] = Counter()
        trials = []
        for task in tasks:
            seen[task.name] += 1
            trials.append(task.trial(policy, attempt=seen[task.name]))
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        name = f"{self.job_prefix}-step{step:05d}-{uuid.uuid4().hex[:6]}"
        items, report = run_batch(trials, job_name=name, jobs_dir=self.jobs_dir,
                                  **self.batch_options)
        record = StepRecord(step, self.jobs_dir / name, report)
        by_name = {item.result.rollout_name: item for item in items}
        eos = _eos_id(trainer)
        out: dict[str, list[Any]] = {k: [] for k in (
            "prompt_ids", "completion_ids", "logprobs", "env_mask", "benchflow_credit",
            "benchflow_reward", "benchflow_rollout")}
        for trial in trials:
            rollout = trial.rollout_name
            sample, why = self._sample(by_name.get(rollout), report, rollout)
            record.rollouts.append(rollout)
            record.samples.append(sample)
            if sample is None:
                record.unusable[rollout] = why
                out["prompt_ids"].append([eos])
                out["completion_ids"].append([eos])
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])
                out["benchflow_credit"].append(None)
                out["benchflow_reward"].append(None)
            else:
                out["prompt_ids"].append(sample.prompt_ids)
                out["completion_ids"].append(sample.completion_ids)
                out["logprobs"].append(sample.logprobs)
                out["env_mask"].append(list(sample.loss_mask))
                out["benchflow_credit"].append(sample.credit)
                out["benchflow_reward"].append(sample.reward)
            out["benchflow_rollout"].append(rollout)
        if record.unusable:
            log.warning("step %d: %d of %d rollouts gave no usable sample (%s); see %s", step,
                        len(record.unusable), len(trials),
                        ", ".join(sorted(set(record.unusable.values()))), record.job_dir)
        self.history.append(record)
        return out

    def _sample(self, item: BatchItem | None, report: BatchReport,
                rollout: str) -> tuple[TokenSample | None, str]:
        if item is None:
            return None, "straggler" if rollout in report.stragglers else "no_result"
        if item.result.error is not None:
            return None, f"error:{item.result.error.type}"
        if not item.samples:
            reasons = sorted(set(item.skipped.values()))
            return None, ",".join(reasons) or "no_sample"
        roles = {s.metadata.get("role") for s in item.samples}
        if len(roles) > 1:
            raise ConfigError(f"rollout_func: {rollout} has token samples for roles "
                              f"{sorted(map(str, roles))}: give TrlSpec(role=...) the "
                              "trainable one")
        if len(item.samples) > 1:
            return None, "split_sequence"
        return item.samples[0], ""


def _eos_id(trainer: Any) -> int:
    tokenizer = getattr(trainer, "processing_class", None)
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


__all__ = ["StepRecord", "TrlSpec", "benchflow_reward"]
