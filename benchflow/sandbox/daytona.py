"""The Daytona sandbox backend, on the `daytona` SDK's async client.

The task's Dockerfile becomes a named Daytona snapshot keyed by a content hash (so the
second rollout of a task does not rebuild); a sandbox is created from it (or from the
task's `docker_image`) with the spec's resources, the job/rollout labels and
`auto_stop_interval`/`auto_delete_interval` as a backstop against leaks. Commands go
through `process.exec` with stdout/stderr redirected to files that are then downloaded,
so output stays binary-safe. Daytona's exceptions are mapped in `map_daytona_errors`.

Not implemented yet (and so not claimed in `CAPABILITIES`): live processes (ACP agents),
snapshots of a running sandbox, the `model-only` network policy, GPUs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import secrets
import shlex
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from benchflow._models import FrozenModel
from benchflow.errors import (
    BenchflowError,
    ConfigError,
    SandboxError,
    SandboxExecError,
    SandboxStartError,
    SandboxTeardownError,
)
from benchflow.sandbox import archive, certs, images, ledger
from benchflow.sandbox.base import ExecResult, LiveProcess, SandboxCapabilities
from benchflow.sandbox.cloud import DaytonaCredentials as _DaytonaCredentials
from benchflow.sandbox.labels import LABEL_JOB, LABEL_MANAGED, LABEL_ROLLOUT
from benchflow.sandbox.limits import ProviderLimits, limits_for
from benchflow.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)

CAPABILITIES = SandboxCapabilities(live_processes=False, root_exec=True, gpus=False,
                                   snapshots=False, network_policies=frozenset({"public", "none"}))
_TIMEOUT_EXIT_CODES = (124, 137)
LABEL_CREATE = "benchflow.create"
"""A token unique to one create request: finds what an ambiguous create made."""


class DaytonaConfig(FrozenModel):
    """`environment.provider_config` for daytona."""

    client_factory: str | None = None
    """`module:callable` returning an `AsyncDaytona`-compatible client (default: the SDK's)."""
    auto_stop_interval: int = 60
    """Minutes of inactivity before Daytona stops a sandbox benchflow lost track of."""
    auto_delete_interval: int = 0
    """Minutes after a stop before Daytona deletes it (0: at once)."""
    create_timeout_sec: float = 300.0
    target: str | None = None
    max_sandboxes: int = 100
    """Sandboxes alive at once from this process, whatever the job's concurrency."""
    creates_per_sec: float = 5.0
    rate_limit_retries: int = 5
    """Creates answered 429 are retried this many times, with exponential backoff."""
    backoff_sec: float = 1.0


def _limits_for(config: DaytonaConfig) -> ProviderLimits:
    return limits_for("daytona", config.max_sandboxes, config.creates_per_sec)


@contextlib.contextmanager
def map_daytona_errors(error: type[SandboxError] = SandboxExecError) -> Iterator[None]:
    """Translate Daytona SDK failures: rejected credentials or requests are configuration
    errors (never retried); everything else is `error` (infrastructure, retryable)."""
    import daytona

    deterministic = (daytona.DaytonaAuthenticationError, daytona.DaytonaAuthorizationError,
                     daytona.DaytonaForbiddenError, daytona.DaytonaBadRequestError,
                     daytona.DaytonaUnprocessableEntityError, daytona.DaytonaValidationError)
    try:
        yield
    except BenchflowError:
        raise
    except deterministic as exc:
        raise ConfigError(f"daytona rejected the request: {exc}") from exc
    except daytona.DaytonaError as exc:
        raise error(f"daytona error: {exc}", transient=True) from exc


def _client_factory(config: DaytonaConfig) -> Callable[[], Any]:
    if config.client_factory is None:
        from daytona import AsyncDaytona

        return AsyncDaytona
    module, _, attr = config.client_factory.partition(":")
    return getattr(importlib.import_module(module), attr)


class DaytonaSandbox:
    """A rollout's Daytona sandbox (created at `start()`, deleted at `stop()`)."""

    capabilities = CAPABILITIES
    backend = "daytona"

    def __init__(self, spec: SandboxSpec, config: DaytonaConfig) -> None:
        self.spec = spec
        self.config = config
        self.image: str | None = None
        self.workdir = spec.workdir or "/"
        self._client: Any = None
        self._box: Any = None
        self._pems = certs.read_certs(spec.extra_ca_certs)
        self._env = {**(certs.CA_ENV if self._pems else {}), **spec.env}

    @property
    def sandbox_id(self) -> str | None:
        return None if self._box is None else str(self._box.id)

    def _client_now(self) -> Any:
        if self._client is None:
            with map_daytona_errors(SandboxStartError):
                self._client = _client_factory(self.config)()
        return self._client

    async def _snapshot(self, client: Any) -> str:
        """The named snapshot of the task's Dockerfile, created when missing."""
        import daytona

        assert self.spec.environment_dir is not None
        tag = images.image_tag(self.spec.name, self.spec.environment_dir, self._pems)
        name = tag.replace("/", "-").replace(":", "-")
        with map_daytona_errors(SandboxStartError):
            try:
                await client.snapshot.get(name)
                return name
            except daytona.DaytonaNotFoundError:
                pass
            log.info("creating daytona snapshot %s", name)
            # The build context as on docker: CA certificates installed after every FROM.
            with tempfile.TemporaryDirectory(prefix="bf-daytona-") as tmp:
                context = images.build_context(self.spec.environment_dir, self._pems)
                with tarfile.open(fileobj=context) as tar:
                    tar.extractall(tmp, filter="data")
                image = daytona.Image.from_dockerfile(Path(tmp) / "Dockerfile")
                await client.snapshot.create(daytona.CreateSnapshotParams(
                    name=name, image=image, resources=self._resources()))
        return name

    def _resources(self) -> Any:
        import daytona

        spec = self.spec
        return daytona.Resources(cpu=max(1, round(spec.cpus)), memory=max(1, spec.memory_mb // 1024),
                                 disk=max(1, (spec.storage_mb or 10240) // 1024))

    async def start(self) -> None:
        if self._box is not None:
            return
        import daytona

        client, spec = self._client_now(), self.spec
        token = secrets.token_hex(8)
        labels = {LABEL_MANAGED: "true", **spec.labels, LABEL_CREATE: token}
        common: dict[str, Any] = dict(
            labels=labels, env_vars=self._env, os_user="root",
            auto_stop_interval=self.config.auto_stop_interval,
            auto_delete_interval=self.config.auto_delete_interval,
            network_block_all=spec.network_policy == "none" or None)
        if spec.environment_dir is not None and (spec.force_build or not spec.docker_image):
            self.image = await self._snapshot(client)
            params = daytona.CreateSandboxFromSnapshotParams(snapshot=self.image, **common)
        else:
            self.image = spec.docker_image
            params = daytona.CreateSandboxFromImageParams(image=spec.docker_image,
                                                          resources=self._resources(), **common)
        self._box = await self._create(client, params, labels)
        try:
            with map_daytona_errors(SandboxStartError):
                # the image's WORKDIR (Daytona falls back to the user's home)
                self.workdir = spec.workdir or await self._box.get_work_dir() or "/"
            await self._init()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop(delete=True)
            raise

    async def _init(self) -> None:
        steps = ["mkdir -p /logs/agent /logs/verifier /tmp/.benchflow",
                 "chmod 777 /logs/agent", "chmod 700 /logs/verifier", "chmod 1777 /tmp/.benchflow"]
        if self.spec.workdir:
            steps.append(f"mkdir -p {shlex.quote(self.spec.workdir)}")
        if self._pems:
            for fname, data in certs.ca_files(self._pems).items():
                await self.upload_bytes(data, f"{certs.CA_DIR}/{fname}",
                                        0o755 if fname.endswith(".sh") else 0o644)
            steps.append(f"sh {certs.INSTALL_SCRIPT}")
        result = await self.exec(["sh", "-c", " && ".join(steps)], user="root")
        if not result.ok:
            raise SandboxStartError(f"sandbox init failed: {result.text(2000)}")
        for path, data in self.spec.files.items():
            await self.upload_bytes(data, path)

    async def stop(self, delete: bool = True) -> None:
        box, client = self._box, self._client
        if box is None:
            return
        import daytona

        with map_daytona_errors(SandboxTeardownError):
            try:
                if delete:
                    await client.delete(box)
                else:
                    await box.stop()
            except daytona.DaytonaNotFoundError:
                if not delete:
                    raise
                log.info("sandbox %s was already deleted", box.id)  # e.g. by a job's cancel
        if delete:
            self._box = None
            self._record("deleted", box.labels.get(LABEL_CREATE, "") if isinstance(
                getattr(box, "labels", None), dict) else "", str(box.id))
            _limits_for(self.config).alive.release_on_behalf_of(self)

    def _record(self, event: Any, token: str, sandbox_id: str | None = None) -> None:
        ledger.record(self.spec.ledger_path, ledger.LedgerEntry(
            event=event, provider=self.backend, rollout=self.spec.labels.get(LABEL_ROLLOUT, ""),
            sandbox_id=sandbox_id, create_token=token))

    async def _create(self, client: Any, params: Any, labels: dict[str, str]) -> Any:
        """Create under the provider limits; 429 backs off and retries; an ambiguous failure
        (timeout, 5xx after the request went out) is resolved by label lookup, and whatever
        was made is deleted before the (retryable) error propagates."""
        import daytona

        token, limits = labels[LABEL_CREATE], _limits_for(self.config)
        self._record("creating", token)
        await limits.alive.acquire_on_behalf_of(self)
        try:
            for attempt in range(self.config.rate_limit_retries + 1):
                await limits.pace()
                try:
                    with map_daytona_errors(SandboxStartError):
                        try:
                            box = await client.create(params, timeout=self.config.create_timeout_sec)
                        except daytona.DaytonaRateLimitError:
                            if attempt == self.config.rate_limit_retries:
                                raise
                            delay = self.config.backoff_sec * 2 ** attempt
                            log.info("daytona rate limit: retrying the create in %.1fs", delay)
                            await anyio.sleep(delay)
                            continue
                except SandboxError:
                    with anyio.CancelScope(shield=True):
                        await self._delete_duplicates(client, token)
                    raise
                self._record("created", token, str(box.id))
                return box
            raise AssertionError("unreachable")  # pragma: no cover
        except BaseException:
            limits.alive.release_on_behalf_of(self)
            raise

    async def _delete_duplicates(self, client: Any, token: str) -> None:
        """Delete sandboxes a failed create may have made (found by their create token)."""
        import daytona

        try:
            with map_daytona_errors(SandboxTeardownError):
                async for box in client.list(daytona.ListSandboxesQuery(
                        labels={LABEL_CREATE: token})):
                    await client.delete(box)
                    self._record("duplicate_deleted", token, str(box.id))
                    log.warning("deleted sandbox %s left by an ambiguous create", box.id)
        except SandboxError as exc:
            log.warning("could not look up sandboxes of an ambiguous create: %s", exc)

    def _require(self) -> Any:
        if self._box is None:
            raise SandboxExecError("sandbox is not started")
        return self._box

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None) -> ExecResult:
        box = self._require()
        argv = list(cmd)
        if timeout is not None:
            argv = ["/usr/bin/timeout", "-k", "5s", f"{max(timeout, 0.01):.3f}s", *argv]
        if user and user != "root":
            argv = ["runuser", "-u", user, "--", *argv]
        out = f"/tmp/.benchflow/exec-{secrets.token_hex(6)}"
        script = (f'mkdir -p /tmp/.benchflow; {shlex.join(argv)} >{out}.out 2>{out}.err '
                  f'</dev/null; echo $? >{out}.rc; chmod 644 {out}.*')
        started = anyio.current_time()
        sdk_timeout = None if timeout is None else int(timeout) + 30
        with map_daytona_errors():
            await box.process.exec(shlex.join(["sh", "-c", script]), cwd=cwd or self.workdir,
                                   env=dict(env) if env else None, timeout=sdk_timeout)
            stdout = await box.fs.download_file(f"{out}.out") or b""
            stderr = await box.fs.download_file(f"{out}.err") or b""
            rc_text = (await box.fs.download_file(f"{out}.rc") or b"-1").decode().strip()
            await box.process.exec(f"rm -f {out}.out {out}.err {out}.rc")
        code = int(rc_text) if rc_text.lstrip("-").isdigit() else -1
        timed_out = (timeout is not None and code in _TIMEOUT_EXIT_CODES
                     and anyio.current_time() - started >= timeout * 0.99)
        return ExecResult(code, stdout, stderr, timed_out)

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        box = self._require()
        parent = str(Path(dst).parent)
        with map_daytona_errors():
            await box.process.exec(f"mkdir -p {shlex.quote(parent)}")
            await box.fs.upload_file(data, dst)
            await box.process.exec(f"chmod {mode:o} {shlex.quote(dst)}")

    async def upload(self, src: Path, dst: str) -> None:
        if not src.exists():
            raise SandboxExecError(f"upload source {src} does not exist")
        data = await anyio.to_thread.run_sync(archive.tar_path, src, dst)
        tmp = f"/tmp/.benchflow/up-{secrets.token_hex(6)}.tar"
        await self.upload_bytes(data, tmp)
        result = await self.exec(["sh", "-c", f"tar -xf {tmp} -C / && rm -f {tmp}"], user="root")
        if not result.ok:
            raise SandboxExecError(f"upload to {dst} failed: {result.text(2000)}")

    async def download(self, src: str, dst: Path) -> None:
        box = self._require()
        tmp = f"/tmp/.benchflow/down-{secrets.token_hex(6)}.tar"
        parent, name = str(Path(src.rstrip("/")).parent), Path(src.rstrip("/")).name or "."
        result = await self.exec(["tar", "-cf", tmp, "-C", parent, name], user="root")
        if not result.ok:
            raise SandboxExecError(f"download of {src} failed: {result.text(2000)}")
        with map_daytona_errors():
            data = await box.fs.download_file(tmp) or b""
            await box.process.exec(f"rm -f {tmp}")
        await anyio.to_thread.run_sync(archive.extract, iter([data]), src, dst)

    async def open_process(self, cmd: Sequence[str], *, user: str | None = None,
                           cwd: str | None = None, env: Mapping[str, str] | None = None
                           ) -> LiveProcess:
        raise ConfigError("the daytona backend has no live processes yet: run ACP agents on docker")


class DaytonaSandboxProvider(_DaytonaCredentials):
    """Daytona sandboxes (credentials: `DAYTONA_API_KEY`; keys in `DaytonaConfig`)."""

    capabilities = CAPABILITIES
    config_model = DaytonaConfig

    def __init__(self, provider_config: dict[str, Any] | None = None) -> None:
        super().__init__(provider_config)
        try:
            self.config = DaytonaConfig.model_validate(self.provider_config)
        except ValueError as exc:
            raise ConfigError(f"provider_config for daytona: {exc}") from None

    async def preflight(self) -> None:
        missing = self.missing_credentials()
        if missing:
            raise ConfigError(f"{self.name} credentials missing: set {' and '.join(missing)}")
        if self.config.client_factory is None and importlib.util.find_spec("daytona") is None:
            raise ConfigError("the daytona SDK is not installed: pip install 'benchflow[daytona]'")

    def create(self, spec: SandboxSpec) -> DaytonaSandbox:
        return DaytonaSandbox(spec, self.config)

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        """Delete every sandbox labelled by benchflow (of `job_name`); returns their ids."""
        import daytona

        client = _client_factory(self.config)()
        labels = {LABEL_MANAGED: "true", **({LABEL_JOB: job_name} if job_name else {})}
        removed: list[str] = []
        with map_daytona_errors(SandboxTeardownError):
            async for box in client.list(daytona.ListSandboxesQuery(labels=labels)):
                await client.delete(box)
                removed.append(str(box.id))
        return removed

    async def cleanup_ids(self, sandbox_ids: list[str]) -> list[str]:
        return await _delete_ids(_client_factory(self.config)(), sandbox_ids)


async def _delete_ids(client: Any, sandbox_ids: list[str]) -> list[str]:
    import daytona

    removed = []
    with map_daytona_errors(SandboxTeardownError):
        for sandbox_id in sandbox_ids:
            try:
                await client.delete(await client.get(sandbox_id))
            except daytona.DaytonaNotFoundError:
                continue
            removed.append(sandbox_id)
    return removed


__all__ = ["CAPABILITIES", "DaytonaConfig", "DaytonaSandbox", "DaytonaSandboxProvider",
           "map_daytona_errors"]
