"""The driver for every ACP agent described by a manifest (`agents/<name>/agent.toml`).

`install(ctx)` (once per rollout, as root): create the sandbox's agent user with a
writable home and give it the workdir; provide Node.js or the python wheels the agent
needs (fetched on the host, so the sandbox needs no network for them); upload the
manifest's files; run the rendered install script under the install timeout.
`connect(ctx, role, scene)` starts the agent as that user and opens an ACP session with
the manifest's argv and env, the role's env and the credentials from the host; each
`prompt()` is one turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from benchflow.agents import python_wheels
from benchflow.agents.agent_env import LaunchPlan, format_model, launch_plan, resolve_credentials
from benchflow.agents.base import (
    AgentConnection,
    AgentContext,
    AgentUser,
    DriverCapabilities,
    StepOutcome,
)
from benchflow.agents.templates import render_file
from benchflow.config import Role
from benchflow.errors import AgentInstallError, AgentInstallTimeout, BenchflowError, ConfigError
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult
from benchflow.settings import get_settings
from benchflow.steps import Step

if TYPE_CHECKING:
    from benchflow.acp import AcpSession, AcpTimeouts
    from benchflow.agents.manifest import AgentManifest

DEFAULT_AGENT_USER = "agent"
INSTALLED_MARKERS = "/opt/benchflow/installed"
MODEL_FILES_DIR = "/opt/benchflow/models"
"""Where model files (`model.upload_file`: the scripted agent's scripts) are uploaded."""
CREATE_USER_SCRIPT = Path(__file__).parents[1] / "sandbox" / "scripts" / "create_user.sh"
_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
SESSION_MARKER_ENV = "BENCHFLOW_AGENT_SESSION"
"""Set in every agent's environment (inherited by its children) so that the session's
processes can be found and killed when it ends."""
_KILL_MARKED = (Path(__file__).parent / "scripts" / "kill_marked.sh").read_text()
_KILL_TIMEOUT_SEC = 20.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchPrep:
    """What `AcpAgentDriver.prepare_launch` settled for one session of a role."""

    user: AgentUser
    plan: LaunchPlan
    timeouts: AcpTimeouts
    marker: str
    """The value of `SESSION_MARKER_ENV` in the session's processes (to kill them after)."""
    env: dict[str, str]
    """The launch plan's env plus the session marker."""
    umask: str | None = None
    """The file mode mask of the session's processes (the role's, when roles share writes)."""


async def role_user(ctx: AgentContext, role: str | None) -> AgentUser:
    """The user `role` runs as: its own when the rollout gave roles their own users
    (`ctx.roles`), else the agent user."""
    access = ctx.roles.get(role) if role is not None else None
    if access is not None:
        return AgentUser(name=access.user, uid=access.uid, home=access.home)
    return await ensure_agent_user(ctx)


async def ensure_agent_user(ctx: AgentContext) -> AgentUser:
    """Create (once per rollout) the user agents run as: the task's `agent.user`, else
    `agent`. Gives it a writable home and the workdir; sets `ctx.agent_user`.

    Raises:
        ConfigError: the user name is invalid.
        AgentInstallError: the user could not be created.
    """
    if ctx.created_user is not None:
        return ctx.created_user
    name = ctx.task.config.agent.user or ctx.agent_user or DEFAULT_AGENT_USER
    if not _USER_NAME.match(name):
        raise ConfigError(f"agent.user {name!r} is not a valid user name")
    script = CREATE_USER_SCRIPT.read_text()
    result = await ctx.sandbox.exec(["sh", "-c", script, "create_user", name, ctx.workdir],
                                    user="root", timeout=120)
    append_setup_log(ctx, f"create user {name}", result)
    lines = result.stdout.decode("utf-8", "replace").strip().splitlines()
    if not result.ok or not lines:
        raise AgentInstallError(f"cannot create the agent user {name!r}: {result.text(1000)}")
    info = json.loads(lines[-1])
    user = AgentUser(name=info["user"], uid=int(info["uid"]), home=info["home"])
    ctx.created_user = user
    ctx.agent_user = user.name
    return user


def append_setup_log(ctx: AgentContext, title: str, result: ExecResult) -> None:
    folder = ctx.paths.setup_dir
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (("stdout.txt", result.stdout), ("stderr.txt", result.stderr)):
        with (folder / name).open("ab") as out:
            out.write(f"=== {title} (exit {result.exit_code}) ===\n".encode() + data)
            if data and not data.endswith(b"\n"):
                out.write(b"\n")


async def kill_session_processes(ctx: AgentContext, user: AgentUser, marker: str) -> None:
    """Kill whatever the session left running (agents that ignore EOF, native children
    that survive their wrapper), as the agent user: shielded, bounded, never raising."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_TIMEOUT_SEC + 5):
        try:
            result = await ctx.sandbox.exec(["sh", "-c", _KILL_MARKED, "kill_marked",
                                             f"{SESSION_MARKER_ENV}={marker}"],
                                            user=user.name, timeout=_KILL_TIMEOUT_SEC)
        except BenchflowError as exc:
            log.warning("could not stop the agent session's processes: %s", exc)
            return
        if not result.ok:
            log.warning("stopping the agent session's processes failed: %s", result.text(500))


class AcpConnection:
    """One open ACP session of a role; `session` is the live `AcpSession`."""

    def __init__(self, session: AcpSession, ctx: AgentContext | None = None,
                 role: Role | None = None) -> None:
        self.session = session
        self._ctx = ctx
        self._role = role

    @property
    def resumed(self) -> bool:
        """The session was restored (session/load): the agent has its earlier turns."""
        return self.session.resumed

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        """Send the step's prompt and wait for the turn to end, within the role's
        `timeout_sec` and what is left of the agent phase (counted from now: the session
        may have waited through other roles' turns).

        Raises:
            AgentTimeout, AgentExecutionError, AgentProtocolError: as `AcpSession.prompt`.
        """
        wall = None
        if self._ctx is not None and self._role is not None:
            wall = self._ctx.turn_timeout_sec(self._role.timeout_sec)
        out = await self.session.prompt(step.prompt, turn=step.turn_index, round=round,
                                        session_turn=step.session_turn, wall_sec=wall)
        usage = out.usage
        return StepOutcome(
            stop_reason=out.stop_reason, n_tool_calls=out.n_tool_calls,
            input_tokens=(usage.input_tokens or 0) if usage else 0,
            output_tokens=(usage.output_tokens or 0) if usage else 0,
            cost=usage.cost if usage else None, agent_text=out.agent_text,
            reported_usage=usage is not None and bool(usage.input_tokens or usage.output_tokens),
            incomplete_tool_calls=out.incomplete_tool_calls)


class AcpAgentDriver:
    """Installs and connects one manifest's agent. One instance may serve many rollouts."""

    def __init__(self, manifest: AgentManifest) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self.capabilities = DriverCapabilities(
            cached_install=True, mcp_sessions=True,
            network_install=bool(manifest.install.package))

    @property
    def skills_dir(self) -> str | None:
        """Where the agent discovers skills, relative to its user's home (None: nowhere)."""
        return self.manifest.skills_dir

    # -- install -----------------------------------------------------------------------

    def install_timeout_sec(self, ctx: AgentContext) -> float:
        """The task's `agent.install_timeout_sec` when set, else the manifest's, else the
        task default; scaled by the rollout's timeout multiplier."""
        task_set = "install_timeout_sec" in ctx.task.config.agent.model_fields_set
        if task_set or not self.manifest.install.timeout_sec:
            return ctx.install_timeout_sec
        return ctx.scaled(self.manifest.install.timeout_sec)

    async def install(self, ctx: AgentContext) -> None:
        """Install the agent (idempotent: a second run takes the script's fast path).

        Raises:
            AgentInstallTimeout: the install exceeded its timeout.
            AgentInstallError: a step failed (output in `setup/{stdout,stderr}.txt`).
            ConfigError: a bad agent user name or install template.
        """
        timeout = self.install_timeout_sec(ctx)
        deadline = anyio.current_time() + timeout
        try:
            with anyio.fail_after(timeout):
                await self._install(ctx, deadline)
        except TimeoutError as exc:
            raise AgentInstallTimeout("agent_install", timeout,
                                      f"installing agent {self.name!r} exceeded its timeout "
                                      f"of {timeout:g} s") from exc

    async def _install(self, ctx: AgentContext, deadline: float) -> None:
        m, sandbox = self.manifest, ctx.sandbox
        # a layered agent installs under its own folder; a mounted layer (read-only) holds
        # that install already: only the links onto PATH and the script's fast path remain
        mounted = m.install.layer and m.name in ctx.agent_layers
        user = await ensure_agent_user(ctx)
        python_path = None
        if m.install.node or m.install.python:
            platform = ctx.platform or await python_wheels.probe_platform(sandbox)
            ctx.platform = platform
            if m.install.node:
                line = await python_wheels.ensure_node(
                    sandbox, platform, m.install.node, get_settings().cache_dir,
                    root=f"{m.sandbox_dir}/node" if m.install.layer else None, present=mounted)
                append_setup_log(ctx, f"node for {m.name}", ExecResult(0, line.encode(), b""))
                if not python_wheels.image_node_fits(platform, m.install.node):
                    ctx.platform = None  # node is linked now: the next install probes again
            if m.install.python:
                python_path = await self._install_python(ctx, platform, mounted)
        ctx.python_paths[m.name] = python_path
        if m.files and not mounted:
            assert m.folder is not None
            for name in m.files:
                await sandbox.upload(m.folder / name, f"{m.sandbox_dir}/{name}")
            await python_wheels.make_readable(sandbox, m.sandbox_dir)
        if m.install.script:
            await self._run_script(ctx, user, python_path, deadline)

    async def _install_python(self, ctx: AgentContext, platform: python_wheels.SandboxPlatform,
                              mounted: bool) -> str | None:
        m = self.manifest
        assert m.install.python is not None
        need = tuple(int(p) for p in m.install.python.split("."))
        if platform.python is None or platform.python < need:
            have = "none" if platform.python is None else ".".join(map(str, platform.python))
            raise AgentInstallError(
                f"agent {m.name!r} needs python3 >= {m.install.python} in the task image "
                f"(found: {have}); add python3 to the task's Dockerfile")
        if not m.install.python_packages:
            return None
        key = python_wheels.wheel_set_key(m.install.python_packages, platform.platform_tags(),
                                          platform.python)
        root = f"{m.sandbox_dir}/python" if m.install.layer else python_wheels.SANDBOX_PYTHON_ROOT
        dst = f"{root}/{key}"
        if mounted:
            return dst
        present = await ctx.sandbox.exec(["test", "-f", f"{dst}/.complete"], user="root",
                                         timeout=30)
        if present.exit_code != 0:
            site = await python_wheels.fetch_wheels(m.install.python_packages, platform,
                                                    get_settings().cache_dir)
            await python_wheels.upload_tree(ctx.sandbox, site, dst)
        return dst

    async def _run_script(self, ctx: AgentContext, user: AgentUser, python_path: str | None,
                          deadline: float) -> None:
        m = self.manifest
        assert m.folder is not None and m.install.script is not None
        context = {
            "name": m.name, "version": m.version, "package": m.install.package or "",
            "binary": m.install.binary or m.launch.argv[0],
            "prefix": m.sandbox_dir if m.install.layer else "/usr/local",
            "marker": (f"{m.sandbox_dir}/.installed" if m.install.layer
                       else f"{INSTALLED_MARKERS}/{m.name}"),
            "agent_dir": m.sandbox_dir,
            "python_path": python_path or "", "user": user.name, "home": user.home,
        }
        script = render_file(m.folder / m.install.script, context)
        remaining = max(deadline - anyio.current_time(), 1.0)
        result = await ctx.sandbox.exec(
            ["sh", "-c", script, f"install-{m.name}"], user="root", cwd="/",
            env={"DEBIAN_FRONTEND": "noninteractive", "NPM_CONFIG_PREFIX": "/usr/local"},
            timeout=remaining)
        append_setup_log(ctx, f"install {m.name} {m.version}", result)
        if result.timed_out:
            raise AgentInstallTimeout("agent_install", remaining,
                                      f"install script of agent {m.name!r} timed out")
        if result.exit_code != 0:
            raise AgentInstallError(
                f"install script of agent {m.name!r} exited with code {result.exit_code} "
                f"(full output: {ctx.paths.setup_dir}); output tail:\n{result.text(2000)}")

    # -- connect -----------------------------------------------------------------------

    async def prepare_launch(self, ctx: AgentContext, role: Role) -> LaunchPrep:
        """Everything a session of `role` starts with: the agent user, the launch plan
        (argv, env, credentials, model), the timeouts and the session marker.

        Raises:
            ConfigError: credentials are missing.
        """
        m = self.manifest
        user = await role_user(ctx, role.name)
        endpoint = ctx.agent_endpoint.for_role(role.name) if ctx.agent_endpoint else None
        credentials = resolve_credentials(m, role.model, role.env, endpoint)
        model = format_model(m, role.model)
        if m.model.upload_file and model and Path(model).expanduser().is_file():
            model = await self._upload_model_file(ctx, Path(model).expanduser())
        await self._upload_credential_files(ctx, user, credentials.files)
        plan = launch_plan(
            m, model=model, role=role.name, role_env=role.env, base_env=ctx.env,
            user=user.name, home=user.home, workdir=ctx.workdir,
            python_path=ctx.python_paths.get(m.name), credentials=credentials,
            endpoint=endpoint)
        idle = ctx.scaled(role.idle_timeout_sec) if role.idle_timeout_sec else None
        from benchflow.acp import AcpTimeouts  # the ACP SDK only when an ACP agent runs

        timeouts = AcpTimeouts(handshake_sec=ctx.scaled(m.launch.handshake_timeout_sec),
                               idle_sec=idle, wall_sec=None)
        marker = secrets.token_hex(8)
        access = ctx.roles.get(role.name)
        return LaunchPrep(user=user, plan=plan, timeouts=timeouts, marker=marker,
                          env={**plan.env, SESSION_MARKER_ENV: marker},
                          umask=access.umask if access is not None else None)

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        """Start the agent as the agent user and open an ACP session for `role`.

        Raises:
            ConfigError: credentials are missing, or the agent refused the model.
            AgentTimeout: the handshake exceeded the manifest's handshake timeout.
            AgentExecutionError, AgentProtocolError: the agent died or broke the protocol.
        """
        from benchflow.acp import AcpSession

        prep = await self.prepare_launch(ctx, role)
        plan = prep.plan
        resume = ctx.resume_sessions.pop(role.name, None)
        try:
            async with AcpSession.open(
                ctx.sandbox, argv=plan.argv, cwd=ctx.workdir, env=prep.env,
                credentials=plan.credentials.env, user=prep.user.name, role=role.name,
                scene=scene, trajectory=ctx.trajectory,
                stderr_path=ctx.paths.agent_dir / f"{role.name}.stderr.txt",
                timeouts=prep.timeouts, model=plan.acp_model, auth_method=plan.auth_method,
                mcp_servers=ctx.mcp_servers, umask=prep.umask, resume=resume,
            ) as session:
                yield AcpConnection(session, ctx, role)
        finally:
            await kill_session_processes(ctx, prep.user, prep.marker)

    async def _upload_model_file(self, ctx: AgentContext, path: Path) -> str:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:12]
        # beside the agent's folder, not in it: that may be a read-only layer
        folder = f"{MODEL_FILES_DIR}/{self.manifest.name}"
        dst = f"{folder}/{digest}-{path.name}"
        await ctx.sandbox.upload_bytes(data, dst, mode=0o644)
        await python_wheels.make_readable(ctx.sandbox, folder)
        return dst

    async def _upload_credential_files(self, ctx: AgentContext, user: AgentUser,
                                       files: list[tuple[Path, str]]) -> None:
        for host, rel in files:
            dst = f"{user.home}/{rel}"
            await ctx.sandbox.upload_bytes(host.read_bytes(), dst, mode=0o600)
            result = await ctx.sandbox.exec(
                ["sh", "-c", 'chown "$1" "$2" "$(dirname "$2")"', "chown", user.name, dst],
                user="root", timeout=30, env={"PATH": SYSTEM_PATH})
            if not result.ok:
                raise AgentInstallError(f"cannot hand credential file {rel} to {user.name}: "
                                        f"{result.text(500)}")


__all__ = ["DEFAULT_AGENT_USER", "AcpAgentDriver", "AcpConnection", "AgentUser", "LaunchPrep",
           "ensure_agent_user", "kill_session_processes", "role_user"]
