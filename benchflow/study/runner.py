"""From a study file to a finished study: every arm planned and checked before anything
runs, the arms' jobs run side by side, the reproducibility record written.

A study is a set of jobs in one folder (see `record`), so it resumes like a job: run
`benchflow study` again on the same file (or on the study folder) and only the trials
without a final result run; when the study file changed since the study started
(arms, agents, models, settings, task contents) it refuses and lists what changed.
The arms run at the same time (so a drift of the backend or of a model endpoint over
the run hits every arm alike), sharing the study's `n_concurrent_trials` between them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from benchflow._version import package_version
from benchflow.errors import ConfigError
from benchflow.job.config import with_overrides
from benchflow.job.job import Job
from benchflow.job.models import JobResult
from benchflow.job.resume import is_final, prepare_resume, previous_start
from benchflow.job.runner import PreparedJob, make_job, prepare_job, reset_unfinished
from benchflow.job.runner import start_new_job
from benchflow.job.signals import EXIT_CANCELLED, remove_containers, remove_containers_now
from benchflow.job.store import (
    MANIFEST,
    RESULT,
    job_lock,
    read_manifest,
    read_trial_result,
    redacted_job_config,
)
from benchflow.rollout.events import RolloutListener
from benchflow.rollout.result import utcnow
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.registry import get_provider
from benchflow.settings import host_env
from benchflow.study.config import ArmSpec, StudySpec, load_study
from benchflow.study.provenance import arm_record, image_ids
from benchflow.study.record import (
    RECORD,
    STUDY_FILE,
    RolePlan,
    StudyRecord,
    is_study_dir,
    read_record,
    write_record,
)
from benchflow.study.trials import models_used, read_trial, roles_used

log = logging.getLogger(__name__)

_NOT_COMPARED = ("name", "jobs_dir", "n_concurrent_trials")
"""Job-config keys that may differ on resume (the folder moved, another -n)."""

Notify = Callable[[str], None]


@dataclass
class StudyArm:
    """One arm, planned: its spec, its job, and whether it resumes an earlier run."""

    spec: ArmSpec
    prepared: PreparedJob
    resuming: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class PreparedStudy:
    """A validated study: every arm's job, and what each still has to run."""

    spec: StudySpec
    source: Path
    arms: list[StudyArm]
    record: StudyRecord
    resuming: bool = False
    results: dict[str, JobResult] = field(default_factory=dict)

    @property
    def study_dir(self) -> Path:
        return self.spec.study_dir

    @property
    def to_run(self) -> int:
        return sum(len(arm.prepared.to_run) for arm in self.arms)

    @property
    def finished(self) -> int:
        return sum(len(arm.prepared.finished) for arm in self.arms)


def split_concurrency(total: int, n_arms: int) -> list[int]:
    """`total` concurrent trials shared by `n_arms` arms as evenly as possible (each arm
    gets at least one)."""
    base, extra = divmod(total, n_arms)
    return [max(1, base + (index < extra)) for index in range(n_arms)]


def _trial_keys(prepared: PreparedJob) -> set[tuple[str, str, int]]:
    return {(t.ref.dataset_name, t.ref.task_name, t.ref.attempt) for t in prepared.trials}


def _config_differences(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    keys = sorted((old.keys() | new.keys()) - set(_NOT_COMPARED))
    return [f"arm {name!r}: {key} changed" for key in keys if old.get(key) != new.get(key)]


def _study_differences(saved: StudyRecord, spec: StudySpec,
                       arms: list[tuple[ArmSpec, PreparedJob]]) -> list[str]:
    out = []
    if saved.k != spec.k:
        out.append(f"k {saved.k} -> {spec.k}")
    old_names, new_names = [a.name for a in saved.arms], [a.name for a, _ in arms]
    for name in old_names:
        if name not in new_names:
            out.append(f"arm {name!r} removed")
    for arm, prepared in arms:
        record = saved.arm(arm.name)
        if record is None:
            out.append(f"arm {arm.name!r} added")
            continue
        out += _config_differences(arm.name, record.config, redacted_job_config(prepared.config))
        job_dir = prepared.job_dir
        if (job_dir / MANIFEST).is_file():
            out += [f"arm {arm.name!r}: {d}"
                    for d in read_manifest(job_dir).differences(prepared.manifest)]
    return out


def _plan_rest(arm: StudyArm, retry_errors: bool) -> None:
    """Keep only the arm's trials without a final result in `to_run`."""
    prepared = arm.prepared
    prepared.to_run, prepared.finished = [], []
    for trial in prepared.trials:
        result = read_trial_result(prepared.trial_dir(trial) / RESULT)
        if result is not None and is_final(result, retry_errors=retry_errors):
            prepared.finished.append(result)
        else:
            prepared.to_run.append(trial)


def _resume_folder(study_dir: Path, n_concurrent: int | None, retry_errors: bool,
                   lookup: Callable[[str], str | None]) -> PreparedStudy:
    """Plan the rest of a study from its folder: each arm's job resumes from its saved
    config (absolute paths: it works from any directory)."""
    record = read_record(study_dir)
    total = n_concurrent or sum(int(_json_field(study_dir / arm.job / "config.json",
                                                "n_concurrent_trials", 1))
                                for arm in record.arms)
    arms = []
    for arm, share in zip(record.arms, split_concurrency(total, len(record.arms)), strict=True):
        prepared = prepare_resume(study_dir / arm.job, retry_errors=retry_errors,
                                  n_concurrent_trials=share, lookup=lookup)
        spec = ArmSpec(name=arm.name, description=arm.description,
                       agent=(arm.config.get("agents") or [{}])[0])
        arms.append(StudyArm(spec, prepared, resuming=True))
    spec = StudySpec(name=record.name, description=record.description,
                     studies_dir=study_dir.resolve().parent, k=record.k,
                     baseline=record.baseline, arms=[a.spec for a in arms])
    return PreparedStudy(spec, study_dir / STUDY_FILE, arms, record, resuming=True)


def _json_field(path: Path, key: str, default: Any) -> Any:
    try:
        return json.loads(path.read_text()).get(key, default)
    except (OSError, ValueError, AttributeError):
        return default


def prepare_study(path: Path | str, *, studies_dir: Path | None = None,
                  n_concurrent: int | None = None, retry_errors: bool = False,
                  lookup: Callable[[str], str | None] = host_env) -> PreparedStudy:
    """Plan every arm of the study file at `path` without running anything; an existing
    study folder of the same name is resumed, as is the study folder `path` itself.

    Raises:
        ConfigError: a bad study file, an invalid arm, arms planning different trials, or a
            study folder whose study changed since it started.
    """
    path = Path(path)
    if path.is_dir():
        if not is_study_dir(path):
            raise ConfigError(f"{path}: not a study folder (no {RECORD}): give a study file")
        return _resume_folder(path, n_concurrent, retry_errors, lookup)
    spec = load_study(path)
    spec = spec.model_copy(update={
        "studies_dir": (studies_dir or spec.studies_dir).expanduser().resolve()})
    configs = spec.job_configs(path)
    total = n_concurrent or next(iter(configs.values())).n_concurrent_trials
    planned: list[tuple[ArmSpec, PreparedJob]] = []
    for arm, share in zip(spec.arms, split_concurrency(total, len(spec.arms)), strict=True):
        config = with_overrides(configs[arm.name], n_concurrent_trials=share)
        planned.append((arm, prepare_job(config, source=f"{path}: arm {arm.name}",
                                         lookup=lookup)))
    first_arm, first = planned[0]
    for arm, prepared in planned[1:]:
        if _trial_keys(prepared) != _trial_keys(first):
            raise ConfigError(f"{path}: arms {first_arm.name!r} and {arm.name!r} plan different "
                              "tasks or attempts: every arm must run the study's tasks")
    if not first.trials:
        raise ConfigError(f"{path}: the study has no trials: its datasets hold no tasks")
    study_dir = spec.study_dir
    resuming = is_study_dir(study_dir)
    if not resuming and study_dir.exists() and any(study_dir.iterdir()):
        raise ConfigError(f"{study_dir}: exists and is not a study folder: give the study "
                          "another name or studies_dir")
    started_at = None
    if resuming:
        saved = read_record(study_dir)
        differences = _study_differences(saved, spec, planned)
        if differences:
            raise ConfigError(f"{study_dir}: cannot resume: the study changed since it started: "
                              + "; ".join(differences)
                              + ": restore the study file, or give the study another name")
        started_at = saved.started_at
    arms = [StudyArm(arm, prepared, resuming=(prepared.job_dir / MANIFEST).is_file())
            for arm, prepared in planned]
    for arm in arms:
        if arm.resuming:
            _plan_rest(arm, retry_errors)
    record = StudyRecord(
        name=spec.name, description=spec.description, baseline=spec.baseline_arm, k=spec.k,
        tasks=sorted(f"{d.name}/{t.name}" for d in first.datasets for t in d.tasks),
        benchflow_version=package_version(), started_at=started_at,
        arms=[arm_record(a.name, a.spec.description, a.prepared) for a in arms])
    return PreparedStudy(spec, path, arms, record, resuming=resuming)


def start_study(study: PreparedStudy) -> None:
    """Write the study folder: the study file, study.json, and each new arm's job files."""
    study_dir = study.study_dir
    study_dir.mkdir(parents=True, exist_ok=True)
    copy = study_dir / STUDY_FILE
    if study.source.resolve() != copy.resolve():
        copy.write_bytes(study.source.read_bytes())
    study.record.started_at = study.record.started_at or utcnow()
    write_record(study_dir, study.record)
    for arm in study.arms:
        if arm.resuming:
            reset_unfinished(arm.prepared)
        else:
            start_new_job(arm.prepared)


@contextlib.contextmanager
def study_locks(study: PreparedStudy) -> Iterator[None]:
    """Hold every arm's job lock (one study never runs twice at once)."""
    with contextlib.ExitStack() as stack:
        for arm in study.arms:
            stack.enter_context(job_lock(arm.prepared.job_dir))
        yield


def providers(study: PreparedStudy) -> dict[str, SandboxProvider]:
    """Each arm's sandbox provider."""
    return {arm.name: get_provider(arm.prepared.config.environment.type,
                                   arm.prepared.config.environment.provider_config)
            for arm in study.arms}


def _hard_exit(jobs: list[tuple[Job, SandboxProvider]], notify: Notify | None) -> None:
    removed = 0
    for job, provider in jobs:
        try:
            job.cancelled = True
            job.write_result(include_running=True)
        except Exception as exc:  # noqa: BLE001 - exiting anyway
            log.warning("could not write the result of %s: %s", job.name, exc)
        removed += len(remove_containers_now(job.name, provider))
    if notify is not None:
        notify(f"removed {removed} sandbox(es); exiting")
    os._exit(EXIT_CANCELLED)


async def _watch(jobs: list[tuple[Job, SandboxProvider]], notify: Notify | None,
                 background: TaskGroup, *,
                 task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        count = 0
        async for signum in signals:
            count += 1
            if count > 1:
                _hard_exit(jobs, notify)
            if notify is not None:
                running = sum(job.running for job, _ in jobs)
                notify(f"{signal.Signals(signum).name}: cancelling the study: stopping "
                       f"{running} running trial(s); press Ctrl-C again to exit at once")
            for job, provider in jobs:
                job.cancel()
                background.start_soon(remove_containers, job.name, provider)


async def run_study(study: PreparedStudy, listener_for: Callable[[str], RolloutListener | None],
                    notify: Notify | None = None) -> dict[str, JobResult]:
    """Run every arm's remaining trials at once; SIGINT/SIGTERM cancel them all (a second
    signal exits at once, results written and sandboxes removed). Returns each arm's
    job result."""
    by_arm = providers(study)
    jobs: list[tuple[Job, SandboxProvider]] = []
    for arm in study.arms:
        job = make_job(arm.prepared, listener=listener_for(arm.name))
        if arm.resuming:
            job.started_at = previous_start(arm.prepared.job_dir)
            await remove_containers(job.name, by_arm[arm.name])  # left by a crashed run
        jobs.append((job, by_arm[arm.name]))
    results: dict[str, JobResult] = {}

    async def run_arm(name: str, job: Job) -> None:
        results[name] = await job.run()

    async with anyio.create_task_group() as tg:
        await tg.start(_watch, jobs, notify, tg)
        async with anyio.create_task_group() as arms:
            for arm, (job, _) in zip(study.arms, jobs, strict=True):
                arms.start_soon(run_arm, arm.name, job, name=f"arm {arm.name}")
        tg.cancel_scope.cancel()
    if any(job.cancelled for job, _ in jobs):
        with anyio.CancelScope(shield=True):
            for job, provider in jobs:
                await remove_containers(job.name, provider)
    study.results = results
    return results


async def finish_record(study: PreparedStudy) -> StudyRecord:
    """Complete study.json with what the runs showed: the agents and models the results
    name (per role: `roles.<name>`), each task's image id, the end time."""
    record = study.record
    for arm in study.arms:
        arm_rec = record.arm(arm.name)
        assert arm_rec is not None
        trials = [t for t in (read_trial(p, "") for p in
                              sorted(arm.prepared.job_dir.glob(f"*/*/*/{RESULT}")))
                  if t is not None]
        arm_rec.models_used = models_used(trials)
        for name, (agents, models) in roles_used(trials).items():
            plan = arm_rec.roles.get(name) or RolePlan(agent=agents[0] if agents else "")
            arm_rec.roles[name] = plan.model_copy(update={"agents_used": agents,
                                                         "models_used": models})
        for key, image in (await image_ids(arm.prepared)).items():
            if key in arm_rec.tasks:
                arm_rec.tasks[key].image = image
    if not any(r.cancelled for r in study.results.values()):
        record.finished_at = utcnow()
    write_record(study.study_dir, record)
    return record


__all__ = ["PreparedStudy", "StudyArm", "finish_record", "prepare_study", "providers",
           "run_study", "split_concurrency", "start_study", "study_locks"]
