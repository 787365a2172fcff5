"""What a comparison reads of each trial: its result.json, tolerantly.

`TrialRecord` keeps only the fields a comparison uses and ignores the rest, so results
written by newer benchflow versions (extra fields) or older ones (missing `roles`) load
alike. Each trial's outcome falls in one `Outcome`: passed or failed (scored), an
agent error (the agent crashed, timed out or tampered with the verifier: scored as a
failure with reward 0, as the job's metrics do), an infrastructure error (sandbox,
install, verifier or benchflow failures: kept apart, see `ErrorPolicy`), not scored
(verifier disabled) or cancelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from benchflow.verify.rewards import passes

Outcome = Literal["pass", "fail", "agent_error", "infra_error", "not_scored", "cancelled"]
ErrorPolicy = Literal["exclude", "fail"]
"""How trials that ended in an infrastructure error count: `exclude` drops them from
rates and tests (they are counted and listed apart); `fail` scores them 0."""

AGENT_ERRORS = frozenset({"agent_execution_failed", "agent_execution_timeout",
                          "verifier_tampered"})
"""Error types that are the agent's own outcome (unless the error was a transient
infrastructure failure that outlasted its retries, `retryable`)."""
ROLES_TOTAL = "(all roles)"
"""The role name usage is reported under when a result has no per-role `roles`."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TokenCounts(_Lenient):
    input: int = 0
    output: int = 0
    cached: int = 0


class RoleUsage(_Lenient):
    """One role's share of a trial (result.json `roles.<name>`)."""

    agent: str | None = None
    model: str | None = None
    tokens: TokenCounts | None = None
    cost: float | None = None
    n_prompts: int = 0
    n_tool_calls: int = 0
    usage_source: str | None = None
    """`acp` (the agent reported it) or `model_calls` (benchflow counted the role's calls)."""


class TrialError(_Lenient):
    type: str
    message: str = ""
    retryable: bool = False


class TrialDurations(_Lenient):
    total_sec: float | None = None
    agent_execution_sec: float | None = None


class TrialRecord(_Lenient):
    """One trial's result.json as a comparison sees it."""

    job_name: str = ""
    task_name: str
    dataset_name: str
    agent_name: str
    attempt: int
    model: str | None = None
    task_git_commit_id: str | None = None
    reward: float | None = None
    error: TrialError | None = None
    cost: float | None = None
    tokens: TokenCounts | None = None
    n_tool_calls: int = 0
    durations: TrialDurations = Field(default_factory=TrialDurations)
    roles: dict[str, RoleUsage] = Field(default_factory=dict)
    rel: str = Field(default="", description="<agent>/<dataset>/<task>__<n> in the job folder")

    @property
    def task_key(self) -> str:
        return f"{self.dataset_name}/{self.task_name}"

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            kind = self.error.type
            if kind == "cancelled":
                return "cancelled"
            if kind == "environment_teardown_failed" and self.reward is not None:
                pass  # scored before the teardown failed: the score stands
            elif kind in AGENT_ERRORS and not self.error.retryable:
                return "agent_error"
            else:
                return "infra_error"
        if self.reward is None:
            return "not_scored"
        return "pass" if passes(self.reward) else "fail"

    def score(self, policy: ErrorPolicy) -> tuple[float, bool] | None:
        """(reward, passed) as the comparison counts this trial, or None when it does not
        count (excluded infrastructure error, not scored, cancelled)."""
        outcome = self.outcome
        if outcome in ("pass", "fail"):
            assert self.reward is not None
            return self.reward, outcome == "pass"
        if outcome == "agent_error" or (outcome == "infra_error" and policy == "fail"):
            return 0.0, False
        return None

    def role_usage(self) -> dict[str, RoleUsage]:
        """Usage per role; a result without `roles` reports its totals as one role (none
        when it reports no usage at all)."""
        if self.roles:
            return dict(self.roles)
        if self.tokens is None and self.cost is None:
            return {}
        return {ROLES_TOTAL: RoleUsage(agent=self.agent_name, model=self.model,
                                       tokens=self.tokens, cost=self.cost,
                                       n_tool_calls=self.n_tool_calls)}


def models_used(trials: Iterable[TrialRecord]) -> list[str]:
    """The models the results name (top-level and per role), in first-seen order."""
    seen: dict[str, None] = {}
    for trial in trials:
        for model in [trial.model, *(r.model for r in trial.roles.values())]:
            if model:
                seen.setdefault(model, None)
    return list(seen)


def roles_used(trials: Iterable[TrialRecord]) -> dict[str, tuple[list[str], list[str]]]:
    """Per role of the results' `roles`: the agents and the models used, in first-seen
    order (results without `roles` name none)."""
    seen: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for trial in trials:
        for name, role in trial.roles.items():
            agents, models = seen.setdefault(name, ({}, {}))
            if role.agent:
                agents.setdefault(role.agent, None)
            if role.model:
                models.setdefault(role.model, None)
    return {name: (list(agents), list(models)) for name, (agents, models) in seen.items()}


def read_trial(path: Path, rel: str) -> TrialRecord | None:
    """A trial's result.json, or None while it is missing or half-written."""
    try:
        record = TrialRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    return record.model_copy(update={"rel": rel})


def trial_dirs(job_dir: Path, agent: str | None = None) -> Iterator[Path]:
    """The `<agent>/<dataset>/<task>__<n>` folders of a job (of one agent when given)."""
    for trial in sorted(job_dir.glob(f"{agent or '*'}/*/*")):
        if trial.is_dir() and trial.name.rpartition("__")[2].isdigit():
            yield trial


__all__ = ["AGENT_ERRORS", "ROLES_TOTAL", "ErrorPolicy", "Outcome", "RoleUsage",
           "TokenCounts", "TrialError", "TrialRecord", "models_used", "read_trial",
           "roles_used", "trial_dirs"]
