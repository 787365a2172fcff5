"""Trials of a QA dataset: one rollout per item (x attempts), named by the item's id.

Used by `benchflow run data.jsonl`, job files' `{qa: path}` datasets and `benchflow.qa`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchflow.agents.base import AgentDriver
from benchflow.agents.model_agent import ModelAgent, ModelAgentConfig
from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.job.job import PlannedRollout
from benchflow.task.qa import QaItem, QaScoring
from benchflow.task.qa_tasks import DEFAULT_QA_IMAGE, qa_dataset_name, qa_task
from benchflow.verify.answers import check_scoring


def qa_trials(dataset_path: Path, items: Sequence[QaItem], *, agent: str, model: str | None,
              scoring: QaScoring, endpoint: ModelEndpoint | None = None, attempts: int = 1,
              environment: str = "docker", model_agent: ModelAgentConfig | None = None,
              image: str = DEFAULT_QA_IMAGE, dataset_name: str | None = None,
              drivers: dict[str, AgentDriver] | None = None,
              evaluate: bool = True, metric_where: str = "metric",
              **rollout_fields: object) -> list[PlannedRollout]:
    """The trials of `items` for one agent configuration.

    The model agent gets no tools on QA items unless `model_agent` lists some (then each
    item runs in a sandbox of `image`).
    """
    check_scoring(scoring, metric_where)
    name = dataset_name or qa_dataset_name(dataset_path)
    given = dict(drivers or {})
    if agent == "model" and agent not in given:
        given[agent] = ModelAgent(model_agent or ModelAgentConfig(tools=[]))
    trials = []
    for item in items:
        task = qa_task(item, dataset_path, scoring, image)
        for attempt in range(1, attempts + 1):
            config = RolloutConfig(
                task_path=task.path, scenes=[Scene.single(agent=agent, model=model)],
                environment=environment,  # type: ignore[arg-type]
                dataset_name=name, attempt=attempt, model_endpoint=endpoint,
                harden=False,  # the answer is the output; nothing in the sandbox is scored
                verifier_disabled=not evaluate, **rollout_fields)  # type: ignore[arg-type]
            trials.append(PlannedRollout(config, task, drivers=given))
    return trials


__all__ = ["qa_trials"]
