"""Role users and their access arguments (pure parts of `rollout/role_access.py`)."""

from __future__ import annotations

import re

import pytest

from benchflow.acp.launch import with_umask
from benchflow.config import Role, Scene, Turn
from benchflow.errors import ConfigError
from benchflow.rollout.role_access import access_argv, needs_role_users, role_user_name


def test_role_user_names_are_valid_unix_names():
    assert role_user_name("agent", "coder") == "agent-coder"
    assert role_user_name("agent", "Code.Review") == "agent-code-review"
    long = role_user_name("agent", "a" * 60)
    assert len(long) <= 32 and long != role_user_name("agent", "a" * 61)
    assert re.fullmatch(r"[a-z_][a-z0-9_-]*", role_user_name("9", "x"))


def test_only_several_roles_or_a_read_only_one_get_their_own_users():
    one = Scene.single(agent="claude")
    assert not needs_role_users([one, one])  # one role name across scenes
    assert needs_role_users([one, Scene.single(agent="codex", role="other")])
    ro = Scene(roles=[Role(name="r", agent="claude", workspace="read-only")],
               turns=[Turn(role="r")])
    assert needs_role_users([ro])
    # the built-in agents run as root (oracle) or not at all (nop): no users for them
    assert not needs_role_users([one, Scene.single(agent="oracle", role="solver"),
                                 Scene.single(agent="nop", role="idle")])


def test_access_arguments_name_each_role_and_the_read_only_outputs():
    roles = {"coder": Role(name="coder", agent="nop"),
             "reviewer": Role(name="reviewer", agent="nop", workspace="read-only",
                              outputs=["review.md", "notes/", "a/b.txt"])}
    users = {"coder": "agent-coder", "reviewer": "agent-reviewer"}
    assert access_argv("/app", users, roles) == [
        "/app", "benchflow-rw", "/tmp/roles", "--role", "agent-coder", "rw", "coder",
        "--role", "agent-reviewer", "ro", "reviewer", "--out", "review.md",
        "--out", "notes/", "--out", "a/b.txt"]


def test_with_umask_wraps_the_argv_and_checks_the_mask():
    assert with_umask(["echo", "hi"], None) == ["echo", "hi"]
    assert with_umask(["echo", "hi"], "002") == ["sh", "-c", 'umask "$0" && exec "$@"',
                                                  "002", "echo", "hi"]
    with pytest.raises(ConfigError):
        with_umask(["x"], "002; rm -rf /")
