"""Rollout configuration: which task, which agents in which scenes, where, and how.

A `Scene` is authoring sugar: `steps.desugar()` turns scenes into the flat list of
`Step`s the runtime executes.
"""

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, Field, SecretStr, ValidationError, field_validator,
                      model_validator)

from benchflow import bounds as B
from benchflow._models import FrozenModel
from benchflow.errors import ConfigError
from benchflow.mcp import McpServer
from benchflow.tools.acp import AcpTools
from benchflow.sandbox.spec import NetworkPolicy, PreservePolicy



def _registered_backend(name: str) -> str:
    from benchflow.sandbox.registry import UnknownBackendError, check_backend

    try:
        return check_backend(name)
    except UnknownBackendError as exc:
        raise ValueError(str(exc)) from None


EnvironmentType = Annotated[str, AfterValidator(_registered_backend)]
"""A sandbox backend registered in `benchflow.sandbox.registry` (docker, daytona, modal, plugins)."""

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def _inside_workspace(paths: list[str]) -> list[str]:
    for path in paths:
        parts = path.strip("/").split("/")
        if path.startswith("/") or not path.strip("/") or ".." in parts:
            raise ValueError(f"output {path!r} must be a path inside the workspace, "
                             "relative to it (e.g. review.md)")
    return paths


WorkspacePaths = Annotated[list[str], AfterValidator(_inside_workspace)]
"""Workspace-relative paths (a role's `outputs`): no leading /, no `..`."""


class Role(FrozenModel):
    """One participant of a scene: an agent (and model) with its own env and timeouts."""

    name: str = Field(pattern=_NAME)
    agent: str
    model: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_sec: float | None = Field(default=None, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False,
                                      description="wall clock per prompt")
    idle_timeout_sec: float | None = Field(default=None, gt=0, le=B.MAX_SECONDS,
                                           allow_inf_nan=False)
    skills: list[Path] = Field(default_factory=list, description="skill folders (or folders "
                               "of skills) on the host, for this role only")
    workspace: Literal["read-write", "read-only"] = Field(
        default="read-write", description="read-only: the role's Unix user can read the "
        "workspace but write only its scratch folder (/tmp/roles/<role>) and `outputs`")
    outputs: WorkspacePaths = Field(default_factory=list, description="workspace-relative files "
                               "(or folders, ending in /) a read-only role may write")
    session: Literal["persistent", "fresh"] = Field(
        default="persistent", description="persistent: one agent process and ACP session for "
        "the whole scene, kept while other roles take turns; fresh: a new session whenever "
        "another role had the turn in between")


class Turn(FrozenModel):
    """One prompt to one role; `prompt=None` means the scene/role prompt file or the task instruction."""

    role: str
    prompt: str | None = None
    session: Literal["fresh"] | None = Field(
        default=None, description="fresh: this turn starts the role's session over (no "
        "memory of its earlier turns); later turns continue the new session")


class Scene(FrozenModel):
    """Roles taking turns in one sandbox. Each role keeps one agent process and ACP session
    for the whole scene (started at its first turn), unless it or a turn says `fresh`."""

    name: str = Field(default="main", pattern=_NAME)
    roles: list[Role] = Field(min_length=1)
    turns: list[Turn] = Field(min_length=1)
    skills: list[Path] = Field(default_factory=list, description="skill folders (or folders "
                               "of skills) on the host, for every role of the scene")
    skills_out: str | None = Field(
        default=None, pattern=r"^/", description="a sandbox folder the scene's agents may "
        "write skills into; after the scene, each subfolder with a SKILL.md is a skill of "
        "every later scene (bring your own skill)")

    @model_validator(mode="after")
    def _turns_name_declared_roles(self) -> "Scene":
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
               prompt: str | None = None) -> "Scene":
        """The one-agent, one-turn scene: `Scene.single(agent="claude", model="...")`."""
        return cls(roles=[Role(name=role, agent=agent, model=model, env=env or {},
                               timeout_sec=timeout_sec)],
                   turns=[Turn(role=role, prompt=prompt)])


def load_scenes(path: Path) -> list[Scene]:
    """Scenes from a YAML file (`--scenes`, a job file agent's `scenes`): a list of scenes,
    or a mapping with a `scenes` list. The one reader of the scenes-file format.

    Raises:
        ConfigError: unreadable file, bad YAML, or an invalid scene (naming the file,
            the scene and the field).
    """
    import yaml  # only where a scenes file is read (~10 ms of import)

    path = path.expanduser()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the scenes file ({exc})") from None
    if isinstance(data, dict):
        data = data.get("scenes")
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{path}: expected a non-empty list of scenes (or 'scenes: [...]'), "
                          "each with roles and turns")
    scenes = []
    for index, item in enumerate(data):
        try:
            scenes.append(Scene.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(scene)'}: "
                f"{err['msg'].removeprefix('Value error, ')}" for err in exc.errors())
            raise ConfigError(f"{path}: scene [{index}]: {problems}") from None
    return scenes


class ModelEndpoint(FrozenModel):
    """The model API the rollout's agents use: a scripted model server benchflow starts for
    the rollout (`script`), or a real endpoint (`base_url`, its key in the host variable
    `api_key_env`). The rollout hands its agents the endpoint as an `AgentEndpoint` (URL,
    each role's key), which each agent's manifest maps to its own settings; in the sandbox
    it reads as `BENCHFLOW_PROVIDER_BASE_URL` / `_API_KEY` (docs/how-to/test-agents-offline.md)."""

    script: Path | None = Field(default=None, description="YAML script of a scripted model")
    base_url: str | None = Field(default=None, pattern=r"^https?://",
                                 description="a real endpoint's root URL (a trailing /v1 is "
                                 "dropped; agents that need it add it back)")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                    description="host variable holding the endpoint's key")
    api_key: SecretStr | None = Field(
        default=None, exclude=True, description="the key itself, for a caller in this process "
        "that holds it (a trainer's per-rollout token); never written to a file")
    model: str | None = Field(default=None, description="the model id benchflow itself asks "
                              "for (model agent, judges, LLM users); agents take -m")
    request_tokens: Literal["vllm", "sglang"] | None = Field(
        default=None, description="ask the endpoint for token ids and log-probabilities in "
        "this server's request options on every generation call through benchflow's relay "
        "(recorded in model_calls.jsonl; needs capture_model_calls)")

    @classmethod
    def remote(cls, base_url: str, model: str | None = None,
               api_key_env: str | None = None) -> "ModelEndpoint":
        """An OpenAI-compatible endpoint: `ModelEndpoint.remote("http://host:8000/v1", "qwen")`."""
        return cls(base_url=base_url, model=model, api_key_env=api_key_env)

    @model_validator(mode="after")
    def _one_source(self) -> "ModelEndpoint":
        if (self.script is None) == (self.base_url is None):
            raise ValueError("set exactly one of `script` (a scripted model) and `base_url`")
        if (self.api_key_env or self.api_key) and self.script is not None:
            raise ValueError("`api_key_env` goes with `base_url`; a scripted model needs no key")
        if self.api_key_env and self.api_key:
            raise ValueError("set one of `api_key_env` (a host variable) and `api_key`")
        if self.request_tokens and self.script is not None:
            raise ValueError("`request_tokens` goes with `base_url` (a vLLM or SGLang server); "
                             "a scripted model returns no token ids")
        return self


class ForkSource(FrozenModel):
    """Where a forked rollout starts (`benchflow fork`): the snapshot of the original
    rollout's sandbox before step `step`; steps `step`.. run again with this config's
    roles. A role with earlier turns restores its ACP session (`sessions`, session/load)
    where its agent supports it, else gets `history`, the summary of its earlier turns,
    before its first prompt (rollout/replay.py); `baseline`: the original's hardening
    baseline."""

    rollout: str = Field(description="the original rollout's folder")
    step: int = Field(ge=0, description="the first step (turn) run again")
    snapshot: str
    baseline: dict[str, Any] | None = None
    history: dict[str, str] = Field(default_factory=dict)
    sessions: dict[str, str] = Field(
        default_factory=dict, description="per role: the original's ACP session id, restored "
        "with session/load where the role's agent (unchanged) supports it")


class RolloutConfig(FrozenModel):
    """Everything one rollout needs: `benchflow.run(RolloutConfig(task_path=..., scenes=[...]))`."""

    task_path: Path
    scenes: list[Scene] = Field(
        default_factory=list, description="empty: the task's own scenes (roles filled from "
        "`agent`/`model`), else one turn of `agent`")
    agent: str | None = Field(default=None, description="the agent when `scenes` is empty")
    model: str | None = Field(default=None, description="the model when `scenes` is empty")
    environment: EnvironmentType = "docker"
    user: Any = Field(default=None, exclude=True, description="a BaseUser driving several rounds")
    max_user_rounds: int = Field(default=5, ge=1, le=B.MAX_TURNS)
    oracle_access: bool = False
    jobs_dir: Path = Path("jobs")
    job_name: str | None = None
    run_id: str | None = Field(default=None, description="the job's run id; None: a new one")
    job_id: str | None = Field(default=None, description="the job instance's id (its "
                               "sandboxes' `benchflow.job-id` label); None: the job folder's")
    dataset_name: str | None = None
    attempt: int = Field(default=1, ge=1, le=B.MAX_ATTEMPTS)
    force_build: bool = False
    preserve_env: PreservePolicy = "never"
    extra_ca_certs: tuple[Path, ...] | None = Field(
        default=None, description="PEM files for sandboxes; () for none; None: "
        "BENCHFLOW_EXTRA_CA_CERTS, else the host's /usr/local/share/ca-certificates/*.crt")
    timeout_multiplier: float = Field(default=1.0, gt=0, le=B.MAX_TIMEOUT_MULTIPLIER,
                                      allow_inf_nan=False)
    instruction_path: str = "/tmp/instruction.md"
    verifier_disabled: bool = False
    harden: bool | None = Field(
        default=None, description="harden before the final verify; None: unless every agent "
        "is a trusted built-in (oracle, nop)")
    verifier_timeout_sec: float | None = Field(default=None, gt=0)
    override_cpus: float | None = None
    override_memory_mb: int | None = None
    override_storage_mb: int | None = None
    max_download_mb: int = Field(default=1024, ge=1, le=B.MAX_DOWNLOAD_MB, description="what one "
                                 "download from the sandbox (/logs, an artifact) may bring "
                                 "to the host; the rest is dropped, with a warning")
    provider_config: dict[str, Any] = Field(default_factory=dict)
    network: NetworkPolicy | None = Field(
        default=None, description="None: the task's (`allow_internet: false` -> none, or "
        "model-only with a model endpoint); a scripted model server implies model-only")
    model_endpoint: ModelEndpoint | None = None
    capture_model_calls: bool = Field(
        default=False, description="record every model request and response that passes "
        "through benchflow's model server or relay in model_calls.jsonl (needs model_endpoint)")
    skills: list[Path] = Field(default_factory=list, description="skill folders (or folders "
                               "of skills) on the host, for every role (`--skill`)")
    mcp_servers: list[McpServer] = Field(default_factory=list, description="MCP servers every "
                                         "ACP session gets, besides the task's")
    acp_tools: AcpTools | None = Field(
        default=None, description="tool-server tools (web:search, ...) for the ACP agents: "
        "served over MCP by a tool server benchflow starts for the rollout")
    snapshot_turns: bool = Field(
        default=False, description="snapshot the sandbox at each turn boundary (and after "
        "the last turn), for `benchflow fork` and `benchflow jobs regrade`")
    fork: ForkSource | None = Field(default=None, description="start from a snapshot of "
                                    "another rollout (set by `benchflow fork`)")
    workspace_changes: bool | None = Field(
        default=None, description="record what each turn changed in the workspace "
        "(`workspace_changes` trajectory events); None: unless only built-in agents run")
    judge_endpoint: ModelEndpoint | None = Field(
        default=None, description="the LLM judge's endpoint (base_url) for tasks scored by a "
        "judge; None: the model endpoint")

    @field_validator("task_path")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _scenes_or_agent(self) -> "RolloutConfig":
        if not self.scenes and not self.agent:
            raise ValueError("give `scenes`, or `agent` (the task's own scenes or one turn)")
        return self

    @property
    def agent_name(self) -> str:
        """The agent label used in paths and results: one agent's name, or `a+b` for several
        (a routed agent's `/` becomes `-`: `acpx/gemini` is stored as `acpx-gemini`)."""
        names = dict.fromkeys(r.agent.replace("/", "-") for s in self.scenes for r in s.roles)
        return "+".join(names) or (self.agent or "").replace("/", "-")

    @property
    def model_name(self) -> str | None:
        models = dict.fromkeys(r.model for s in self.scenes for r in s.roles if r.model)
        return "+".join(models) or self.model
