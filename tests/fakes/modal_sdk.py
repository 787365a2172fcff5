"""A fake of the `modal` SDK whose sandboxes are real local containers.

It implements the part of Modal's surface benchflow's adapter uses (`App.lookup`,
`Image.from_dockerfile/from_registry/from_id`, `Sandbox.create/from_id/list`, `exec` with
`ContainerProcess` streams, `filesystem`, `snapshot_filesystem`, `terminate`) with the SDK's
own signatures (tests/unit/sandbox/test_modal_fake.py compares them with `inspect.signature`)
and raises the SDK's own exception classes. Like the real SDK's `.aio` interface, every
network call is reached as `method.aio(...)`.

What is mimicked on purpose: images build lazily at the first `Sandbox.create` and are cached
by content (`image.build` is only called for new content); tags are set at create and
filter `Sandbox.list`; stdin is buffered by `write` and sent by `drain`; stdout/stderr are
async iterables of chunks that resume where they stopped after a transient error (the SDK
keeps a stream offset); `ContainerProcess.wait` returns -1 when the exec deadline passed.
`snapshot_filesystem` commits the container, which docker pauses meanwhile: an exec started
into the paused container would hang the daemon for it, where Modal's service takes an
exec during a snapshot in its stride; so a sandbox's execs and file calls are ordered
against its snapshots (`SnapshotGate`, per container).

Failure injection: put exceptions in `Sandbox.inject[<call>]` and the next calls raise them in
order (`sandbox.create` before anything is made, `sandbox.create.after` after the container
exists (an ambiguous create), `process.wait` (`ExecTimeoutError`: the exec deadline passed),
`sandbox.terminate`, ...); `Sandbox.stream_drops` drops a matching process's stdout after
some chunks (a `StreamDrop`);
`Sandbox.latency_sec[<call>]` adds a per-call delay; `Sandbox.calls` logs every call.
"""

from __future__ import annotations

import functools
import hashlib
import io
import secrets as _secrets
import shutil
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import docker
import docker.errors
from modal import exception
from modal._image import AUTO_DOCKERIGNORE
from modal.stream_type import StreamType

from benchflow.errors import SandboxExecError
from benchflow.sandbox.docker.process import DockerProcess, wait_started
from benchflow.sandbox.snapshot_gate import SnapshotGate
from tests.fakes.egress import restrict_egress
from tests.fakes.modal_process import (
    ContainerProcess,
    StreamDrop,
    _Aio,
    _docker,
    _Injector,
    _io,
)

__all__ = ["FAKE_LABEL", "PROVIDER_CONFIG", "App", "ContainerProcess", "Image", "Sandbox",
           "SandboxFilesystem", "StreamDrop", "containers", "remove_snapshots", "reset"]

FAKE_LABEL = "benchflow.fake-modal"
_APP_LABEL = "fake-modal.app"
_IMAGES = "fake-modal/images"


class App(_Injector):
    """`modal.App`: a named app sandboxes belong to."""

    _apps: ClassVar[dict[str, str]] = {}

    def __init__(self, name: str, app_id: str) -> None:
        self.name = name
        self.app_id = app_id

    @_Aio
    @staticmethod
    async def lookup(name: str, *, client: Any = None, environment_name: str | None = None,
                     create_if_missing: bool = False) -> App:
        await App._enter("app.lookup")
        if name not in App._apps:
            if not create_if_missing:
                raise exception.NotFoundError(f"App '{name}' not found")
            # stable across processes, as a deployed app's id is
            App._apps[name] = "ap-" + hashlib.sha256(name.encode()).hexdigest()[:20]
        return App(name, App._apps[name])


class Image(_Injector):
    """`modal.Image`: lazy until a sandbox needs it; built once per content."""

    def __init__(self, build: Callable[[], Any] | None = None, object_id: str | None = None
                 ) -> None:
        self._build = build
        self.object_id = object_id

    async def _hydrate(self) -> str:
        if self.object_id is None:
            assert self._build is not None
            self.object_id = await self._build()
        return self.object_id

    @staticmethod
    def from_dockerfile(path: str | Path, *, force_build: bool = False,
                        context_dir: Path | str | None = None,
                        ignore: Sequence[str] | Callable[[Path], bool] = AUTO_DOCKERIGNORE,
                        build_args: dict[str, str] = {},  # noqa: B006 - the SDK's signature
                        registry_secret: Any = None, secrets: Collection[Any] | None = None,
                        env: dict[str, str | None] | None = None, gpu: str | None = None,
                        add_python: str | None = None) -> Image:
        dockerfile = Path(path)
        context = Path(context_dir) if context_dir is not None else Path.cwd()

        async def build() -> str:
            return await _build_image(dockerfile, context, force_build)
        return Image(build)

    @staticmethod
    def from_registry(tag: str, secret: Any = None, *,
                      setup_dockerfile_commands: list[str] = [],  # noqa: B006
                      force_build: bool = False, add_python: str | None = None,
                      **kwargs: Any) -> Image:
        async def build() -> str:
            await Image._enter("image.pull")
            try:
                await _io(_docker().images.get, tag)
            except exception.NotFoundError as exc:
                raise exception.ImageBuildError(f"image {tag} not found", "im-missing") from exc
            return await _tag_as_image(tag)
        return Image(build)

    @_Aio
    @classmethod
    async def from_id(cls, image_id: str, client: Any = None) -> Image:
        await Image._enter("image.from_id")
        await _io(_docker().images.get, _local_tag(image_id))
        return Image(object_id=image_id)


def _local_tag(image_id: str) -> str:
    return f"{_IMAGES}:{image_id.removeprefix('im-')}"


async def _tag_as_image(ref: str) -> str:
    digest = hashlib.sha256(ref.encode()).hexdigest()[:24]
    image = await _io(_docker().images.get, ref)
    await _io(image.tag, _IMAGES, digest)
    return f"im-{digest}"


async def _build_image(dockerfile: Path, context: Path, force: bool) -> str:
    digest = hashlib.sha256(dockerfile.read_bytes())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(path.relative_to(context).as_posix().encode() + b"\0" + path.read_bytes())
    image_id = f"im-{digest.hexdigest()[:24]}"
    client = _docker()
    if not force:
        try:
            await _io(client.images.get, _local_tag(image_id))
            return image_id  # Modal's build cache: same content, no rebuild
        except exception.NotFoundError:
            pass
    await Image._enter("image.build")
    with tempfile.TemporaryDirectory(prefix="fake-modal-") as tmp:
        shutil.copytree(context, tmp, dirs_exist_ok=True)
        shutil.copy(dockerfile, Path(tmp) / ".fake-modal.Dockerfile")
        try:
            await anyio.to_thread.run_sync(functools.partial(
                client.images.build, path=tmp, dockerfile=".fake-modal.Dockerfile",
                tag=_local_tag(image_id), rm=True))
        except docker.errors.BuildError as exc:
            raise exception.ImageBuildError(f"Image build failed: {exc}", image_id) from exc
    return image_id


_gates: dict[str, SnapshotGate] = {}
_starting: dict[str, list[str]] = {}
"""Per container, the execs started since its last snapshot (maybe not running yet)."""


def _gate(container: Any) -> SnapshotGate:
    """The container's order of snapshots against execs and file calls (whichever
    `Sandbox` object of it makes them)."""
    return _gates.setdefault(container.id, SnapshotGate())


class SandboxFilesystem(_Injector):
    """`Sandbox.filesystem`: files through docker's archive API."""

    def __init__(self, container: Any) -> None:
        self._container = container

    @staticmethod
    def _absolute(remote_path: str, op: str) -> None:
        if not remote_path.startswith("/"):
            raise exception.InvalidError(f"{op}: remote_path must be absolute, got {remote_path!r}")

    @_Aio
    async def write_bytes(self, data: bytes | bytearray | memoryview, remote_path: str) -> None:
        await self._enter("filesystem.write_bytes")
        self._absolute(remote_path, "write_bytes")
        parent, name = str(Path(remote_path).parent), Path(remote_path).name
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(bytes(data)))
        async with _gate(self._container):
            await _io(self._container.exec_run, ["mkdir", "-p", parent], user="root")
            try:
                ok = await _io(self._container.put_archive, parent, buf.getvalue())
            except exception.NotFoundError as exc:
                raise exception.SandboxFilesystemNotADirectoryError(str(exc)) from exc
        if not ok:
            raise exception.SandboxFilesystemError(f"write_bytes {remote_path} failed")

    @_Aio
    async def read_bytes(self, remote_path: str) -> bytes:
        await self._enter("filesystem.read_bytes")
        self._absolute(remote_path, "read_bytes")
        try:
            async with _gate(self._container):
                chunks, _stat = await _io(self._container.get_archive, remote_path)
        except exception.NotFoundError as exc:
            raise exception.SandboxFilesystemNotFoundError(f"{remote_path}: not found") from exc
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
            member = tar.next()
            if member is None or member.isdir():
                raise exception.SandboxFilesystemIsADirectoryError(f"{remote_path} is a directory")
            handle = tar.extractfile(member)
            return handle.read() if handle is not None else b""


class Sandbox(_Injector):
    """`modal.Sandbox`: a local container labelled with its tags and app."""

    def __init__(self, container: Any, tags: dict[str, str]) -> None:
        self._container = container
        self.object_id = _sandbox_id(container.name)
        self._tags = tags
        self._filesystem = SandboxFilesystem(container)

    @property
    def filesystem(self) -> SandboxFilesystem:
        return self._filesystem

    @_Aio
    @staticmethod
    async def create(
        *args: str,
        app: Any = None,
        name: str | None = None,
        tags: dict[str, str] | None = None,
        image: Image | None = None,
        env: dict[str, str | None] | None = None,
        secrets: Collection[Any] | None = None,
        network_file_systems: dict[Any, Any] = {},  # noqa: B006 - the SDK's signature
        timeout: int | None = 300,
        idle_timeout: int | None = None,
        workdir: str | None = None,
        gpu: str | None = None,
        cloud: str | None = None,
        region: str | Sequence[str] | None = None,
        cpu: float | tuple[float, float] | None = None,
        memory: int | tuple[int, int] | None = None,
        runtime: Any = None,
        block_network: bool = False,
        outbound_cidr_allowlist: Sequence[str] | None = None,
        outbound_domain_allowlist: Sequence[str] | None = None,
        _experimental_outbound_policy: Any = None,
        inbound_cidr_allowlist: Sequence[str] | None = None,
        volumes: dict[Any, Any] = {},  # noqa: B006
        pty: bool = False,
        encrypted_ports: Sequence[int] = [],
        h2_ports: Sequence[int] = [],
        unencrypted_ports: Sequence[int] = [],
        custom_domain: str | None = None,
        proxy: Any = None,
        include_oidc_identity_token: bool = False,
        readiness_probe: Any = None,
        verbose: bool = False,
        experimental_options: dict[str, Any] | None = None,
        _experimental_enable_snapshot: bool = False,
        _experimental_persistent: bool = False,
        client: Any = None,
        environment_name: str | None = None,
        pty_info: Any = None,
        cidr_allowlist: Sequence[str] | None = None,
    ) -> Sandbox:
        await Sandbox._enter("sandbox.create")
        if not isinstance(app, App):
            raise exception.InvalidError("App has not been initialized: pass app=")
        if gpu is not None:
            raise exception.InvalidError("the fake has no GPUs")
        if cidr_allowlist is not None or inbound_cidr_allowlist is not None:
            raise exception.InvalidError("the fake enforces outbound allowlists only")
        allowlisted = outbound_cidr_allowlist is not None or outbound_domain_allowlist is not None
        if block_network and allowlisted:
            raise exception.InvalidError("block_network cannot be combined with an allowlist")
        local = _local_tag(await image._hydrate()) if image is not None else "debian:bookworm-slim"
        labels = {**(tags or {}), FAKE_LABEL: "true", _APP_LABEL: app.app_id}
        if timeout is not None:
            labels["fake-modal.timeout"] = str(timeout)
        created.append({"region": region, "verbose": verbose})  # what a test may check
        cpus = cpu[1] if isinstance(cpu, tuple) else cpu
        mem = memory[1] if isinstance(memory, tuple) else memory
        container = await _io(
            _docker().containers.run, local, list(args) or ["sleep", "infinity"], detach=True,
            init=True, labels=labels, name=f"fake-modal-{_secrets.token_hex(8)}",
            environment={k: v for k, v in (env or {}).items() if v is not None},
            working_dir=workdir, nano_cpus=int(cpus * 1e9) if cpus else None,
            mem_limit=f"{mem}m" if mem else None,
            network_mode="none" if block_network else None)
        if allowlisted:
            await _io(restrict_egress, container, outbound_cidr_allowlist or (),
                      outbound_domain_allowlist or ())
        box = Sandbox(container, dict(tags or {}))
        if Sandbox.latency_sec.get("sandbox.create.after"):  # made, the answer still on its way
            await anyio.sleep(Sandbox.latency_sec["sandbox.create.after"])
        queue = Sandbox.inject.get("sandbox.create.after")  # the request went out, the answer was lost
        if queue:
            raise queue.pop(0)
        return box

    @_Aio
    @staticmethod
    async def from_id(sandbox_id: str, client: Any = None) -> Sandbox:
        await Sandbox._enter("sandbox.from_id")
        container = await _io(_docker().containers.get, f"fake-modal-{sandbox_id.removeprefix('sb-')}")
        if FAKE_LABEL not in container.labels:
            raise exception.NotFoundError(f"Sandbox {sandbox_id} not found")
        return Sandbox(container, _tags(container.labels))

    @_Aio
    @staticmethod
    async def list(*, app_id: str | None = None, tags: dict[str, str] | None = None,
                   client: Any = None) -> AsyncIterator[Sandbox]:
        await Sandbox._enter("sandbox.list")
        wanted = [FAKE_LABEL] + ([f"{_APP_LABEL}={app_id}"] if app_id else [])
        wanted += [f"{k}={v}" for k, v in (tags or {}).items()]
        for container in await _io(_docker().containers.list, filters={"label": wanted}):
            yield Sandbox(container, _tags(container.labels))

    @_Aio
    async def exec(
        self,
        *args: str,
        stdout: StreamType = StreamType.PIPE,
        stderr: StreamType = StreamType.PIPE,
        timeout: int | None = None,
        workdir: str | None = None,
        env: dict[str, str | None] | None = None,
        secrets: Collection[Any] | None = None,
        text: bool = True,
        bufsize: int = -1,
        pty: bool = False,
        _pty_info: Any = None,
        pty_info: Any = None,
    ) -> ContainerProcess:
        await self._enter("sandbox.exec")
        if workdir is not None and not workdir.startswith("/"):
            raise exception.InvalidError(f"workdir must be an absolute path, got: {workdir}")
        argv = list(args)
        deadline = None
        if timeout is not None:  # Modal's exec deadline, enforced where the process runs
            argv = ["timeout", "-s", "KILL", f"{timeout}s", *argv]
            deadline = time.monotonic() + timeout
        api = _docker().api
        environment = {k: v for k, v in (env or {}).items() if v is not None}
        gate = _gate(self._container)
        async with gate:  # started: it is frozen and thawed with the container
            exec_id = (await _io(api.exec_create, self._container.id, argv, stdin=True,
                                 workdir=workdir, environment=environment, user="root"))["Id"]
            sock = await _io(api.exec_start, exec_id, socket=True)
            _starting.setdefault(self._container.id, []).append(exec_id)

        async def exit_code() -> int | None:
            info = await _io(api.exec_inspect, exec_id)
            return None if info["Running"] else int(info["ExitCode"] or 0)

        async def kill() -> None:
            pid = (await _io(api.exec_inspect, exec_id))["Pid"]
            if pid:
                async with gate:
                    await _io(self._container.exec_run, ["kill", "-KILL", str(pid)], user="root")

        process = DockerProcess(getattr(sock, "_sock", sock), sock, exit_code, kill)
        return ContainerProcess(process, text, deadline, self._container.id, " ".join(args))

    @_Aio
    async def terminate(self, *, wait: bool = False) -> int | None:
        await self._enter("sandbox.terminate")
        await ContainerProcess._close_all(self._container.id)
        try:
            await _io(self._container.remove, force=True, v=True)
        except exception.NotFoundError:
            pass  # a no-op when the sandbox already finished
        _gates.pop(self._container.id, None)
        _starting.pop(self._container.id, None)
        return 137 if wait else None

    @_Aio
    async def snapshot_filesystem(self, timeout: int = 55, *, ttl: int | None = 30 * 24 * 3600
                                  ) -> Image:
        await self._enter("sandbox.snapshot_filesystem")
        digest = _secrets.token_hex(12)
        async with _gate(self._container).snapshot():  # docker pauses what it commits
            try:
                await _io(wait_started, _docker().api, _starting.pop(self._container.id, []))
            except SandboxExecError as exc:
                raise exception.InternalError(str(exc)) from exc
            await _io(self._container.commit, repository=_IMAGES, tag=digest,
                      conf={"Labels": {FAKE_LABEL: "", _APP_LABEL: ""}})
        _snapshots.append(f"{_IMAGES}:{digest}")
        return Image(object_id=f"im-{digest}")

    @_Aio
    async def _experimental_set_outbound_network_policy(
            self, *, outbound_cidr_allowlist: Sequence[str] | None = None,
            outbound_domain_allowlist: Sequence[str] | None = None) -> None:
        await self._enter("sandbox.set_outbound_network_policy")
        if outbound_cidr_allowlist is None and outbound_domain_allowlist is None:
            raise exception.InvalidError("the fake cannot reopen a sandbox's network")
        if outbound_cidr_allowlist or outbound_domain_allowlist:
            await _io(restrict_egress, self._container, outbound_cidr_allowlist or (),
                      outbound_domain_allowlist or ())
            return
        await _io(self._container.reload)
        for name in list(self._container.attrs["NetworkSettings"]["Networks"]):
            await _io(_docker().networks.get(name).disconnect, self._container.id, force=True)

    @_Aio
    async def poll(self) -> int | None:
        await self._enter("sandbox.poll")
        try:
            await _io(self._container.reload)
        except exception.NotFoundError:
            return 0
        return None if self._container.status == "running" else 0

    @_Aio
    async def get_tags(self) -> dict[str, str]:
        await self._enter("sandbox.get_tags")
        return dict(self._tags)


def _sandbox_id(container_name: str) -> str:
    return "sb-" + container_name.removeprefix("fake-modal-")


def _tags(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if not k.startswith("fake-modal.") and k != FAKE_LABEL}


def containers(**labels: str) -> list[Any]:
    """The fake's sandboxes (running or not) carrying `labels` (for tests' leak checks);
    like Modal's own listing, none half-created or half-removed (which docker lists but
    cannot inspect)."""
    wanted = [FAKE_LABEL] + [f"{k}={v}" for k, v in labels.items()]
    return _docker().containers.list(all=True, ignore_removed=True, filters={"label": wanted})


_snapshots: list[str] = []
"""Images `snapshot_filesystem` committed in this process (`remove_snapshots` deletes them)."""


def remove_snapshots() -> None:
    """Delete the snapshots this process made (tests call it when they end: unlike built
    images, which are cached by content, every snapshot is a new image)."""
    while _snapshots:
        try:
            _docker().images.remove(_snapshots.pop(), noprune=False)
        except docker.errors.NotFound:
            pass


created: list[dict[str, Any]] = []
"""`Sandbox.create`'s region and verbose arguments, one entry per create."""


def reset() -> None:
    """Clear injected failures, latencies and the call log."""
    created.clear()
    _Injector.inject.clear()
    _Injector.latency_sec.clear()
    _Injector.calls.clear()
    _Injector.stream_drops.clear()


PROVIDER_CONFIG = {"sdk_module": __name__}
"""The `provider_config` that points benchflow's modal backend at this fake."""
