"""The arms of a comparison, read from job folders and study folders.

A study folder (with `study.json`) gives its arms by name. A job folder gives one arm
per agent (`<job>/<agent>/`): named after the job when it has one agent, else after the
agent. Trials are read as they are on disk, so a running job or study can be compared
(and its missing trials are counted).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchflow.errors import ConfigError
from benchflow.study.record import ArmRecord, StudyRecord, is_study_dir, read_record
from benchflow.study.trials import TrialRecord, read_trial, trial_dirs

_JOB_FILES = ("config.json", "manifest.json", "result.json")


@dataclass
class Arm:
    """One configuration's trials: an agent of a job."""

    name: str
    job_dir: Path
    agent: str | None
    trials: list[TrialRecord] = field(default_factory=list)
    planned: int | None = None
    """Trials the job planned (from its manifest), when known."""
    running: bool = False
    """The job has no result.json yet (running, interrupted, or not started)."""
    record: ArmRecord | None = None
    source: str = ""

    @property
    def missing(self) -> int:
        """Planned trials without a result yet."""
        return max(0, (self.planned or 0) - len(self.trials))


@dataclass
class ArmSet:
    """The arms given to `benchflow compare`, and the study they came from (if one)."""

    arms: list[Arm]
    study: StudyRecord | None = None
    study_dir: Path | None = None

    @property
    def baseline(self) -> str:
        """The study's baseline, else the first arm."""
        if self.study is not None and any(a.name == self.study.baseline for a in self.arms):
            return self.study.baseline
        return self.arms[0].name

    @property
    def running(self) -> bool:
        return any(a.running for a in self.arms)


def is_job_dir(path: Path) -> bool:
    """A job folder: its config/manifest/result files, or at least one trial folder."""
    if any((path / name).is_file() for name in _JOB_FILES):
        return True
    return next(trial_dirs(path), None) is not None


def _planned(job_dir: Path) -> int | None:
    """Trials per agent the job planned: tasks x n_attempts of its manifest."""
    try:
        manifest = json.loads((job_dir / "manifest.json").read_text())
        return len(manifest["tasks"]) * int(manifest["n_attempts"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _agents(job_dir: Path) -> list[str]:
    return sorted({trial.parent.parent.name for trial in trial_dirs(job_dir)})


def load_job_arm(job_dir: Path, agent: str | None, name: str, source: str = "") -> Arm:
    """The trials of one agent of a job (all agents when `agent` is None)."""
    trials = []
    for trial in trial_dirs(job_dir, agent):
        record = read_trial(trial / "result.json", str(trial.relative_to(job_dir)))
        if record is not None:
            trials.append(record)
    return Arm(name=name, job_dir=job_dir, agent=agent, trials=trials,
               planned=_planned(job_dir),
               running=not (job_dir / "result.json").is_file(), source=source or str(job_dir))


def _job_arms(job_dir: Path) -> list[Arm]:
    agents = _agents(job_dir)
    if len(agents) <= 1:
        return [load_job_arm(job_dir, agents[0] if agents else None, job_dir.name)]
    return [load_job_arm(job_dir, agent, agent, f"{job_dir}/{agent}") for agent in agents]


def _study_arms(study_dir: Path, record: StudyRecord) -> list[Arm]:
    arms = []
    for arm in record.arms:
        job_dir = study_dir / arm.job
        loaded = load_job_arm(job_dir, None, arm.name, f"{study_dir}:{arm.name}")
        loaded.record = arm
        arms.append(loaded)
    return arms


def load_arms(sources: Sequence[Path]) -> ArmSet:
    """The arms of job and study folders, in the order given.

    Raises:
        ConfigError: a folder is missing or neither a job nor a study folder, or two arms
            have the same name (the same job or study given twice).
    """
    arms: list[Arm] = []
    study: StudyRecord | None = None
    study_dir: Path | None = None
    for source in sources:
        path = Path(source)
        if not path.is_dir():
            raise ConfigError(f"{path}: no such job or study folder")
        if is_study_dir(path):
            record = read_record(path)
            found = _study_arms(path, record)
            if study is None:
                study, study_dir = record, path
        elif is_job_dir(path):
            found = _job_arms(path)
        else:
            raise ConfigError(f"{path}: neither a job folder (config.json, result.json or "
                              "<agent>/<dataset>/<task>__<n>/ trials) nor a study folder "
                              "(study.json)")
        for arm in found:
            twin = next((a for a in arms if a.name == arm.name), None)
            if twin is not None:
                raise ConfigError(f"arm name {arm.name!r} given twice ({twin.source} and "
                                  f"{arm.source}): give each job or study once")
            arms.append(arm)
    return ArmSet(arms, study, study_dir)


__all__ = ["Arm", "ArmSet", "is_job_dir", "load_arms", "load_job_arm"]
