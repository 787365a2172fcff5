"""The Sandbox protocol: where an agent works and a verifier checks.

Rollouts, verifiers and agents compose on top of this small surface; every backend
(docker, daytona, modal) implements it and passes `tests/conformance/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeGuard, TypeVar, runtime_checkable

from anyio.abc import ByteReceiveStream, ByteSendStream

from benchflow._models import FrozenModel
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec

if TYPE_CHECKING:
    from benchflow.sandbox.output import OutputCapture

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH for benchflow's own root commands once an agent has run: never a folder the agent
could write (an image PATH may start with ~/.local/bin, and argv[0] is looked up through it)."""


@dataclass(frozen=True)
class ExecResult:
    """What a finished command left: its exit code and everything it printed.

    `timed_out` is set when the command was killed at its deadline (exit code 124/137).
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def text(self, limit: int | None = None) -> str:
        """stdout then stderr, decoded leniently, optionally keeping only the last `limit` chars."""
        out = (self.stdout + self.stderr).decode("utf-8", "replace")
        return out if limit is None else out[-limit:]


@runtime_checkable
class LiveProcess(Protocol):
    """A process running inside a sandbox with live stdio (the ACP transport).

    The shape follows `anyio.abc.Process`; `kill()` is async because the backend may
    need a round-trip to signal the process group inside the sandbox.
    """

    @property
    def stdin(self) -> ByteSendStream: ...

    @property
    def stdout(self) -> ByteReceiveStream: ...

    @property
    def stderr(self) -> ByteReceiveStream: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int:
        """Wait until the process exits (its stdout closed) and return its exit code."""
        ...

    async def kill(self) -> None:
        """Kill the process and every process it started (its whole process group)."""
        ...

    async def aclose(self) -> None:
        """Kill if still running and release the streams."""
        ...


class SandboxCapabilities(FrozenModel):
    """What a backend can do; checked against a rollout's needs before anything starts
    (`benchflow.sandbox.provider.require_capabilities`).

    `live_processes`: long-running processes with live stdio (ACP agents need them).
    `root_exec`: exec as another user than the image's (agent users, verifier hardening).
    `network_policies`: the `NetworkPolicy` values the backend can enforce.
    `snapshots`: a started sandbox can be saved as an image to start from later (the agent
    install cache; without it agents are installed in every rollout).
    `volumes`: named volumes, each filled once by a short-lived sandbox of the same image
    and mounted read-only into later sandboxes (the per-agent install layers: a pairing of
    agents installed before starts with both, with no install and no image to build).
    `gpus`: GPUs can be attached.
    `compose`: multi-container sandboxes (a task's docker-compose.yaml; `SandboxSpec.compose_file`).
    `egress_allowlist`: `model-only` is an outbound allowlist holding the model endpoint's
    host (`SandboxSpec.egress_allowlist`): the sandbox calls the endpoint directly, so it
    must be reachable from the sandbox. Without it (docker) `model-only` is an internal
    network whose gateway relays to the endpoint.
    """

    live_processes: bool = True
    root_exec: bool = True
    gpus: bool = False
    snapshots: bool = False
    volumes: bool = False
    network_policies: frozenset[NetworkPolicy] = frozenset({"public"})
    egress_allowlist: bool = False
    compose: bool = False


@runtime_checkable
class Sandbox(Protocol):
    """A running sandbox: one per rollout, shared by every role and the verifier."""

    capabilities: SandboxCapabilities
    backend: str
    """The registered name of the provider that made it (`benchflow.sandbox.registry`)."""
    spec: SandboxSpec
    image: str | None
    """The image (or snapshot) it starts or started from, once known."""
    workdir: str
    """The working directory of agents and the verifier (task workdir, else the image's)."""

    @property
    def sandbox_id(self) -> str | None:
        """The backend's id of the running sandbox (None before start and after delete)."""
        ...

    async def start(self) -> None:
        """Build or fetch the image and start the sandbox (idempotent)."""
        ...

    async def exec(
        self,
        cmd: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run `cmd` (argv, never a shell string) to completion and capture its output.

        A command still running at `timeout` seconds is killed and the result has
        `timed_out=True`. Raises `SandboxExecError` only when the backend itself fails.
        """
        ...

    async def upload(self, src: Path, dst: str) -> None:
        """Copy a host file or folder to `dst` inside the sandbox (created as needed)."""
        ...

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        """Write `data` to the file `dst` inside the sandbox."""
        ...

    async def download(self, src: str, dst: Path) -> None:
        """Copy a sandbox file or folder to the host path `dst`."""
        ...

    async def open_process(
        self,
        cmd: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LiveProcess:
        """Start `cmd` with live stdin/stdout/stderr, in its own process group."""
        ...

    async def stop(self, delete: bool = True) -> None:
        """Stop the sandbox; with `delete`, remove it. Idempotent."""
        ...


@runtime_checkable
class SnapshotSandbox(Sandbox, Protocol):
    """A sandbox whose backend can save it as an image (`capabilities.snapshots`)."""

    async def snapshot_base(self) -> str:
        """Before start: prepare the image and return a stable id of its content."""
        ...

    async def snapshot_exists(self, name: str) -> bool:
        """Whether a snapshot called `name` exists."""
        ...

    def start_from_snapshot(self, name: str) -> None:
        """Make the next `start()` use snapshot `name` instead of the task image."""
        ...

    async def save_snapshot(self, name: str, description: str) -> None:
        """Save the running sandbox as snapshot `name`. It waits for the sandbox's calls in
        flight (exec, a live process's start, uploads, downloads), and calls made meanwhile
        wait for it (`SnapshotGate`): Docker pauses a container it commits, and an exec
        started into the paused container hangs the daemon for it."""
        ...


@runtime_checkable
class StreamingSandbox(Sandbox, Protocol):
    """A sandbox that hands a command's output over as it arrives (`OutputCapture`), so an
    agent's output lands on disk live and only its tail is held in memory."""

    async def exec_into(self, cmd: Sequence[str], capture: OutputCapture, *,
                        user: str | None = None, cwd: str | None = None,
                        env: Mapping[str, str] | None = None,
                        timeout: float | None = None) -> ExecResult:
        """`exec`, with stdout and stderr written to `capture` chunk by chunk."""
        ...


@runtime_checkable
class GuardedSandbox(Sandbox, Protocol):
    """A sandbox whose backend may leave limits to benchflow: `storage_quota` False means
    `spec.storage_mb` is not enforced by the backend, so the rollout's disk watchdog reads
    `disk_usage_mb()` and stops the agent past it. `warnings` collects what weakened the
    sandbox's guarantees (a download cut at `spec.download_limit_mb`) for the result."""

    storage_quota: bool
    warnings: list[str]

    async def disk_usage_mb(self) -> float:
        """What the sandbox has written since it started, in MB."""
        ...

    async def stop_processes(self) -> None:
        """Stop every process in the sandbox (its running commands return); its files
        stay downloadable."""
        ...


@runtime_checkable
class PolicySandbox(Sandbox, Protocol):
    """A sandbox that can change its network policy once started (`network_policies`)."""

    async def apply_network_policy(self, policy: NetworkPolicy, network: str | None) -> None:
        """Apply `policy` now (with `model-only`: attach to `network` only)."""
        ...


@runtime_checkable
class VolumeSandbox(Sandbox, Protocol):
    """A sandbox whose backend keeps named volumes (`capabilities.volumes`).

    A volume is filled once (`fill_volume`) and from then on only read: mounted read-only
    (`mount_volume`, before `start()`), so no rollout can change what later ones run.
    """

    async def snapshot_base(self) -> str:
        """Before start: prepare the image and return a stable id of its content."""
        ...

    def scratch(self) -> AbstractAsyncContextManager[Sandbox]:
        """A short-lived started sandbox of the same image, on the public network, with
        none of this one's files; removed on exit (to inspect the image before start)."""
        ...

    async def volume_ready(self, name: str) -> bool:
        """Whether volume `name` exists and was filled completely."""
        ...

    async def fill_volume(self, name: str, target: str,
                          fill: Callable[[Sandbox], Awaitable[None]], *,
                          ttl_sec: float = 3600.0) -> bool:
        """Fill volume `name`: `fill` runs on a scratch sandbox where the (emptied) volume
        is mounted read-write at `target`; when it returns, the volume is marked complete.

        One filler at a time per volume, across processes: a caller that finds another
        filling waits for it and returns False once the volume is ready (True: filled
        here); a filler killed mid-fill blocks the others for at most `ttl_sec`. Raises
        what `fill` raised (the volume stays incomplete).
        """
        ...

    def mount_volume(self, name: str, target: str) -> None:
        """Before start: mount volume `name` read-only at `target`."""
        ...


@runtime_checkable
class ServiceSandbox(Sandbox, Protocol):
    """A multi-container sandbox (`capabilities.compose`): the agent's `main` plus the other
    services of the task's docker-compose.yaml, reached here by name (for Harbor's collect
    hooks and the artifacts taken from a service)."""

    async def service_exec(self, service: str, command: str, *, user: str | None = None,
                           timeout: float) -> ExecResult:
        """Run the shell command `command` (`sh -c`) in `service`, as `user` (None: the
        image's own user), with no environment or working directory of main's. Killed after
        `timeout` seconds (`timed_out`)."""
        ...

    async def service_download(self, service: str, src: str, dst: Path) -> bool:
        """Copy `src` from `service`'s file system to the host path `dst` (also from a
        stopped service); False when `src` does not exist there."""
        ...

    async def stop_main(self) -> None:
        """Stop `main` (every process in it ends) and leave the other services running."""
        ...

    def main_can_write(self, service: str, path: str) -> str | None:
        """Why `main` can write `path` of `service` (a volume or host folder mounted in both,
        writable in main), or None when only `service` can."""
        ...


_P = TypeVar("_P")


def implements(sandbox: object, protocol: type[_P]) -> TypeGuard[_P]:
    """`isinstance(sandbox, protocol)` for the runtime-checkable protocols above, answered
    once per class: on Python 3.11 the check walks the protocol's members on every call
    (~20 us; a rollout asks a few times, a thousand rollouts in flight ask thousands). A
    backend declares what it implements by its class, not per instance."""
    key = (type(sandbox), protocol)
    found = _IMPLEMENTS.get(key)
    if found is None:
        found = _IMPLEMENTS[key] = isinstance(sandbox, protocol)
    return found


_IMPLEMENTS: dict[tuple[type, type], bool] = {}
