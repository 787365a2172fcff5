"""Per-turn workspace changes through a whole rollout: a scripted scene creates, edits and
deletes known files, and each turn's `workspace_changes` event says exactly that, with the
role and turn that did it, the new content's size and sha256, a unified diff for text,
none for binary or large files, and the task's test and config files flagged."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from benchflow import Role, Rollout, RolloutConfig, Scene, Turn
from benchflow.trajectory import WorkspaceChangesEvent

from .conftest import TASKS
from .test_scenes import events_of

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

CODER_REVIEWER = TASKS / "coder-reviewer"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def test_each_turn_records_what_it_created_edited_and_deleted(tmp_path, job_label):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"roles": {
        "coder": {"turns": [
            {"actions": [
                {"type": "write_file", "path": "app.py", "content": "a = 1\nb = 2\n"},
                {"type": "write_file", "path": "tests/test_app.py", "content": "ok\n"},
                {"type": "shell", "command": "head -c 100000 /dev/zero | tr '\\0' x > big.txt"
                                            " && printf 'x\\000y' > blob.bin"}]},
            {"actions": [
                {"type": "write_file", "path": "app.py", "content": "a = 1\nb = 3\n"},
                {"type": "shell", "command": "rm blob.bin && echo '[tool]' > pyproject.toml"}]}]},
        "reviewer": {"turns": [{"actions": [{"type": "shell", "command": "cat app.py"}]}]},
    }}))
    scene = Scene(name="edit", roles=[
        Role(name="coder", agent="scripted", model=str(script)),
        Role(name="reviewer", agent="scripted", model=str(script), workspace="read-only")],
        turns=[Turn(role="coder"), Turn(role="reviewer", prompt="look"),
               Turn(role="coder", prompt="again")])
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[scene],
                                    jobs_dir=tmp_path, job_name=job_label,
                                    verifier_disabled=True))
    result = await rollout.run()
    assert result.error is None, result.error
    events = [e for e in events_of(rollout.paths.trajectory)
              if isinstance(e, WorkspaceChangesEvent)]
    assert [(e.scene, e.role, e.turn, e.session_turn) for e in events] == [
        ("edit", "coder", 0, 0), ("edit", "reviewer", 1, 0), ("edit", "coder", 2, 1)]
    first, review, second = ({c.path: c for c in e.changes} for e in events)

    assert sorted(first) == ["app.py", "big.txt", "blob.bin", "tests/test_app.py"]
    assert {c.change for c in first.values()} == {"created"}
    app = first["app.py"]
    assert (app.size, app.sha256, app.flagged) == (12, sha("a = 1\nb = 2\n"), False)
    assert app.diff is not None and "+a = 1\n+b = 2\n" in app.diff
    assert first["tests/test_app.py"].flagged  # a test file of the task
    assert first["big.txt"].size == 100_000 and first["big.txt"].diff is None  # over the bound
    assert first["blob.bin"].diff is None  # binary

    assert review == {}  # the reviewer only read

    assert sorted(second) == ["app.py", "blob.bin", "pyproject.toml"]
    assert (second["app.py"].change, second["app.py"].sha256) == ("modified",
                                                                  sha("a = 1\nb = 3\n"))
    assert second["app.py"].diff is not None
    assert "-b = 2\n+b = 3\n" in second["app.py"].diff  # against the previous turn's version
    assert (second["blob.bin"].change, second["blob.bin"].size) == ("deleted", None)
    assert second["pyproject.toml"].change == "created" and second["pyproject.toml"].flagged


async def test_an_edit_that_keeps_size_and_mtime_is_seen(tmp_path, job_label):
    """Files whose status is unchanged are not hashed again; an edit that puts the file's
    size and mtime back (`touch -r`) still changes its ctime, so it is recorded."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"roles": {"coder": {"turns": [
        {"actions": [{"type": "write_file", "path": "app.py", "content": "a = 1\n"}]},
        {"actions": [{"type": "shell", "command": "true"}]},
        {"actions": [{"type": "shell", "command":
                      "cp -p app.py /tmp/ref && printf 'a = 2\\n' > app.py"
                      " && touch -r /tmp/ref app.py"
                      " && [ $(stat -c %s.%y app.py) = $(stat -c %s.%y /tmp/ref) ]"}]}]}}}))
    scene = Scene(name="edit", roles=[Role(name="coder", agent="scripted", model=str(script))],
                  turns=[Turn(role="coder"), Turn(role="coder", prompt="nothing"),
                         Turn(role="coder", prompt="again")])
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[scene],
                                    jobs_dir=tmp_path, job_name=job_label,
                                    verifier_disabled=True))
    result = await rollout.run()
    assert result.error is None, result.error
    assert result.n_tool_calls == 3  # the last command's check of size and mtime held
    events = [e for e in events_of(rollout.paths.trajectory)
              if isinstance(e, WorkspaceChangesEvent)]
    assert [[(c.path, c.change) for c in e.changes] for e in events] == [
        [("app.py", "created")], [], [("app.py", "modified")]]
    assert events[2].changes[0].sha256 == sha("a = 2\n")
    assert events[2].changes[0].diff is not None and "-a = 1\n+a = 2\n" in events[2].changes[0].diff
