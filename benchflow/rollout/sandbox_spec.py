"""The sandbox one rollout asks for, as a `SandboxSpec`: the one mapping from its config,
task, agents and network to the spec, shared by `Rollout.setup` and `benchflow run`'s
early start (`first_sandbox_spec`), which must ask for exactly the same sandbox for the
rollout to adopt it (`benchflow.sandbox.early`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchflow.agents.base import AgentDriver
from benchflow.agents.builtin import BUILTIN_AGENT_NAMES, solution_tree
from benchflow.agents.registry import get_driver
from benchflow.config import RolloutConfig
from benchflow.paths import RolloutPaths, rollout_name, task_and_dataset
from benchflow.rollout.model_endpoint import RolloutNetwork, needs_network_install
from benchflow.rollout.scenes import resolve_scenes
from benchflow.sandbox.labels import LABEL_ROLLOUT
from benchflow.sandbox.ledger import LEDGER_NAME
from benchflow.sandbox.owner import job_instance_id, owner_labels
from benchflow.sandbox.spec import SandboxSpec, SpecTree
from benchflow.settings import get_settings
from benchflow.task import Task
from benchflow.task.env_templates import resolve_task_env


def rollout_spec(config: RolloutConfig, task: Task, *, paths: RolloutPaths, job_name: str,
                 job_id: str, rollout: str, solution: SpecTree | None,
                 network: dict[str, Any]) -> SandboxSpec:
    """The spec of the sandbox `rollout` (its name under the job) starts for `task`
    (its env templates resolved); `solution`: the oracle's tree placed at start;
    `network`: `RolloutNetwork.sandbox_fields`."""
    sandbox_cfg = task.config.sandbox
    return SandboxSpec(
        name=task.path.name,
        environment_dir=task.environment_dir if task.dockerfile else None,
        docker_image=sandbox_cfg.docker_image,
        force_build=config.force_build,
        build_timeout_sec=sandbox_cfg.build_timeout_sec * config.timeout_multiplier,
        cpus=config.override_cpus or sandbox_cfg.cpus,
        memory_mb=config.override_memory_mb or sandbox_cfg.memory_mb,
        storage_mb=config.override_storage_mb or sandbox_cfg.storage_mb,
        pids_limit=sandbox_cfg.pids_limit, download_limit_mb=config.max_download_mb,
        gpus=sandbox_cfg.gpus,
        workdir=sandbox_cfg.workdir,
        env={**sandbox_cfg.env, "ROLLOUT_TASK_INSTRUCTION": config.instruction_path},
        files={config.instruction_path: task.instruction.encode()},
        trees=(solution,) if solution else (),
        compose_file=task.compose_file,
        extra_ca_certs=(config.extra_ca_certs if config.extra_ca_certs is not None
                        else get_settings().extra_ca_certs),
        labels={**owner_labels(job_name, job_id), LABEL_ROLLOUT: rollout},
        build_log_path=paths.build_log,
        ledger_path=config.jobs_dir / job_name / LEDGER_NAME,
        **network,
    )


def first_sandbox_spec(config: RolloutConfig, task: Task | None,
                       drivers: Mapping[str, AgentDriver]) -> SandboxSpec | None:
    """The spec `Rollout(config, task=task, drivers=drivers).setup()` will ask for, where
    it is known before the rollout runs: only built-in agents (no install layers or agent
    image to prepare before the start), no model endpoint, tool server, model-only network
    or fork; else None. `config` as the job runs it (`job_name`, `jobs_dir` and `job_id` set).

    Raises:
        ConfigError: an env template of the task names an unset host variable.
    """
    if task is None or task.qa is not None or config.fork is not None:
        return None
    config = resolve_scenes(config, task)
    agents = {role.agent for scene in config.scenes for role in scene.roles}
    if (not agents <= set(BUILTIN_AGENT_NAMES) or config.model_endpoint is not None
            or config.acp_tools is not None or task.verifier_doc.strategy == "agent-judge"):
        return None
    assert config.job_name is not None
    task = resolve_task_env(task).task
    resolved = {name: drivers.get(name) or get_driver(name) for name in agents}
    task_name, dataset = task_and_dataset(task.path, config.dataset_name)
    network = RolloutNetwork(config, allow_internet=task.config.sandbox.allow_internet,
                             job_name=config.job_name, log_dir=config.jobs_dir)
    if network.policy == "model-only":
        return None
    return rollout_spec(
        config, task, job_name=config.job_name,
        job_id=config.job_id or job_instance_id(config.jobs_dir / config.job_name),
        paths=RolloutPaths.for_trial(config.jobs_dir, config.job_name, config.agent_name,
                                     dataset, task_name, config.attempt),
        rollout=rollout_name(config.agent_name, dataset, task_name, config.attempt),
        solution=solution_tree(task, list(resolved.values())),
        network=network.sandbox_fields(online_install=needs_network_install(resolved.values())))


__all__ = ["first_sandbox_spec", "rollout_spec"]
