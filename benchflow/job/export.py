"""`benchflow export`: a job's rollouts as training data (JSONL), filtered.

```python
stats = export_job(Path("jobs/my-job"), "sft", Path("out.jsonl"),
                   ExportFilters(min_reward=1.0, roles=("coder",)))
```

One line per rollout and role (`sft`, `sharegpt`, `atif`), built from the trajectory, or
(`source="model-calls"`, sft only) one line per captured model call: exactly the messages
the model received and the reply it produced. Every line goes through a `Scrubber`
(host secret values, API-key shapes, secret-named keys).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchflow.errors import ConfigError
from benchflow.job.store import iter_trial_results
from benchflow.paths import RolloutPaths
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.secrets import Scrubber
from benchflow.trajectory.conversation import group_turns
from benchflow.trajectory.exporters import (
    atif_trajectory,
    model_call_examples,
    openai_messages,
    role_steps,
    roles_of,
    sharegpt_conversations,
)
from benchflow.trajectory.events import WorkspaceChangesEvent
from benchflow.trajectory.reader import iter_events

ExportFormat = Literal["sft", "sharegpt", "atif"]
ExportSource = Literal["trajectory", "model-calls"]
FORMATS: tuple[ExportFormat, ...] = ("sft", "sharegpt", "atif")


@dataclass(frozen=True)
class ExportFilters:
    """Which rollouts (and roles) to export. Empty tuples mean all."""

    min_reward: float | None = None
    agents: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    errors: Literal["include", "exclude"] = "exclude"
    workspace_changes: bool = False
    """Add each role's per-turn workspace changes to its lines' metadata."""

    def keeps(self, result: RolloutResult) -> bool:
        if self.errors == "exclude" and result.error is not None:
            return False
        if self.min_reward is not None and (result.reward is None
                                            or result.reward < self.min_reward):
            return False
        if self.agents and result.agent_name not in self.agents:
            return False
        return not (self.datasets and result.dataset_name not in self.datasets)

    def keeps_role(self, role: str | None) -> bool:
        return not self.roles or role in self.roles


@dataclass
class ExportStats:
    rollouts: int = 0
    lines: int = 0
    skipped_rollouts: int = 0


def _metadata(result: RolloutResult, role: str | None, trace_id: str | None) -> dict[str, Any]:
    return {"job": result.job_name, "rollout": result.rollout_name, "task": result.task_name,
            "dataset": result.dataset_name, "agent": result.agent_name, "model": result.model,
            "role": role, "attempt": result.attempt, "reward": result.reward,
            "rewards": result.rewards,
            "error_type": result.error.type if result.error else None, "trace_id": trace_id}


def _trace_id(result: RolloutResult) -> str | None:
    value = getattr(result, "trace_id", None)  # added to results by the tracing work
    return value if isinstance(value, str) else None


def workspace_changes_of(path: Path) -> dict[str | None, list[dict[str, Any]]]:
    """Each role's `workspace_changes` events: `[{scene, turn, session_turn, changes}]`."""
    by_role: dict[str | None, list[dict[str, Any]]] = {}
    for event in iter_events(path):
        if isinstance(event, WorkspaceChangesEvent):
            by_role.setdefault(event.role, []).append({
                "scene": event.scene, "turn": event.turn, "session_turn": event.session_turn,
                "changes": [c.model_dump(mode="json") for c in event.changes]})
    return by_role


def _trajectory_lines(fmt: ExportFormat, result: RolloutResult, paths: RolloutPaths,
                      filters: ExportFilters) -> Iterator[dict[str, Any]]:
    if not paths.trajectory.is_file():
        return
    blocks = list(group_turns(iter_events(paths.trajectory)))
    changes = workspace_changes_of(paths.trajectory) if filters.workspace_changes else {}
    for role in roles_of(blocks):
        if not filters.keeps_role(role):
            continue
        steps = role_steps(blocks, role)
        if not steps:
            continue
        meta = _metadata(result, role, _trace_id(result))
        if filters.workspace_changes:
            meta["workspace_changes"] = changes.get(role, [])
        if fmt == "sft":
            yield {"messages": openai_messages(steps), "metadata": meta}
        elif fmt == "sharegpt":
            yield {"conversations": sharegpt_conversations(steps), "metadata": meta}
        else:
            session = f"{result.job_name}/{result.rollout_name}" + (f"#{role}" if role else "")
            trajectory = atif_trajectory(steps, session_id=session, agent=result.agent_name,
                                         model=result.model, extra=meta)
            yield trajectory.model_dump(mode="json", exclude_none=True)


def export_lines(job_dir: Path, fmt: ExportFormat, filters: ExportFilters,
                 source: ExportSource = "trajectory",
                 stats: ExportStats | None = None) -> Iterator[dict[str, Any]]:
    """The export's records, scrubbed, in rollout order."""
    stats = stats if stats is not None else ExportStats()
    scrub = Scrubber()
    for result in iter_trial_results(job_dir):
        if not filters.keeps(result):
            stats.skipped_rollouts += 1
            continue
        paths = RolloutPaths(job_dir / result.rollout_name)
        if source == "model-calls":
            records: Iterator[dict[str, Any]] = (
                {**example, "metadata": {**_metadata(result, example.pop("role", None),
                                                     _trace_id(result)),
                                         **example.pop("call", {})}}
                for example in model_call_examples(paths.root / "model_calls.jsonl")
                if filters.keeps_role(example.get("role")))
        else:
            records = _trajectory_lines(fmt, result, paths, filters)
        stats.rollouts += 1
        for record in records:
            stats.lines += 1
            yield scrub(record)


def export_job(job_dir: Path, fmt: ExportFormat, out: Path,
               filters: ExportFilters | None = None,
               source: ExportSource = "trajectory") -> ExportStats:
    """Write the export to `out` (JSONL; written to a temporary file, then renamed).

    Raises:
        ConfigError: not a job folder, an unknown format, or `model-calls` with a format
            other than `sft`.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if source == "model-calls" and fmt != "sft":
        raise ConfigError("--from model-calls builds `sft` examples only; use --format sft")
    if not job_dir.is_dir():
        raise ConfigError(f"{job_dir}: no such job folder")
    if not any(job_dir.glob("*/*/*/result.json")):
        raise ConfigError(f"{job_dir}: no trial results here (expected "
                          "<agent>/<dataset>/<task>__<n>/result.json); pass a job folder, "
                          "e.g. jobs/<job-name>")
    stats = ExportStats()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for record in export_lines(job_dir, fmt, filters or ExportFilters(), source, stats):
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return stats
