"""A study folder on disk, and the reproducibility record it keeps.

```text
<studies_dir>/<study>/
├── study.yaml            the study file as given (byte for byte)
├── study.json            StudyRecord: settings, tasks, and per arm what ran (below)
└── <study>.<arm>/        one job folder per arm (config.json, manifest.json, result.json,
                          <agent>/<dataset>/<task>__<n>/ trials), as `benchflow jobs` writes
```

Per arm the record holds the resolved job config (secrets redacted), the agents with
the versions their manifests install, the role -> agent/model assignments planned, the
models the results say were used, each task's image id (as the sandbox backend reports
it) and git commit, and the benchflow and Python versions.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from benchflow._models import StrictModel
from benchflow.errors import BenchflowError, ConfigError
from benchflow.job.runner import PreparedJob
from benchflow.job.store import redacted_job_config
from benchflow.rollout.result import write_json_atomic
from benchflow.sandbox.base import SnapshotSandbox
from benchflow.sandbox.registry import get_provider
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.study.trials import TrialRecord

log = logging.getLogger(__name__)

STUDY_FILE = "study.yaml"
RECORD = "study.json"


class AgentVersion(StrictModel):
    """An agent as installed: its manifest's version and package (built-ins: benchflow's)."""

    name: str
    version: str | None = None
    package: str | None = None


class RolePlan(StrictModel):
    """Who plays a role, as planned (the results' `roles` say what was used)."""

    agent: str
    model: str | None = None


class TaskRecord(StrictModel):
    """A task as the arm ran it."""

    content_sha256: str | None = None
    git_commit: str | None = None
    image: str | None = Field(default=None, description="the sandbox image's id, when the "
                              "backend reports one (docker: the image id)")


class ArmRecord(StrictModel):
    """What one arm is: enough to run it again and to cite it."""

    name: str
    description: str | None = None
    job: str = Field(description="the arm's job folder, inside the study folder")
    config: dict = Field(default_factory=dict, description="the job config, secrets redacted")
    agents: list[AgentVersion] = Field(default_factory=list)
    roles: dict[str, RolePlan] = Field(default_factory=dict)
    models_used: list[str] = Field(default_factory=list)
    tasks: dict[str, TaskRecord] = Field(default_factory=dict)


class StudyRecord(StrictModel):
    """`study.json`: the study's settings and every arm's record."""

    schema_version: Literal[1] = 1
    name: str
    description: str | None = None
    baseline: str
    k: int
    tasks: list[str] = Field(default_factory=list, description="<dataset>/<task> keys")
    benchflow_version: str
    python_version: str = Field(default_factory=platform.python_version)
    platform: str = Field(default_factory=platform.platform)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    arms: list[ArmRecord] = Field(default_factory=list)

    def arm(self, name: str) -> ArmRecord | None:
        return next((a for a in self.arms if a.name == name), None)


def agent_versions(names: Iterable[str]) -> list[AgentVersion]:
    """Each agent's installed version: its manifest's, benchflow's for the built-ins
    (oracle, nop), none for command and http agents (the job file defines them)."""
    from benchflow import __version__
    from benchflow.agents.builtin import BUILTIN_AGENT_NAMES
    from benchflow.agents.catalog import load_catalog

    catalog = load_catalog()
    out = []
    for name in dict.fromkeys(names):
        if name in BUILTIN_AGENT_NAMES:
            out.append(AgentVersion(name=name, version=__version__, package="benchflow"))
            continue
        canonical = catalog.resolve(name)
        if canonical is None or canonical not in catalog.manifests:
            out.append(AgentVersion(name=name))
            continue
        manifest = catalog.manifests[canonical]
        out.append(AgentVersion(name=name, version=manifest.version,
                                package=manifest.install.package))
    return out


def arm_record(name: str, description: str | None, prepared: PreparedJob) -> ArmRecord:
    """An arm's record from its planned job (before it runs: no images nor models used)."""
    roles: dict[str, RolePlan] = {}
    for trial in prepared.trials:
        for scene in trial.config.scenes:
            for role in scene.roles:
                roles.setdefault(role.name, RolePlan(agent=role.agent, model=role.model))
    tasks = {}
    for dataset in prepared.datasets:
        for entry in dataset.tasks:
            commit = entry.git_commit_id or (entry.task.git_commit_id() if entry.task else None)
            tasks[f"{dataset.name}/{entry.name}"] = TaskRecord(
                content_sha256=entry.content_hash(), git_commit=commit)
    return ArmRecord(name=name, description=description, job=prepared.config.name,
                     config=redacted_job_config(prepared.config),
                     agents=agent_versions(r.agent for r in roles.values()), roles=roles,
                     tasks=tasks)


def models_used(trials: Iterable[TrialRecord]) -> list[str]:
    """The models the results name (top-level and per role), in first-seen order."""
    seen: dict[str, None] = {}
    for trial in trials:
        for model in [trial.model, *(r.model for r in trial.roles.values())]:
            if model:
                seen.setdefault(model, None)
    return list(seen)


async def image_ids(prepared: PreparedJob) -> dict[str, str | None]:
    """Each task's sandbox image id, asked of the arm's backend (after the arm ran, the
    images exist: nothing is built). None where the backend reports no image id or the
    task did not load."""
    environment = prepared.config.environment
    provider = get_provider(environment.type, environment.provider_config)
    certs = (tuple(environment.extra_ca_certs) if environment.extra_ca_certs is not None
             else get_settings().extra_ca_certs)
    out: dict[str, str | None] = {}
    for dataset in prepared.datasets:
        for entry in dataset.tasks:
            key, task = f"{dataset.name}/{entry.name}", entry.task
            out[key] = None
            if task is None or not provider.capabilities.snapshots:
                continue
            spec = SandboxSpec(name=task.path.name,
                               environment_dir=task.environment_dir if task.dockerfile else None,
                               docker_image=task.config.sandbox.docker_image,
                               extra_ca_certs=certs)
            try:
                sandbox = provider.create(spec)
                if isinstance(sandbox, SnapshotSandbox):
                    out[key] = await sandbox.snapshot_base()
            except BenchflowError as exc:
                log.warning("no image id for %s: %s", key, exc)
    return out


def write_record(study_dir: Path, record: StudyRecord) -> None:
    write_json_atomic(study_dir / RECORD, record.model_dump_json(indent=2))


def read_record(study_dir: Path) -> StudyRecord:
    """The study's `study.json`.

    Raises:
        ConfigError: missing or unreadable.
    """
    path = study_dir / RECORD
    try:
        return StudyRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        raise ConfigError(f"{study_dir}: no readable {RECORD} ({type(exc).__name__}): not a "
                          "study folder of `benchflow study`") from None


def is_study_dir(path: Path) -> bool:
    return (path / RECORD).is_file()


__all__ = ["RECORD", "STUDY_FILE", "AgentVersion", "ArmRecord", "RolePlan", "StudyRecord",
           "TaskRecord", "agent_versions", "arm_record", "image_ids", "is_study_dir",
           "models_used", "read_record", "write_record"]
