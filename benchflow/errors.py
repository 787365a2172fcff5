"""The benchflow exception tree and the error types written to result files.

```text
BenchflowError
├── ConfigError              bad job/task/agent/scene config; never retried
│   ├── TaskNotFoundError    task_not_found
│   └── TaskInvalidError     task_invalid
├── SandboxError             a sandbox backend failed (infrastructure)
│   ├── SandboxBuildError    environment_build_failed
│   ├── SandboxBuildTimeout  environment_build_timeout
│   ├── ImagePullError       environment_image_pull_failed
│   ├── SandboxStartError    environment_start_failed
│   ├── ResourceAllocationError  environment_resource_allocation_failed
│   ├── SandboxExecError     daemon/API failure in exec (a non-zero exit is a result)
│   └── SandboxTeardownError environment_teardown_failed
├── AgentError
│   ├── AgentInstallError    agent_install_failed
│   ├── AgentInstallTimeout  agent_install_timeout
│   ├── AgentExecutionError  agent_execution_failed
│   ├── AgentTimeout         agent_execution_timeout
│   └── AgentProtocolError   ACP handshake or transport failure (agent_execution_failed)
├── ProviderError            model API failure; .status, .transient
├── VerifierError
│   ├── VerifierFailed       verifier_failed (non-zero exit; any reward file ignored)
│   ├── VerifierTimeout      verifier_timeout
│   ├── RewardMissingError   verifier_reward_missing
│   ├── RewardInvalidError   verifier_reward_invalid
│   └── VerifierTampered     verifier_tampered (hardening found tampering; fail closed)
├── RolloutCancelled         cancelled
└── PhaseTimeout             mixin of the *Timeout classes: .phase, .timeout_sec
```

Every class carries the `ErrorType` it is recorded as and whether the job layer may
retry it. Retries read `retryable`, never message text.
"""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

ErrorType = Literal[
    "environment_build_failed",
    "environment_build_timeout",
    "environment_image_pull_failed",
    "environment_start_failed",
    "environment_resource_allocation_failed",
    "agent_install_failed",
    "agent_install_timeout",
    "agent_execution_failed",
    "agent_execution_timeout",
    "verifier_failed",
    "verifier_timeout",
    "verifier_reward_missing",
    "verifier_reward_invalid",
    "environment_teardown_failed",
    "task_invalid",
    "task_not_found",
    "internal_error",
    "verifier_tampered",
    "cancelled",
]
"""Every value `result.json`'s `error.type` can take (the job spec's 17 plus ours)."""

ERROR_TYPES: tuple[str, ...] = get_args(ErrorType)


class BenchflowError(Exception):
    """Base of every error benchflow raises on purpose."""

    error_type: ClassVar[ErrorType] = "internal_error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class PhaseTimeout(BenchflowError):
    """Mixin base of the errors raised when a phase's own deadline passed (`.phase`, `.timeout_sec`)."""

    def __init__(self, phase: str, timeout_sec: float, message: str | None = None) -> None:
        super().__init__(message or f"{phase} exceeded its timeout of {timeout_sec:g} s")
        self.phase = phase
        self.timeout_sec = timeout_sec


class ConfigError(BenchflowError):
    """A job, task, agent or scene configuration is wrong; the message says how to fix it."""

    error_type: ClassVar[ErrorType] = "task_invalid"


class TaskNotFoundError(ConfigError):
    """No task exists at the given path."""

    error_type: ClassVar[ErrorType] = "task_not_found"


class TaskInvalidError(ConfigError):
    """A task folder exists but is malformed (missing file, bad frontmatter, bad key)."""

    error_type: ClassVar[ErrorType] = "task_invalid"


class SandboxError(BenchflowError):
    """A sandbox backend failed. Infrastructure: retried by the job layer."""

    error_type: ClassVar[ErrorType] = "environment_start_failed"
    retryable: ClassVar[bool] = True


class SandboxBuildError(SandboxError):
    """The environment's image did not build. `log_path` holds the build log when saved."""

    error_type: ClassVar[ErrorType] = "environment_build_failed"

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class SandboxBuildTimeout(PhaseTimeout, SandboxError):
    """The image build exceeded `environment.build_timeout_sec`."""

    error_type: ClassVar[ErrorType] = "environment_build_timeout"


class ImagePullError(SandboxError):
    """The task's `docker_image` is neither local nor pullable."""

    error_type: ClassVar[ErrorType] = "environment_image_pull_failed"


class SandboxStartError(SandboxError):
    """The container did not start after its image was ready."""

    error_type: ClassVar[ErrorType] = "environment_start_failed"


class ResourceAllocationError(SandboxError):
    """The backend could not allocate the requested cpus, memory or storage."""

    error_type: ClassVar[ErrorType] = "environment_resource_allocation_failed"


class SandboxExecError(SandboxError):
    """The backend failed to run a command (a non-zero exit code is a result, not this)."""

    error_type: ClassVar[ErrorType] = "environment_start_failed"


class SandboxTeardownError(SandboxError):
    """Stopping or removing the sandbox failed. Recorded; never changes the reward."""

    error_type: ClassVar[ErrorType] = "environment_teardown_failed"


class AgentError(BenchflowError):
    """The agent under test failed. A legitimate outcome: never retried."""

    error_type: ClassVar[ErrorType] = "agent_execution_failed"


class AgentInstallError(AgentError):
    """The agent's install step exited non-zero."""

    error_type: ClassVar[ErrorType] = "agent_install_failed"


class AgentInstallTimeout(PhaseTimeout, AgentError):
    """The agent's install step exceeded its timeout."""

    error_type: ClassVar[ErrorType] = "agent_install_timeout"


class AgentExecutionError(AgentError):
    """The agent exited non-zero or died mid-turn."""

    error_type: ClassVar[ErrorType] = "agent_execution_failed"


class AgentTimeout(PhaseTimeout, AgentError):
    """The agent exceeded its wall-clock or idle timeout."""

    error_type: ClassVar[ErrorType] = "agent_execution_timeout"


class AgentProtocolError(AgentError):
    """The ACP handshake or transport failed."""

    error_type: ClassVar[ErrorType] = "agent_execution_failed"


class ProviderError(BenchflowError):
    """The model API failed; retried only when `transient`."""

    error_type: ClassVar[ErrorType] = "agent_execution_failed"

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient

    @property  # type: ignore[override]
    def retryable(self) -> bool:
        return self.transient


class VerifierError(BenchflowError):
    """The verifier produced no reward."""

    error_type: ClassVar[ErrorType] = "verifier_failed"


class VerifierFailed(VerifierError):
    """test.sh exited non-zero; any reward file it wrote is ignored."""

    error_type: ClassVar[ErrorType] = "verifier_failed"


class VerifierTimeout(PhaseTimeout, VerifierError):
    """test.sh exceeded `verifier.timeout_sec`."""

    error_type: ClassVar[ErrorType] = "verifier_timeout"


class RewardMissingError(VerifierError):
    """test.sh exited 0 but wrote neither reward.txt nor reward.json."""

    error_type: ClassVar[ErrorType] = "verifier_reward_missing"


class RewardInvalidError(VerifierError):
    """A reward file exists but does not hold a number (or a map of numbers)."""

    error_type: ClassVar[ErrorType] = "verifier_reward_invalid"


class VerifierTampered(VerifierError):
    """Hardening found the agent tampered with what the verifier trusts; reward is null."""

    error_type: ClassVar[ErrorType] = "verifier_tampered"


class RolloutCancelled(BenchflowError):
    """The rollout was cancelled (Ctrl-C, SIGTERM, job cancellation)."""

    error_type: ClassVar[ErrorType] = "cancelled"


__all__ = [
    "ERROR_TYPES",
    "AgentError",
    "AgentExecutionError",
    "AgentInstallError",
    "AgentInstallTimeout",
    "AgentProtocolError",
    "AgentTimeout",
    "BenchflowError",
    "ConfigError",
    "ErrorType",
    "ImagePullError",
    "PhaseTimeout",
    "ProviderError",
    "ResourceAllocationError",
    "RewardInvalidError",
    "RewardMissingError",
    "RolloutCancelled",
    "SandboxBuildError",
    "SandboxBuildTimeout",
    "SandboxError",
    "SandboxExecError",
    "SandboxStartError",
    "SandboxTeardownError",
    "TaskInvalidError",
    "TaskNotFoundError",
    "VerifierError",
    "VerifierFailed",
    "VerifierTampered",
    "VerifierTimeout",
]
