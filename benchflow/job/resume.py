"""Resume: run the trials of a job folder that have no final result yet.

A trial is final when its result.json parses, it was not cancelled and its error (if
any) was not a transient infrastructure failure (those are retryable); with
`retry_errors`, trials that ended in an error (a teardown error alone excepted) run
again too. A half-written result.json (a crash mid-write) counts as unfinished.
Resume refuses, listing the differences, when the agents, their models, n_attempts
or the tasks' contents differ from what the job started with (manifest.json), so
results of one job always come from one configuration. A finished trial never runs
twice: its folder is left alone and the job folder is locked while running.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig, load_job_config, with_overrides
from benchflow.job.envvars import EnvLookup
from benchflow.job.retry import RetryPolicy
from benchflow.job.runner import PreparedJob, prepare_job
from benchflow.job.store import CONFIG, RESULT, read_manifest, read_trial_result
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.secrets import REDACTED
from benchflow.settings import host_env


def is_final(result: RolloutResult, *, retry_errors: bool = False) -> bool:
    """Whether a trial's result stands (resume does not run the trial again): a cancelled
    trial and one whose error was a transient infrastructure failure (`retryable`: a
    daemon restart, a lost connection) run again; with `retry_errors`, every error does."""
    if result.error is None:
        return True
    if result.error.type == "cancelled" or RetryPolicy.is_retryable(result):
        return False
    if retry_errors:
        return result.error.type == "environment_teardown_failed" and result.reward is not None
    return True


def load_saved_config(job_dir: Path, config_file: Path | None = None) -> JobConfig:
    """The job's config: its saved config.json, or `config_file` when given.

    The name and jobs_dir always follow `job_dir` (so a moved job folder resumes).

    Raises:
        ConfigError: unreadable, or config.json holds redacted secrets (give the job file).
    """
    source = config_file or job_dir / CONFIG
    if not source.exists():
        raise ConfigError(f"{job_dir}: no {CONFIG}: not a job folder of `benchflow jobs run`")
    config = load_job_config(source)
    if config_file is None:
        for index, agent in enumerate(config.agents):
            env = agent.env if agent.kind in ("command", "registered", "roles") else {}
            redacted = [k for k, v in env.items() if v == REDACTED]
            if redacted:
                raise ConfigError(
                    f"{source}: agents[{index}].env.{redacted[0]} was saved redacted (the job file "
                    "held the secret itself): resume with --config <job file>, and prefer "
                    "'${VAR}' references for secrets")
    return with_overrides(config, name=job_dir.name, jobs_dir=job_dir.parent)


def previous_start(job_dir: Path) -> datetime | None:
    """`started_at` of the job's earlier run, when its result.json says."""
    try:
        value = json.loads((job_dir / RESULT).read_text()).get("started_at")
        return datetime.fromisoformat(value) if value else None
    except (OSError, ValueError, AttributeError):
        return None


def prepare_resume(job_dir: Path, *, retry_errors: bool = False, config_file: Path | None = None,
                   n_concurrent_trials: int | None = None, lookup: EnvLookup = host_env,
                   cache_dir: Path | None = None) -> PreparedJob:
    """Plan the rest of a job: `to_run` holds only the unfinished trials.

    Raises:
        ConfigError: not a job folder, or the job changed since it started.
    """
    job_dir = Path(job_dir)
    if not job_dir.is_dir():
        raise ConfigError(f"{job_dir}: no such job folder: give jobs/<job>")
    saved = read_manifest(job_dir)
    config = load_saved_config(job_dir, config_file)
    if n_concurrent_trials is not None:
        config = with_overrides(config, n_concurrent_trials=n_concurrent_trials)
    prepared = prepare_job(config, source=config_file or job_dir / CONFIG, lookup=lookup,
                           cache_dir=cache_dir)
    differences = saved.differences(prepared.manifest)
    if differences:
        raise ConfigError(f"{job_dir}: cannot resume: the job changed since it started:\n  - "
                          + "\n  - ".join(differences)
                          + "\nrestore the original agents and tasks, or start a new job")
    prepared.to_run, prepared.finished = [], []
    for trial in prepared.trials:
        result = read_trial_result(prepared.trial_dir(trial) / RESULT)
        if result is not None and is_final(result, retry_errors=retry_errors):
            prepared.finished.append(result)
        else:
            prepared.to_run.append(trial)
    return prepared


__all__ = ["is_final", "load_saved_config", "prepare_resume", "previous_start"]
