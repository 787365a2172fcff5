"""The agent-judge's own read-only role: a separate non-root Unix user (`bf-judge`) that
owns nothing in the workspace, which `lock_workspace` has made root's and unwritable by
anyone else. The judge can read the agent's work and write only its home and
`/logs/judge`.

This is the simple local mechanism until roles get OS-enforced permissions of their own
(`Role.workspace: read-only`): then the judge becomes such a role and this module goes.
"""

from __future__ import annotations

import json

from benchflow.agents.acp_driver import CREATE_USER_SCRIPT, AgentUser
from benchflow.errors import VerifierError
from benchflow.sandbox.base import Sandbox
from benchflow.task.models import HardeningConfig
from benchflow.verify.hardening import lock_workspace

JUDGE_USER = "bf-judge"
JUDGE_LOGS = "/logs/judge"


async def judge_user(sandbox: Sandbox, workspace: str) -> AgentUser:
    """Create the judge's user (no workspace of its own) and lock the workspace.

    Raises:
        VerifierError: the user could not be created or the workspace locked.
    """
    result = await sandbox.exec(["sh", "-c", CREATE_USER_SCRIPT.read_text(), "create_user",
                                 JUDGE_USER], user="root", timeout=120)
    lines = result.stdout.decode("utf-8", "replace").strip().splitlines()
    if not result.ok or not lines:
        raise VerifierError(f"cannot create the judge's user: {result.text(1000)}")
    info = json.loads(lines[-1])
    await lock_workspace(sandbox, workspace, HardeningConfig(lock_workspace=True))
    logs = await sandbox.exec(["sh", "-c", 'mkdir -p "$1" && chown "$2" "$1" && chmod 700 "$1"',
                               "judge_logs", JUDGE_LOGS, info["user"]], user="root", timeout=60)
    if not logs.ok:
        raise VerifierError(f"cannot create {JUDGE_LOGS}: {logs.text(500)}")
    return AgentUser(name=info["user"], uid=int(info["uid"]), home=info["home"])


__all__ = ["JUDGE_LOGS", "JUDGE_USER", "judge_user"]
