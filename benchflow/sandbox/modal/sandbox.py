"""A rollout's Modal sandbox, on the `modal` SDK's `.aio` API.

The task's Dockerfile (with extra CA certificates installed after every FROM, as on
docker) becomes a `modal.Image`, kept per content hash for the process and cached by
content on Modal's side; a task's `docker_image` comes `from_registry`. The sandbox runs
`sleep infinity` under the app from `provider_config`, with the spec's cpu, memory and
GPUs, `block_network` for the `none` policy, outbound allowlists holding the model
endpoint's host for `model-only` (`outbound_cidr_allowlist` for IP addresses,
`outbound_domain_allowlist` for names), a lifetime (`timeout`) as a backstop against
leaks, and tags: `benchflow.managed`, job, rollout and a create token that resolves an
ambiguous create. Commands run through `exec` (another user through `runuser`, deadlines
enforced inside the sandbox); live processes are `exec`s with streamed stdin/stdout.
A sandbox that started public for an agent's online install is isolated through the SDK's
`_experimental_set_outbound_network_policy` (an empty allowlist for `none`).
"""

from __future__ import annotations

import importlib
import logging
import secrets
import shlex
import shutil
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from benchflow.errors import (
    SandboxError,
    SandboxExecError,
    SandboxStartError,
    SandboxTeardownError,
)
from benchflow.sandbox import archive, certs, images
from benchflow.sandbox.allowlist import split_hosts
from benchflow.sandbox.exit_codes import TIMEOUT_EXIT_CODES
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, SandboxCapabilities
from benchflow.sandbox.cloud_sandbox import INIT_STEPS, CloudSandbox
from benchflow.sandbox.labels import LABEL_CREATE, LABEL_MANAGED
from benchflow.sandbox.limits import ProviderLimits, limits_for
from benchflow.sandbox.cost import Rates, SandboxMeter
from benchflow.sandbox.modal.config import ModalConfig
from benchflow.sandbox.modal.errors import map_modal_errors
from benchflow.sandbox.modal.process import ModalProcess
from benchflow.sandbox.modal.snapshots import SnapshotIndex
from benchflow.sandbox.snapshot_gate import SnapshotGate
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec

log = logging.getLogger(__name__)

CAPABILITIES = SandboxCapabilities(live_processes=True, root_exec=True, gpus=True,
                                   snapshots=True, egress_allowlist=True,
                                   network_policies=frozenset({"public", "none", "model-only"}))
_KILL_SCRIPT = (Path(__file__).parents[1] / "scripts" / "kill_process.sh").read_text()
_images: dict[tuple[str, str], Any] = {}
"""(sdk module, content key) -> modal.Image, hydrated by the first sandbox that used it."""
_apps: dict[tuple[str, str], Any] = {}
_contexts: dict[tuple[str, str], Path] = {}
"""Build contexts on disk until the first sandbox hydrated their image."""


def sdk(config: ModalConfig) -> Any:
    """The SDK module: `modal`, or what `sdk_module` names (tests use a fake)."""
    return importlib.import_module(config.sdk_module)


async def lookup_app(config: ModalConfig, *, create: bool = True) -> Any:
    """The app sandboxes belong to (created when missing, unless `create` is false).

    Raises:
        ConfigError / SandboxStartError: as mapped from Modal's answer.
    """
    key = (config.sdk_module, config.app_name)
    if key not in _apps:
        with map_modal_errors(SandboxStartError):
            _apps[key] = await sdk(config).App.lookup.aio(config.app_name,
                                                           create_if_missing=create)
    return _apps[key]


def _limits(config: ModalConfig) -> ProviderLimits:
    return limits_for("modal", config.max_sandboxes, config.creates_per_sec)


class ModalSandbox(CloudSandbox):
    """A rollout's Modal sandbox (created at `start()`, terminated at `stop()`)."""

    capabilities = CAPABILITIES
    backend = "modal"

    def __init__(self, spec: SandboxSpec, config: ModalConfig) -> None:
        super().__init__(spec, config, SandboxMeter(
            Rates(config.price_per_cpu_hour, config.price_per_gib_hour),
            cpus=spec.cpus or 0.125, memory_mb=spec.memory_mb or 128))
        self._snapshot: str | None = None
        self._index = SnapshotIndex(config)
        self._holding = False  # a slot of the provider's sandbox limit
        self._gate = SnapshotGate()  # a snapshot holds the filesystem still, as on docker

    @property
    def sandbox_id(self) -> str | None:
        return None if self._box is None else str(self._box.object_id)

    # -- image -------------------------------------------------------------------------

    def _image_key(self) -> str:
        spec = self.spec
        if spec.environment_dir is not None and (spec.force_build or not spec.docker_image):
            return images.image_tag(spec.name, spec.environment_dir, self._pems)
        return spec.docker_image or ""

    async def _image(self) -> Any:
        """The modal.Image to start from: a saved snapshot, the task's Dockerfile or image."""
        mod, spec = sdk(self.config), self.spec
        if self._snapshot is not None:
            self.image = self._snapshot
            with map_modal_errors(SandboxStartError):
                return await mod.Image.from_id.aio(self._index.get(self._snapshot) or "")
        key = self._image_key()
        self.image = key
        cache_key = (self.config.sdk_module, key)
        if cache_key in _images and not spec.force_build:
            return _images[cache_key]
        if key != spec.docker_image:
            assert spec.environment_dir is not None
            # the build context as on docker (CA certificates after every FROM), kept on disk:
            # Modal reads it when the first sandbox hydrates the image
            context = Path(tempfile.mkdtemp(prefix="bf-modal-"))
            _contexts[cache_key] = context
            with tarfile.open(fileobj=images.build_context(spec.environment_dir, self._pems)) as tar:
                tar.extractall(context, filter="data")
            image = mod.Image.from_dockerfile(context / "Dockerfile", context_dir=context,
                                              force_build=spec.force_build)
        else:
            image = mod.Image.from_registry(key)
        _images[cache_key] = image
        return image

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._box is not None:
            return
        spec, config = self.spec, self.config
        image = await self._image()
        app = await lookup_app(config)
        token = secrets.token_hex(8)
        tags = {LABEL_MANAGED: "true", **spec.labels, LABEL_CREATE: token}
        kwargs: dict[str, Any] = dict(
            app=app, image=image, tags=tags, env=self._env, timeout=config.sandbox_timeout_sec,
            idle_timeout=config.idle_timeout_sec, workdir=spec.workdir,
            cpu=spec.cpus or None, memory=spec.memory_mb or None,
            block_network=spec.network_policy == "none", verbose=config.verbose)
        if config.region_arg is not None:
            kwargs["region"] = config.region_arg
        if spec.network_policy == "model-only":
            kwargs.update(self._allowlist_kwargs())
        if spec.gpus:
            kwargs["gpu"] = f"{config.gpu_type}:{spec.gpus}"
        self._box = await self._create(kwargs, token, app)
        self.meter.start()
        context = _contexts.pop((config.sdk_module, self._image_key()), None)
        if context is not None:  # the image is built and hydrated: Modal is done with it
            shutil.rmtree(context, ignore_errors=True)
        try:
            await self._init()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop(delete=True)
            raise

    async def _create(self, kwargs: dict[str, Any], token: str, app: Any) -> Any:
        """Create under the provider limits. A rate limit (`ResourceExhaustedError`) backs off
        and retries; any other failure may have made a sandbox after all (a timeout, a 5xx
        once the request went out): it is looked up by its create token and terminated
        before the (retryable) error propagates."""
        from modal import exception

        limits, mod = _limits(self.config), sdk(self.config)
        self._record("creating", token)
        await limits.alive.acquire_on_behalf_of(self)
        try:
            for attempt in range(self.config.rate_limit_retries + 1):
                await limits.pace()
                try:
                    with map_modal_errors(SandboxStartError):
                        try:
                            with anyio.fail_after(self.config.create_timeout_sec):
                                box = await mod.Sandbox.create.aio("sleep", "infinity", **kwargs)
                        except exception.ResourceExhaustedError:
                            if attempt == self.config.rate_limit_retries:
                                raise
                            delay = self.config.backoff_sec * 2 ** attempt
                            log.info("modal rate limit: retrying the create in %.1fs", delay)
                            await anyio.sleep(delay)
                            continue
                        except TimeoutError as exc:
                            raise SandboxStartError(
                                f"modal did not answer the create within "
                                f"{self.config.create_timeout_sec:.0f}s", transient=True) from exc
                except (SandboxError, anyio.get_cancelled_exc_class()):
                    # cancelled mid-create too: the request may have gone out
                    with anyio.CancelScope(shield=True), anyio.move_on_after(60):
                        await self._delete_duplicates(token, app)
                    raise
                self._record("created", token, str(box.object_id))
                self._holding = True
                return box
            raise AssertionError("unreachable")  # pragma: no cover
        except BaseException:
            limits.alive.release_on_behalf_of(self)
            raise

    async def _delete_duplicates(self, token: str, app: Any) -> None:
        """Terminate sandboxes a failed create may have made (found by their create token)."""
        try:
            with map_modal_errors(SandboxTeardownError):
                async for box in sdk(self.config).Sandbox.list.aio(
                        app_id=app.app_id, tags={LABEL_CREATE: token}):
                    await box.terminate.aio()
                    self._record("duplicate_deleted", token, str(box.object_id))
                    log.warning("terminated sandbox %s left by an ambiguous create", box.object_id)
        except SandboxError as exc:
            log.warning("could not look up sandboxes of an ambiguous create: %s", exc)

    async def _init(self) -> None:
        """One upload (the CA certificates and the spec's files and trees, as a tar) and one exec:
        benchflow's folders, the files unpacked, the CAs installed, the image's working dir."""
        steps = list(INIT_STEPS)
        if self.spec.workdir:
            steps.append(f"mkdir -p {shlex.quote(self.spec.workdir)}")
        files = {f"{certs.CA_DIR}/{name}": (data, 0o755 if name.endswith(".sh") else 0o644)
                 for name, data in certs.ca_files(self._pems).items()} if self._pems else {}
        files.update({path: (data, 0o644) for path, data in self.spec.files.items()})
        if files or self.spec.trees:
            bundle = f"/tmp/bf-init-{secrets.token_hex(4)}.tar"
            data = await anyio.to_thread.run_sync(archive.tar_bytes, files, self.spec.trees)
            with map_modal_errors(SandboxStartError):
                await self._box.filesystem.write_bytes.aio(data, bundle)
            steps.append(f"tar -xf {bundle} -C / && rm -f {bundle}")
        if self._pems:
            steps.append(f"sh {certs.INSTALL_SCRIPT}")
        try:
            result = await self.exec(["sh", "-c", " && ".join(steps) + " && pwd"], user="root",
                                     cwd=self.spec.workdir or "")
        except SandboxExecError as exc:
            raise SandboxStartError(f"sandbox init failed: {exc}", transient=exc.transient) from exc
        if not result.ok:
            raise SandboxStartError(f"sandbox init failed: {result.text(2000)}")
        # the image's WORKDIR, as the init command started there
        self.workdir = self.spec.workdir or result.stdout.decode().strip().splitlines()[-1] or "/"

    async def stop(self, delete: bool = True) -> None:
        """Terminate the sandbox (Modal keeps no stopped sandboxes: `delete` is implied)."""
        box = self._box
        if box is None:
            return
        try:
            with map_modal_errors(SandboxTeardownError):
                await box.terminate.aio()
        finally:
            self.meter.stop()
            # a failed terminate frees the slot too (the ledger keeps the id for cleanup)
            if self._holding:
                self._holding = False
                _limits(self.config).alive.release_on_behalf_of(self)
        self._box = None
        self._record("deleted", "", str(box.object_id))

    # -- commands ----------------------------------------------------------------------

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None) -> ExecResult:
        box = self._require()
        argv = list(cmd)
        if timeout is not None:  # enforced inside the sandbox; the SDK's deadline is a backstop
            argv = ["/usr/bin/timeout", "-k", "5s", f"{max(timeout, 0.01):.3f}s", *argv]
        argv = self._as_user(argv, user)
        sdk_timeout = None if timeout is None else int(timeout) + 30
        started = anyio.current_time()
        out, err = bytearray(), bytearray()

        async def drain(stream: Any, buf: bytearray) -> None:
            async for chunk in stream:
                buf.extend(chunk.encode() if isinstance(chunk, str) else chunk)

        async with self._gate:
            with map_modal_errors():
                proc = await box.exec.aio(*argv, text=False, timeout=sdk_timeout,
                                          workdir=(self.workdir if cwd is None else cwd) or None,
                                          env=dict(env) if env else None)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(drain, proc.stdout, out)
                    tg.start_soon(drain, proc.stderr, err)
                    code = int(await proc.wait.aio())
        timed_out = timeout is not None and (code == -1 or (
            code in TIMEOUT_EXIT_CODES and anyio.current_time() - started >= timeout * 0.99))
        return ExecResult(code, bytes(out), bytes(err), timed_out)

    async def open_process(self, cmd: Sequence[str], *, user: str | None = None,
                           cwd: str | None = None, env: Mapping[str, str] | None = None
                           ) -> ModalProcess:
        box = self._require()
        proc_id = secrets.token_hex(8)
        pidfile = f"/tmp/.benchflow/proc-{proc_id}.pid"
        # setsid: the command leads its own process group, so kill() reaches its children
        argv = self._as_user(["/usr/bin/setsid", "-w", "/bin/sh", "-c", 'echo $$ > "$0"; exec "$@"',
                              pidfile, *cmd], user)
        async with self._gate:
            with map_modal_errors():
                proc = await box.exec.aio(*argv, text=False, workdir=cwd or self.workdir or None,
                                          env={**(env or {}), "BENCHFLOW_PROC_ID": proc_id})

        async def kill() -> None:
            await self.exec(["/bin/sh", "-c", _KILL_SCRIPT, "kill_process", pidfile, proc_id],
                            user=user, timeout=30, env={"PATH": SYSTEM_PATH})

        return ModalProcess(proc, kill, stream_retries=self.config.stream_retries,
                            backoff_sec=self.config.backoff_sec)

    # -- files -------------------------------------------------------------------------

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        await self._write_file(data, dst)
        result = await self.exec(["chmod", f"{mode:o}", dst], user="root")
        if not result.ok:
            raise SandboxExecError(f"chmod of {dst} failed: {result.text(2000)}")

    async def _write_file(self, data: bytes, path: str) -> None:
        async with self._gate:
            with map_modal_errors():
                await self._require().filesystem.write_bytes.aio(data, path)

    async def download(self, src: str, dst: Path) -> None:
        """A tar of `src` streamed out of the sandbox, extracted safely on the host."""
        path = Path(src.rstrip("/") or "/")
        name = path.name or "."
        result = await self.exec(["tar", "-cf", "-", "-C", str(path.parent), name], user="root")
        if not result.ok:
            raise SandboxExecError(f"download of {src} failed: {result.stderr.decode()[-2000:]}")
        await anyio.to_thread.run_sync(archive.extract, iter([result.stdout]), src, dst)

    # -- network policy ----------------------------------------------------------------

    def _allowlist_kwargs(self) -> dict[str, Any]:
        """`model-only`: outbound allowlists holding the spec's hosts (IP addresses as
        networks, names as domains); with no host, no egress at all."""
        allowed = split_hosts(self.spec.egress_allowlist)
        if allowed.empty:
            return {"block_network": True}
        return {"outbound_cidr_allowlist": list(allowed.cidrs),
                "outbound_domain_allowlist": list(allowed.domains)}

    async def apply_network_policy(self, policy: NetworkPolicy, network: str | None) -> None:
        """Isolate a running sandbox (one that started public for an agent's online
        install): `none` is an outbound allowlist with nothing on it, `model-only` one
        holding the spec's `egress_allowlist`; `public` does nothing."""
        if policy == "public":
            return
        allowed = split_hosts(self.spec.egress_allowlist if policy == "model-only" else ())
        box = self._require()
        with map_modal_errors(SandboxStartError):
            await box._experimental_set_outbound_network_policy.aio(
                outbound_cidr_allowlist=list(allowed.cidrs),
                outbound_domain_allowlist=list(allowed.domains))

    # -- snapshots (the agent install cache) -------------------------------------------

    async def snapshot_base(self) -> str:
        """A stable id of the task image's content (nothing is built yet)."""
        return self._image_key()

    async def snapshot_exists(self, name: str) -> bool:
        image_id = self._index.get(name)
        if image_id is None:
            return False
        from modal import exception

        try:
            with map_modal_errors(SandboxStartError):
                try:
                    await sdk(self.config).Image.from_id.aio(image_id)
                except exception.NotFoundError:
                    self._index.forget(name)
                    return False
        except SandboxError as exc:
            log.warning("agent snapshot %s unavailable: %s", name, exc)
            return False
        return True

    def start_from_snapshot(self, name: str) -> None:
        self._snapshot = name

    async def save_snapshot(self, name: str, description: str) -> None:
        """`snapshot_filesystem` of the running sandbox, remembered as `name` (no exec or
        file call of benchflow's runs meanwhile: `SnapshotGate`)."""
        box = self._require()
        async with self._gate.snapshot():
            with map_modal_errors():
                image = await box.snapshot_filesystem.aio(
                    timeout=self.config.snapshot_timeout_sec)
        self._index.put(name, str(image.object_id))
        log.info("saved modal snapshot %s as %s (%s)", name, image.object_id, description)


__all__ = ["CAPABILITIES", "LABEL_CREATE", "ModalSandbox", "lookup_app", "sdk"]
