"""The normalized task configuration, shared by the native and the legacy layout.

A task's settings reach the rest of benchflow only through `TaskConfig`: the native
loader validates a `task.md` frontmatter against `Frontmatter`, the legacy loader maps
a Harbor-style `task.toml` onto the same shape first, and both end in `TaskConfig`.
"""

import posixpath
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator

from benchflow import bounds as B
from benchflow._models import FrozenModel
from benchflow.mcp import McpServer

Seconds = Annotated[float, Field(gt=0, le=B.MAX_SECONDS, allow_inf_nan=False)]
"""A positive, finite duration in seconds (at most a week)."""
Interval = Annotated[float, Field(ge=0, le=B.MAX_SECONDS, allow_inf_nan=False)]

Text = Annotated[str, Field(min_length=1)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]

MAIN_SERVICE = "main"
"""The compose service the agent and the verifier run in (Harbor's name)."""
ServiceName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
"""A Docker Compose service name (Harbor's rule)."""
VerifierMode = Literal["shared", "separate"]
RewardStrategy = Literal["mean", "final"]


class TaskConfigWarning(UserWarning):
    """A task file uses a key benchflow does not support yet; the key was ignored."""


class _Strict(FrozenModel):
    """Frozen, unknown keys rejected, no str->number or str->bool coercion (native files)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True
    )


class HardeningConfig(_Strict):
    """Which anti-reward-hacking steps run before the verifier scores the sandbox.

    Every step is on by default; a task turns one off only when its legitimate test
    setup conflicts with it. Unknown keys are errors in both task layouts.
    """

    kill_agent_processes: bool = True
    """Kill every process the agent user left running before the verifier starts."""
    restore_build_config: bool = True
    """Restore build and test configuration files (pyproject.toml, setup.cfg, pytest.ini, ...) to their pre-agent content."""
    remove_injected_files: bool = True
    """Delete files planted to hijack the verifier: conftest.py outside the verifier dir, sitecustomize.py, *.pth, Python files in /tmp."""
    check_system_integrity: bool = True
    """Compare system binaries and libraries with their pre-agent state; a change is reported as tampering (reward null)."""
    fixed_verifier_env: bool = True
    """Run the verifier with a fixed PATH, PYTHONPATH and PYTEST_ADDOPTS instead of the agent's environment."""
    reset_verifier_logs: bool = True
    """Empty /logs/verifier before the verifier runs, so a reward file planted by the agent is never read."""
    lock_verifier_dirs: bool = True
    """Make the verifier folder and /logs/verifier root-owned and unwritable by the agent user."""
    lock_workspace: bool = True
    """Before the final verifier, make the workspace root-owned and unwritable by anyone else (the verifier, as root, still writes there); turn off for a verifier that checks the agent user's file ownership."""
    scrub_git_history: bool = True
    """Before the agent starts, keep only HEAD's history in the workspace's git repository (other branches, tags, reflogs and unreachable objects go), so a solution left in history cannot be recovered. Turn off for tasks that need their branches."""
    cleanup_conftests: bool = True
    """Harbor-compatible switch: false keeps conftest.py files (for tasks that ship a real one); the rest of remove_injected_files still runs."""

    @property
    def removes_conftests(self) -> bool:
        """Whether conftest.py files outside the verifier folder are deleted before verify."""
        return self.remove_injected_files and self.cleanup_conftests


class Author(_Strict):
    """One author of a task; a plain string in a task file becomes `Author(name=...)`."""

    name: Text
    email: str | None = None


class AgentSettings(_Strict):
    """Limits and identity of the agent under test."""

    timeout_sec: Seconds = 600.0
    """Wall-clock budget of the agent phase."""
    install_timeout_sec: Seconds = 300.0
    """Budget of the agent's install step."""
    user: Text | None = None
    """Sandbox user the agent runs as; None means benchflow's non-root default user."""


class HealthcheckSettings(_Strict):
    """Harbor's readiness check (Docker HEALTHCHECK semantics): after the sandbox starts (and
    after a step's setup), `command` runs until it exits 0; failures during
    `start_period_sec` do not count, then more than `retries` consecutive failures fail the
    rollout (`environment_start_failed`) before any agent runs."""

    command: Text
    interval_sec: Interval = 5.0
    timeout_sec: Seconds = 30.0
    start_period_sec: Interval = 0.0
    start_interval_sec: Interval = 5.0
    retries: Annotated[int, Field(ge=0, le=10_000)] = 3


class JudgeConfig(_Strict):
    """Harbor-style `[verifier.judge]`: the LLM judge of a `type = "llm-judge"` verifier."""

    model: str | None = None
    """The judge model id (None: the run's judge endpoint's model)."""
    rubric_path: str | None = None
    """The rubric file, relative to the task folder (default: tests/rubric.toml or rubric.json)."""
    input_dir: str = "/app"
    """The sandbox folder whose files the judge sees when the rubric names none."""
    input_type: Literal["deliverables"] = "deliverables"
    """What the judge evaluates: the agent's deliverables (files)."""
    context: str = ""
    """Extra context for the judge (besides the instruction)."""


class SandboxSettings(_Strict):
    """The container the agent works in."""

    docker_image: Text | None = None
    """A pre-built image used instead of building environment/Dockerfile."""
    cpus: Annotated[float, Field(gt=0, le=B.MAX_CPUS, allow_inf_nan=False)] = 1.0
    memory_mb: Annotated[int, Field(gt=0, le=B.MAX_MEMORY_MB)] = 2048
    storage_mb: Annotated[int, Field(gt=0, le=B.MAX_STORAGE_MB)] = 10240
    pids_limit: Annotated[int, Field(ge=B.MIN_PIDS, le=B.MAX_PIDS)] = 4096
    """Processes and threads the sandbox may hold at once (a fork bomb stops there)."""
    gpus: Annotated[int, Field(ge=0, le=B.MAX_GPUS)] = 0
    workdir: Text | None = None
    """Working directory of the agent and the verifier; None keeps the image's WORKDIR."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set in the sandbox for every phase."""
    build_timeout_sec: Seconds = 600.0
    allow_internet: bool = True
    skills_dir: Annotated[str, Field(pattern=r"^/")] | None = None
    """A sandbox folder of skills (Harbor's `environment.skills_dir`): each subfolder with a SKILL.md is given to every agent."""
    mcp_servers: list[McpServer] = Field(default_factory=list)
    """MCP servers passed to ACP agents at session/new (Harbor's `[[environment.mcp_servers]]`)."""
    healthcheck: HealthcheckSettings | None = None
    """Wait until the sandbox is ready before any agent runs (Harbor's `[environment.healthcheck]`)."""


class CollectHook(_Strict):
    """Harbor's `[[verifier.collect]]`: a command run in a compose service after the agent's
    turn, before the artifacts are taken (to snapshot state, such as an in-memory counter or
    a database, into a file an artifact then carries). Best effort: a hook that fails or
    times out is a warning in `result.json`, never an error."""

    command: Text
    """A shell command: `bash -c` in `main`, `sh -c` in another service (any image has sh)."""
    service: ServiceName = MAIN_SERVICE
    timeout_sec: Seconds = 60.0
    user: Text | None = None
    """The user it runs as (None: the service image's own user)."""


class VerifierSettings(_Strict):
    """How the task's test.sh is run."""

    timeout_sec: Seconds = 600.0
    """Budget of test.sh."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for test.sh (templates such as ${VAR} are resolved at run time)."""
    hardening: HardeningConfig = HardeningConfig()
    """Anti-reward-hacking steps run before test.sh."""
    pytest_plugins: list[str] = Field(default_factory=list)
    """pytest plugins the verifier may load even though plugin auto-discovery is off."""
    environment_mode: VerifierMode | None = None
    """`separate`: the tests run in a fresh sandbox of the verifier's own image, given only the declared artifacts and /logs; `shared` (default unless `environment` is set): in the agent's sandbox."""
    environment: SandboxSettings | None = None
    """The separate verifier's sandbox (same keys as `sandbox`); implies `environment_mode = "separate"`."""
    type: Literal["test-script", "script", "llm-judge", "reward-kit", "agent-judge",
                  "ors-episode"] = "test-script"
    """The verifier strategy (Harbor's `test-script` is `script`); native tasks declare it in verifier/verifier.md instead."""
    command: str | None = None
    """The script strategy's command, run as `cd <verifier dir> && <command>` (default: test.sh from the workdir, as Harbor)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The strategy's other settings, the keys of verifier/verifier.md's frontmatter (`agent`, `rubric`, `environment`, ...)."""
    judge: JudgeConfig = JudgeConfig()
    """The LLM judge of an llm-judge verifier (Harbor's `[verifier.judge]`)."""
    collect: list[CollectHook] = Field(default_factory=list)
    """Commands run in compose services after the agent's turn, before the artifacts are
    taken (Harbor's `[[verifier.collect]]`)."""

    @property
    def separate(self) -> bool:
        """Whether the verifier runs in its own sandbox (Harbor's resolution of the mode)."""
        if self.environment_mode is not None:
            return self.environment_mode == "separate"
        return self.environment is not None


def _artifact(value: Any) -> Any:
    return {"source": value} if isinstance(value, str) else value


class Artifact(_Strict):
    """A sandbox path carried out of the agent's sandbox after it finishes (Harbor's `artifacts`):
    kept under the rollout's `artifacts/` and, for a separate verifier, copied to the same
    path in the verifier's sandbox."""

    source: Text
    destination: str | None = None
    """Where under the rollout's `artifacts/` it is kept (default: the source path)."""
    exclude: list[str] = Field(default_factory=list)
    """Harbor's tar --exclude patterns: not supported (refused when not empty)."""
    service: ServiceName | None = None
    """The compose service it is taken from (None or `main`: the agent's sandbox; another
    service of the task's docker-compose.yaml: that container's own file system)."""

    @field_validator("exclude")
    @classmethod
    def _no_exclude(cls, value: list[str]) -> list[str]:
        if value:
            raise ValueError("artifact exclude patterns are not supported by benchflow (they "
                             "change what the verifier sees); carry the folder whole or name "
                             "its files")
        return value

    @field_validator("source")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or ".." in value.split("/"):
            raise ValueError(f"artifact source {value!r} must be an absolute sandbox path "
                             "without '..'")
        return posixpath.normpath(value)

    @field_validator("destination")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value and (value.startswith("/") or ".." in value.split("/")):
            raise ValueError(f"artifact destination {value!r} must be a relative path "
                             "without '..'")
        return value or None

    @property
    def kept_as(self) -> str:
        """The path under the rollout's `artifacts/` folder."""
        return self.destination or self.source.lstrip("/")

    @property
    def from_service(self) -> str:
        """The compose service it is taken from (`main`: the agent's sandbox)."""
        return self.service or MAIN_SERVICE


Artifacts = list[Annotated[Artifact, BeforeValidator(_artifact)]]


class StepAgentSettings(_Strict):
    """A multi-step task's per-step agent settings (unset: the task's)."""

    timeout_sec: Seconds | None = None
    user: Text | None = None


class StepVerifierSettings(_Strict):
    """A multi-step task's per-step verifier settings (unset: the task's)."""

    timeout_sec: Seconds | None = None
    env: dict[str, str] = Field(default_factory=dict)
    environment_mode: VerifierMode | None = None
    environment: SandboxSettings | None = None
    collect: list[CollectHook] = Field(default_factory=list)
    """Run after the task's hooks, for this step's collection."""


class TaskStepConfig(_Strict):
    """One step of a multi-step task (Harbor's `[[steps]]`): `steps/<name>/instruction.md`,
    optional `steps/<name>/tests/` and `steps/<name>/solution/`."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    agent: StepAgentSettings = StepAgentSettings()
    verifier: StepVerifierSettings = StepVerifierSettings()
    healthcheck: HealthcheckSettings | None = None
    """Run after the step's setup, before its agent (besides the task's)."""
    min_reward: FiniteFloat | dict[str, FiniteFloat] | None = None
    """Stop the remaining steps when this step scores below it: a number gates `reward`, a table gates each key (a missing key fails)."""
    artifacts: Artifacts = Field(default_factory=list)

    def gate_failure(self, rewards: dict[str, float]) -> str | None:
        """Why this step's rewards stop the rollout (None when they pass `min_reward`)."""
        if self.min_reward is None:
            return None
        gates = (self.min_reward if isinstance(self.min_reward, dict)
                 else {"reward": self.min_reward})
        for key, threshold in gates.items():
            actual = rewards.get(key, float("-inf"))
            if actual < threshold:
                return f"step {self.name!r} scored {key}={actual:g}, below min_reward {threshold:g}"
        return None


class OracleSettings(_Strict):
    """How the task's reference solution (solve.sh) is run by the oracle agent."""

    timeout_sec: Seconds | None = None
    """Budget of solve.sh; None falls back to agent.timeout_sec at run time."""
    env: dict[str, str] = Field(default_factory=dict)


def _authors(value: Any) -> Any:
    if isinstance(value, list):
        return [{"name": a} if isinstance(a, str) else a for a in value]
    return value


Authors = Annotated[list[Author], BeforeValidator(_authors)]


class TaskConfig(_Strict):
    """A task's settings, normalized: the same shape whichever layout the task uses."""

    schema_version: str | None = None
    name: Text | None = None
    description: str | None = None
    authors: Authors = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str | None = None
    agent: AgentSettings = AgentSettings()
    verifier: VerifierSettings = VerifierSettings()
    sandbox: SandboxSettings = SandboxSettings()
    oracle: OracleSettings = OracleSettings()
    artifacts: Artifacts = Field(default_factory=list)
    steps: list[TaskStepConfig] = Field(default_factory=list)
    multi_step_reward_strategy: RewardStrategy | None = None

    def step_separate(self, step: TaskStepConfig) -> bool:
        """Whether `step`'s verifier runs in its own sandbox (the step's mode, else the task's)."""
        if step.verifier.environment_mode is not None:
            return step.verifier.environment_mode == "separate"
        if step.verifier.environment is not None:
            return True
        return self.verifier.separate


class TaskInfo(_Strict):
    """The `task` table: identity and catalogue data."""

    name: Text | None = None
    description: str | None = None
    authors: Authors = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class Frontmatter(_Strict):
    """A native `task.md` frontmatter; the legacy loader maps task.toml onto it too."""

    schema_version: str | None = None
    strict: bool = True
    """false: unknown keys are warnings instead of errors (a task for a newer benchflow)."""
    task: TaskInfo = TaskInfo()
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str | None = None
    agent: AgentSettings = AgentSettings()
    verifier: VerifierSettings = VerifierSettings()
    sandbox: SandboxSettings = SandboxSettings()
    oracle: OracleSettings = OracleSettings()
    artifacts: Artifacts = Field(default_factory=list)
    steps: list[TaskStepConfig] = Field(default_factory=list)
    multi_step_reward_strategy: RewardStrategy | None = None
    agents: Any = None
    """Reserved for multi-agent tasks; kept in Task.raw_frontmatter."""
    scenes: Any = None
    """Reserved for multi-scene tasks; kept in Task.raw_frontmatter."""
    user: Any = None
    """Reserved for scripted-user tasks; kept in Task.raw_frontmatter."""

    def to_config(self) -> TaskConfig:
        """Flatten the `task` table into the normalized config."""
        return TaskConfig(
            schema_version=self.schema_version,
            name=self.task.name,
            description=self.task.description,
            authors=list(self.task.authors),
            keywords=list(self.task.keywords),
            metadata=self.metadata,
            source=self.source,
            agent=self.agent,
            verifier=self.verifier,
            sandbox=self.sandbox,
            oracle=self.oracle,
            artifacts=self.artifacts,
            steps=self.steps,
            multi_step_reward_strategy=self.multi_step_reward_strategy,
        )


RESERVED_KEYS = ("agents", "scenes", "user")

__all__ = [
    "MAIN_SERVICE",
    "RESERVED_KEYS",
    "AgentSettings",
    "Artifact",
    "Author",
    "CollectHook",
    "Frontmatter",
    "HardeningConfig",
    "HealthcheckSettings",
    "JudgeConfig",
    "OracleSettings",
    "RewardStrategy",
    "SandboxSettings",
    "StepAgentSettings",
    "StepVerifierSettings",
    "TaskConfig",
    "TaskConfigWarning",
    "TaskInfo",
    "TaskStepConfig",
    "VerifierMode",
    "VerifierSettings",
]
