"""Rollout configuration: which task, which agents in which scenes, where, and how.

A `Scene` is authoring sugar: `steps.desugar()` turns scenes into the flat list of
`Step`s the runtime executes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from benchflow._models import FrozenModel
from benchflow.errors import ConfigError
from benchflow.sandbox.spec import NetworkPolicy, PreservePolicy

EnvironmentType = Literal["docker", "daytona", "modal"]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class Role(FrozenModel):
    """One participant of a scene: an agent (and model) with its own env and timeouts."""

    name: str = Field(pattern=_NAME)
    agent: str
    model: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_sec: float | None = Field(default=None, gt=0, description="wall clock per prompt")
    idle_timeout_sec: float | None = Field(default=None, gt=0)


class Turn(FrozenModel):
    """One prompt to one role; `prompt=None` means the scene/role prompt file or the task instruction."""

    role: str
    prompt: str | None = None


class Scene(FrozenModel):
    """Roles taking turns in one sandbox. Consecutive turns of a role share its ACP session."""

    name: str = Field(default="main", pattern=_NAME)
    roles: list[Role] = Field(min_length=1)
    turns: list[Turn] = Field(min_length=1)

    @model_validator(mode="after")
    def _turns_name_declared_roles(self) -> Scene:
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names):
            raise ValueError(f"scene {self.name!r}: duplicate role names {names}")
        for i, turn in enumerate(self.turns):
            if turn.role not in names:
                raise ValueError(f"scene {self.name!r}: turn {i} names role {turn.role!r}, "
                                 f"which is not declared (declared: {', '.join(names)})")
        return self

    @classmethod
    def single(cls, agent: str, model: str | None = None, *, role: str = "agent",
               env: dict[str, str] | None = None, timeout_sec: float | None = None,
               prompt: str | None = None) -> Scene:
        """The one-agent, one-turn scene: `Scene.single(agent="claude", model="...")`."""
        return cls(roles=[Role(name=role, agent=agent, model=model, env=env or {},
                               timeout_sec=timeout_sec)],
                   turns=[Turn(role=role, prompt=prompt)])


def load_scenes(path: Path) -> list[Scene]:
    """Scenes from a YAML file: a list of scenes, or a mapping with a `scenes` list.

    Raises:
        ConfigError: unreadable file, bad YAML, or an invalid scene (naming the file).
    """
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read scenes: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("scenes")
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{path}: expected a list of scenes (or 'scenes: [...]'), each with "
                          "roles and turns")
    try:
        return [Scene.model_validate(item) for item in data]
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid scene: {exc}") from exc


class ModelEndpoint(FrozenModel):
    """The model API the rollout's agents use: a scripted model server benchflow starts for
    the rollout (`script`), or a real endpoint (`base_url`, its key in the host variable
    `api_key_env`). Every role gets `BENCHFLOW_PROVIDER_BASE_URL` / `_API_KEY`, which each
    agent's manifest maps to its own settings (see docs/how-to/test-agents-offline.md)."""

    script: Path | None = Field(default=None, description="YAML script of a scripted model")
    base_url: str | None = Field(default=None, pattern=r"^https?://",
                                 description="a real endpoint's root URL (a trailing /v1 is "
                                 "dropped; agents that need it add it back)")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                    description="host variable holding the endpoint's key")
    model: str | None = Field(default=None, description="the model id benchflow itself asks "
                              "for (model agent, judges, LLM users); agents take -m")

    @classmethod
    def remote(cls, base_url: str, model: str | None = None,
               api_key_env: str | None = None) -> ModelEndpoint:
        """An OpenAI-compatible endpoint: `ModelEndpoint.remote("http://host:8000/v1", "qwen")`."""
        return cls(base_url=base_url, model=model, api_key_env=api_key_env)

    @model_validator(mode="after")
    def _one_source(self) -> ModelEndpoint:
        if (self.script is None) == (self.base_url is None):
            raise ValueError("set exactly one of `script` (a scripted model) and `base_url`")
        if self.api_key_env and self.script is not None:
            raise ValueError("`api_key_env` goes with `base_url`; a scripted model needs no key")
        return self


class RolloutConfig(FrozenModel):
    """Everything one rollout needs: `benchflow.run(RolloutConfig(task_path=..., scenes=[...]))`."""

    task_path: Path
    scenes: list[Scene] = Field(min_length=1)
    environment: EnvironmentType = "docker"
    user: Any = Field(default=None, exclude=True, description="a BaseUser driving several rounds")
    max_user_rounds: int = Field(default=5, ge=1)
    oracle_access: bool = False
    jobs_dir: Path = Path("jobs")
    job_name: str | None = None
    dataset_name: str | None = None
    attempt: int = Field(default=1, ge=1)
    force_build: bool = False
    preserve_env: PreservePolicy = "never"
    extra_ca_certs: tuple[Path, ...] | None = Field(
        default=None, description="PEM files for sandboxes; None: BENCHFLOW_EXTRA_CA_CERTS")
    timeout_multiplier: float = Field(default=1.0, gt=0)
    instruction_path: str = "/tmp/instruction.md"
    verifier_disabled: bool = False
    harden: bool | None = Field(
        default=None, description="harden before the final verify; None: unless every agent "
        "is a trusted built-in (oracle, nop)")
    verifier_timeout_sec: float | None = Field(default=None, gt=0)
    override_cpus: float | None = None
    override_memory_mb: int | None = None
    override_storage_mb: int | None = None
    provider_config: dict[str, Any] = Field(default_factory=dict)
    network: NetworkPolicy | None = Field(
        default=None, description="None: the task's (`allow_internet: false` -> none, or "
        "model-only with a model endpoint); a scripted model server implies model-only")
    model_endpoint: ModelEndpoint | None = None
    judge_endpoint: ModelEndpoint | None = Field(
        default=None, description="the LLM judge's endpoint (base_url) for tasks scored by a "
        "judge; None: the model endpoint")

    @field_validator("task_path")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @property
    def agent_name(self) -> str:
        """The agent label used in paths and results: one agent's name, or `a+b` for several."""
        names = dict.fromkeys(r.agent for s in self.scenes for r in s.roles)
        return "+".join(names)

    @property
    def model_name(self) -> str | None:
        models = dict.fromkeys(r.model for s in self.scenes for r in s.roles if r.model)
        return "+".join(models) or None
