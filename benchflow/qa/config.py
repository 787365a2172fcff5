"""`RolloutConfig` of the AgentFlow-style API (`benchflow.qa`), loaded from JSON or YAML.

Every parameter of the AgentFlow rollout reference is a field here; unknown keys are
rejected naming the nearest valid one. `api_key` and `evaluator_api_key` are best given as
environment references (`${OPENAI_API_KEY}` or `env:OPENAI_API_KEY`); a literal key is
accepted with a one-line warning, used in this process only and never written to any
output. `available_tools` are the model agent's sandbox tools (`shell`, `read_file`,
`write_file`) and the tool server's (`web:search`, `web:browse`, `doc:read`, `code:run`,
`vm:screenshot`, `vm:click`, `vm:type`), served at `sandbox_server_url` (started by
benchflow with `sandbox_auto_start`, configured by `sandbox_config_path`), with sessions
set up by `resource_types` and `resource_init_configs`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from benchflow._models import FrozenModel
from benchflow._config_files import read_config_file
from benchflow.agents.model_agent import check_tools
from benchflow.settings import define_secret
from benchflow.tools.base import RESOURCE_TYPES, TOOL_NAMES as SERVER_TOOLS
from benchflow.errors import ConfigError
from benchflow._suggest import suggest
from benchflow.verify.metrics import METRICS
from benchflow import bounds as B

log = logging.getLogger(__name__)

_ENV_REF = re.compile(r"^(?:\$\{(?P<a>[A-Za-z_][A-Za-z0-9_]*)\}|env:(?P<b>[A-Za-z_][A-Za-z0-9_]*))$")
DEFAULT_SANDBOX_URL = "http://127.0.0.1:18890"


def env_reference(value: str | None, field: str) -> str | None:
    """The variable name of an env reference (`${VAR}` / `env:VAR`), None for "" / None;
    for a literal key, a made-up name this process answers it under (`define_secret`)."""
    if not value:
        return None
    match = _ENV_REF.match(value.strip())
    if match is None:
        return define_secret(value.strip())
    return match.group("a") or match.group("b")


def is_literal_key(value: str | None) -> bool:
    return bool(value) and _ENV_REF.match(str(value).strip()) is None


class QaRolloutConfig(FrozenModel):
    """The parameters of a QA rollout (the AgentFlow reference's table, plus `environment`,
    `sandbox_image`, `answer_pattern`, `agent`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_path: str | None = None
    output_dir: str | None = None
    model_name: str = "gpt-4.1-2025-04-14"
    api_key: str = Field(default="", repr=False)
    base_url: str = ""
    max_turns: int = Field(default=100, ge=1, le=B.MAX_TURNS)
    max_retries: int = Field(default=3, ge=0, le=B.MAX_RETRIES)
    max_workers: int = Field(default=1, ge=1, le=B.MAX_CONCURRENCY)
    available_tools: list[str] = Field(default_factory=list)
    system_prompt: str = ""
    system_prompt_file: str | None = None
    evaluate_results: bool = True
    evaluation_metric: str = "exact_match"
    evaluator_model_name: str | None = None
    evaluator_api_key: str | None = Field(default=None, repr=False)
    evaluator_base_url: str | None = None
    evaluator_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    evaluator_max_retries: int = Field(default=3, ge=0, le=B.MAX_RETRIES)
    evaluator_extra_params: dict[str, Any] = Field(default_factory=dict)
    evaluator_prompt: str | None = None
    resource_types: list[str] = Field(default_factory=list)
    resource_init_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sandbox_server_url: str = DEFAULT_SANDBOX_URL
    sandbox_auto_start: bool = False
    sandbox_config_path: str | None = None
    sandbox_timeout: int = Field(default=120, ge=1, le=B.MAX_SECONDS)
    benchmark_name: str | None = None
    number_of_tasks: int | None = Field(default=None, ge=1, le=B.MAX_TASKS)
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
    def _warn_literal(cls, value: str | None, info: Any) -> str | None:
        if is_literal_key(value):
            log.warning("%s is a literal key: it is used but never written out; prefer an "
                        "environment reference such as \"${OPENAI_API_KEY}\"", info.field_name)
        return value

    @field_validator("available_tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        try:
            return check_tools(value, "available_tools")
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("available_tools: ")) from None

    @field_validator("evaluation_metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        if value not in METRICS:
            near = suggest(value, METRICS)
            hint = f" (did you mean {near!r}?)" if near else ""
            raise ValueError(f"unknown metric {value!r}{hint}; metrics: {', '.join(METRICS)}")
        return value

    @field_validator("resource_types")
    @classmethod
    def _known_resources(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in RESOURCE_TYPES:
                raise ValueError(f"unknown resource type {name!r}; resource types: "
                                 f"{', '.join(RESOURCE_TYPES)}")
        return value

    @field_validator("sandbox_server_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/")

    @property
    def server_tools(self) -> list[str]:
        """The available tools the tool server runs."""
        return [t for t in self.available_tools if t in SERVER_TOOLS]

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
