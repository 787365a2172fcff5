"""`RolloutConfig` of the AgentFlow-style API (`benchflow.qa`), loaded from JSON or YAML.

Every parameter of the AgentFlow rollout reference is a field here; unknown keys are
rejected naming the nearest valid one. Secrets are never written in the file: `api_key`
and `evaluator_api_key` are environment references (`${OPENAI_API_KEY}` or
`env:OPENAI_API_KEY`), or empty for endpoints that need no key. `available_tools` are the
model agent's tools (`shell`, `read_file`, `write_file`); AgentFlow's resource servers
(`resource_types`, `sandbox_server_url`, `sandbox_auto_start`, `sandbox_config_path`) do not
exist in benchflow, which starts its own sandboxes (`environment`), so only their defaults
are accepted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from benchflow._models import FrozenModel
from benchflow.agents.model_agent import unknown_tool
from benchflow.agents.model_tools import TOOL_NAMES
from benchflow._config_files import read_config_file
from benchflow.errors import ConfigError
from benchflow.task._suggest import suggest
from benchflow.verify.metrics import METRICS

_ENV_REF = re.compile(r"^(?:\$\{(?P<a>[A-Za-z_][A-Za-z0-9_]*)\}|env:(?P<b>[A-Za-z_][A-Za-z0-9_]*))$")
DEFAULT_SANDBOX_URL = "http://127.0.0.1:18890"


def env_reference(value: str | None, field: str) -> str | None:
    """The variable name of an env reference (`${VAR}` / `env:VAR`), None for "" / None.

    Raises:
        ValueError: a literal key (secrets stay out of config files).
    """
    if not value:
        return None
    match = _ENV_REF.match(value.strip())
    if match is None:
        raise ValueError(f"{field} must name an environment variable, e.g. "
                         f"\"${{OPENAI_API_KEY}}\" or \"env:OPENAI_API_KEY\" (keys are never "
                         f"written in config files)")
    return match.group("a") or match.group("b")


class QaRolloutConfig(FrozenModel):
    """The parameters of a QA rollout (the AgentFlow reference's table, plus `environment`,
    `sandbox_image`, `answer_pattern`, `agent`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_path: str | None = None
    output_dir: str | None = None
    model_name: str = "gpt-4.1-2025-04-14"
    api_key: str = ""
    base_url: str = ""
    max_turns: int = Field(default=100, ge=1)
    max_retries: int = Field(default=3, ge=0)
    max_workers: int = Field(default=1, ge=1)
    available_tools: list[str] = Field(default_factory=list)
    system_prompt: str = ""
    system_prompt_file: str | None = None
    evaluate_results: bool = True
    evaluation_metric: str = "exact_match"
    evaluator_model_name: str | None = None
    evaluator_api_key: str | None = None
    evaluator_base_url: str | None = None
    evaluator_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    evaluator_max_retries: int = Field(default=3, ge=0)
    evaluator_extra_params: dict[str, Any] = Field(default_factory=dict)
    evaluator_prompt: str | None = None
    resource_types: list[str] = Field(default_factory=list)
    resource_init_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sandbox_server_url: str = DEFAULT_SANDBOX_URL
    sandbox_auto_start: bool = False
    sandbox_config_path: str | None = None
    sandbox_timeout: int = Field(default=120, ge=1)
    benchmark_name: str | None = None
    number_of_tasks: int | None = Field(default=None, ge=1)
    task_ids: list[str] | None = None
    parallel: bool = False
    save_results: bool = True
    save_trajectories: bool = True
    trajectory_only: bool = False
    save_summary: bool = True
    # benchflow's additions
    agent: str = "model"
    environment: Literal["docker", "daytona", "modal"] = "docker"
    sandbox_image: str = "debian:bookworm-slim"
    answer_pattern: str | None = None
    extra_metrics: list[str] = Field(default_factory=list)

    @field_validator("api_key", "evaluator_api_key")
    @classmethod
    def _key_is_a_reference(cls, value: str | None, info: Any) -> str | None:
        env_reference(value, info.field_name)
        return value

    @field_validator("available_tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in TOOL_NAMES:
                raise ValueError(unknown_tool(name))
        return value

    @field_validator("evaluation_metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        if value not in METRICS:
            near = suggest(value, METRICS)
            hint = f" (did you mean {near!r}?)" if near else ""
            raise ValueError(f"unknown metric {value!r}{hint}; metrics: {', '.join(METRICS)}")
        return value

    @field_validator("resource_types", "resource_init_configs")
    @classmethod
    def _no_resources(cls, value: Any, info: Any) -> Any:
        if value:
            raise ValueError(f"{info.field_name}: benchflow has no resource servers; tools run in "
                             "the sandbox it starts (available_tools: shell, read_file, "
                             "write_file; environment: docker | daytona | modal)")
        return value

    @field_validator("sandbox_server_url", "sandbox_auto_start", "sandbox_config_path")
    @classmethod
    def _no_sandbox_server(cls, value: Any, info: Any) -> Any:
        default = {"sandbox_server_url": DEFAULT_SANDBOX_URL, "sandbox_auto_start": False,
                   "sandbox_config_path": None}[info.field_name]
        if value != default:
            raise ValueError(f"{info.field_name}: benchflow starts its own sandboxes (set "
                             "`environment` instead of a sandbox server)")
        return value

    @property
    def api_key_env(self) -> str | None:
        return env_reference(self.api_key, "api_key")

    @property
    def evaluator_api_key_env(self) -> str | None:
        return env_reference(self.evaluator_api_key, "evaluator_api_key")


def parse_config(data: Any, source: str = "<config>") -> QaRolloutConfig:
    """Validate a loaded mapping.

    Raises:
        ConfigError: not a mapping, an unknown key (nearest valid key named), a bad value.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a rollout config is a mapping of parameters")
    valid = list(QaRolloutConfig.model_fields)
    for key in data:
        if key not in valid:
            near = suggest(str(key), valid)
            hint = f" — did you mean '{near}'?" if near else f" (valid keys: {', '.join(valid)})"
            raise ConfigError(f"{source}: unknown key '{key}'{hint}")
    try:
        return QaRolloutConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from exc


def load_config(config_path: str | Path) -> QaRolloutConfig:
    """A config from a `.json`, `.yaml` or `.yml` file.

    Raises:
        ConfigError: unreadable, not JSON/YAML, or invalid (file and key named).
    """
    path = Path(config_path)
    data = read_config_file(path, "rollout config")
    return parse_config(data, str(path))


__all__ = ["QaRolloutConfig", "env_reference", "load_config", "parse_config"]
