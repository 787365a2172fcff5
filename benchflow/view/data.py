"""What the viewer shows, read from a jobs folder: jobs, trials, logs, trajectory pages.

Everything is read from the files as they are on disk (a running job's files included), so
a page reload shows progress. Paths that come from URLs go through `resolve_inside()`: a
URL can name nothing outside the jobs folder (no `..`, no absolute path, no symlink out).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from benchflow.job.models import Aggregates, JobResult, aggregate
from benchflow.job.store import read_trial_result
from benchflow.paths import RolloutPaths
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.secrets import redact
from benchflow.trajectory.conversation import TurnBlock, group_turns
from benchflow.trajectory.events import Event, TrajectoryHeader, event_adapter
from benchflow.verify.rewards import passes

PAGE_EVENTS = 400
"""Trajectory events per page: a page is what the browser receives, never the whole file."""
LOG_LIMIT = 64 * 1024
"""Bytes of a log shown inline (head and tail beyond it; the raw file is linked)."""
_TRIAL_DIR = re.compile(r".+__\d+$")
_BAD_SEGMENT = re.compile(r"^\.{1,2}$|[\\\x00]|^$|^~")


def resolve_inside(root: Path, parts: list[str]) -> Path | None:
    """`root/parts...` if it exists and stays inside `root` after resolving symlinks.

    Rejects `.`/`..` segments, empty segments, backslashes and NUL bytes before touching
    the filesystem; then the resolved path must be under the resolved root.
    """
    if not parts or any(_BAD_SEGMENT.search(p) or "/" in p for p in parts):
        return None
    base = root.resolve()
    try:
        target = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if target != base and base not in target.parents:
        return None
    return target


@dataclass
class TrialRow:
    """One trial (rollout) of a job: its result when finished, else what is known so far."""

    job: str
    rel: str  # agent/dataset/task__n
    agent: str
    dataset: str
    task: str
    attempt: int
    result: RolloutResult | None
    running: bool

    @property
    def reward(self) -> float | None:
        return self.result.reward if self.result else None

    @property
    def error_type(self) -> str | None:
        return self.result.error.type if self.result and self.result.error else None

    @property
    def duration_sec(self) -> float | None:
        return self.result.durations.total_sec if self.result else None

    @property
    def status(self) -> str:
        if self.running:
            return "running"
        if self.error_type:
            return "error"
        if self.reward is None:
            return "no reward"
        return "pass" if passes(self.reward) else "fail"


@dataclass
class JobSummary:
    """A row of the jobs list."""

    name: str
    started_at: datetime | None
    running: bool
    agents: list[str]
    datasets: list[str]
    trials: list[TrialRow]
    aggregates: Aggregates
    duration_sec: float | None
    result: JobResult | None
    n_errors: int = 0
    by_agent: dict[str, Aggregates] = field(default_factory=dict)

    @property
    def n_finished(self) -> int:
        return sum(not t.running for t in self.trials)


def _load_job_result(path: Path) -> JobResult | None:
    try:
        return JobResult.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def iter_trials(job_dir: Path) -> Iterator[TrialRow]:
    """The trial folders `<agent>/<dataset>/<task>__<n>` of a job, finished or running."""
    for trial in sorted(job_dir.glob("*/*/*")):
        if not trial.is_dir() or not _TRIAL_DIR.match(trial.name):
            continue
        agent, dataset = trial.parent.parent.name, trial.parent.name
        task, _, attempt = trial.name.rpartition("__")
        result = read_trial_result(RolloutPaths(trial).result)
        yield TrialRow(job=job_dir.name, rel=f"{agent}/{dataset}/{trial.name}", agent=agent,
                       dataset=dataset, task=task, attempt=int(attempt), result=result,
                       running=result is None)


def _is_job_dir(path: Path) -> bool:
    if not path.is_dir() or path.name.startswith("."):
        return False
    if any((path / name).is_file() for name in ("result.json", "config.json", "manifest.json")):
        return True
    return any(_TRIAL_DIR.match(p.name) for p in path.glob("*/*/*"))


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def load_job(job_dir: Path) -> JobSummary:
    """A job's trials and aggregates (from the trials' files; the job's result.json when the
    job has ended)."""
    trials = list(iter_trials(job_dir))
    job_result = _load_job_result(job_dir / "result.json")
    results = [t.result for t in trials if t.result is not None]
    started = [r.timestamps.started_at for r in results if r.timestamps.started_at]
    started_at = (job_result.started_at if job_result and job_result.started_at
                  else min(started) if started else _mtime(job_dir))
    duration = job_result.total_duration_sec if job_result else None
    if duration is None and started:
        ends = [r.timestamps.ended_at for r in results if r.timestamps.ended_at]
        if ends:
            duration = round((max(ends) - min(started)).total_seconds(), 3)
    by_agent: dict[str, list[RolloutResult]] = {}
    for r in results:
        by_agent.setdefault(r.agent_name, []).append(r)
    skipped = job_result.skipped_trials if job_result else 0
    return JobSummary(
        name=job_dir.name, started_at=started_at, running=job_result is None,
        agents=sorted({t.agent for t in trials}), datasets=sorted({t.dataset for t in trials}),
        trials=trials, aggregates=aggregate(results, skipped), duration_sec=duration,
        result=job_result, n_errors=sum(t.error_type is not None for t in trials),
        by_agent={name: aggregate(rs) for name, rs in sorted(by_agent.items())},
    )


def list_jobs(root: Path) -> list[JobSummary]:
    """Every job under `root`, newest first."""
    if not root.is_dir():
        return []
    jobs = [load_job(p) for p in root.iterdir() if _is_job_dir(p)]
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(jobs, key=lambda j: (j.started_at or epoch, j.name), reverse=True)


@dataclass
class Matrix:
    """Task x agent: passes / trials and mean reward per cell."""

    agents: list[str]
    tasks: list[str]
    cells: dict[tuple[str, str], tuple[int, int, float | None]]


def matrix(trials: list[TrialRow]) -> Matrix:
    groups: dict[tuple[str, str], list[TrialRow]] = {}
    for t in trials:
        groups.setdefault((f"{t.dataset}/{t.task}", t.agent), []).append(t)
    cells = {}
    for key, rows in groups.items():
        rewards = [r.reward for r in rows if r.reward is not None]
        cells[key] = (sum(passes(r.reward) for r in rows), len(rows), sum(rewards) / len(rewards) if rewards else None)
    return Matrix(agents=sorted({t.agent for t in trials}),
                  tasks=sorted({f"{t.dataset}/{t.task}" for t in trials}), cells=cells)


@dataclass
class LogFile:
    label: str
    rel: str  # path relative to the jobs root (for the raw link)
    text: str
    size: int
    truncated: bool


def read_text(path: Path, limit: int = LOG_LIMIT) -> tuple[str, int, bool]:
    """A text file's content, or its head and tail when larger than `limit` bytes."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size <= limit:
            data = fh.read()
            return data.decode("utf-8", "replace"), size, False
        head = fh.read(limit // 2)
        fh.seek(size - limit // 2)
        tail = fh.read()
    skipped = size - len(head) - len(tail)
    return (head.decode("utf-8", "replace") + f"\n\n… {skipped} bytes not shown …\n\n"
            + tail.decode("utf-8", "replace")), size, True


def trial_logs(root: Path, trial: Path) -> list[LogFile]:
    """The trial's logs, in reading order. Verifier output is read from `verifier/` or
    `logs/verifier/` (both layouts exist)."""
    paths = RolloutPaths(trial)
    candidates: list[tuple[str, Path]] = []
    for stream in ("stdout", "stderr"):
        for folder in (paths.verifier_dir, paths.logs_dir / "verifier"):
            candidates.append((f"verifier {stream}", folder / f"{stream}.txt"))
    candidates.append(("error.txt", paths.error))
    candidates.append(("build log", paths.build_log))
    for stream in ("stdout", "stderr"):
        candidates.append((f"agent install {stream}", paths.setup_dir / f"{stream}.txt"))
        candidates.append((f"command {stream}", paths.command_dir / f"{stream}.txt"))
    if paths.agent_dir.is_dir():
        for f in sorted(paths.agent_dir.iterdir()):
            candidates.append((f"agent {f.name}", f))
    agent_logs = paths.logs_dir / "agent"
    if agent_logs.is_dir():
        for f in sorted(p for p in agent_logs.rglob("*") if p.is_file()):
            candidates.append((f"logs/agent/{f.relative_to(agent_logs)}", f))
    candidates.append(("rollout.log", paths.log))
    out, seen = [], set()
    base = root.resolve()
    for label, path in candidates:
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        real = path.resolve()
        if base not in real.parents:
            continue
        text, size, truncated = read_text(real)
        out.append(LogFile(label, str(real.relative_to(base)), text, size, truncated))
    return out


def trial_config(trial: Path) -> str | None:
    """The trial's config.json, redacted again (it is redacted when written; defence in
    depth for files written by older versions)."""
    path = RolloutPaths(trial).config
    if not path.is_file():
        return None
    try:
        return json.dumps(redact(json.loads(path.read_text())), indent=2)
    except ValueError:
        return None


# -- trajectory pages -----------------------------------------------------------------------

_INDEX: dict[tuple[str, int, int], tuple[TrajectoryHeader | None, list[int], int]] = {}


def _index(path: Path) -> tuple[TrajectoryHeader | None, list[int], int]:
    """The header, the byte offset where each page starts, and the number of events.

    Cached per (path, size, mtime): a growing file (a running trial) is re-indexed."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _INDEX:
        return _INDEX[key]
    offsets: list[int] = []
    count = 0
    header: TrajectoryHeader | None = None
    with path.open("rb") as fh:
        first = fh.readline()
        try:
            header = TrajectoryHeader.model_validate_json(first)
        except ValueError:
            header = None
        pos = fh.tell()
        for line in fh:
            if line.strip():
                if count % PAGE_EVENTS == 0:
                    offsets.append(pos)
                count += 1
            pos += len(line)
    if len(_INDEX) > 256:
        _INDEX.clear()
    _INDEX[key] = (header, offsets, count)
    return _INDEX[key]


@dataclass
class TrajectoryPage:
    header: TrajectoryHeader | None
    page: int  # 1-based
    pages: int
    n_events: int
    blocks: list[TurnBlock]
    bad_lines: int = 0


def trajectory_page(path: Path, page: int) -> TrajectoryPage | None:
    """Page `page` (1-based) of a trajectory: `PAGE_EVENTS` raw events grouped into turn
    blocks. Only that page's lines are read and parsed."""
    if not path.is_file():
        return None
    header, offsets, count = _index(path)
    pages = max(1, len(offsets))
    if page < 1 or page > pages:
        return None
    events: list[Event] = []
    bad = 0
    if offsets:
        with path.open("rb") as fh:
            fh.seek(offsets[page - 1])
            while len(events) + bad < PAGE_EVENTS:
                line = fh.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    events.append(event_adapter().validate_json(line))
                except ValueError:
                    bad += 1
    blocks = list(group_turns(events))
    if page > 1 and blocks and blocks[0].prompt is None:
        blocks[0].continued = True
    return TrajectoryPage(header, page, pages, count, blocks, bad)


def forks_of(root: Path, rollout: str) -> list[tuple[str, int]]:
    """The rollouts under `root` forked from `rollout` (`<job>/<agent>/<dataset>/<task>__n`):
    their `<job>/<...>` path and the turn they forked at (`result.json`'s `parent`)."""
    found = []
    needle = json.dumps(rollout)[1:-1]
    for path in sorted(root.glob("*/*/*/*/result.json")):
        try:
            text = path.read_text()
        except OSError:
            continue
        if '"parent"' not in text or needle not in text:
            continue
        parent = (json.loads(text).get("parent") or {})
        if parent.get("rollout") == rollout:
            found.append((str(path.parent.relative_to(root)), int(parent.get("turn", 0))))
    return found


def role_names(trial: Path) -> list[str]:
    """The roles of a trial, in the order of its config (for stable colours)."""
    try:
        config: dict[str, Any] = json.loads(RolloutPaths(trial).config.read_text())
    except (OSError, ValueError):
        return []
    names: list[str] = []
    for scene in config.get("scenes") or []:
        for role in scene.get("roles") or []:
            if role.get("name") not in names:
                names.append(role.get("name"))
    return names
