"""What an arm ran, collected for its reproducibility record (`record.ArmRecord`): the
agents' installed versions, the planned roles, the tasks' contents and commits before the
run; the models the results name and the tasks' image ids after it."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from benchflow._version import package_version
from benchflow.agents.builtin import BUILTIN_AGENT_NAMES
from benchflow.agents.catalog import load_catalog
from benchflow.errors import BenchflowError
from benchflow.job.runner import PreparedJob
from benchflow.job.store import redacted_job_config
from benchflow.sandbox.base import SnapshotSandbox
from benchflow.sandbox.registry import get_provider
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.study.record import AgentVersion, ArmRecord, RolePlan, TaskRecord

log = logging.getLogger(__name__)


def agent_versions(names: Iterable[str]) -> list[AgentVersion]:
    """Each agent's installed version: its manifest's, benchflow's for the built-ins
    (oracle, nop), none for command and http agents (the job file defines them)."""
    catalog = load_catalog()
    out = []
    for name in dict.fromkeys(names):
        if name in BUILTIN_AGENT_NAMES:
            out.append(AgentVersion(name=name, version=package_version(), package="benchflow"))
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


__all__ = ["agent_versions", "arm_record", "image_ids"]
