"""What a trainer samples from: benchflow tasks (task folders, QA items) as prompts, each
able to become a rollout against the policy being trained.

```python
tasks = qa_train_tasks("tasks/qa-example.jsonl", model="policy", metric="similarity")
tasks = train_tasks(["tasks/hello-world"], agent="opencode", model="policy")
trial = tasks[0].trial(ModelEndpoint.remote("http://127.0.0.1:8000/v1", "policy",
                                            request_tokens="vllm"), attempt=3)
```

A rollout of a `TrainTask` calls the policy through benchflow's relay with token capture
on (`capture_model_calls`, the endpoint's `request_tokens`), so its `model_calls.jsonl`
holds the token ids the policy server produced: the only tokens a trainer gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from benchflow.agents.model_agent import ModelAgentConfig
from benchflow.config import ModelEndpoint, RolloutConfig
from benchflow.errors import ConfigError
from benchflow.job.job import PlannedRollout
from benchflow.job.qa_trials import qa_trials
from benchflow.rollout.scenes import task_scenes
from benchflow.task import load_task
from benchflow.task.qa import QaScoring, load_qa_items
from benchflow.task.qa_tasks import DEFAULT_QA_IMAGE


@dataclass(frozen=True)
class TrainTask:
    """One task as a trainer sees it: its `prompt` (the instruction, the trainer's dataset
    row) and the planned rollout (`template`, without a model endpoint)."""

    prompt: str
    template: PlannedRollout

    @property
    def name(self) -> str:
        return self.template.ref.task_name

    def trial(self, policy: ModelEndpoint, attempt: int = 1) -> PlannedRollout:
        """The rollout of this task against `policy`, with its calls (and their token ids,
        when `policy.request_tokens` says how to ask) captured."""
        if policy.base_url is None:
            raise ConfigError("the policy endpoint needs a base_url (the trainer's server)")
        config = self.template.config.model_copy(update={
            "model_endpoint": policy, "capture_model_calls": True, "attempt": attempt})
        return replace(self.template, config=config)


def train_tasks(paths: Sequence[str | Path], *, agent: str, model: str | None = None,
                environment: str = "docker") -> list[TrainTask]:
    """Task folders as train tasks: each runs its own scenes (roles filled from `agent` /
    `model`) when it declares any, else one turn of `agent`.

    Raises:
        TaskNotFoundError, TaskInvalidError: a path is not a task.
    """
    out = []
    for path in paths:
        task = load_task(Path(path))
        config = RolloutConfig(task_path=task.path, scenes=task_scenes(task, agent, model),
                               environment=environment)  # type: ignore[arg-type]
        out.append(TrainTask(task.instruction, PlannedRollout(config, task)))
    return out


def qa_train_tasks(path: str | Path, *, model: str, agent: str = "model",
                   metric: str = "exact_match", answer_pattern: str | None = None,
                   model_agent: ModelAgentConfig | None = None,
                   environment: str = "docker", image: str = DEFAULT_QA_IMAGE,
                   ) -> list[TrainTask]:
    """A QA dataset's items as train tasks, scored by `metric` (the benchflow answer
    metrics: exact_match, f1_score, contains_answer, numeric_match, similarity). The model
    agent without tools runs on the host: no sandbox.

    Raises:
        ConfigError, TaskInvalidError: a bad dataset or metric.
    """
    path = Path(path)
    items = load_qa_items(path)
    scoring = QaScoring(metric=metric, answer_pattern=answer_pattern)
    trials = qa_trials(path, items, agent=agent, model=model, scoring=scoring,
                       environment=environment, model_agent=model_agent, image=image)
    return [TrainTask(item.question, trial) for item, trial in zip(items, trials, strict=True)]


__all__ = ["TrainTask", "qa_train_tasks", "train_tasks"]
