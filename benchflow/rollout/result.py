"""RolloutResult: what `result.json` of one rollout holds (schema documented in docs/)."""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from benchflow._models import StrictModel
from benchflow.errors import BenchflowError, ErrorType

Phase = Literal["environment_setup", "agent_setup", "agent_execution", "verifier"]
PHASES: tuple[Phase, ...] = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def utcnow() -> datetime:
    return datetime.now(UTC)


class ErrorInfo(StrictModel):
    """One error: its type (one of `ErrorType`), a message, and the phase it ended."""

    type: ErrorType
    message: str
    phase: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException, phase: str | None = None) -> ErrorInfo:
        if isinstance(exc, BenchflowError):
            return cls(type=exc.error_type, message=exc.message, phase=phase)
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
    task_git_commit_id: str | None = None
    reward: float | None = None
    rewards: dict[str, float] | None = None
    cost: float | None = None
    error: ErrorInfo | None = None
    retried_errors: list[ErrorInfo] = Field(
        default_factory=list, description="errors of earlier attempts that were retried")
    teardown_error: ErrorInfo | None = None
    durations: Durations = Field(default_factory=Durations)
    timestamps: Timestamps = Field(default_factory=Timestamps)
    n_tool_calls: int = 0
    n_prompts: int = 0
    tokens: Tokens | None = None
    trajectory_path: str | None = None
    answer: str | None = Field(default=None, description="a QA item's predicted answer")
    sandbox_preserved: str | None = Field(default=None, description="container id kept")

    @property
    def passed(self) -> bool:
        return self.reward is not None and self.reward >= 1.0

    @property
    def completed(self) -> bool:
        """The verifier produced a reward."""
        return self.reward is not None


class PhaseClock:
    """Records each phase's start and end into a result's timestamps and durations."""

    def __init__(self, result: RolloutResult) -> None:
        self.result = result

    def begin(self) -> None:
        self.result.timestamps.started_at = utcnow()

    @contextlib.contextmanager
    def phase(self, name: Phase) -> Iterator[None]:
        started = utcnow()
        setattr(self.result.timestamps, f"{name}_started_at", started)
        try:
            yield
        finally:
            ended = utcnow()
            setattr(self.result.timestamps, f"{name}_ended_at", ended)
            setattr(self.result.durations, f"{name}_sec",
                    round((ended - started).total_seconds(), 3))

    def end(self) -> None:
        ts = self.result.timestamps
        ts.ended_at = utcnow()
        if ts.started_at is not None:
            self.result.durations.total_sec = round((ts.ended_at - ts.started_at).total_seconds(), 3)


def write_json_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_error_txt(path: Path, exc: BaseException) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(traceback.format_exception(exc)))
