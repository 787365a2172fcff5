"""A rollout's Daytona sandbox, on the `daytona` SDK's async client.

The task's Dockerfile becomes a named Daytona snapshot keyed by a content hash (so the
second rollout of a task does not rebuild); a sandbox is created from it (or from the
task's `docker_image`) with the spec's resources, the job/rollout labels and
`auto_stop_interval`/`auto_delete_interval` as a backstop against leaks. Commands go
through `process.exec` with stdout/stderr redirected to files that are then downloaded,
so output stays binary-safe. Live processes (ACP agents) are session commands
(`DaytonaProcess`). Network `none` is `network_block_all`; `model-only` is an allow list
holding the model endpoint's host (`network_allow_list` / `domain_allow_list`), set at
create or later through `update_network_settings`. Daytona's exceptions are mapped in
`map_daytona_errors`.

Not implemented yet (and so not claimed in `CAPABILITIES`): snapshots of a running
sandbox, GPUs.
"""

from __future__ import annotations

import importlib
import logging
import secrets
import shlex
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from benchflow.errors import (
    ConfigError,
    SandboxError,
    SandboxExecError,
    SandboxStartError,
    SandboxTeardownError,
)
from benchflow.sandbox import archive, certs, images
from benchflow.sandbox.allowlist import split_hosts
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, SandboxCapabilities
from benchflow.sandbox.cloud_sandbox import INIT_STEPS, CloudSandbox
from benchflow.sandbox.cost import Rates, SandboxMeter
from benchflow.sandbox.daytona.config import DaytonaConfig
from benchflow.sandbox.daytona.errors import map_daytona_errors
from benchflow.sandbox.daytona.process import DaytonaProcess
from benchflow.sandbox.exit_codes import TIMEOUT_EXIT_CODES
from benchflow.sandbox.labels import LABEL_CREATE, LABEL_MANAGED
from benchflow.sandbox.limits import ProviderLimits, limits_for
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec

log = logging.getLogger(__name__)

CAPABILITIES = SandboxCapabilities(live_processes=True, root_exec=True, gpus=False,
                                   snapshots=False, egress_allowlist=True,
                                   network_policies=frozenset({"public", "none", "model-only"}))
_SCRIPTS = Path(__file__).parents[1] / "scripts"
_KILL_SCRIPT = (_SCRIPTS / "kill_process.sh").read_text()
_LAUNCH_SCRIPT = (_SCRIPTS / "session_launch.sh").read_text()
_SECRETS_DIR = "/tmp/.benchflow/daytona"
"""Root-only (0700): env files of live processes wait here until their launcher reads them."""


def _limits_for(config: DaytonaConfig) -> ProviderLimits:
    return limits_for("daytona", config.max_sandboxes, config.creates_per_sec)


def client_factory(config: DaytonaConfig) -> Callable[[], Any]:
    """The `AsyncDaytona` class, or what `client_factory` names (tests use a fake)."""
    if config.client_factory is None:
        from daytona import AsyncDaytona

        return AsyncDaytona
    module, _, attr = config.client_factory.partition(":")
    return getattr(importlib.import_module(module), attr)


class DaytonaSandbox(CloudSandbox):
    """A rollout's Daytona sandbox (created at `start()`, deleted at `stop()`)."""

    capabilities = CAPABILITIES
    backend = "daytona"

    def __init__(self, spec: SandboxSpec, config: DaytonaConfig) -> None:
        super().__init__(spec, config, SandboxMeter(
            Rates(config.price_per_cpu_hour, config.price_per_gib_hour,
                  config.price_per_disk_gib_hour),
            cpus=spec.cpus or 1, memory_mb=spec.memory_mb or 1024, storage_mb=spec.storage_mb or 0))
        self._client: Any = None

    @property
    def sandbox_id(self) -> str | None:
        return None if self._box is None else str(self._box.id)

    def _client_now(self) -> Any:
        if self._client is None:
            with map_daytona_errors(SandboxStartError):
                self._client = client_factory(self.config)()
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

    def _network_params(self, policy: NetworkPolicy) -> dict[str, Any]:
        """`none`: `network_block_all`; `model-only`: allow lists holding the spec's hosts
        (addresses as CIDRs, names as domains; none at all: block all)."""
        if policy == "public":
            return {}
        allowed = split_hosts(self.spec.egress_allowlist if policy == "model-only" else ())
        if allowed.empty:
            return {"network_block_all": True}
        return {"network_allow_list": ",".join(allowed.cidrs) or None,
                "domain_allow_list": ",".join(allowed.domains) or None}

    async def apply_network_policy(self, policy: NetworkPolicy, network: str | None) -> None:
        """Isolate a running sandbox (one that started public for an agent's online install)
        through `update_network_settings`; `public` does nothing."""
        if policy == "public":
            return
        box = self._require()
        with map_daytona_errors(SandboxStartError):
            await box.update_network_settings(**self._network_params(policy))

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
            **self._network_params(spec.network_policy))
        if spec.environment_dir is not None and (spec.force_build or not spec.docker_image):
            self.image = await self._snapshot(client)
            params = daytona.CreateSandboxFromSnapshotParams(snapshot=self.image, **common)
        else:
            self.image = spec.docker_image
            params = daytona.CreateSandboxFromImageParams(image=spec.docker_image,
                                                          resources=self._resources(), **common)
        self._box = await self._create(client, params, labels)
        self.meter.start()
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
        steps = [*INIT_STEPS, f"mkdir -p -m 700 {_SECRETS_DIR}"]
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
        if self.spec.trees:
            await self._upload_tar(await anyio.to_thread.run_sync(
                archive.tar_bytes, {}, self.spec.trees), "the spec's trees")

    async def stop(self, delete: bool = True) -> None:
        box, client = self._box, self._client
        if box is None:
            return
        import daytona

        self.meter.stop()  # a stopped sandbox is billed for its disk only: not counted
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

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None) -> ExecResult:
        box = self._require()
        argv = list(cmd)
        if timeout is not None:
            argv = ["/usr/bin/timeout", "-k", "5s", f"{max(timeout, 0.01):.3f}s", *argv]
        argv = self._as_user(argv, user)
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
        timed_out = (timeout is not None and code in TIMEOUT_EXIT_CODES
                     and anyio.current_time() - started >= timeout * 0.99)
        return ExecResult(code, stdout, stderr, timed_out)

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        box = self._require()
        parent = str(Path(dst).parent)
        with map_daytona_errors():
            await box.process.exec(f"mkdir -p {shlex.quote(parent)}")
            await box.fs.upload_file(data, dst)
            await box.process.exec(f"chmod {mode:o} {shlex.quote(dst)}")

    async def _write_file(self, data: bytes, path: str) -> None:
        with map_daytona_errors():
            await self._require().fs.upload_file(data, path)

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
                           ) -> DaytonaProcess:
        """`cmd` as a command of its own session (see `DaytonaProcess`), in its own process
        group, as `user`; `env` reaches it through a root-only file, never a command line."""
        import daytona

        box = self._require()
        proc_id = secrets.token_hex(8)
        session_id = f"benchflow-{proc_id}"
        pidfile = f"/tmp/.benchflow/proc-{proc_id}.pid"
        env_file = ""
        if env:
            bad = [key for key in env if not key.isidentifier()]
            if bad:
                raise ConfigError(f"invalid environment variable names: {bad}")
            env_file = f"{_SECRETS_DIR}/proc-{proc_id}.env"
            await self.upload_bytes("".join(f"export {key}={shlex.quote(value)}\n"
                                            for key, value in env.items()).encode(),
                                    env_file, 0o600)
        # setsid: the command leads its own process group, so kill() reaches its children;
        # the marker lets the kill script confirm the pid file the command itself wrote.
        argv = ["/usr/bin/env", f"BENCHFLOW_PROC_ID={proc_id}", "/usr/bin/setsid", "-w",
                "/bin/sh", "-c", 'echo $$ > "$0"; exec "$@"', pidfile, *cmd]
        if user and user != "root":
            argv = ["runuser", "-u", user, "--", *argv]
        command = shlex.join(["/bin/sh", "-c", _LAUNCH_SCRIPT, "session_launch", pidfile,
                              env_file, cwd or self.workdir, *argv])
        with map_daytona_errors():
            await box.process.create_session(session_id)
            try:
                started = await box.process.execute_session_command(
                    session_id, daytona.SessionExecuteRequest(
                        command=command, run_async=True, suppress_input_echo=True))
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await box.process.delete_session(session_id)
                raise

        async def kill() -> None:
            # as the process's own user, who can read its /proc/<pid>/environ marker
            await self.exec(["/bin/sh", "-c", _KILL_SCRIPT, "kill_process", pidfile, proc_id],
                            user=user, timeout=30, env={"PATH": SYSTEM_PATH})

        return DaytonaProcess(box.process, session_id, started.cmd_id, kill,
                              stream_retries=self.config.stream_retries,
                              backoff_sec=self.config.backoff_sec)


__all__ = ["CAPABILITIES", "DaytonaSandbox", "client_factory"]
