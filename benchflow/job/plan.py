"""Rollout planning: a job file's agents x tasks x attempts as rollout configs.

Trials are ordered agent by agent, then dataset, task and attempt, and each gets the
job-wide settings (timeouts, overrides, instruction path, environment). Agents map to
scenes: `oracle`, `nop` and command agents to `Scene.single(agent=name)` (a command
agent also gets its driver), a registered agent to `Scene.single(agent=name,
model=model)` or to the scenes of its `scenes` file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from benchflow.agents.base import AgentDriver
from benchflow.bounds import MAX_TRIALS
from benchflow.agents.command import CommandAgent
from benchflow.agents.http import HttpAgent
from benchflow.config import RolloutConfig, Scene, load_scenes
from benchflow.errors import ConfigError
from benchflow.job.config import (
    AgentConfig,
    JobConfig,
    RegisteredAgentConfig,
    RolesAgentConfig,
)
from benchflow.job.datasets import ResolvedDataset, TaskEntry
from benchflow.job.job import PlannedRollout
from benchflow.mcp import McpServer
from benchflow.roles import assign_roles
from benchflow.rollout.scenes import task_scenes
from benchflow.task import Task
from benchflow.tools.acp import AcpTools, acp_tools


def agent_scenes(agent: AgentConfig, env: Mapping[str, str] | None = None,
                 task: Task | None = None) -> list[Scene]:
    """The scenes one job-file agent runs on `task`: its scenes file, else the task's own
    scenes (unset roles filled with this agent), else one turn of the agent."""
    env = dict(env or {})
    scenes_file = agent.scenes if agent.kind in ("builtin", "registered", "roles") else None
    with_model = agent.kind in ("registered", "roles")
    model = agent.model if with_model else None
    assigned = agent.assigned() if agent.kind == "roles" else None
    fills = agent.agent if agent.kind == "roles" else agent.name
    if scenes_file is None:
        return task_scenes(task, fills, model, env if with_model else None, assigned)
    scenes = []
    for scene in load_scenes(scenes_file):
        roles = [role.model_copy(update={"model": role.model or model,
                                         "env": {**env, **role.env}}) for role in scene.roles]
        scenes.append(scene.model_copy(update={"roles": roles}))
    if assigned:
        scenes = assign_roles(scenes, assigned, source=f"scenes file {scenes_file}")
    return scenes


def agent_drivers(agent: AgentConfig, env: Mapping[str, str] | None = None
                  ) -> dict[str, AgentDriver]:
    """Per-job drivers a rollout needs beyond the registry: one per command or http agent."""
    if agent.kind == "command":
        return {agent.name: CommandAgent(agent.name, agent.execute, agent.install,
                                          env=env or {}, description=agent.description)}
    if agent.kind == "http":  # `env` holds its expanded headers
        return {agent.name: HttpAgent(agent.name, agent.endpoint, headers=env or {},
                                      timeout_sec=agent.timeout_sec)}
    return {}


def trial_drivers(agent: AgentConfig, drivers: dict[str, AgentDriver], task: Task | None
                  ) -> dict[str, AgentDriver]:
    """The drivers of one trial: the job's, plus the `model` agent with the job file's
    `tools`/`max_turns` (on QA items it has no tools unless given, so it needs no sandbox)."""
    if not isinstance(agent, RegisteredAgentConfig) or agent.name != "model":
        return drivers
    qa = task is not None and task.qa is not None
    if agent.tools is None and agent.max_turns is None and not qa:
        return drivers  # the registry's default model agent
    from benchflow.agents.model_agent import ModelAgent, ModelAgentConfig, check_tools

    settings: dict[str, object] = {}
    if agent.tools is not None or qa:
        settings["tools"] = check_tools(agent.tools or [], f"agents[{agent.name}].tools")
    if agent.max_turns is not None:
        settings["max_turns"] = agent.max_turns
    return {**drivers, agent.name: ModelAgent(ModelAgentConfig.model_validate(settings))}


def agent_acp_tools(agent: AgentConfig, config: JobConfig) -> AcpTools | None:
    """The tool-server tools an ACP agent gets over MCP (`tools` of a registered agent
    other than `model`), with the job's `tool_config` settings.

    Raises:
        ConfigError: `tool_config` is unreadable or invalid, or no agent takes it.
    """
    if not isinstance(agent, RegisteredAgentConfig) or agent.name == "model" or not agent.tools:
        if config.tool_config is not None and not any(
                isinstance(a, RegisteredAgentConfig) and a.name != "model" and a.tools
                for a in config.agents):
            raise ConfigError(f"tool_config (--tool-config) {config.tool_config}: it sets the "
                              "tools ACP agents get (an agent's `tools`, --tool); no ACP agent "
                              "here has any (the model agent uses a running `benchflow tools "
                              "serve --config`)")
        return None
    from benchflow._extras import require

    require("starlette", "tools", f"the tools of {agent.name!r} (the tool server)")
    return acp_tools(agent.tools, config_path=config.tool_config)


def rollout_config(config: JobConfig, scenes: list[Scene], dataset: str, entry: TaskEntry,
                   attempt: int, mcp_servers: list[McpServer] | None = None,
                   tools: AcpTools | None = None) -> RolloutConfig:
    """One trial's RolloutConfig with the job-wide settings applied (`mcp_servers`: the job's,
    resolved once by `plan_trials`; `tools`: the agent's `agent_acp_tools`)."""
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
        max_download_mb=env.max_download_mb,
        network=env.network, model_endpoint=config.model_endpoint,
        extra_ca_certs=None if env.extra_ca_certs is None else tuple(env.extra_ca_certs),
        capture_model_calls=config.capture_model_calls,
        skills=config.skills, mcp_servers=mcp_servers or [], acp_tools=tools,
        # a QA item's answer is its output: nothing in a sandbox is scored, so no hardening
        harden=False if entry.task is not None and entry.task.qa is not None else config.harden,
        judge_endpoint=config.judge_endpoint, user=_user(config),
        snapshot_turns=config.snapshot_turns, workspace_changes=config.workspace_changes,
    )


def _user(config: JobConfig) -> object | None:
    """A fresh user for one trial (users keep state across rounds) from the job's `user`."""
    if config.user is None:
        return None
    from benchflow.users import user_from_frontmatter  # users load only when a job has one

    return user_from_frontmatter(config.user, "job file user")


def plan_trials(config: JobConfig, datasets: list[ResolvedDataset],
                agent_env: Mapping[str, Mapping[str, str]] | None = None) -> list[PlannedRollout]:
    """Every trial of the job: agents x tasks x attempts, in that nesting order.

    Raises:
        ConfigError: a scenes or MCP config file is invalid, or two agents share a results
            folder.
    """
    total = len(config.agents) * sum(len(d.tasks) for d in datasets) * config.n_attempts
    if total > MAX_TRIALS:  # refused before a single trial is built
        raise ConfigError(f"the job has {total:,} trials (agents x tasks x attempts), more than "
                          f"{MAX_TRIALS:,}: lower n_attempts, filter the datasets (tasks, "
                          "max_tasks) or split the job")
    trials: list[PlannedRollout] = []
    labels: dict[str, str] = {}
    mcp_servers = config.all_mcp_servers()
    for agent in config.agents:
        env = (agent_env or {}).get(agent.name, {})
        drivers = agent_drivers(agent, env)
        tools = agent_acp_tools(agent, config)
        # a roles entry's scenes depend on the task's roles: planned per task below
        scenes = [] if isinstance(agent, RolesAgentConfig) else agent_scenes(agent, env)
        for dataset in datasets:
            for entry in dataset.tasks:
                scenes = agent_scenes(agent, env, entry.task)
                for attempt in range(1, config.n_attempts + 1):
                    rollout = rollout_config(config, scenes, dataset.name, entry, attempt,
                                             mcp_servers, tools)
                    trials.append(PlannedRollout(rollout, entry.task, drivers=trial_drivers(
                                            agent, drivers, entry.task),
                                        task_folder=entry.name))
        if not scenes:
            continue
        label = RolloutConfig(task_path=Path("."), scenes=scenes).agent_name
        if label in labels and labels[label] != agent.name:
            raise ConfigError(f"agents {labels[label]!r} and {agent.name!r} both store results "
                              f"under {label!r}: give them distinct agents")
        labels[label] = agent.name
    return trials


__all__ = ["agent_acp_tools", "agent_drivers", "agent_scenes", "plan_trials", "rollout_config"]
