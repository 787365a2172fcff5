"""The job file: which agents on which datasets, how many times, how hard to retry.

```yaml
name: my-eval-run            # default: YYYY-MM-DD__HH-MM-SS
jobs_dir: jobs
n_attempts: 1
n_concurrent_trials: 4
timeout_multiplier: 1.0
retry: {max_attempts: 3, initial_delay_ms: 1000, max_delay_ms: 30000, multiplier: 2.0}
environment: {type: docker, preserve_env: never, provider_config: {network: my-net},
              network: model-only, extra_ca_certs: [./proxy-ca.pem]}
model_endpoint: {script: ./model.yaml}   # or {base_url: http://..., api_key_env: MY_KEY}
verifier: {override_timeout_sec: 120, max_timeout_sec: 600, disable: false}
metrics: [{type: mean}]
skills: [./skills/ledger-balances]    # skill folders every agent gets (besides the task's)
user: {type: llm, persona: "a busy maintainer"}   # a simulated user driving rounds
mcp_config: ./.mcp.json               # Claude-style MCP servers for every ACP agent
tool_config: ./tools.yaml             # settings of the tool server's tools (agents[].tools)
agents:
  - name: oracle
  - name: my-agent                     # a command agent
    install: "pip install my-agent"
    execute: "my-agent --task $ROLLOUT_TASK_INSTRUCTION"
    env: {MY_API_KEY: "${MY_API_KEY}"}
  - {name: claude-code, model: claude-sonnet-4-5}   # a registered ACP agent
    tools: ["web:search"]              # optional: the tool server's tools, over MCP
  - roles: {coder: "claude:claude-sonnet-4-6", reviewer: "codex:gpt-5.4"}  # per role
datasets:
  - {path: ./tasks, tasks: [hello-world]}
  - {registry: {path: ./registry.json}, name: my-bench, version: "1.0"}
```

`load_job_config(path)` is the one loader (YAML or JSON); every unknown key or bad
value is a `ConfigError` naming the file, the field and the fix. Relative paths
(`jobs_dir`, dataset `path`, registry `path`, `scenes`) are relative to the current
directory, as in Harbor.
"""

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from benchflow import bounds as B
from benchflow._config_files import read_config_file
from benchflow._lenient import validate_leniently
from benchflow._models import FrozenModel
from benchflow.agents.builtin import BUILTIN_AGENT_NAMES, BuiltinAgentName
from benchflow.config import EnvironmentType, ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.mcp import McpServer, load_mcp_config, merge_servers
from benchflow.paths import default_job_name
from benchflow.sandbox.spec import NetworkPolicy, PreservePolicy
from benchflow.task.dataset import TASK_NAME

RESERVED_AGENTS = BUILTIN_AGENT_NAMES
"""Built-in agent names a command agent may not take."""

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _version_str(value: Any) -> Any:
    """YAML reads `version: 2.0` as a float; registries name versions as strings."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class RetryConfig(FrozenModel):
    """Retries of transient infrastructure failures, with exponential backoff.

    `max_attempts` is the number of retries after the first try (the job spec's meaning):
    the default 3 gives up to 4 tries; 0 turns retries off.
    """

    max_attempts: int = Field(default=3, ge=0, le=B.MAX_RETRIES)
    initial_delay_ms: int = Field(default=1000, ge=0, le=B.MAX_DELAY_MS)
    max_delay_ms: int = Field(default=30000, ge=0, le=B.MAX_DELAY_MS)
    multiplier: float = Field(default=2.0, ge=1.0, le=B.MAX_BACKOFF_MULTIPLIER,
                              allow_inf_nan=False)


class EnvironmentConfig(FrozenModel):
    """Where trials run and what happens to their sandboxes afterwards."""

    type: EnvironmentType = "docker"
    force_build: bool = False
    preserve_env: PreservePolicy = "never"
    provider_config: dict[str, Any] = Field(default_factory=dict)
    override_cpus: float | None = Field(default=None, gt=0, le=B.MAX_CPUS, allow_inf_nan=False)
    override_memory_mb: int | None = Field(default=None, gt=0, le=B.MAX_MEMORY_MB)
    override_storage_mb: int | None = Field(default=None, gt=0, le=B.MAX_STORAGE_MB)
    max_download_mb: int = Field(default=1024, ge=1, le=B.MAX_DOWNLOAD_MB, description="what one "
                                 "download from a sandbox (/logs, an artifact) may bring to "
                                 "the host, in MB; the rest is dropped, with a warning")
    network: NetworkPolicy | None = Field(
        default=None, description="public | none | model-only; default: the task's "
        "(model-only with a scripted model server)")
    extra_ca_certs: list[Path] | None = Field(
        default=None, description="PEM files sandboxes trust; [] for none; default: "
        "BENCHFLOW_EXTRA_CA_CERTS, else the host's extra CA certificates")

    @model_validator(mode="after")
    def _check_provider_config(self) -> "EnvironmentConfig":
        from benchflow.sandbox.registry import provider_class

        model = provider_class(self.type).config_model
        if model is not None:
            try:
                model.model_validate(self.provider_config)
            except ValidationError as exc:
                problems = "; ".join(f"{_loc(tuple(e['loc']))}: {_fix(e)}" for e in exc.errors())
                allowed = ", ".join(model.model_fields)
                raise ValueError(f"provider_config for {self.type}: {problems} (keys: {allowed})"
                                 ) from None
        return self


class VerifierConfig(FrozenModel):
    """Job-wide verifier settings. A timeout of 0 means "not set" (as in the spec's example)."""

    override_timeout_sec: float | None = Field(default=None, ge=0, le=B.MAX_SECONDS,
                                               allow_inf_nan=False)
    max_timeout_sec: float | None = Field(default=None, ge=0, le=B.MAX_SECONDS,
                                          allow_inf_nan=False)
    disable: bool = False

    def timeout_for(self, task_timeout_sec: float) -> float:
        """The verifier timeout of one task, before `timeout_multiplier` is applied."""
        timeout = self.override_timeout_sec or task_timeout_sec
        if self.max_timeout_sec:
            timeout = min(timeout, self.max_timeout_sec)
        return timeout


class MetricConfig(FrozenModel):
    """An aggregate of trial rewards printed live and stored in the job's result.json."""

    type: Literal["sum", "min", "max", "mean"]


class BuiltinAgentConfig(FrozenModel):
    """`oracle` (runs the task's solution) or `nop` (does nothing), optionally in scenes."""

    name: BuiltinAgentName
    kind: Literal["builtin"] = "builtin"
    description: str | None = None
    scenes: Path | None = Field(default=None, description="YAML list of Scene dicts")


class CommandAgentConfig(FrozenModel):
    """An agent given as bash scripts: `install` (optional) then `execute`, with `env`."""

    name: str = Field(pattern=_NAME)
    kind: Literal["command"] = "command"
    description: str | None = None
    install: str | None = None
    execute: str
    env: dict[Annotated[str, Field(pattern=_ENV_NAME)], str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_AGENTS:
            raise ValueError(f"{value!r} is a reserved agent name: drop install/execute to use "
                             f"the built-in {value}, or rename this agent")
        return value


class HttpAgentConfig(FrozenModel):
    """An agent behind an HTTP endpoint: one POST per attempt (docs/how-to/http-agents.md).

    `headers` values may reference host variables (`${TOKEN}`); they are sent to the
    endpoint and never written anywhere (config.json shows `***`).
    """

    name: str = Field(pattern=_NAME)
    kind: Literal["http"] = "http"
    description: str | None = None
    endpoint: str = Field(pattern=r"^https?://", description="http(s) URL receiving the POSTs")
    headers: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")], str] = Field(
        default_factory=dict)
    timeout_sec: float = Field(default=60.0, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False)

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_AGENTS:
            raise ValueError(f"{value!r} is a reserved agent name: rename this http agent")
        return value


class RegisteredAgentConfig(FrozenModel):
    """A registered (ACP) agent by name, with a model and optionally a scenes file."""

    name: str = Field(pattern=_NAME)
    kind: Literal["registered"] = "registered"
    description: str | None = None
    model: str | None = None
    scenes: Path | None = Field(default=None, description="YAML list of Scene dicts")
    env: dict[Annotated[str, Field(pattern=_ENV_NAME)], str] = Field(default_factory=dict)
    tools: list[str] | None = Field(default=None, description="the `model` agent: its tools "
                                    "(shell, read_file, write_file, and the tool server's); "
                                    "default all on tasks, none on QA items. An ACP agent: "
                                    "tool-server tools (web:search, ...) it gets over MCP")
    max_turns: int | None = Field(default=None, ge=1, le=B.MAX_TURNS, description="the `model` agent only: "
                                  "model calls per prompt")

    @field_validator("tools")
    @classmethod
    def _acp_agent_tools(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        name = info.data.get("name")
        if name == "model" or not value:
            return value  # the model agent's are checked with its settings
        from benchflow.tools.base import TOOL_NAMES, unknown_tool

        for tool in value:
            if tool not in TOOL_NAMES:
                own = " (an ACP agent has its own shell and files)" if tool in (
                    "shell", "read_file", "write_file") else ""
                raise ValueError(f"the tools of {name!r} are the tool server's, given over "
                                 f"MCP: {unknown_tool(tool)}{own}")
        return value

    @field_validator("max_turns")
    @classmethod
    def _model_agent_only(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("name") != "model":
            raise ValueError(f"max_turns is a setting of the built-in `model` agent, not of "
                             f"{info.data.get('name')!r}: remove it")
        return value


class RolesAgentConfig(FrozenModel):
    """Agents assigned to a task's own roles, keeping its scenes and prompts:
    `{roles: {coder: "claude:claude-sonnet-4-6", reviewer: "codex:gpt-5.4"}}` (the CLI's
    `--role`). `agent`/`model` play the roles not listed; `scenes` replaces the task's
    scenes (its roles are the ones assigned). `name` labels the entry (default: the
    roles' agents joined with `+`)."""

    roles: dict[Annotated[str, Field(pattern=_NAME)], str] = Field(min_length=1)
    kind: Literal["roles"] = "roles"
    name: str = Field(default="", pattern=r"^$|^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
    agent: str | None = None
    model: str | None = None
    description: str | None = None
    scenes: Path | None = Field(default=None, description="YAML list of Scene dicts")
    env: dict[Annotated[str, Field(pattern=_ENV_NAME)], str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _valid_roles(self) -> "RolesAgentConfig":
        from benchflow.roles import parse_role_mapping

        try:
            assigned = parse_role_mapping(self.roles)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if not self.name:
            agents = [self.agent] if self.agent else []
            agents += [a.agent for a in assigned.values()]
            label = "+".join(dict.fromkeys(a.replace("/", "-") for a in agents))
            object.__setattr__(self, "name", label)
        return self

    def assigned(self) -> dict[str, Any]:
        """The roles as `RoleAgent`s, by role name."""
        from benchflow.roles import parse_role_mapping

        return parse_role_mapping(self.roles)


def _agent_kind(value: Any) -> str:
    """The agent entry's `kind`: as written, else from its shape (job files may omit it)."""
    if isinstance(value, dict):
        if value.get("kind") in ("builtin", "command", "http", "registered", "roles"):
            return str(value["kind"])
        if "roles" in value:
            return "roles"
        if value.get("kind") == "http" or "endpoint" in value:
            return "http"
        if "install" in value or "execute" in value:
            return "command"
        return "builtin" if value.get("name") in RESERVED_AGENTS else "registered"
    return str(getattr(value, "kind", "registered"))


AgentConfig = Annotated[
    Annotated[BuiltinAgentConfig, Tag("builtin")]
    | Annotated[CommandAgentConfig, Tag("command")]
    | Annotated[HttpAgentConfig, Tag("http")]
    | Annotated[RegisteredAgentConfig, Tag("registered")]
    | Annotated[RolesAgentConfig, Tag("roles")],
    Discriminator(_agent_kind),
]


def _check_task_names(value: list[str] | None) -> list[str] | None:
    """Filter names must be task folder names; duplicates are dropped, the first kept."""
    if value is None:
        return None
    bad = [name for name in value if not TASK_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"invalid task name(s) {', '.join(repr(b) for b in bad)}: a name starts "
                         "with a letter or digit and holds only letters, digits, '_' and '-'")
    return list(dict.fromkeys(value))


class LocalDatasetConfig(FrozenModel):
    """A folder of task folders; its name is the folder's basename."""

    path: Path
    tasks: list[str] | None = None
    max_tasks: int | None = Field(default=None, ge=1, le=B.MAX_TASKS, description="run only the first N "
                                  "tasks (after the `tasks` filter), as `--max-tasks`")

    @field_validator("tasks")
    @classmethod
    def _names(cls, value: list[str] | None) -> list[str] | None:
        return _check_task_names(value)


class RegistryRef(FrozenModel):
    """Where a registry.json lives: a local `path` or a `url` (exactly one)."""

    path: Path | None = None
    url: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "RegistryRef":
        if (self.path is None) == (self.url is None):
            raise ValueError("give exactly one of registry.path and registry.url")
        return self


class RegistryDatasetConfig(FrozenModel):
    """A dataset listed in a registry.json, by name and version."""

    registry: RegistryRef
    name: str
    version: Annotated[str | None, BeforeValidator(_version_str)] = None
    tasks: list[str] | None = None
    max_tasks: int | None = Field(default=None, ge=1, le=B.MAX_TASKS, description="run only the first N "
                                  "tasks (after the `tasks` filter), as `--max-tasks`")

    @field_validator("tasks")
    @classmethod
    def _names(cls, value: list[str] | None) -> list[str] | None:
        return _check_task_names(value)


class QaDatasetConfig(FrozenModel):
    """A QA dataset file (.jsonl / .json): each item is one task, scored by `metric`
    (extra_metrics are added to rewards); `tasks` filters item ids."""

    qa: Path
    metric: str = "exact_match"
    extra_metrics: list[str] = Field(default_factory=list)
    answer_pattern: str | None = None
    judge_model: str | None = None
    image: str = Field(default="debian:bookworm-slim", description="sandbox image, used only "
                       "when an agent needs a sandbox")
    tasks: list[str] | None = None
    max_tasks: int | None = Field(default=None, ge=1, le=B.MAX_TASKS, description="run only the first N "
                                  "tasks (after the `tasks` filter), as `--max-tasks`")


def _dataset_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "registry" if "registry" in value else "qa" if "qa" in value else "local"
    if isinstance(value, QaDatasetConfig):
        return "qa"
    return "registry" if isinstance(value, RegistryDatasetConfig) else "local"


DatasetConfig = Annotated[
    Annotated[LocalDatasetConfig, Tag("local")] | Annotated[RegistryDatasetConfig, Tag("registry")]
    | Annotated[QaDatasetConfig, Tag("qa")],
    Discriminator(_dataset_kind),
]


class JobConfig(FrozenModel):
    """A whole job file. Trials are agents x tasks x attempts."""

    name: str = Field(default_factory=default_job_name, pattern=_NAME)
    strict: bool = Field(default=True, description="false: unknown keys are warnings instead "
                         "of errors (a file written for a newer benchflow)")
    jobs_dir: Path = Path("jobs")
    n_attempts: int = Field(default=1, ge=1, le=B.MAX_ATTEMPTS)
    n_concurrent_trials: int = Field(default=B.DEFAULT_CONCURRENCY, ge=1, le=B.MAX_CONCURRENCY)
    timeout_multiplier: float = Field(default=1.0, gt=0, le=B.MAX_TIMEOUT_MULTIPLIER,
                                      allow_inf_nan=False)
    retry: RetryConfig = RetryConfig()
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "warning"
    instruction_path: str = Field(default="/tmp/instruction.md", pattern=r"^/")
    capture_model_calls: bool = Field(
        default=False, description="record every model call through benchflow's model server "
        "or relay in each trial's model_calls.jsonl")
    executor: Literal["local", "ray"] = Field(
        default="local", description="where trials run: this process, or Ray workers "
        "(the ray extra; docs/how-to/scale.md)")
    ray_address: str | None = Field(default=None, description="with executor ray: the "
                                    "cluster to join (`auto`, host:port, ray://...); unset: "
                                    "a local Ray instance")
    ray_workers: int = Field(default=2, ge=1, le=B.MAX_WORKERS, description="with executor ray: worker actors, "
                             "spread over the cluster's nodes")
    otel: bool = Field(default=False, description="export OpenTelemetry spans over OTLP/HTTP "
                       "(the otel extra), as `--otel`; OTEL_EXPORTER_OTLP_ENDPOINT also turns "
                       "it on")
    environment: EnvironmentConfig = EnvironmentConfig()
    model_endpoint: ModelEndpoint | None = Field(
        default=None, description="the model API every agent uses: a scripted model server "
        "(`script`) or a real endpoint (`base_url`, `api_key_env`)")
    judge_endpoint: ModelEndpoint | None = Field(
        default=None, description="the LLM judge's API (llm_judgement, llm-judge verifiers); "
        "None: the model endpoint")
    verifier: VerifierConfig = VerifierConfig()
    harden: bool | None = Field(
        default=None, description="true: harden before the final verify for every agent, the "
        "oracle included; false: never (recorded as a warning in each result); unset: harden "
        "unless every agent is a trusted built-in (oracle, nop)")
    snapshot_turns: bool = Field(
        default=False, description="snapshot each trial's sandbox at every turn boundary "
        "(for `benchflow fork` and `benchflow jobs regrade`; removed by `benchflow jobs rm`)")
    workspace_changes: bool | None = Field(
        default=None, description="record what each turn changed in the workspace; unset: "
        "unless every agent is a trusted built-in (oracle, nop)")
    metrics: list[MetricConfig] = Field(default_factory=lambda: [MetricConfig(type="mean")])
    agents: list[AgentConfig] = Field(min_length=1)
    datasets: list[DatasetConfig] = Field(min_length=1)
    skills: list[Path] = Field(default_factory=list, description="skill folders (or folders "
                               "of skills) given to every agent, besides the task's")
    mcp_config: Path | None = Field(default=None, description="a Claude-style .mcp.json whose "
                                    "servers every ACP agent gets, besides the task's")
    mcp_servers: list[McpServer] = Field(default_factory=list, description="MCP servers every "
                                         "ACP agent gets (after mcp_config's, same name wins)")
    tool_config: Path | None = Field(default=None, description="a tool server config "
                                     "({resources: {web: {corpus: ...}}}): the settings of "
                                     "the tools ACP agents get (agents[].tools)")
    user: dict[str, Any] | None = Field(default=None, description="a simulated user driving "
                                        "rounds in every trial, as a task's `user:` block "
                                        "({type: llm, persona, model, ...}); a task's own "
                                        "user otherwise")

    @field_validator("user")
    @classmethod
    def _user_block(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from benchflow.users import user_from_frontmatter  # users load only when set

            try:
                user_from_frontmatter(value, "user")
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("user: ")) from None
        return value

    def all_mcp_servers(self) -> list[McpServer]:
        """`mcp_config`'s servers, then `mcp_servers`, by name.

        Raises:
            ConfigError: the mcp_config file is unreadable or invalid.
        """
        from_file = load_mcp_config(self.mcp_config) if self.mcp_config else []
        return merge_servers(from_file, self.mcp_servers)

    @field_validator("judge_endpoint")
    @classmethod
    def _judge_is_served(cls, value: ModelEndpoint | None) -> ModelEndpoint | None:
        if value is not None and value.base_url is None:
            raise ValueError("the judge needs a served endpoint: give base_url (and "
                             "api_key_env, model), not a script")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique_agents(self) -> "JobConfig":
        names = [a.name for a in self.agents]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agents: duplicate agent name(s) {', '.join(dupes)}: each agent "
                             "gets its own jobs/<job>/<agent>/ folder; run one job per model")
        return self


# -- loading ------------------------------------------------------------------------------

_TAGS = {"builtin", "command", "registered", "roles", "local", "registry", "qa"}


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (the key)"
        elif part not in _TAGS and not str(part).startswith("function-"):
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _fix(error: dict[str, Any]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key: remove it or check its spelling (see docs/reference/job-file.md)"
    if kind == "missing":
        return "required: add it"
    return error["msg"].removeprefix("Value error, ")


def config_error(source: Path | str, exc: ValidationError) -> ConfigError:
    """A ConfigError naming the file and each bad field with its fix, on one line."""
    lines = [f"{_loc(tuple(e['loc']))}: {_fix(e)}" for e in exc.errors()]
    return ConfigError(f"{source}: invalid job file: " + "; ".join(lines))


def parse_job_config(data: Any, source: Path | str = "<job>") -> JobConfig:
    """Validate a parsed job file. Raises ConfigError with each bad field's path.

    Unknown keys are errors, unless the file says `strict: false` (then each is a warning).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a job file is a mapping of keys (name, agents, datasets, "
                          f"...), not a {type(data).__name__}")
    try:
        if data.get("strict") is False:
            return validate_leniently(JobConfig.model_validate, data, str(source))
        return JobConfig.model_validate(data)
    except ValidationError as exc:
        raise config_error(source, exc) from None


def load_job_config(path: Path | str) -> JobConfig:
    """Read a job file (`.json` as JSON, anything else as YAML).

    Raises:
        ConfigError: the file is missing, unparsable, or has a bad or unknown field.
    """
    path = Path(path)
    data = read_config_file(path, "job file")
    return parse_job_config(data, path)


def with_overrides(config: JobConfig, **overrides: Any) -> JobConfig:
    """A copy with CLI overrides (None values ignored), validated again.

    Keys: `n_concurrent_trials`, `n_attempts`, `jobs_dir`, `name`, `executor`, `ray_address`
    and `environment_type`.
    """
    data = config.model_dump(mode="python")
    env_type = overrides.pop("environment_type", None)
    if env_type is not None:
        data["environment"] = {**data["environment"], "type": env_type}
    data.update({k: v for k, v in overrides.items() if v is not None})
    return parse_job_config(data, "command line")


def with_absolute_paths(config: JobConfig, base: Path | None = None) -> JobConfig:
    """A copy whose dataset, registry and scenes paths are absolute (relative to `base`,
    default the current directory), so the saved config.json resumes from anywhere."""
    base = base or Path.cwd()

    def absolute(path: Path | None) -> Path | None:
        return None if path is None else (base / path.expanduser()).resolve()

    data = config.model_dump(mode="python")
    for agent in data["agents"]:
        if agent.get("scenes") is not None:
            agent["scenes"] = absolute(agent["scenes"])
    endpoint = data.get("model_endpoint")
    if endpoint and endpoint.get("script") is not None:
        endpoint["script"] = absolute(endpoint["script"])
    data["skills"] = [absolute(p) for p in data.get("skills") or []]
    for key in ("mcp_config", "tool_config"):
        if data.get(key) is not None:
            data[key] = absolute(data[key])
    certs = data["environment"].get("extra_ca_certs")
    if certs:
        data["environment"]["extra_ca_certs"] = [absolute(p) for p in certs]
    for dataset in data["datasets"]:
        if "registry" in dataset:
            dataset["registry"]["path"] = absolute(dataset["registry"]["path"])
        elif "qa" in dataset:
            dataset["qa"] = absolute(dataset["qa"])
        else:
            dataset["path"] = absolute(dataset["path"])
    return parse_job_config(data, "job")


__all__ = [
    "AgentConfig",
    "BuiltinAgentConfig",
    "CommandAgentConfig",
    "HttpAgentConfig",
    "DatasetConfig",
    "EnvironmentConfig",
    "JobConfig",
    "LocalDatasetConfig",
    "MetricConfig",
    "QaDatasetConfig",
    "RegisteredAgentConfig",
    "RegistryDatasetConfig",
    "RegistryRef",
    "RetryConfig",
    "RolesAgentConfig",
    "VerifierConfig",
    "config_error",
    "load_job_config",
    "parse_job_config",
    "with_absolute_paths",
    "with_overrides",
]
