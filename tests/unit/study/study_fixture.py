"""Job and study folders written the way benchflow writes them, with result.json files that
carry per-role usage (`roles`, CONTRACTS.md) where a test asks for it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchflow.rollout.result import Durations, ErrorInfo, RolloutResult, Timestamps, Tokens
from benchflow.study.record import ArmRecord, RolePlan, StudyRecord, TaskRecord, write_record

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def result_json(job: str, agent: str, task: str, attempt: int, reward: float | None, *,
                dataset: str = "tasks", error: str | None = None, retryable: bool = False,
                roles: dict[str, dict[str, Any]] | None = None, seconds: float = 10.0,
                model: str | None = "m-1") -> dict[str, Any]:
    """A trial's result.json; `roles` maps role -> {agent, model, input, output, cost}."""
    tokens = cost = None
    role_entries: dict[str, Any] = {}
    if roles:
        tokens = Tokens(input=sum(r.get("input", 0) for r in roles.values()),
                        output=sum(r.get("output", 0) for r in roles.values()))
        costs = [r["cost"] for r in roles.values() if r.get("cost") is not None]
        cost = round(sum(costs), 12) if costs else None
        for name, r in roles.items():
            role_entries[name] = {
                "agent": r.get("agent", agent), "model": r.get("model", model),
                "tokens": {"input": r.get("input", 0), "output": r.get("output", 0),
                           "cached": 0},
                "cost": r.get("cost"), "n_prompts": r.get("prompts", 1),
                "n_tool_calls": r.get("tool_calls", 0),
                "usage_source": r.get("source", "acp")}
    start = T0 + timedelta(minutes=attempt)
    result = RolloutResult(
        job_name=job, rollout_name=f"{agent}/{dataset}/{task}__{attempt}", task_name=task,
        dataset_name=dataset, agent_name=agent, model=model, attempt=attempt, reward=reward,
        rewards=None if reward is None else {"reward": reward},
        error=None if error is None else ErrorInfo(type=error, message=f"{error} happened",
                                                    retryable=retryable),
        cost=cost, tokens=tokens,
        durations=Durations(total_sec=seconds, agent_execution_sec=seconds * 0.6),
        timestamps=Timestamps(started_at=start, ended_at=start + timedelta(seconds=seconds)),
        task_git_commit_id="abc1234def5678")
    data = result.model_dump(mode="json")
    if roles:
        data["roles"] = role_entries
    return data


def write_trial(job_dir: Path, data: dict[str, Any]) -> Path:
    trial = job_dir / data["rollout_name"]
    trial.mkdir(parents=True, exist_ok=True)
    (trial / "result.json").write_text(json.dumps(data, indent=2))
    return trial


def write_job(job_dir: Path, trials: list[dict[str, Any]], *, finished: bool = True,
              n_attempts: int | None = None) -> Path:
    """A job folder: its trials, a manifest, and (when finished) a result.json."""
    job_dir.mkdir(parents=True, exist_ok=True)
    for data in trials:
        write_trial(job_dir, data)
    tasks = sorted({f"{t['dataset_name']}/{t['task_name']}" for t in trials})
    attempts = n_attempts or max(t["attempt"] for t in trials)
    (job_dir / "manifest.json").write_text(json.dumps(
        {"schema_version": 1, "job_name": job_dir.name, "n_attempts": attempts, "agents": {},
         "tasks": {t: None for t in tasks}}))
    if finished:
        (job_dir / "result.json").write_text(json.dumps({"schema_version": 1,
                                                         "job_name": job_dir.name}))
    return job_dir


def write_study(study_dir: Path, arms: dict[str, list[dict[str, Any]]], *,
                baseline: str | None = None, finished: bool = True) -> Path:
    """A study folder: study.json and one job folder per arm (`<study>.<arm>`)."""
    records = []
    for name, trials in arms.items():
        job = f"{study_dir.name}.{name}"
        write_job(study_dir / job, trials, finished=finished)
        agent = trials[0]["agent_name"] if trials else "scripted"
        records.append(ArmRecord(
            name=name, job=job, roles={"agent": RolePlan(agent=agent, model="m-1")},
            tasks={"tasks/a": TaskRecord(git_commit="abc1234def5678")}))
    write_record(study_dir, StudyRecord(name=study_dir.name, baseline=baseline or next(iter(arms)),
                                        k=3, benchflow_version="0.1.0", arms=records))
    return study_dir


def binary_arm(job: str, agent: str, passes: dict[str, list[int]], **kw: Any
               ) -> list[dict[str, Any]]:
    """Trials of an arm from {task: [1, 0, 1]} (1 = reward 1.0)."""
    return [result_json(job, agent, task, i + 1, float(p), **kw)
            for task, outcomes in passes.items() for i, p in enumerate(outcomes)]
