"""`benchflow export`: a job's rollouts as training data (JSONL, or Parquet for tokens),
filtered.

```python
stats = export_job(Path("jobs/my-job"), "sft", Path("out.jsonl"),
                   ExportFilters(min_reward=1.0, roles=("coder",)))
```

One line per rollout and role (`sft`, `sharegpt`, `atif`, `adp`), built from the
trajectory; or (`source="model-calls"`, sft only) one line per captured model call:
exactly the messages the model received and the reply it produced (calls that hold none,
such as token counts, are counted by reason in `ExportStats.skipped_calls`); or (`tokens`)
one token sample per rollout and role from the captured calls' token ids (`tokens.py`), a
role without token data being a counted, named skip. Each line's metadata names its role's
own agent and model (`result.json` `roles`), and the `agents`/`models` filters apply per
role: a coder/reviewer rollout of claude and codex exports its claude lines for `--agent
claude`. Every line goes through a `Scrubber` (host secret values, API-key shapes,
secret-named keys).
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
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
    TokenSample,
    adp_trajectory,
    atif_trajectory,
    model_call_examples,
    openai_messages,
    read_calls,
    role_steps,
    role_tokens,
    roles_of,
    samples_of,
    sharegpt_conversations,
)
from benchflow.trajectory.exporters.tokens import SkipReason
from benchflow.trajectory.events import WorkspaceChangesEvent
from benchflow.trajectory.reader import iter_events

ExportFormat = Literal["sft", "sharegpt", "atif", "adp", "tokens"]
ExportSource = Literal["trajectory", "model-calls"]
FORMATS: tuple[ExportFormat, ...] = ("sft", "sharegpt", "atif", "adp", "tokens")


@dataclass(frozen=True)
class ExportFilters:
    """Which rollouts (and roles) to export. Empty tuples mean all."""

    min_reward: float | None = None
    agents: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    errors: Literal["include", "exclude"] = "exclude"
    models: tuple[str, ...] = ()
    workspace_changes: bool = False
    """Add each role's per-turn workspace changes to its lines' metadata."""

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
    skipped_samples: Counter[str] = field(default_factory=Counter)
    """`tokens`: rollout roles without a sample, by reason (`SkipReason`)."""
    roles_seen: set[str | None] = field(default_factory=set)
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
                      filters: ExportFilters, stats: ExportStats) -> Iterator[dict[str, Any]]:
    if not paths.trajectory.is_file():
        return
    blocks = list(group_turns(iter_events(paths.trajectory)))
    changes = workspace_changes_of(paths.trajectory) if filters.workspace_changes else {}
    for role in roles_of(blocks):
        stats.roles_seen.add(role)
        if not filters.keeps_role(role, result):
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
        elif fmt == "adp":
            trajectory_id = f"{result.job_name}/{result.rollout_name}" + (
                f"#{role}" if role else "")
            yield adp_trajectory(steps, trajectory_id=trajectory_id, reward=result.reward,
                                 details=meta).model_dump(mode="json", exclude_none=True)
        else:
            session = f"{result.job_name}/{result.rollout_name}" + (f"#{role}" if role else "")
            agent, model = identity(result, role)
            trajectory = atif_trajectory(steps, session_id=session, agent=agent, model=model,
                                         extra=meta)
            yield trajectory.model_dump(mode="json", exclude_none=True)


def _roles(paths: RolloutPaths, calls: Iterable[dict[str, Any]]) -> list[str | None]:
    """The rollout's roles in order of appearance: the trajectory's, then any other that
    made model calls."""
    roles: list[str | None] = []
    events = iter_events(paths.trajectory) if paths.trajectory.is_file() else iter(())
    for role in [*(e.role for e in events), *(c.get("role") for c in calls)]:
        if role not in roles:
            roles.append(role)
    return roles


def rollout_token_samples(result: RolloutResult, root: Path,
                          roles: Sequence[str] = ()) -> tuple[list[TokenSample],
                                                              dict[str | None, SkipReason]]:
    """The token samples of one rollout (folder `root`), per role (`roles`: these only),
    and the roles that gave none with the reason. Not scrubbed."""
    paths = RolloutPaths(root)
    calls = read_calls(paths.model_calls)
    samples: list[TokenSample] = []
    skipped: dict[str | None, SkipReason] = {}
    for role in _roles(paths, calls):
        if roles and role not in roles:
            continue
        tokens = role_tokens(calls, role)
        if tokens.skipped is not None:
            skipped[role] = tokens.skipped
            continue
        metadata = _metadata(result, role, _trace_id(result))
        first = next(c for c in calls if c.get("role") == role)
        for key in ("agent", "model"):  # the role's own, where the calls name it
            if first.get(key):
                metadata[key] = first[key]
        samples += samples_of(tokens, reward=result.reward, rewards=result.rewards,
                              metadata=metadata)
    return samples, skipped


def _token_lines(result: RolloutResult, paths: RolloutPaths, filters: ExportFilters,
                 stats: ExportStats) -> Iterator[dict[str, Any]]:
    samples, skipped = rollout_token_samples(result, paths.root)
    for sample in samples:
        role = sample.metadata.get("role")
        stats.roles_seen.add(role)
        if filters.keeps_role(role, result):
            yield sample.model_dump(mode="json")
    for role, reason in skipped.items():
        stats.roles_seen.add(role)
        if filters.keeps_role(role, result):
            stats.skipped_samples[reason] += 1


def _call_lines(result: RolloutResult, paths: RolloutPaths, filters: ExportFilters,
                stats: ExportStats) -> Iterator[dict[str, Any]]:
    for example in model_call_examples(paths.root / "model_calls.jsonl", stats.skipped_calls):
        role = example.pop("role", None)
        call = example.pop("call", {})
        agent, model = example.pop("agent", None), example.pop("model", None)
        stats.roles_seen.add(role)
        if not filters.keeps_role(role, result):
            continue
        meta = {**_metadata(result, role, _trace_id(result)), **call}
        if agent is not None:  # the call names its role's agent and model itself
            meta["agent"], meta["model"] = agent, model
        yield {**example, "metadata": meta}



def export_lines(job_dir: Path, fmt: ExportFormat, filters: ExportFilters,
                 source: ExportSource = "trajectory",
                 stats: ExportStats | None = None,
                 include_trace: bool = False) -> Iterator[dict[str, Any]]:
    """The export's records, scrubbed, in rollout order; `include_trace` adds the agent's
    own trace (`trace_events`: the rollout's trace_events.jsonl, in order) to each."""
    stats = stats if stats is not None else ExportStats()
    scrub = Scrubber()
    for result in iter_trial_results(job_dir):
        if not filters.keeps(result):
            stats.skipped_rollouts += 1
            continue
        paths = RolloutPaths(job_dir / result.rollout_name)
        if fmt == "tokens":
            records: Iterator[dict[str, Any]] = _token_lines(result, paths, filters, stats)
        elif source == "model-calls":
            records = _call_lines(result, paths, filters, stats)
        else:
            records = _trajectory_lines(fmt, result, paths, filters, stats)
        stats.rollouts += 1
        trace = _trace_events(paths) if include_trace else None
        for record in records:
            stats.lines += 1
            if trace is not None:
                record = {**record, "trace_events": trace}
            yield scrub(record)


def _trace_events(paths: RolloutPaths) -> list[dict[str, Any]]:
    from benchflow.traces.reader import read_events
    from benchflow.traces.store import TRACE_EVENTS

    return read_events(paths.root / TRACE_EVENTS)


def _check_roles(filters: ExportFilters, stats: ExportStats, job_dir: Path) -> None:
    unknown = [r for r in filters.roles if r not in stats.roles_seen]
    if unknown and stats.rollouts:
        seen = ", ".join(sorted(str(r) for r in stats.roles_seen if r is not None)) or "none"
        raise ConfigError(f"--role {', '.join(unknown)}: no rollout of {job_dir} has this "
                          f"role (roles here: {seen})")


def _check_tokens(stats: ExportStats, job_dir: Path) -> None:
    if stats.lines or not stats.skipped_samples:
        return
    raise ConfigError(f"{job_dir}: no token samples ({skip_summary(stats)}): run with "
                      "--capture-tokens vllm|sglang (or capture_model_calls with "
                      "model_endpoint.request_tokens) against a vLLM or SGLang server")


def skip_summary(stats: ExportStats) -> str:
    """`no_token_data: 3 rollout roles, ...` (what `tokens` skipped, by reason)."""
    return ", ".join(f"{reason}: {n} rollout role{'s' if n != 1 else ''}"
                     for reason, n in sorted(stats.skipped_samples.items()))


def _write_jsonl(records: Iterator[dict[str, Any]], path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


_PARQUET_BATCH = 512


def _write_parquet(records: Iterator[dict[str, Any]], path: Path) -> None:
    """Token samples as Parquet: the token columns typed, `metadata` as a JSON string."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError("writing Parquet needs pyarrow: pip install 'benchflow[train]' "
                          "(or write .jsonl)") from exc
    schema = pa.schema([("prompt_ids", pa.list_(pa.int64())),
                        ("completion_ids", pa.list_(pa.int64())),
                        ("loss_mask", pa.list_(pa.int8())), ("logprobs", pa.list_(pa.float64())),
                        ("reward", pa.float64()), ("credit", pa.float64()),
                        ("role", pa.string()), ("rollout", pa.string()), ("task", pa.string()),
                        ("metadata", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        batch: list[dict[str, Any]] = []
        for record in itertools.chain(records, [None]):
            if record is not None:
                meta = record["metadata"]
                batch.append({**{k: v for k, v in record.items() if k != "metadata"},
                              "role": meta.get("role"), "rollout": meta.get("rollout"),
                              "task": meta.get("task"),
                              "metadata": json.dumps(meta, ensure_ascii=False)})
            if batch and (record is None or len(batch) >= _PARQUET_BATCH):
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []


def export_job(job_dir: Path, fmt: ExportFormat, out: Path,
               filters: ExportFilters | None = None,
               source: ExportSource = "trajectory", include_trace: bool = False) -> ExportStats:
    """Write the export to `out` (written to a temporary file, then renamed): JSONL, or
    Parquet for `tokens` when `out` ends in `.parquet`.

    Raises:
        ConfigError: not a job folder, an unknown format, `model-calls` with a format other
            than `sft`, Parquet for another format, a `--role` no rollout has, or (`tokens`)
            no sample at all because no role had token data.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if source == "model-calls" and fmt != "sft":
        raise ConfigError("--from model-calls builds `sft` examples only; use --format sft")
    parquet = out.suffix == ".parquet"
    if parquet and fmt != "tokens":
        raise ConfigError(f"{out}: Parquet is written for --format tokens only; use .jsonl")
    if not job_dir.is_dir():
        raise ConfigError(f"{job_dir}: no such job folder")
    if not any(job_dir.glob("*/*/*/result.json")):
        raise ConfigError(f"{job_dir}: no trial results here (expected "
                          "<agent>/<dataset>/<task>__<n>/result.json); pass a job folder, "
                          "e.g. jobs/<job-name>")
    stats = ExportStats()
    filters = filters or ExportFilters()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        records = export_lines(job_dir, fmt, filters, source, stats, include_trace)
        (_write_parquet if parquet else _write_jsonl)(records, tmp)
        _check_roles(filters, stats, job_dir)
        if fmt == "tokens":
            _check_tokens(stats, job_dir)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return stats
