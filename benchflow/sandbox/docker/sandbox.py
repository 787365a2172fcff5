"""The docker sandbox backend, on the Engine API (never the docker CLI).

One long-lived container per rollout, with docker's init (tini) as PID 1 so that a stop
is immediate and zombies are reaped. A plain rollout's requests go over the daemon's local
socket without the Docker SDK (`calls.py`, `engine.py`); the rest through the SDK. Every
blocking request goes through `docker_call`, which runs it in a worker thread and maps
Docker's exceptions to benchflow's.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import shlex
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio

from benchflow.errors import (
    ResourceAllocationError,
    SandboxError,
    SandboxExecError,
    SandboxStartError,
    SandboxTeardownError,
)
from benchflow.sandbox import certs, images
from benchflow.sandbox.docker import calls, engine
from benchflow.sandbox.archive import tar_bytes as _tar_bytes
from benchflow.sandbox.archive import tar_path as _tar_path
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, Sandbox, SandboxCapabilities
from benchflow.sandbox.docker.errors import docker_call, docker_client
from benchflow.sandbox.exit_codes import TIMEOUT_EXIT_CODES
from benchflow.sandbox.output import OutputCapture
from benchflow.sandbox.docker.process import DockerProcess, wait_started
from benchflow.sandbox.early import backend_waits
from benchflow.sandbox.snapshot_gate import SnapshotGate
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec

log = logging.getLogger(__name__)
T = TypeVar("T")

from benchflow.sandbox.labels import LABEL_JOB, LABEL_MANAGED, LABEL_ROLLOUT  # noqa: E402
from benchflow.sandbox.owner import LABEL_JOB_ID, LABEL_OWNER  # noqa: E402

LABEL_SNAPSHOT_OF = "benchflow.agent-cache"
"""On a committed agent-install image: the task image it was made from."""

_SCRIPTS = Path(__file__).parents[1] / "scripts"
_KILLED_CODES = (128 + 9, 128 + 15, -1)
"""Exit codes of a command whose container may have stopped under it (SIGKILL, SIGTERM)."""
_pending_removal: set[str] = set()
"""Containers whose removal failed because the daemon was unreachable: `reclaim()` removes
them once it answers again."""
_KILL_SCRIPT = "/tmp/.benchflow/kill_process.sh"
_build_locks: dict[str, threading.Lock] = {}
"""One build (or existence check) of a tag at a time, across threads: an early start
(`benchflow.sandbox.early`) prepares its image on an event loop of its own."""
_known_images: set[str] = set()  # tags seen locally in this process: skip the inspect call


_storage_quotas: bool | None = None
"""Whether the daemon honours `storage_opt` size quotas (None: not asked yet)."""

CAPABILITIES = SandboxCapabilities(
    live_processes=True, root_exec=True, gpus=True, snapshots=True, compose=True, volumes=True,
    network_policies=frozenset({"public", "none", "model-only"}))


class DockerSandbox:
    """A rollout's container on the local (or `DOCKER_HOST`) Docker daemon."""

    capabilities = CAPABILITIES
    backend = "docker"

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.container_id: str | None = None
        self.image: str | None = None
        self.workdir = spec.workdir or "/"
        self._pems = certs.read_certs(spec.extra_ca_certs)
        self._env = dict(spec.env)
        self._ca_env: dict[str, str] = {}
        """CA variables every exec carries (see certs.ca_env_argv), known after start."""
        self._ca_in_image = False  # built here from the Dockerfile with the CAs baked in
        self.storage_quota = False
        """Whether the daemon enforces `spec.storage_mb` itself (known after start): where
        it does not, the rollout's disk watchdog does."""
        self.warnings: list[str] = []
        """What weakened this sandbox's guarantees (a download cut at its limit), for the
        rollout's result."""
        self._gate = SnapshotGate()  # a commit pauses the container: no exec starts then
        self._starting: list[str] = []
        """Live processes' execs, maybe not running yet: a snapshot waits until they do."""

    @property
    def sandbox_id(self) -> str | None:
        return self.container_id

    # -- lifecycle ---------------------------------------------------------------------

    async def prepare_image(self) -> str:
        """Build, reuse or pull the image; returns its tag (a build or pull imports the SDK)."""
        spec = self.spec
        use_dockerfile = spec.environment_dir is not None and (
            spec.force_build or not spec.docker_image
        )
        if use_dockerfile:
            assert spec.environment_dir is not None
            tag = images.image_tag(spec.name, spec.environment_dir, self._pems)
            async with _build_lock(tag):
                exists = tag in _known_images or await docker_call(
                    calls.image_exists, tag, error=SandboxStartError)
                if spec.force_build or not exists:
                    from benchflow.sandbox.docker import images as docker_images

                    log.info("building %s", tag)
                    await docker_call(docker_images.build_image, docker_client(), tag,
                                spec.environment_dir, self._pems,
                                spec.build_timeout_sec, spec.build_log_path, _owner(spec.labels),
                                error=SandboxStartError)
            # the tag covers the CA digest: the final stage installed these certificates
            self._ca_in_image = bool(self._pems) and images.final_stage_has_ca(
                spec.environment_dir)
        else:
            tag = spec.docker_image or ""
            if not await docker_call(calls.image_exists, tag, error=SandboxStartError):
                from benchflow.sandbox.docker import images as docker_images

                await docker_call(docker_images.pull_image, docker_client(), tag,
                                  error=SandboxStartError)
        _known_images.add(tag)
        self.image = tag
        return tag

    async def start(self) -> None:
        if self.container_id is not None:
            return
        image = self.image or await self.prepare_image()
        spec = self.spec
        kwargs = create_kwargs(spec, image, self._env)
        self.container_id = container_id = await self._create(kwargs, spec.storage_mb)
        try:
            backend_waits()  # an early start's caller goes on (`benchflow.sandbox.early`)
            await docker_call(calls.start, container_id, error=SandboxStartError)
            try:
                await self._init_container()
                info = await docker_call(calls.inspect, container_id, error=SandboxStartError)
            except SandboxExecError as exc:  # still starting: an exec now is a start failure
                raise SandboxStartError(f"sandbox init failed: {exc}",
                                        transient=exc.transient) from exc
            self.workdir = spec.workdir or (info.get("Config") or {}).get("WorkingDir") or "/"
            state = info.get("State")
            status = state.get("Status") if isinstance(state, dict) else state
            if status != "running":
                raise SandboxStartError(f"the container exited right after it started "
                                        f"(status {status}): the image needs `sleep` "
                                        "and a shell")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop(delete=True)
            raise

    async def _create(self, kwargs: dict[str, Any], storage_mb: int | None) -> str:
        """The new container's id."""
        global _storage_quotas
        if storage_mb and _storage_quotas is not False:
            try:
                container = await docker_call(calls.create_with_quota, kwargs, storage_mb,
                                              error=SandboxStartError)
            except SandboxStartError as exc:
                raise _classify_start(exc) from exc
            if container is not None:
                _storage_quotas = self.storage_quota = True
                return container
            log.info("the daemon has no storage quota: the disk watchdog enforces storage_mb")
            _storage_quotas = False  # the daemon's storage driver: ask once per process
        try:
            return await docker_call(calls.create, kwargs, error=SandboxStartError)
        except SandboxStartError as exc:
            raise _classify_start(exc) from exc

    async def _init_container(self) -> None:
        """Log folders, the kill helper, CA certificates and the spec's files and trees: one
        upload, an exec only if needed."""
        files: dict[str, tuple[bytes, int]] = {
            "/logs/agent/": (b"", 0o777),
            "/logs/verifier/": (b"", 0o700),  # the agent must not read or plant verifier output
            "/tmp/.benchflow/": (b"", 0o1777),  # live processes of any user write pid files
            _KILL_SCRIPT: ((_SCRIPTS / "kill_process.sh").read_bytes(), 0o755),
        }
        files.update({path: (data, 0o644) for path, data in self.spec.files.items()})
        install_ca = bool(self._pems) and not self._ca_in_image
        if install_ca:
            for fname, data in certs.ca_files(self._pems).items():
                files[f"{certs.CA_DIR}/{fname}"] = (data, 0o755 if fname.endswith(".sh") else 0o644)
        trees = self.spec.trees  # host folders: read off the event loop
        await self._put_archive("/", await anyio.to_thread.run_sync(_tar_bytes, files, trees)
                                if trees else _tar_bytes(files))
        steps = []
        if self.spec.workdir:  # mkdir only: an existing workdir keeps its owner and mode
            steps.append(f"mkdir -p {shlex.quote(self.spec.workdir)}")
        if install_ca:
            steps.append(f"sh {certs.INSTALL_SCRIPT}")
        if steps:
            result = await self.exec(["sh", "-c", " && ".join(steps)], user="root")
            if not result.ok:
                raise SandboxStartError(f"sandbox init failed: {result.text(2000)}")
        if install_ca:  # after the files exist: never point a variable at a missing file
            result = await self.exec(certs.ca_env_argv(), user="root", env={"PATH": SYSTEM_PATH})
            if not result.ok:
                raise SandboxStartError(f"sandbox init failed: {result.text(2000)}")
            self._ca_env = certs.parse_ca_env(result.stdout)

    async def stop(self, delete: bool = True) -> None:
        if self.container_id is None:
            return
        container_id = self.container_id
        try:  # by id: no lookup round trip first
            await docker_call(calls.remove_or_stop, container_id, delete,
                              error=SandboxTeardownError)
        except SandboxTeardownError as exc:
            if delete and exc.transient:  # the daemon is away: remove it once it is back
                _pending_removal.add(container_id)
            raise
        self.container_id = None if delete else container_id

    # -- snapshots (the agent install cache) and network policy ------------------------

    async def snapshot_base(self) -> str:
        """The task image's id (built or pulled now if needed)."""
        base = self.image or await self.prepare_image()
        return (await docker_call(docker_client().images.get, base)).id

    async def snapshot_exists(self, name: str) -> bool:
        from benchflow.sandbox.docker import images as docker_images

        return await docker_call(docker_images.image_exists, docker_client(), name)

    def start_from_snapshot(self, name: str) -> None:
        self.image = name

    async def save_snapshot(self, name: str, description: str) -> None:
        """Commit the container as image `name`, without the job/rollout labels. Docker
        pauses the container meanwhile: no exec, upload or download runs then
        (`SnapshotGate`)."""
        container = await docker_call(docker_client().containers.get, self._require())
        repository, _, tag = name.rpartition(":")
        async with self._gate.snapshot():
            if self._starting:
                starting, self._starting = self._starting, []
                await docker_call(wait_started, docker_client().api, starting)
            await docker_call(container.commit, repository=repository, tag=tag,
                              message=description, changes=[f"LABEL {LABEL_JOB}= {LABEL_ROLLOUT}="],
                              conf={"Labels": {LABEL_MANAGED: "true", **_owner(self.spec.labels),
                                               LABEL_SNAPSHOT_OF: self.image or ""}})

    # -- volumes (the per-agent install layers; volumes.py) ----- ----------------------

    @contextlib.asynccontextmanager
    async def scratch(self, volumes: dict[str, str] | None = None
                      ) -> AsyncIterator[DockerSandbox]:
        """A started container of this sandbox's image on the public network, without its
        files, with `volumes` (name -> path) mounted read-write; removed on exit."""
        spec = self.spec.model_copy(update={
            "name": f"{self.spec.name}-scratch", "network": None, "network_policy": "public",
            "egress_allowlist": (), "files": {}, "trees": (),
            "volumes": {n: {"bind": path, "mode": "rw"} for n, path in (volumes or {}).items()}})
        box = DockerSandbox(spec)
        # the image this sandbox prepared (or its snapshot), not a build of its own
        box.image = self.image or await self.prepare_image()
        box._ca_in_image = self._ca_in_image
        try:
            await box.start()
            yield box
        finally:
            with anyio.CancelScope(shield=True):
                await box.stop(delete=True)

    async def volume_ready(self, name: str) -> bool:
        from benchflow.sandbox.docker import volumes as docker_volumes

        return await docker_volumes.volume_ready(name)

    async def fill_volume(self, name: str, target: str,
                          fill: Callable[[Sandbox], Awaitable[None]], *,
                          ttl_sec: float = 3600.0) -> bool:
        """Fill volume `name` once (see `VolumeSandbox.fill_volume`); a lock left by a
        killed process is honoured for at most `ttl_sec`."""
        from benchflow.sandbox.docker import volumes as docker_volumes

        return await docker_volumes.fill_volume(self, name, target, fill, ttl_sec)

    def mount_volume(self, name: str, target: str) -> None:
        """Before start: mount volume `name` read-only at `target`."""
        mounts = self.spec.volumes
        if isinstance(mounts, list):
            mounts = [*mounts, f"{name}:{target}:ro"]
        else:
            mounts = {**(mounts or {}), name: {"bind": target, "mode": "ro"}}
        self.spec = self.spec.model_copy(update={"volumes": mounts})

    async def apply_network_policy(self, policy: NetworkPolicy, network: str | None) -> None:
        """`none` disconnects every network (loopback stays); `model-only` attaches `network`
        and disconnects the rest; `public` does nothing."""
        if policy == "public" or self.container_id is None:
            return
        await docker_call(isolate, self.container_id, policy, network, error=SandboxStartError)

    # -- commands ----------------------------------------------------------------------

    def _require(self) -> str:
        if self.container_id is None:
            raise SandboxExecError("sandbox is not started")
        return self.container_id

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None) -> ExecResult:
        return await self.exec_into(cmd, OutputCapture(), user=user, cwd=cwd, env=env,
                                    timeout=timeout)

    async def exec_into(self, cmd: Sequence[str], capture: OutputCapture, *,
                        user: str | None = None, cwd: str | None = None,
                        env: Mapping[str, str] | None = None,
                        timeout: float | None = None) -> ExecResult:
        """Run `cmd`; its output goes to `capture` frame by frame as the daemon sends it
        (linear in its size, on disk live when the capture has files)."""
        argv = list(cmd)
        if timeout is not None:
            # A worker thread cannot be interrupted: the deadline is enforced in the container.
            # By absolute path: PATH may hold folders the agent can write.
            argv = ["/usr/bin/timeout", "-k", "5s", f"{max(timeout, 0.01):.3f}s", *argv]
        started = time.monotonic()
        async with self._gate:
            exec_id = await self._exec_create(argv, user=user or "", workdir=cwd,
                                              environment={**self._ca_env, **(env or {})})
            await docker_call(calls.pump, exec_id, capture)
            code = (await docker_call(calls.exec_inspect, exec_id))["ExitCode"]
            timed_out = (timeout is not None and code in TIMEOUT_EXIT_CODES
                         and time.monotonic() - started >= timeout * 0.99)
            if not timed_out and (code is None or code in _KILLED_CODES):
                await self._check_still_running()
        return capture.result(code if code is not None else -1, timed_out)

    async def _exec_create(self, argv: list[str], **kwargs: Any) -> str:
        """A new exec's id. The daemon refuses one (409) only when the container is not
        running, which benchflow never causes before teardown: the container stopped under
        the rollout (a daemon restart), a transient SandboxExecError."""
        try:
            return await docker_call(calls.exec_create, self._require(), argv, **kwargs)
        except SandboxExecError as exc:
            if calls.refusal_status(exc.__cause__) == 409:
                raise SandboxExecError(f"the sandbox stopped under benchflow ({exc}): the "
                                       "Docker daemon restarted or the container was stopped",
                                       transient=True) from exc.__cause__
            raise

    async def _check_still_running(self) -> None:
        """A command killed because its container stopped (a daemon restart, someone's
        `docker rm`) failed for the infrastructure, not for the agent: raise a transient
        SandboxExecError instead of handing back its exit code."""
        state = (await docker_call(calls.inspect, self._require()))["State"]
        if not state.get("Running") or state.get("Paused") or state.get("Restarting"):
            raise SandboxExecError(f"the sandbox stopped under the command (container "
                                   f"{state.get('Status')}, exit {state.get('ExitCode')}): "
                                   "the Docker daemon restarted or the container was removed",
                                   transient=True)

    async def open_process(self, cmd: Sequence[str], *, user: str | None = None,
                           cwd: str | None = None, env: Mapping[str, str] | None = None
                           ) -> DockerProcess:
        api = docker_client().api
        proc_id = secrets.token_hex(8)
        pidfile = f"/tmp/.benchflow/proc-{proc_id}.pid"
        # setsid: the command leads its own process group, so kill() reaches its children.
        argv = ["/usr/bin/setsid", "-w", "/bin/sh", "-c", 'echo $$ > "$0"; exec "$@"', pidfile, *cmd]
        environment = {**self._ca_env, **(env or {}), "BENCHFLOW_PROC_ID": proc_id}
        async with self._gate:  # started: it is frozen and thawed with the container
            exec_id = await self._exec_create(argv, user=user or "", workdir=cwd,
                                              environment=environment, stdin=True)
            sock = await docker_call(api.exec_start, exec_id, socket=True)
            self._starting.append(exec_id)  # answered before the process runs
        raw = getattr(sock, "_sock", sock)

        async def exit_code() -> int | None:
            info = await docker_call(api.exec_inspect, exec_id)
            return None if info["Running"] else int(info["ExitCode"] or 0)

        async def kill() -> None:
            # As the process's own user: docker drops CAP_SYS_PTRACE, so root could not read
            # another user's /proc/<pid>/environ to confirm the marker.
            await self.exec(["/bin/sh", _KILL_SCRIPT, pidfile, proc_id], user=user, timeout=30,
                            env={"PATH": SYSTEM_PATH})

        return DockerProcess(raw, sock, exit_code, kill)

    # -- files -------------------------------------------------------------------------

    async def _put_archive(self, path: str, data: bytes) -> None:
        async with self._gate:
            ok = await docker_call(calls.put_archive, self._require(), path, data)
        if not ok:
            raise SandboxExecError(f"upload to {path} failed")

    async def upload(self, src: Path, dst: str) -> None:
        if not src.exists():
            raise SandboxExecError(f"upload source {src} does not exist")
        await self._put_archive("/", await anyio.to_thread.run_sync(_tar_path, src, dst))

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        await self._put_archive("/", _tar_bytes({dst: (data, mode)}))

    async def download(self, src: str, dst: Path) -> None:
        """Stream `src` out of the container to `dst` (at most `spec.download_limit_mb`; what
        the limit left out is recorded in `warnings`)."""
        async with self._gate:
            note = await docker_call(calls.download, self._require(), src, dst,
                                     self.spec.download_limit_mb)
        if note is not None:
            log.warning("%s", note)
            self.warnings.append(note)

    # -- limits benchflow enforces itself ----------------------------------------------

    async def disk_usage_mb(self) -> float:
        """What the container has written (its writable layer), in MB."""
        info = await docker_call(calls.inspect_with_size, self._require())
        return float(info.get("SizeRw") or 0) / (1 << 20)

    async def stop_processes(self) -> None:
        """Stop and kill every process but the container's init (`scripts/stop_all.sh`):
        nothing writes another byte, running commands return, files stay downloadable."""
        script = (_SCRIPTS / "stop_all.sh").read_text()
        await self.exec(["/bin/sh", "-c", script], user="root", timeout=60,
                        env={"PATH": SYSTEM_PATH})


@contextlib.asynccontextmanager
async def _build_lock(tag: str) -> AsyncIterator[None]:
    """Hold `tag`'s build lock; waiting polls (backing off to 0.5 s), so that it stays
    cancellable and works whichever thread's event loop holds the lock."""
    lock = _build_locks.setdefault(tag, threading.Lock())
    delay = 0.01
    while not lock.acquire(blocking=False):
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.5)
    try:
        yield
    finally:
        lock.release()


def _owner(labels: Mapping[str, str]) -> dict[str, str]:
    """The job instance and lease labels of a spec, for the images a sandbox makes (kept as
    provenance: images are shared caches, which no cleanup removes)."""
    return {k: v for k, v in labels.items() if k in (LABEL_JOB_ID, LABEL_OWNER)}


def isolate(container_id: str, policy: NetworkPolicy, target: str | None,
            keep: str | None = None) -> None:
    """Leave the container on the model-only network `target` (connected if it is not) and
    on `keep` (a compose project's own network) only: every other network is disconnected."""
    client = docker_client()
    container = client.containers.get(container_id)
    attached = list((container.attrs.get("NetworkSettings") or {}).get("Networks") or {})
    if policy == "model-only" and target and target not in attached:
        client.networks.get(target).connect(container_id)
    for name in attached:
        if name != keep and (name != target or policy != "model-only"):
            client.networks.get(name).disconnect(container_id, force=True)


def create_kwargs(spec: SandboxSpec, image: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The Docker SDK's `containers.create` options of a sandbox's container (sent as the
    SDK would by `engine.create`, else by the SDK)."""
    name = f"bf-{re.sub(r'[^a-zA-Z0-9_.-]+', '-', spec.name)[:40]}-{secrets.token_hex(4)}"
    kwargs: dict[str, Any] = dict(
        image=image, command=["sleep", "infinity"], name=name, init=True, detach=True,
        labels={LABEL_MANAGED: "true", **spec.labels}, environment=dict(env),
        nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
        mem_limit=f"{spec.memory_mb}m" if spec.memory_mb else None,
        pids_limit=spec.pids_limit,
        network=None if spec.network_policy == "none" else spec.network,
        network_mode="none" if spec.network_policy == "none" else None,
        runtime=spec.runtime, volumes=spec.volumes,
        working_dir=spec.workdir,
    )
    if spec.gpus:
        import docker.types

        kwargs["device_requests"] = [docker.types.DeviceRequest(count=spec.gpus,
                                                                capabilities=[["gpu"]])]
    return kwargs


def _classify_start(exc: SandboxStartError) -> SandboxError:
    text = str(exc).lower()
    if any(word in text for word in ("memory", "cpu", "nano_cpus", "resources", "insufficient")):
        return ResourceAllocationError(str(exc), transient=exc.transient)
    return exc


def _reclaim() -> list[str]:
    import docker.errors

    removed = []
    api = docker_client().api
    for container_id in sorted(_pending_removal):
        try:
            api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        removed.append(container_id)
        _pending_removal.discard(container_id)
    return removed


async def reclaim() -> list[str]:
    """Remove the containers of this process whose removal failed while the daemon was
    away (a restart); returns their ids. Raises SandboxTeardownError while it still is."""
    if not _pending_removal:
        return []
    return await docker_call(_reclaim, error=SandboxTeardownError)


def _ping() -> None:
    if docker_client.cache_info().currsize:  # made earlier: does the daemon still answer?
        docker_client().ping()
    else:  # making the client asks the daemon its API version: the same check
        docker_client()


async def preflight() -> None:
    """Check once per job that the daemon answers. Raises SandboxStartError saying what to do."""
    if await docker_call(engine.ping):  # the local socket, without the SDK (engine.py)
        return
    try:
        await docker_call(_ping, error=SandboxStartError)
    except SandboxStartError as exc:
        raise SandboxStartError(
            f"no Docker daemon answers ({exc}). Start Docker, or run "
            "scripts/ensure-docker.sh (installs and starts dockerd when run as root)") from exc
