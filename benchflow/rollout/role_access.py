"""Role permissions the OS enforces: each role of a multi-role rollout runs as its own
Unix user in the shared sandbox, with the workspace access the role declares.

- `read-write` roles (the default) share write access to the workspace: their users are
  members of one group (`ROLE_GROUP`) that owns the workspace with group write, its folders
  setgid, and their processes run with umask 002, so what one role creates the others can
  edit.
- `read-only` roles can read the whole workspace but write only their scratch folder
  (`/tmp/roles/<role>`) and the workspace paths the role names as `outputs`: anything else
  fails with EACCES, whatever the agent tries.

Outside the workspace ordinary Unix permissions hold (a role writes its home and /tmp; the
task's tests, verifier and solution folders are root's). A rollout with a single
read-write role keeps today's one agent user. Set up once, as root, after the agents are
installed and before the hardening baseline (so the baseline sees the final modes).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from benchflow.agents.acp_driver import (
    CREATE_USER_SCRIPT,
    DEFAULT_AGENT_USER,
    append_setup_log,
    ensure_agent_user,
)
from benchflow.agents.base import AgentContext, RoleAccess
from benchflow.config import Role, Scene
from benchflow.errors import AgentInstallError
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, Sandbox

ROLE_GROUP = "benchflow-rw"
"""The group of the read-write roles' users; it owns the workspace."""
SCRATCH_ROOT = "/tmp/roles"
ROLE_ACCESS_SCRIPT = Path(__file__).parents[1] / "sandbox" / "scripts" / "role_access.sh"
_MAX_USER = 32


def rollout_roles(scenes: Sequence[Scene]) -> dict[str, Role]:
    """Each role name of the rollout whose agent runs as a sandbox user (not the built-in
    oracle and nop), with its first declaration (a role that appears in several scenes is
    one role: one user)."""
    from benchflow.agents.builtin import BUILTIN_AGENT_NAMES

    roles: dict[str, Role] = {}
    for scene in scenes:
        for role in scene.roles:
            if role.agent not in BUILTIN_AGENT_NAMES:
                roles.setdefault(role.name, role)
    return roles


def needs_role_users(scenes: Sequence[Scene]) -> bool:
    """Whether roles get their own users: several agent roles, or a read-only one."""
    roles = rollout_roles(scenes)
    return len(roles) > 1 or any(r.workspace == "read-only" for r in roles.values())


def role_user_name(base: str, role: str) -> str:
    """`<base>-<role>` as a valid Unix user name (lower case, at most 32 characters)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", f"{base}-{role}".lower()).strip("-")
    if len(name) > _MAX_USER:
        digest = hashlib.sha1(name.encode()).hexdigest()[:6]
        name = f"{name[:_MAX_USER - 7]}-{digest}"
    if not re.match(r"^[a-z_]", name):
        name = f"r{name}"[:_MAX_USER]
    return name


def access_argv(workdir: str, users: dict[str, str], roles: dict[str, Role]) -> list[str]:
    """The arguments of role_access.sh for these roles (pure)."""
    argv = [workdir, ROLE_GROUP, SCRATCH_ROOT]
    for name, role in roles.items():
        argv += ["--role", users[name], "rw" if role.workspace == "read-write" else "ro", name]
        if role.workspace == "read-only":
            for output in role.outputs:
                argv += ["--out", output.lstrip("/") if output.endswith("/")
                         else output.strip("/")]
    return argv


async def setup_role_access(ctx: AgentContext, scenes: Sequence[Scene]) -> dict[str, RoleAccess]:
    """Create each role's user and give it its workspace access; sets `ctx.roles`.
    Nothing to do (returns {}) for a rollout with one read-write role.

    Raises:
        AgentInstallError: a user or the access could not be set up.
    """
    if not needs_role_users(scenes):
        return {}
    sandbox = ctx.require_sandbox("role permissions")
    owner = await ensure_agent_user(ctx)  # owns the workspace, as in a one-role rollout
    base = owner.name if owner.name != "root" else DEFAULT_AGENT_USER
    roles = rollout_roles(scenes)

    def record(title: str, result: ExecResult) -> None:
        append_setup_log(ctx, title, result)

    ctx.roles = await grant_role_access(sandbox, ctx.workdir, roles, base, record)
    return ctx.roles


async def grant_role_access(sandbox: Sandbox, workdir: str, roles: dict[str, Role],
                            base: str = DEFAULT_AGENT_USER,
                            record: Callable[[str, ExecResult], None] | None = None
                            ) -> dict[str, RoleAccess]:
    """As root in `sandbox`: a user `<base>-<role>` per role, and the workspace access of
    the module docstring. Idempotent.

    Raises:
        AgentInstallError: a user or the access could not be set up.
    """
    users = {name: role_user_name(base, name) for name in roles}
    rw = sum(role.workspace == "read-write" for role in roles.values())
    access: dict[str, RoleAccess] = {}
    for name, role in roles.items():
        result = await sandbox.exec(
            ["sh", "-c", CREATE_USER_SCRIPT.read_text(), "create_user", users[name]],
            user="root", timeout=120, env={"PATH": SYSTEM_PATH})
        if record is not None:
            record(f"create user {users[name]} for role {name}", result)
        lines = result.stdout.decode("utf-8", "replace").strip().splitlines()
        if not result.ok or not lines:
            raise AgentInstallError(f"cannot create the user of role {name!r}: "
                                    f"{result.text(1000)}")
        info = json.loads(lines[-1])
        access[name] = RoleAccess(
            role=name, user=info["user"], uid=int(info["uid"]), home=info["home"],
            workspace=role.workspace, scratch=f"{SCRATCH_ROOT}/{name}",
            umask="002" if rw > 1 and role.workspace == "read-write" else None)
    result = await sandbox.exec(
        ["sh", "-c", ROLE_ACCESS_SCRIPT.read_text(), "role_access",
         *access_argv(workdir, users, roles)],
        user="root", timeout=300, env={"PATH": SYSTEM_PATH})
    if record is not None:
        record("role permissions", result)
    if not result.ok:
        raise AgentInstallError(f"cannot set up the roles' workspace permissions: "
                                f"{result.text(1000)}")
    return access


__all__ = ["ROLE_GROUP", "SCRATCH_ROOT", "access_argv", "grant_role_access", "needs_role_users",
           "role_user_name", "rollout_roles", "setup_role_access"]
