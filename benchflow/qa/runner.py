"""`AgentRunner`: the spec's lower-level API, one item at a time.

```python
from benchflow.qa import AgentRunner, load_config, load_tasks   # spec: rollout.core.runner

runner = AgentRunner(load_config("configs/qa.json"), worker_id="custom_runner")
await runner.start()                     # the tool server (auto-started or checked)
try:
    for task in load_tasks("data.jsonl"):
        result = await runner.run_task(task)
        print(result.task_id, result.predicted_answer, result.score, result.success)
finally:
    await runner.stop()
```

Each `run_task` is one rollout (a job of one trial under
`<output_dir>/jobs/<worker_id>__<timestamp>/`), scored with the config's metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchflow.errors import ConfigError
from benchflow.job import Job
from benchflow.job.qa_trials import qa_trials
from benchflow.qa.api import (
    ToolServerScope,
    _acp_tools,
    _check_extras,
    _endpoint,
    _model_agent,
    _scoring,
)
from benchflow.qa.config import QaRolloutConfig
from benchflow.qa.outputs import trajectory_payload
from benchflow.rollout.result import RolloutResult
from benchflow.task.qa import QaItem, parse_item


@dataclass
class TaskResult:
    """One item's outcome, with the spec's fields."""

    task_id: str
    question: str
    predicted_answer: str | None
    ground_truth: Any
    score: float | None
    success: bool
    error: str | None = None
    rewards: dict[str, float] | None = None
    trajectory: dict[str, Any] = field(default_factory=dict)
    result: RolloutResult | None = field(default=None, repr=False)


class AgentRunner:
    """Runs items one by one with a config's agent, tools and metric (see the module)."""

    def __init__(self, config: QaRolloutConfig, worker_id: str = "runner", *,
                 base_dir: Path | None = None) -> None:
        self.config = config
        self.worker_id = worker_id
        self.base = base_dir or Path.cwd()
        out = Path(config.output_dir) if config.output_dir else Path("results") / (
            config.benchmark_name or worker_id)
        self.out = out if out.is_absolute() else self.base / out
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        self.job_name = f"{worker_id}__{stamp}"
        self._scope: ToolServerScope | None = None
        self._count = 0

    async def start(self) -> None:
        """Check the extras and start (or check) the tool server.

        Raises:
            ConfigError: a missing extra. ToolServerError: the tool server is unreachable.
        """
        _check_extras(self.config)
        self._scope = ToolServerScope(self.config, self.base)
        await self._scope.__aenter__()

    async def run_task(self, task: QaItem | Mapping[str, Any]) -> TaskResult:
        """Run and score one item (a `QaItem` or a dict with the dataset's fields)."""
        if self._scope is None:
            raise ConfigError("AgentRunner.run_task before start(): await runner.start() first")
        item = task if isinstance(task, QaItem) else parse_item(dict(task), "run_task(task)")
        self._count += 1
        scoring = _scoring(self.config, self.config.evaluation_metric)
        trials = qa_trials(self.out / f"{self.worker_id}.jsonl", [item],
                           agent=self.config.agent, model=self.config.model_name,
                           scoring=scoring, endpoint=_endpoint(self.config),
                           environment=self.config.environment,
                           image=self.config.sandbox_image,
                           model_agent=_model_agent(self.config, self.base),
                           evaluate=self.config.evaluate_results,
                           dataset_name=self.config.benchmark_name or self.worker_id,
                           acp_tools=_acp_tools(self.config, self.base))
        job = Job(f"{self.job_name}__{self._count:05d}", self.out / "jobs", trials)
        await job.run()
        result = job.results[0] if job.results else None
        error = None if result is None or result.error is None else \
            f"{result.error.type}: {result.error.message}"
        return TaskResult(
            task_id=item.id, question=item.question,
            predicted_answer=result.answer if result else None, ground_truth=item.answer,
            score=result.reward if result else None,
            success=result is not None and result.error is None, error=error or (
                None if result else "not run"),
            rewards=result.rewards if result else None,
            trajectory=trajectory_payload(item, result), result=result)

    async def stop(self) -> None:
        """Stop the tool server this runner started (idempotent)."""
        if self._scope is not None:
            await self._scope.__aexit__(None, None, None)
            self._scope = None


__all__ = ["AgentRunner", "TaskResult"]
