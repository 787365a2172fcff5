"""Role permissions on every backend: docker, and daytona and modal on fakes of their
SDKs (the same fixtures as `test_sandbox_contract.py`). A read-only role writes nothing in
the workspace (EACCES) but its outputs and scratch folder; read-write roles share the
workspace, each as its own Unix user.
"""

from __future__ import annotations

import pytest

from benchflow.config import Role
from benchflow.rollout.role_access import ROLE_GROUP, grant_role_access
from tests.conformance.test_sandbox_contract import backend, sandbox  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

ROLES = {
    "coder": Role(name="coder", agent="nop"),
    "tester": Role(name="tester", agent="nop"),
    "reviewer": Role(name="reviewer", agent="nop", workspace="read-only",
                     outputs=["review.md", "notes/"]),
}


async def as_user(box, user: str, script: str, umask: str | None = None) -> tuple[int, str]:
    argv = ["sh", "-c", script if umask is None else f"umask {umask}; {script}"]
    result = await box.exec(argv, user=user, cwd="/app")
    return result.exit_code, result.text()


async def test_read_only_role_gets_eacces_and_read_write_roles_share(sandbox):  # noqa: F811
    await sandbox.exec(["sh", "-c", "mkdir -p /app/src && echo v1 > /app/src/main.py "
                                    "&& chmod 777 /app/src"], user="root")
    access = await grant_role_access(sandbox, "/app", ROLES)
    assert {a.user for a in access.values()} == {"agent-coder", "agent-tester",
                                                 "agent-reviewer"}
    assert (access["coder"].umask, access["reviewer"].umask) == ("002", None)

    # read-only: reads everything, writes nothing in the workspace (not even a folder the
    # image left world-writable), but its outputs and its scratch folder
    code, out = await as_user(sandbox, "agent-reviewer", "cat src/main.py")
    assert (code, out) == (0, "v1\n")
    for attempt in ("touch /app/x", "echo no > /app/src/main.py", "touch /app/src/new.py",
                    "mkdir /app/dir", "rm /app/src/main.py"):
        code, out = await as_user(sandbox, "agent-reviewer", attempt)
        assert code != 0 and ("Permission denied" in out or "Operation not permitted" in out), (
            attempt, out)
    listing = await sandbox.exec(["sh", "-c", "ls -A /app /app/src"], user="root")
    assert listing.stdout.split() == [b"/app:", b"notes", b"review.md", b"src", b"/app/src:",
                                      b"main.py"]
    for ok in ("echo LGTM > review.md", "echo n > notes/1.md", "echo s > /tmp/roles/reviewer/s"):
        assert await as_user(sandbox, "agent-reviewer", ok) == (0, ""), ok
    # the scratch folder is its own
    code, out = await as_user(sandbox, "agent-coder", "ls /tmp/roles/reviewer")
    assert code != 0 and "Permission denied" in out

    # read-write roles: each its own user, in the group that owns the workspace; what one
    # creates (umask 002) the other edits
    code, out = await as_user(sandbox, "agent-coder", "id -un; id -Gn", umask="002")
    assert code == 0 and out.split()[0] == "agent-coder" and ROLE_GROUP in out.split()[1:]
    assert await as_user(sandbox, "agent-coder", "mkdir pkg && echo a > pkg/a.py",
                         umask="002") == (0, "")
    assert await as_user(sandbox, "agent-tester", "echo b >> pkg/a.py && echo c > pkg/c.py "
                         "&& echo v2 > src/main.py", umask="002") == (0, "")
    assert await as_user(sandbox, "agent-coder", "cat pkg/a.py pkg/c.py src/main.py "
                         "review.md") == (0, "a\nb\nc\nv2\nLGTM\n")
    code, out = await as_user(sandbox, "agent-reviewer", "echo no >> pkg/c.py")
    assert code != 0 and "Permission denied" in out

    # idempotent: a second grant (a resumed or forked rollout) changes nothing
    assert await grant_role_access(sandbox, "/app", ROLES) == access
