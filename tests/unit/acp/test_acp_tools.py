"""The client's side of tools: permissions, fs and terminals, exercised by the scripted agent."""

from __future__ import annotations

import pytest

from benchflow.acp import PermissionPolicy, PermissionRequest
from tests.unit.acp.conftest import Harness

pytestmark = pytest.mark.anyio

PERMISSION = {"type": "permission", "title": "rm -rf build", "kind": "execute"}


async def test_auto_approve_prefers_allow_always(harness: Harness) -> None:
    harness.script({"actions": [PERMISSION]})
    async with harness.session() as session:
        outcome = await session.prompt("go")
    assert outcome.agent_text == "permission granted: allow-always"
    (event,) = harness.of_type("permission")
    assert (event.outcome, event.option_id, event.option_kind, event.policy) == (
        "selected",
        "allow-always",
        "allow_always",
        "auto_approve",
    )
    assert event.tool_call["title"] == "rm -rf build"
    assert [o["kind"] for o in event.options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]


async def test_auto_approve_falls_back_to_allow_once(harness: Harness) -> None:
    options = [{"id": "yes", "kind": "allow_once"}, {"id": "no", "kind": "reject_once"}]
    harness.script({"actions": [{**PERMISSION, "options": options}]})
    async with harness.session() as session:
        assert (await session.prompt("go")).agent_text == "permission granted: yes"


async def test_deny_policy(harness: Harness) -> None:
    harness.script(
        {"actions": [{**PERMISSION, "on_deny": "stop"}, {"type": "message", "text": "not reached"}]}
    )
    async with harness.session(permission_policy=PermissionPolicy.deny()) as session:
        outcome = await session.prompt("go")
    assert outcome.agent_text == "permission denied"
    (event,) = harness.of_type("permission")
    assert (event.outcome, event.option_id, event.policy) == ("selected", "reject-once", "deny")


async def test_callback_policy_sees_the_request_and_decides(harness: Harness) -> None:
    seen: list[PermissionRequest] = []

    async def decide(request: PermissionRequest) -> str | None:
        seen.append(request)
        if "rm" in request.title:
            return None  # cancel the request
        return "allow_once"  # a kind is accepted as well as an option id

    harness.script({"actions": [PERMISSION, {**PERMISSION, "title": "ls"}]})
    policy = PermissionPolicy.callback(decide, name="no-rm")
    async with harness.session(permission_policy=policy) as session:
        outcome = await session.prompt("go")
    assert outcome.agent_text == "permission deniedpermission granted: allow-once"
    assert [r.title for r in seen] == ["rm -rf build", "ls"]
    assert seen[0].kind == "execute" and seen[0].session_id == session.session_id
    events = harness.of_type("permission")
    assert [(e.outcome, e.option_id, e.policy) for e in events] == [
        ("cancelled", None, "no-rm"),
        ("selected", "allow-once", "no-rm"),
    ]


async def test_fs_and_terminal_through_the_client(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "shell", "command": "echo hi > f.txt && cat f.txt && echo oops >&2 "
                                             "&& echo after"},
                {"type": "write_file", "path": "sub/notes.md", "content": "line1\nline2\nline3\n"},
                {"type": "read_file", "path": "f.txt", "echo": True},
                {"type": "read_file", "path": "sub/notes.md", "line": 2, "limit": 1, "echo": True},
                {"type": "read_file", "path": "missing.txt"},
                {"type": "shell", "command": "exit 4"},
                {
                    "type": "shell",
                    "command": "head -c 5000 /dev/zero | tr '\\0' a; printf END",
                    "output_limit": 100,
                },
                {"type": "write_file", "path": "/proc/no/such/dir/x", "content": "x"},
            ]
        }
    )
    async with harness.session() as session:
        outcome = await session.prompt("go")
    assert (harness.workdir / "f.txt").read_text() == "hi\n"
    assert (harness.workdir / "sub" / "notes.md").read_text() == "line1\nline2\nline3\n"
    assert outcome.n_tool_calls == 8
    assert outcome.agent_text.startswith("hi\nline2\nread failed:")
    assert "write failed:" in outcome.agent_text and "/proc/no/such/dir/x" in outcome.agent_text
    updates = [
        e for e in harness.of_type("tool_call_update") if e.status in ("completed", "failed")
    ]
    assert [e.status for e in updates] == [
        "completed",
        "completed",
        "completed",
        "completed",
        "failed",
        "failed",
        "completed",
        "failed",
    ]
    shell = updates[0].update["rawOutput"]
    # stderr and stdout share one stream, in the order written (as in a terminal)
    assert (shell["exit_code"], shell["output"]) == (0, "hi\noops\nafter\n")
    assert updates[5].update["rawOutput"]["exit_code"] == 4
    limited = updates[6].update["rawOutput"]["output"]
    assert len(limited) == 100 and limited.endswith("aEND")  # truncated from the beginning


async def test_local_shell_and_local_files(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "shell", "command": "pwd", "via": "local"},
                {"type": "write_file", "path": "local.txt", "content": "L", "via": "local"},
                {"type": "read_file", "path": "local.txt", "via": "local", "echo": True},
            ]
        }
    )
    async with harness.session() as session:
        outcome = await session.prompt("go")
    assert outcome.agent_text == "L"
    first = next(e for e in harness.of_type("tool_call_update") if e.status == "completed")
    assert first.update["rawOutput"]["output"].strip() == str(harness.workdir)
