"""RolloutResult: what `result.json` of one rollout holds (schema documented in docs/)."""

import contextlib
import os
import traceback
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from benchflow._models import StrictModel
from benchflow.agents.image_cache import AgentInstallCache
from benchflow.errors import BenchflowError, ErrorType
from benchflow.paths import write_bytes
from benchflow.verify.rewards import passes

if TYPE_CHECKING:
    from benchflow.trajectory.events import Event

Phase = Literal["environment_setup", "agent_setup", "agent_execution", "verifier"]
PHASES: tuple[Phase, ...] = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def utcnow() -> datetime:
    return datetime.now(UTC)


class ErrorInfo(StrictModel):
    """One error: its type (one of `ErrorType`), a message, the phase it ended, and whether
    it was a transient infrastructure failure the job may retry."""

    type: ErrorType
    message: str
    phase: str | None = None
    retryable: bool = False

    @classmethod
    def from_exception(cls, exc: BaseException, phase: str | None = None) -> "ErrorInfo":
        if isinstance(exc, BenchflowError):
            return cls(type=exc.error_type, message=exc.message, phase=phase,
                       retryable=bool(exc.retryable))
        return cls(type="internal_error", message=f"{type(exc).__name__}: {exc}", phase=phase)


class Durations(StrictModel):
    total_sec: float | None = None
    environment_setup_sec: float | None = None
    agent_setup_sec: float | None = None
    agent_execution_sec: float | None = None
    verifier_sec: float | None = None


class Timestamps(StrictModel):
    """ISO-8601 UTC start and end of the rollout and of each phase (null: phase never ran)."""

    started_at: datetime | None = None
    environment_setup_started_at: datetime | None = None
    environment_setup_ended_at: datetime | None = None
    agent_setup_started_at: datetime | None = None
    agent_setup_ended_at: datetime | None = None
    agent_execution_started_at: datetime | None = None
    agent_execution_ended_at: datetime | None = None
    verifier_started_at: datetime | None = None
    verifier_ended_at: datetime | None = None
    ended_at: datetime | None = None


class Tokens(StrictModel):
    input: int = 0
    output: int = 0
    cached: int = 0


class RoleResult(StrictModel):
    """One role of a rollout (a role in several scenes is one entry: its counts add up):
    its agent, the model it actually used (the agent's default when none was given), and
    what it used. `usage_source`: `acp` when the agent reported its tokens over ACP,
    `model_calls` when benchflow's model server or relay counted them (codex, gemini)."""

    agent: str
    model: str | None = None
    tokens: Tokens | None = None
    cost: float | None = None
    n_prompts: int = 0
    n_tool_calls: int = 0
    usage_source: Literal["acp", "model_calls"] | None = None


class TaskStepResult(StrictModel):
    """One step of a multi-step task: its rewards, how long its agent and verifier took,
    and whether its `min_reward` gate stopped the rollout."""

    name: str
    rewards: dict[str, float] | None = None
    agent_sec: float | None = None
    verifier_sec: float | None = None
    n_prompts: int = 0
    n_tool_calls: int = 0
    gate_failed: str | None = Field(default=None, description="why the remaining steps did "
                                    "not run (this step scored below its min_reward)")

    @property
    def reward(self) -> float | None:
        return None if self.rewards is None else self.rewards.get("reward")


class ParentRef(StrictModel):
    """Where a forked rollout came from: the original rollout's folder (relative to the
    jobs folder when it is inside it) and the turn index the fork replaced from."""

    rollout: str
    turn: int = Field(ge=0)


class RolloutResult(StrictModel):
    """The outcome of one rollout. `reward` is the verifier's headline; null on error."""

    schema_version: Literal[1] = 1
    job_name: str
    rollout_name: str
    task_name: str
    dataset_name: str
    agent_name: str
    model: str | None = None
    attempt: int
    run_id: str | None = Field(default=None, description="the job's run id")
    trace_id: str | None = Field(default=None, description="the rollout's W3C trace id")
    span_id: str | None = Field(default=None, description="the rollout's root span id")
    task_git_commit_id: str | None = None
    reward: float | None = None
    rewards: dict[str, float] | None = None
    cost: float | None = None
    sandbox_cost: float | None = Field(
        default=None, description="the sandbox provider's share of `cost` (Modal, Daytona)")
    error: ErrorInfo | None = None
    retried_errors: list[ErrorInfo] = Field(
        default_factory=list, description="errors of earlier attempts that were retried")
    teardown_error: ErrorInfo | None = None
    durations: Durations = Field(default_factory=Durations)
    timestamps: Timestamps = Field(default_factory=Timestamps)
    n_tool_calls: int = 0
    n_prompts: int = 0
    tokens: Tokens | None = None
    roles: dict[str, RoleResult] = Field(
        default_factory=dict, description="each role's agent, model and usage (the totals "
        "above are their sums)")
    trajectory_path: str | None = None
    answer: str | None = Field(default=None, description="a QA item's predicted answer")
    sandbox_preserved: str | None = Field(default=None, description="container id kept")
    agent_install_cache: AgentInstallCache | None = Field(
        default=None, description="registered agents started from a snapshot (hit), were "
        "installed and saved as one (saved), or installed without (installed); null: none")
    hardened: bool | None = Field(
        default=None, description="whether the final verify was hardened; null: no verify ran")
    steps: list[TaskStepResult] = Field(
        default_factory=list, description="a multi-step task's steps, in the order they ran")
    warnings: list[str] = Field(
        default_factory=list, description="what weakens this score, e.g. hardening turned off")
    parent: ParentRef | None = Field(
        default=None, description="the rollout this one was forked from, and at which turn")

    @property
    def trajectory(self) -> "list[Event]":
        """The rollout's trajectory events (message chunks merged), read from
        `trajectory_path` when asked for (each time: keep the list); [] when there is none."""
        from benchflow.trajectory.reader import load

        path = Path(self.trajectory_path) if self.trajectory_path else None
        return load(path) if path is not None and path.is_file() else []

    @property
    def passed(self) -> bool:
        """The verifier scored it at or above the pass threshold."""
        return passes(self.reward)

    @property
    def failed(self) -> bool:
        """It ended in an error, or the verifier scored it below the pass threshold.

        A rollout run with the verifier disabled is neither passed nor failed (not scored).
        """
        return self.error is not None or (self.reward is not None and not self.passed)

    @property
    def completed(self) -> bool:
        """The verifier produced a reward."""
        return self.reward is not None


def record_endpoint_score(result: RolloutResult, score: float | None, passed: bool | None,
                          verified: bool) -> None:
    """Add an agent endpoint's own score to `result` (`rewards.endpoint_score`, `passed`).

    It becomes `reward` only when no verifier scored the rollout (`verified` False).
    """
    if score is None and passed is None:
        return
    rewards = dict(result.rewards or {})
    if score is not None:
        rewards["endpoint_score"] = score
    if passed is not None:
        rewards["passed"] = 1.0 if passed else 0.0
    result.rewards = rewards
    if not verified:
        result.reward = score if score is not None else rewards["passed"]


class PhaseClock:
    """Records each phase's start and end into a result's timestamps and durations."""

    def __init__(self, result: RolloutResult) -> None:
        self.result = result
        self.current: Phase | None = None
        """The phase entered last (kept after it ends): where an error is attributed when
        phases alternate (a multi-step task's agent and verifier phases)."""

    def begin(self) -> None:
        self.result.timestamps.started_at = utcnow()

    @contextlib.contextmanager
    def phase(self, name: Phase) -> Iterator[None]:
        """Time one run of a phase. A phase that runs again (the steps of a multi-step
        task) keeps its first start and last end, and its duration is the sum of its runs."""
        started = utcnow()
        self.current = name
        ts, durations = self.result.timestamps, self.result.durations
        if getattr(ts, f"{name}_started_at") is None:
            setattr(ts, f"{name}_started_at", started)
        try:
            yield
        finally:
            ended = utcnow()
            setattr(ts, f"{name}_ended_at", ended)
            before = getattr(durations, f"{name}_sec") or 0.0
            setattr(durations, f"{name}_sec",
                    round(before + (ended - started).total_seconds(), 3))

    def end(self) -> None:
        ts = self.result.timestamps
        ts.ended_at = utcnow()
        if ts.started_at is not None:
            self.result.durations.total_sec = round((ts.ended_at - ts.started_at).total_seconds(), 3)


def write_json_atomic(path: Path, text: str, *, make_parent: bool = True) -> None:
    """Write via a temporary file and rename, so readers never see a half-written file.
    `make_parent=False` when the caller has just made the folder (a system call less)."""
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_bytes(tmp, text.encode())  # UTF-8, as JSON is
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary file stays behind
        tmp.unlink(missing_ok=True)
        raise


def write_error_txt(path: Path, exc: BaseException, secrets: Iterable[str] = ()) -> None:
    """The traceback of `exc`, with each of `secrets` masked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(traceback.format_exception(exc))
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    path.write_text(text)


def append_error_txt(path: Path, exc: BaseException) -> None:
    """Add `exc` to error.txt after any earlier error (a teardown failure after a rollout error)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        if out.tell():
            out.write("\n")
        out.write("".join(traceback.format_exception(exc)))
