"""Which scenes a rollout runs: the caller's, else the task's own, else one turn.

Every entry point (`benchflow run`, job files, `benchflow.run()`) resolves scenes here,
so a task that declares scenes in its frontmatter (`tasks/coder-reviewer`) runs them
however it is started, unless the caller gives scenes (`--scenes`, a job agent's
`scenes` file, `RolloutConfig.scenes`).
"""

from __future__ import annotations

from collections.abc import Mapping

from benchflow.config import RolloutConfig, Scene
from benchflow.errors import BenchflowError, ConfigError
from benchflow.roles import RoleAgent, check_roles
from benchflow.task import Task, load_task


def task_scenes(task: Task | None, agent: str | None, model: str | None = None,
                env: Mapping[str, str] | None = None,
                assigned: Mapping[str, RoleAgent] | None = None) -> list[Scene]:
    """The task's own scenes with unset roles filled from `agent`/`model`, else one turn
    of `agent`; `assigned` (`--role`) gives roles their agents first. `env` goes under
    every role's own env (the role's values win).

    Raises:
        ConfigError: a task role names no agent and `agent` is empty, or `assigned` names
            a role the task does not have.
    """
    source = f"task {task.path.name}" if task is not None else "the task"
    if task is not None and task.scenes is not None:
        check_roles(assigned or {}, task.scenes.role_names(), source=source)
        scenes = task.scenes.to_scenes(agent, model, assigned)
    else:
        check_roles(assigned or {}, ["agent"], source=source)
        given = (assigned or {}).get("agent")
        if given is None and agent is None:
            raise ConfigError(f"{source}: no agent: give -a/--agent or --role agent=AGENT")
        scenes = [Scene.single(agent=given.agent if given else agent,  # type: ignore[arg-type]
                               model=given.model if given else model)]
    if not env:
        return scenes
    return [scene.model_copy(update={"roles": [
        role.model_copy(update={"env": {**env, **role.env}}) for role in scene.roles]})
        for scene in scenes]


def resolve_scenes(config: RolloutConfig, task: Task | None = None) -> RolloutConfig:
    """`config` with its scenes filled in when it has none (see the module docstring).

    A task that does not load gets one turn of `config.agent`: the rollout records the
    load error itself without starting anything.
    """
    if config.scenes:
        return config
    assert config.agent is not None  # RolloutConfig requires scenes or agent
    if task is None:
        try:
            task = load_task(config.task_path)
        except BenchflowError:
            task = None
    try:
        scenes = task_scenes(task, config.agent, config.model)
    except BenchflowError:
        scenes = [Scene.single(agent=config.agent, model=config.model)]
    return config.model_copy(update={"scenes": scenes})


__all__ = ["resolve_scenes", "task_scenes"]
