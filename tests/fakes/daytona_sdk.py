"""A fake of the `daytona` SDK's async client whose sandboxes are real local containers.

It implements the part of the SDK surface benchflow's adapter uses, with the SDK's own
signatures (tests/unit/sandbox/test_daytona_fake.py compares them with `inspect.signature`)
and the SDK's own parameter and exception classes. Failure injection: put exceptions in
`FakeAsyncDaytona.inject[<method>]` and the next calls raise them in order;
`FakeAsyncDaytona.latency_sec` adds a per-call delay (documented Daytona latencies);
`FakeAsyncDaytona.stream_drops` ends live processes' log streams early
(`tests/fakes/daytona_sessions.py`, which implements the session commands).
"""

from __future__ import annotations

import functools
import io
import shlex
import tarfile
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import daytona
import docker
from daytona import (
    CreateSandboxFromImageParams,
    CreateSandboxFromSnapshotParams,
    CreateSnapshotParams,
    ExecuteResponse,
    ListSandboxesQuery,
)

from tests.fakes.daytona_sessions import SessionCommands, StreamDrop
from tests.fakes.egress import restrict_egress

FAKE_LABEL = "benchflow.fake-daytona"


async def _io(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a docker call; its failures surface as the SDK's exceptions (as the API's would)."""
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except docker.errors.NotFound as exc:
        raise daytona.DaytonaNotFoundError(str(exc), status_code=404) from exc
    except docker.errors.APIError as exc:
        code = exc.status_code or 500
        cls = daytona.DaytonaConflictError if code == 409 else daytona.DaytonaInternalServerError
        raise cls(str(exc), status_code=code) from exc


class _Injector:
    inject: ClassVar[dict[str, list[BaseException]]] = {}
    latency_sec: ClassVar[dict[str, float]] = {}
    calls: ClassVar[list[str]] = []
    stream_drops: ClassVar[list[StreamDrop]] = SessionCommands.stream_drops

    @classmethod
    async def _enter(cls, method: str) -> None:
        _Injector.calls.append(method)
        delay = _Injector.latency_sec.get(method, 0.0)
        if delay:
            await anyio.sleep(delay)
        queue = _Injector.inject.get(method)
        if queue:
            raise queue.pop(0)


class FakeProcess(SessionCommands):
    """`sandbox.process`: exec through `docker exec` (the SDK runs `command` in a shell);
    session commands as the daemon runs them (`SessionCommands`)."""

    def __init__(self, container: Any) -> None:
        self._container = container

    async def _enter(self, method: str) -> None:
        await _Injector._enter(method)

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout: int | None = None) -> ExecuteResponse:
        await _Injector._enter("process.exec")
        argv = ["sh", "-c", command if timeout is None else f"timeout {timeout}s sh -c {shlex.quote(command)}"]
        result = await _io(self._container.exec_run, argv, workdir=cwd, environment=env or {},
                           user="root")
        if timeout is not None and result.exit_code in (124, 137):
            raise daytona.DaytonaTimeoutError(f"command timed out after {timeout}s")
        return ExecuteResponse(exit_code=result.exit_code,
                               result=(result.output or b"").decode("utf-8", "replace"))


class FakeFileSystem:
    """`sandbox.fs`: files through docker's archive API."""

    def __init__(self, container: Any) -> None:
        self._container = container

    async def upload_file(self, src: str | bytes, dst: str, timeout: int = 1800) -> None:
        await _Injector._enter("fs.upload_file")
        data = src if isinstance(src, bytes) else Path(src).read_bytes()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(Path(dst).name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        ok = await _io(self._container.put_archive, str(Path(dst).parent), buf.getvalue())
        if not ok:
            raise daytona.DaytonaError(f"upload to {dst} failed")

    async def download_file(self, *args: str) -> bytes | None:
        await _Injector._enter("fs.download_file")
        try:
            chunks, _ = await _io(self._container.get_archive, args[0])
        except daytona.DaytonaNotFoundError as exc:
            raise daytona.DaytonaFileNotFoundError(f"{args[0]}: not found") from exc
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None else None
            return handle.read() if handle is not None else b""


class FakeSandbox:
    """An `AsyncSandbox`: a local container carrying the requested labels."""

    def __init__(self, container: Any, labels: dict[str, str]) -> None:
        self.id = container.id
        self.labels = labels
        self._container = container
        self.process = FakeProcess(container)
        self.fs = FakeFileSystem(container)

    async def get_work_dir(self) -> str:
        await _Injector._enter("sandbox.get_work_dir")
        await _io(self._container.reload)
        return self._container.attrs.get("Config", {}).get("WorkingDir") or "/root"

    async def stop(self, timeout: float | None = 60, force: bool = False) -> None:
        await _Injector._enter("sandbox.stop")
        await _io(self._container.stop, timeout=2)

    async def update_network_settings(self, *, network_block_all: bool | None = None,
                                      network_allow_list: str | None = None,
                                      domain_allow_list: str | None = None,
                                      request_timeout: float | None = None) -> None:
        await _Injector._enter("sandbox.update_network_settings")
        if network_block_all is None and network_allow_list is None and domain_allow_list is None:
            raise daytona.DaytonaValidationError("At least one of network_block_all, "
                                                 "network_allow_list or domain_allow_list must be set")
        if network_block_all is False:
            raise daytona.DaytonaValidationError("the fake cannot reopen a sandbox's network")
        if network_block_all:
            await _io(self._container.reload)
            for name in list(self._container.attrs["NetworkSettings"]["Networks"]):
                await _io(docker.from_env().networks.get(name).disconnect, self._container.id,
                          force=True)
            return
        await _io(restrict_egress, self._container, _split(network_allow_list),
                  _split(domain_allow_list))


def _split(allow_list: str | None) -> list[str]:
    return [item.strip() for item in (allow_list or "").split(",") if item.strip()]


class FakeSnapshotService:
    """`client.snapshot`: named snapshots are local images `fake-daytona/<name>`."""

    def __init__(self, docker_client: Any) -> None:
        self._docker = docker_client

    async def get(self, name: str) -> Any:
        await _Injector._enter("snapshot.get")
        return await _io(self._docker.images.get, f"fake-daytona/{name}")

    async def create(self, params: CreateSnapshotParams, *,
                     on_logs: Callable[[str], None] | None = None, timeout: float | None = 0
                     ) -> Any:
        await _Injector._enter("snapshot.create")
        image = params.image
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "Dockerfile").write_text(image.dockerfile())
            for ctx in image._context_list:
                target = root / ctx.archive_path
                target.parent.mkdir(parents=True, exist_ok=True)
                src = Path(ctx.source_path)
                if src.is_dir():
                    import shutil

                    shutil.copytree(src, target, dirs_exist_ok=True)
                else:
                    target.write_bytes(src.read_bytes())
            try:
                built, _ = await anyio.to_thread.run_sync(functools.partial(
                    self._docker.images.build, path=tmp, tag=f"fake-daytona/{params.name}", rm=True))
            except docker.errors.BuildError as exc:
                raise daytona.DaytonaBadRequestError(f"snapshot build failed: {exc}") from exc
        return built


class FakeAsyncDaytona(_Injector):
    """`AsyncDaytona` backed by the local docker daemon."""

    def __init__(self, config: daytona.DaytonaConfig | None = None) -> None:
        self._docker = docker.from_env()
        self.snapshot = FakeSnapshotService(self._docker)

    async def create(self, params: CreateSandboxFromSnapshotParams | CreateSandboxFromImageParams
                     | None = None, *, timeout: float = 60,
                     on_snapshot_create_logs: Callable[[str], None] | None = None) -> FakeSandbox:
        await self._enter("create")
        assert params is not None
        if isinstance(params, CreateSandboxFromSnapshotParams):
            image = f"fake-daytona/{params.snapshot}"
        else:
            image = params.image if isinstance(params.image, str) else "debian:bookworm-slim"
        labels = {**(params.labels or {}), FAKE_LABEL: "true"}
        allowlisted = params.network_allow_list is not None or params.domain_allow_list is not None
        if params.network_block_all and allowlisted:
            raise daytona.DaytonaValidationError("network_block_all with an allow list")
        container = await _io(
            self._docker.containers.run, image, ["sleep", "infinity"], detach=True, init=True,
            labels=labels, environment=params.env_vars or {},
            name=f"fake-daytona-{uuid.uuid4().hex[:10]}",
            network_mode="none" if params.network_block_all else None)
        if allowlisted:
            await _io(restrict_egress, container, _split(params.network_allow_list),
                      _split(params.domain_allow_list))
        box = FakeSandbox(container, labels)
        queue = self.inject.get("create.after")  # the request went out, the answer was lost
        if queue:
            raise queue.pop(0)
        return box

    async def get(self, sandbox_id_or_name: str, request_timeout: float | None = None
                  ) -> FakeSandbox:
        await self._enter("get")
        container = await _io(self._docker.containers.get, sandbox_id_or_name)
        if FAKE_LABEL not in container.labels:
            raise daytona.DaytonaNotFoundError(f"sandbox {sandbox_id_or_name} not found",
                                               status_code=404)
        return FakeSandbox(container, dict(container.labels))

    async def delete(self, sandbox: FakeSandbox, timeout: float = 60, wait: bool = False) -> None:
        await self._enter("delete")
        await _io(sandbox._container.remove, force=True, v=True)

    async def list(self, query: ListSandboxesQuery | None = None,
                   request_timeout: float | None = None) -> AsyncIterator[FakeSandbox]:
        await self._enter("list")
        labels = dict((query.labels if query is not None else None) or {})
        filters = {"label": [FAKE_LABEL] + [f"{k}={v}" for k, v in labels.items()]}
        for container in await _io(self._docker.containers.list, all=True, filters=filters):
            yield FakeSandbox(container, dict(container.labels))


def reset() -> None:
    """Clear injected failures, latencies and the call log."""
    _Injector.inject.clear()
    _Injector.latency_sec.clear()
    _Injector.calls.clear()
    _Injector.stream_drops.clear()
