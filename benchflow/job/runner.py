"""From a job file to a running job: check everything that can be checked, then run.

`prepare_job` does all the work that can fail on bad input before any container
starts (env expansion, agent names, datasets, filters, registry fetches, planning);
`start_new_job` claims the job folder and writes config.json and manifest.json;
`run_job` runs the trials with Ctrl-C / SIGTERM handling (see `signals`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from benchflow.agents.registry import check_scenes
from benchflow.errors import BenchflowError, ConfigError
from benchflow.job.config import JobConfig
from benchflow.job.datasets import ResolvedDataset, resolve_datasets
from benchflow.job.envvars import EnvLookup, expand_agent_env
from benchflow.job.job import Job, PlannedRollout
from benchflow.job.plan import plan_trials
from benchflow.job.retry import RetryPolicy
from benchflow.job.store import CONFIG, MANIFEST, Manifest, job_lock, write_job_files
from benchflow.rollout.events import RolloutListener
from benchflow.rollout.model_endpoint import check_endpoint, model_endpoint, scenes_for_check
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.sandbox_spec import first_sandbox_spec
from benchflow.sandbox.certs import read_certs
from benchflow.sandbox.early import EarlySandbox, start_early
from benchflow.sandbox.owner import job_instance_id
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.registry import get_provider
from benchflow.settings import host_env
from benchflow.task.env_templates import resolve_mcp_servers, resolve_task_env


log = logging.getLogger(__name__)


@dataclass
class PreparedJob:
    """A validated job: its trials, and which of them still have to run."""

    config: JobConfig
    datasets: list[ResolvedDataset]
    trials: list[PlannedRollout]
    manifest: Manifest
    to_run: list[PlannedRollout] = field(default_factory=list)
    finished: list[RolloutResult] = field(default_factory=list)

    @property
    def job_dir(self) -> Path:
        return self.config.jobs_dir / self.config.name

    def trial_dir(self, trial: PlannedRollout) -> Path:
        return self.job_dir / trial.rollout_name

    @property
    def needs_sandboxes(self) -> bool:
        """Whether any trial left to run starts a sandbox: every task does; a QA item only
        when one of its agents needs one (so a sandbox-less QA run never checks Docker)."""
        return any(trial_needs_sandbox(trial) for trial in self.to_run)


def trial_needs_sandbox(trial: PlannedRollout) -> bool:
    """Whether `trial` starts a sandbox (see `QaRollout`)."""
    from benchflow.agents.base import driver_needs_sandbox
    from benchflow.agents.registry import get_driver

    if trial.task is None or trial.task.qa is None:
        return True
    agents = {role.agent for scene in trial.config.scenes for role in scene.roles}
    return any(driver_needs_sandbox(trial.drivers.get(a) or get_driver(a)) for a in agents)


def check_agents(trials: list[PlannedRollout], lookup: EnvLookup = host_env) -> None:
    """Every agent a trial names resolves to a driver and has its credentials, and every
    task's (and MCP server's) env templates resolve.

    Raises:
        ConfigError: an unknown agent, a missing credential or an unset host variable an
            env template needs, before anything starts.
    """
    for trial in trials:
        check_scenes(scenes_for_check(trial.config), given=trial.drivers,
                     endpoint=check_endpoint(trial.config))
    for servers in {id(t.config.mcp_servers): t.config.mcp_servers for t in trials}.values():
        resolve_mcp_servers(servers, lookup)  # MCP server env templates, likewise
    for task in {id(t.task): t.task for t in trials if t.task is not None}.values():
        resolve_task_env(task, lookup)  # env templates naming unset host variables


def prepare_job(config: JobConfig, *, source: Path | str = "job", lookup: EnvLookup = host_env,
                cache_dir: Path | None = None) -> PreparedJob:
    """Validate and plan a job without starting anything.

    Raises:
        ConfigError: a missing `${VAR}`, an unknown agent, a missing dataset or task,
            a registry or git failure, a bad scenes file.
    """
    if config.environment.extra_ca_certs:  # each file exists and is a PEM certificate
        read_certs(tuple(config.environment.extra_ca_certs))
    if config.model_endpoint is not None:  # the script loads, the key variable is set
        endpoint = config.model_endpoint
        model_endpoint(endpoint.script, endpoint.base_url, endpoint.api_key_env)
    env = expand_agent_env(config, lookup, source)
    datasets = resolve_datasets(config, cache_dir, source)
    trials = plan_trials(config, datasets, env)
    check_agents(trials, lookup)
    return PreparedJob(config, datasets, trials, Manifest.build(config, datasets),
                       to_run=list(trials))


def start_new_job(prepared: PreparedJob) -> None:
    """Claim `jobs/<job>/` and write config.json and manifest.json.

    Raises:
        ConfigError: the folder already holds a job (resume it or pick another name).
    """
    job_dir = prepared.job_dir
    if (job_dir / CONFIG).exists() or (job_dir / MANIFEST).exists():
        raise ConfigError(f"{job_dir}: a job of this name already exists: resume it with "
                          f"`benchflow jobs resume {job_dir}` or set another `name`")
    write_job_files(job_dir, prepared.config, prepared.manifest)


@contextmanager
def opened_job(prepared: PreparedJob, *, resuming: bool) -> Iterator[SandboxProvider]:
    """The job's sandbox provider, checked (`preflight`: credentials, daemon) when a trial
    needs a sandbox, with the job folder locked and claimed (a new job's files written, a
    resumed one's unfinished trials reset) for the duration.

    Raises:
        ConfigError: the folder already holds a job; the backend needs setting up.
        SandboxStartError: the backend does not answer.
    """
    environment = prepared.config.environment
    provider = get_provider(environment.type, environment.provider_config)
    if prepared.needs_sandboxes:  # credentials and daemon, before anything is written
        anyio.run(provider.preflight)
    with job_lock(prepared.job_dir):
        if resuming:
            reset_unfinished(prepared)
        else:
            start_new_job(prepared)
        yield provider


def start_first_sandbox(prepared: PreparedJob) -> EarlySandbox | None:
    """Start the first trial's sandbox now, on a thread (`benchflow.sandbox.early`), when
    its spec is known before its rollout runs (`first_sandbox_spec`); its rollout adopts
    it. Call inside `opened_job`, and `discard_early()` once the job has run. Returns it
    (None: nothing started early).

    Never raises for the trial's config: what its rollout would fail on, it still fails on
    (and records) then.
    """
    if not prepared.to_run or prepared.config.executor != "local":  # ray: in its workers
        return None
    trial, config = prepared.to_run[0], prepared.config
    rollout_config = trial.config.model_copy(update={  # as `Job` runs it
        "job_name": config.name, "jobs_dir": config.jobs_dir,
        "job_id": trial.config.job_id or job_instance_id(prepared.job_dir)})
    try:
        spec = first_sandbox_spec(rollout_config, trial.task, trial.drivers)
    except BenchflowError as exc:  # the rollout meets it again and records it, as ever
        log.debug("no early sandbox: %s", exc)
        return None
    if spec is None:
        return None
    return start_early(rollout_config.environment, spec, rollout_config.provider_config)


def reset_unfinished(prepared: PreparedJob) -> None:
    """Remove what earlier runs left in the folders of trials about to run."""
    for trial in prepared.to_run:
        shutil.rmtree(prepared.trial_dir(trial), ignore_errors=True)


def make_job(prepared: PreparedJob, listener: RolloutListener | None = None) -> Job:
    """The `Job` running `prepared.to_run`, counting `prepared.finished` in its result."""
    config = prepared.config
    settings = dict(concurrency=config.n_concurrent_trials, listener=listener,
                    retry=RetryPolicy.from_config(config.retry), metrics=config.metrics,
                    finished=prepared.finished)
    if config.executor == "ray":
        from benchflow.job.ray_executor import RayJob

        return RayJob(config.name, config.jobs_dir, prepared.to_run, address=config.ray_address,
                      workers=config.ray_workers, **settings)
    return Job(config.name, config.jobs_dir, prepared.to_run, **settings)


__all__ = ["PreparedJob", "check_agents", "make_job", "opened_job", "prepare_job",
           "reset_unfinished", "start_first_sandbox", "start_new_job"]
