"""The normalized task configuration, shared by the native and the legacy layout.

A task's settings reach the rest of benchflow only through `TaskConfig`: the native
loader validates a `task.md` frontmatter against `Frontmatter`, the legacy loader maps
a Harbor-style `task.toml` onto the same shape first, and both end in `TaskConfig`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field

from benchflow._models import FrozenModel

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A positive, finite duration in seconds."""

Text = Annotated[str, Field(min_length=1)]


class TaskConfigWarning(UserWarning):
    """A task file uses a key benchflow does not support yet; the key was ignored."""


class _Strict(FrozenModel):
    """Frozen, unknown keys rejected, no str->number or str->bool coercion (native files)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
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
    type: Literal["test-script", "llm-judge"] = "test-script"
    """Harbor's verifier type; native tasks declare it in verifier/verifier.md instead."""
    judge: JudgeConfig = JudgeConfig()
    """The LLM judge of an llm-judge verifier (Harbor's `[verifier.judge]`)."""


class SandboxSettings(_Strict):
    """The container the agent works in."""

    docker_image: Text | None = None
    """A pre-built image used instead of building environment/Dockerfile."""
    cpus: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    memory_mb: Annotated[int, Field(gt=0)] = 2048
    storage_mb: Annotated[int, Field(gt=0)] = 10240
    gpus: Annotated[int, Field(ge=0)] = 0
    workdir: Text | None = None
    """Working directory of the agent and the verifier; None keeps the image's WORKDIR."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set in the sandbox for every phase."""
    build_timeout_sec: Seconds = 600.0
    allow_internet: bool = True


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


class TaskInfo(_Strict):
    """The `task` table: identity and catalogue data."""

    name: Text | None = None
    description: str | None = None
    authors: Authors = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class Frontmatter(_Strict):
    """A native `task.md` frontmatter; the legacy loader maps task.toml onto it too."""

    schema_version: str | None = None
    task: TaskInfo = TaskInfo()
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str | None = None
    agent: AgentSettings = AgentSettings()
    verifier: VerifierSettings = VerifierSettings()
    sandbox: SandboxSettings = SandboxSettings()
    oracle: OracleSettings = OracleSettings()
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
        )


RESERVED_KEYS = ("agents", "scenes", "user")

__all__ = [
    "RESERVED_KEYS",
    "AgentSettings",
    "Author",
    "Frontmatter",
    "HardeningConfig",
    "JudgeConfig",
    "OracleSettings",
    "SandboxSettings",
    "TaskConfig",
    "TaskConfigWarning",
    "TaskInfo",
    "VerifierSettings",
]
