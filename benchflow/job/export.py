"""`benchflow export`: a job's rollouts as training data (JSONL), filtered.

```python
stats = export_job(Path("jobs/my-job"), "sft", Path("out.jsonl"),
                   ExportFilters(min_reward=1.0, roles=("coder",)))
```

One line per rollout and role (`sft`, `sharegpt`, `atif`), built from the trajectory, or
(`source="model-calls"`, sft only) one line per captured model call: exactly the messages
the model received and the reply it produced (calls that hold none, such as token counts,
are counted by reason in `ExportStats.skipped_calls`). Each line's metadata names its
role's own agent and model (`result.json` `roles`), and the `agents`/`models` filters
apply per role: a coder/reviewer rollout of claude and codex exports its claude lines for
`--agent claude`. Every line goes through a `Scrubber` (host secret values, API-key
shapes, secret-named keys).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    models: tuple[str, ...] = ()

    def keeps(self, result: RolloutResult) -> bool:
        """Whether the rollout passes (and at least one of its roles could)."""
        if self.errors == "exclude" and result.error is not None:
            return False
        if self.min_reward is not None and (result.reward is None
                                            or result.reward < self.min_reward):
            return False
        if self.datasets and result.dataset_name not in self.datasets:
            return False
        names = [*result.roles, None] if result.roles else [None]
        return any(self._keeps_identity(result, role) for role in names)

    def keeps_role(self, role: str | None, result: RolloutResult | None = None) -> bool:
        """Whether `role`'s lines pass: the role filter, and the agent and model filters on
        the role's own agent and model (or the rollout's `a+b` label)."""
        if self.roles and role not in self.roles:
            return False
        return result is None or self._keeps_identity(result, role)

    def _keeps_identity(self, result: RolloutResult, role: str | None) -> bool:
        agent, model = identity(result, role)
        if self.agents and agent not in self.agents and result.agent_name not in self.agents:
            return False
        return not (self.models and model not in self.models
                    and (result.model or "") not in self.models)


@dataclass
class ExportStats:
    rollouts: int = 0
    lines: int = 0
    skipped_rollouts: int = 0
    skipped_calls: Counter[str] = field(default_factory=Counter)
    """`--from model-calls`: calls that gave no line, by reason."""

    def skipped_summary(self) -> str:
        """`3 model calls skipped: 2 token counting, 1 failed (HTTP 500)` ('' if none)."""
        total = sum(self.skipped_calls.values())
        if not total:
            return ""
        reasons = ", ".join(f"{n} {why}" for why, n in self.skipped_calls.most_common())
        return f"{total} model call{'s' if total != 1 else ''} skipped: {reasons}"


def identity(result: RolloutResult, role: str | None) -> tuple[str, str | None]:
    """A role's own agent and model (`result.roles`), else the rollout's."""
    known = result.roles.get(role) if role is not None else None
    if known is not None:
        return known.agent, known.model
    return result.agent_name, result.model


def _metadata(result: RolloutResult, role: str | None, trace_id: str | None) -> dict[str, Any]:
    agent, model = identity(result, role)
    known = result.roles.get(role) if role is not None else None
    meta: dict[str, Any] = {
        "job": result.job_name, "rollout": result.rollout_name, "task": result.task_name,
        "dataset": result.dataset_name, "agent": agent, "model": model, "role": role,
        "attempt": result.attempt, "reward": result.reward, "rewards": result.rewards,
        "error_type": result.error.type if result.error else None, "trace_id": trace_id}
    if known is not None:
        meta["tokens"] = known.tokens.model_dump() if known.tokens else None
        meta["usage_source"] = known.usage_source
        meta["rollout_agent"] = result.agent_name
    return meta


def _trace_id(result: RolloutResult) -> str | None:
    value = getattr(result, "trace_id", None)  # added to results by the tracing work
    return value if isinstance(value, str) else None


def _trajectory_lines(fmt: ExportFormat, result: RolloutResult, paths: RolloutPaths,
                      filters: ExportFilters) -> Iterator[dict[str, Any]]:
    if not paths.trajectory.is_file():
        return
    blocks = list(group_turns(iter_events(paths.trajectory)))
    for role in roles_of(blocks):
        if not filters.keeps_role(role, result):
            continue
        steps = role_steps(blocks, role)
        if not steps:
            continue
        meta = _metadata(result, role, _trace_id(result))
        if fmt == "sft":
            yield {"messages": openai_messages(steps), "metadata": meta}
        elif fmt == "sharegpt":
            yield {"conversations": sharegpt_conversations(steps), "metadata": meta}
        else:
            session = f"{result.job_name}/{result.rollout_name}" + (f"#{role}" if role else "")
            agent, model = identity(result, role)
            trajectory = atif_trajectory(steps, session_id=session, agent=agent, model=model,
                                         extra=meta)
            yield trajectory.model_dump(mode="json", exclude_none=True)


def _call_lines(result: RolloutResult, paths: RolloutPaths, filters: ExportFilters,
                stats: ExportStats) -> Iterator[dict[str, Any]]:
    for example in model_call_examples(paths.root / "model_calls.jsonl", stats.skipped_calls):
        role = example.pop("role", None)
        call = example.pop("call", {})
        agent, model = example.pop("agent", None), example.pop("model", None)
        if not filters.keeps_role(role, result):
            continue
        meta = {**_metadata(result, role, _trace_id(result)), **call}
        if agent is not None:  # the call names its role's agent and model itself
            meta["agent"], meta["model"] = agent, model
        yield {**example, "metadata": meta}


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
            records: Iterator[dict[str, Any]] = _call_lines(result, paths, filters, stats)
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
