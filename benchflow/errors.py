"""The benchflow exception tree and the error types written to result files.

```text
BenchflowError
├── ConfigError              config_invalid: bad configuration that is not the task's
│   │                        fault (backend, credentials, options); never retried
│   ├── TaskNotFoundError    task_not_found
│   ├── TaskInvalidError     task_invalid
│   └── TaskEscapeError      task_invalid: a task file links outside its folder (refused
│                            for the whole run, never recorded as one trial's failure)
├── SandboxError             a sandbox backend failed (infrastructure); retried only
│   │                        when `transient` (set where the backend's exception is mapped)
│   ├── SandboxBuildError    environment_build_failed
│   ├── SandboxBuildTimeout  environment_build_timeout
│   ├── ImagePullError       environment_image_pull_failed
│   ├── SandboxStartError    environment_start_failed
│   ├── ResourceAllocationError  environment_resource_allocation_failed
│   ├── SandboxExecError     environment_exec_failed: daemon/API failure in an exec after
│   │                        start (a non-zero exit is a result)
│   ├── ResourceExhaustedError  environment_resource_exhausted: the sandbox ran past a limit
│   │                        benchflow enforces (disk); never retried
│   ├── SandboxTeardownError environment_teardown_failed (never retried)
│   └── ToolServerError      environment_start_failed: the tool server is unreachable or
│                            refused a session (benchflow.tools)
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
├── ResultsWriteError        the job's files cannot be written (disk full): the job stops
└── PhaseTimeout             mixin of the *Timeout classes: .phase, .timeout_sec
```

Every class carries the `ErrorType` it is recorded as and whether the job layer may
retry it. Retries read `retryable`, never message text: for sandbox errors it is the
instance's `transient`, decided from the backend's exception type and status where it
is mapped (`sandbox/docker/sandbox.py::map_docker_errors`): daemon 5xx, lost connections and
timeouts are transient; a Dockerfile that does not build or an image that does not
exist is not.
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
    "config_invalid",
    "environment_exec_failed",
    "worker_lost",
    "environment_resource_exhausted",
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
    """A job, agent, scene or run configuration is wrong; the message says how to fix it.

    Recorded as `config_invalid`; the task's own problems are `TaskInvalidError` and
    `TaskNotFoundError`.
    """

    error_type: ClassVar[ErrorType] = "config_invalid"


class TaskNotFoundError(ConfigError):
    """No task exists at the given path."""

    error_type: ClassVar[ErrorType] = "task_not_found"


class TaskInvalidError(ConfigError):
    """A task folder exists but is malformed (missing file, bad frontmatter, bad key)."""

    error_type: ClassVar[ErrorType] = "task_invalid"


class TaskEscapeError(ConfigError):
    """A file or folder of a task resolves outside the task folder (a symbolic link to a
    host file): the run is refused, since its text would reach the sandbox and the results."""

    error_type: ClassVar[ErrorType] = "task_invalid"


class SandboxError(BenchflowError):
    """A sandbox backend failed. Infrastructure: retried by the job layer when `transient`.

    `transient` is decided where the backend's exception is mapped (a daemon 5xx, a lost
    connection, a timeout); a failure that would repeat identically is not transient.
    """

    error_type: ClassVar[ErrorType] = "environment_start_failed"

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient

    @property  # type: ignore[override]
    def retryable(self) -> bool:
        return self.transient


class SandboxBuildError(SandboxError):
    """The environment's image did not build. `log_path` holds the build log when saved."""

    error_type: ClassVar[ErrorType] = "environment_build_failed"

    def __init__(self, message: str, log: str = "", *, transient: bool = False) -> None:
        super().__init__(message, transient=transient)
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

    error_type: ClassVar[ErrorType] = "environment_exec_failed"


class ResourceExhaustedError(SandboxError):
    """The sandbox ran past a limit benchflow enforces itself (its disk, where the backend
    has no quota): the agent was stopped. Never retried: a rerun would do the same."""

    error_type: ClassVar[ErrorType] = "environment_resource_exhausted"

    @property
    def retryable(self) -> bool:
        return False


class SandboxTeardownError(SandboxError):
    """Stopping or removing the sandbox failed. Recorded; never changes the reward or retried."""

    error_type: ClassVar[ErrorType] = "environment_teardown_failed"

    @property  # type: ignore[override]
    def retryable(self) -> bool:
        return False


class ToolServerError(SandboxError):
    """The tool server (`benchflow tools serve`) is unreachable or refused a session."""

    error_type: ClassVar[ErrorType] = "environment_start_failed"


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


class WorkerLostError(BenchflowError):
    """The process running the rollout died (a Ray worker or its node). Infrastructure: the
    trial is retried on another worker."""

    error_type: ClassVar[ErrorType] = "worker_lost"
    retryable: ClassVar[bool] = True


class ResultsWriteError(BenchflowError):
    """benchflow cannot write a job's files (the disk under the jobs folder is full, or it
    refuses writes). The job stops starting trials and ends: every result written before
    stays valid, and `benchflow jobs resume` finishes the job once there is room. Never
    recorded in a result (there is no room for one)."""

    @classmethod
    def for_path(cls, path: object, exc: OSError, job_dir: object = None) -> ResultsWriteError:
        where = f"`benchflow jobs resume {job_dir}`" if job_dir else "the run again"
        return cls(f"{path}: cannot write ({exc.strerror or exc}): free space there and run "
                   f"{where}; the results written before stay valid")


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
    "ResourceExhaustedError",
    "ResultsWriteError",
    "RewardInvalidError",
    "RewardMissingError",
    "RolloutCancelled",
    "SandboxBuildError",
    "WorkerLostError",
    "SandboxBuildTimeout",
    "SandboxError",
    "SandboxExecError",
    "SandboxStartError",
    "SandboxTeardownError",
    "TaskEscapeError",
    "TaskInvalidError",
    "TaskNotFoundError",
    "ToolServerError",
    "VerifierError",
    "VerifierFailed",
    "VerifierTampered",
    "VerifierTimeout",
]
