"""Trial planning: a job file's agents x tasks x attempts as rollout configs.

Trials are ordered agent by agent, then dataset, task and attempt, and each gets the
job-wide settings (timeouts, overrides, instruction path, environment). Agents map to
scenes: `oracle`, `nop` and command agents to `Scene.single(agent=name)` (a command
agent also gets its driver), a registered agent to `Scene.single(agent=name,
model=model)` or to the scenes of its `scenes` file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import ValidationError

from benchflow.agents.base import AgentDriver
from benchflow.agents.command import CommandAgent
from benchflow.agents.model_agent import ModelAgent, ModelAgentConfig
from benchflow.config import RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.job.config import (
    AgentConfig,
    CommandAgentConfig,
    JobConfig,
    RegisteredAgentConfig,
    config_error,
)
from benchflow.job.datasets import ResolvedDataset, TaskEntry
from benchflow.job.job import Trial
from benchflow.task import Task


def load_scenes(path: Path) -> list[Scene]:
    """A scenes file: a YAML list of Scene mappings (name, roles, turns).

    Raises:
        ConfigError: unreadable, not a list, or a scene is invalid.
    """
    try:
        data = yaml.safe_load(path.expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the scenes file ({exc})") from None
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{path}: a scenes file is a non-empty YAML list of scenes")
    scenes = []
    for index, item in enumerate(data):
        try:
            scenes.append(Scene.model_validate(item))
        except ValidationError as exc:
            raise ConfigError(f"{path}: scene [{index}]: {config_error(path, exc)}") from None
    return scenes


def agent_scenes(agent: AgentConfig, env: Mapping[str, str] | None = None) -> list[Scene]:
    """The scenes one job-file agent runs in each trial."""
    env = dict(env or {})
    if not isinstance(agent, RegisteredAgentConfig):
        return [Scene.single(agent=agent.name)]
    if agent.scenes is None:
        return [Scene.single(agent=agent.name, model=agent.model, env=env)]
    scenes = []
    for scene in load_scenes(agent.scenes):
        roles = [role.model_copy(update={"model": role.model or agent.model,
                                         "env": {**env, **role.env}}) for role in scene.roles]
        scenes.append(scene.model_copy(update={"roles": roles}))
    return scenes


def agent_drivers(agent: AgentConfig, env: Mapping[str, str] | None = None
                  ) -> dict[str, AgentDriver]:
    """Per-job drivers a rollout needs beyond the registry: one per command agent."""
    if isinstance(agent, CommandAgentConfig):
        return {agent.name: CommandAgent(agent.name, agent.execute, agent.install,
                                          env=env or {}, description=agent.description)}
    return {}


def qa_drivers(agent: str, drivers: dict[str, AgentDriver], task: Task | None
               ) -> dict[str, AgentDriver]:
    """On QA items the model agent has no tools (so it runs without a sandbox)."""
    if task is None or task.qa is None or agent != "model" or agent in drivers:
        return drivers
    return {**drivers, agent: ModelAgent(ModelAgentConfig(tools=[]))}


def rollout_config(config: JobConfig, scenes: list[Scene], dataset: str, entry: TaskEntry,
                   attempt: int) -> RolloutConfig:
    """One trial's RolloutConfig with the job-wide settings applied."""
    env, verifier = config.environment, config.verifier
    verifier_timeout = None
    if entry.task is not None and (verifier.override_timeout_sec or verifier.max_timeout_sec):
        verifier_timeout = verifier.timeout_for(entry.task.config.verifier.timeout_sec)
    return RolloutConfig(
        task_path=entry.path, scenes=scenes, environment=env.type, jobs_dir=config.jobs_dir,
        job_name=config.name, dataset_name=dataset, attempt=attempt,
        force_build=env.force_build, preserve_env=env.preserve_env,
        timeout_multiplier=config.timeout_multiplier, instruction_path=config.instruction_path,
        verifier_disabled=verifier.disable, verifier_timeout_sec=verifier_timeout,
        override_cpus=env.override_cpus, override_memory_mb=env.override_memory_mb,
        override_storage_mb=env.override_storage_mb, provider_config=env.provider_config,
        model_endpoint=config.model_endpoint,
        # a QA item's answer is its output: nothing in a sandbox is scored, so no hardening
        harden=False if entry.task is not None and entry.task.qa is not None else None,
    )


def plan_trials(config: JobConfig, datasets: list[ResolvedDataset],
                agent_env: Mapping[str, Mapping[str, str]] | None = None) -> list[Trial]:
    """Every trial of the job: agents x tasks x attempts, in that nesting order.

    Raises:
        ConfigError: a scenes file is invalid, or two agents share a results folder.
    """
    trials: list[Trial] = []
    labels: dict[str, str] = {}
    for agent in config.agents:
        env = (agent_env or {}).get(agent.name, {})
        scenes, drivers = agent_scenes(agent, env), agent_drivers(agent, env)
        for dataset in datasets:
            for entry in dataset.tasks:
                for attempt in range(1, config.n_attempts + 1):
                    rollout = rollout_config(config, scenes, dataset.name, entry, attempt)
                    trials.append(Trial(rollout, entry.task, drivers=qa_drivers(
                                            agent.name, drivers, entry.task),
                                        task_folder=entry.name))
        label = RolloutConfig(task_path=Path("."), scenes=scenes).agent_name
        if label in labels and labels[label] != agent.name:
            raise ConfigError(f"agents {labels[label]!r} and {agent.name!r} both store results "
                              f"under {label!r}: give them distinct agents")
        labels[label] = agent.name
    return trials


__all__ = ["agent_drivers", "agent_scenes", "load_scenes", "plan_trials", "rollout_config"]
