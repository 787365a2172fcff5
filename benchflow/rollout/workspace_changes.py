"""What each turn did to the workspace: a `workspace_changes` trajectory event per turn.

Before the first turn the workspace's files are hashed (sha256, size; `.git` left out)
and a root-only copy of the small ones is kept; after each turn the tree is hashed again
and, for each file whose hash changed, a unified diff against its copy is printed (files
of at most `DIFF_MAX_BYTES`; binary files get none) and the copy updated: one call of
`workspace_scan.sh` per turn, in a root shell kept open for the agent phase (`LiveShell`:
a few ms instead of an exec's round trips; `exec` when the backend has no live
processes). The manifests are compared here (created, modified, deleted). Changes to the
task's test, verifier or config files are flagged (`is_flagged`). The event carries the
scene, role and turn of the turn that made them.

A failure to scan is logged and skips that turn's event: the record never fails a rollout.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchflow.agents.base import AgentContext
from benchflow.config import RolloutConfig
from benchflow.errors import BenchflowError
from benchflow.rollout.result import write_json_atomic
from benchflow.sandbox.base import SYSTEM_PATH, Sandbox
from benchflow.sandbox.live_shell import LiveShell
from benchflow.steps import Step
from benchflow.trajectory.writer import TrajectoryWriter

log = logging.getLogger(__name__)

SCAN_SCRIPT = Path(__file__).parents[1] / "sandbox" / "scripts" / "workspace_scan.sh"
SHADOW_DIR = "/tmp/.benchflow-workspace"
WORKSPACE_START = "workspace_start.json"
"""In the rollout folder: every workspace file's sha256 and size before the first turn."""
DIFF_MAX_BYTES = 64 * 1024
"""Files up to this size get a unified diff (and a copy kept for the next one)."""
DIFF_MAX_CHARS = 20_000
"""A diff longer than this is cut (and ends with a note saying so)."""
_SCAN_TIMEOUT_SEC = 300.0
_UNTRACKED_WORKDIRS = ("/", "/tmp", "/root", "/home", "/usr", "/etc", "/var")

CONFIG_NAMES = frozenset({
    "pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "pytest.ini", ".pytest.ini",
    ".coveragerc", "Makefile", "makefile", "GNUmakefile", "package.json", "conftest.py",
    "sitecustomize.py", "usercustomize.py", "noxfile.py", "jest.config.js", "vitest.config.ts",
    "go.mod", "Cargo.toml", "pom.xml", "build.gradle", "CMakeLists.txt"})
"""Build, test-runner and import-hook files (those hardening restores, and their kin)."""
TEST_PATTERNS = ("test_*.py", "*_test.py", "*_test.go", "*.test.js", "*.test.ts",
                 "*.spec.js", "*.spec.ts", "*Test.java", "*.pth")
TEST_FOLDERS = frozenset({"test", "tests", "testing", "__tests__", "spec"})


def is_flagged(path: str, extra: Iterable[str] = ()) -> bool:
    """Whether a change to workspace-relative `path` touches the task's tests, verifier or
    config: a config file name, a test file name, a file in a test folder, or below one
    of `extra` (workspace-relative folders, e.g. where the verifier lives)."""
    parts = path.split("/")
    name = parts[-1]
    if name in CONFIG_NAMES or any(fnmatch.fnmatchcase(name, p) for p in TEST_PATTERNS):
        return True
    if any(part in TEST_FOLDERS for part in parts[:-1]):
        return True
    return any(path == e or path.startswith(e.rstrip("/") + "/") for e in extra)


@dataclass(frozen=True)
class FileState:
    sha256: str
    size: int | None


@dataclass
class Manifest:
    """The workspace's regular files: path -> (sha256, size)."""

    files: dict[str, FileState] = field(default_factory=dict)


def parse_manifest(data: bytes) -> Manifest:
    """The manifest part of `workspace_scan.sh`'s output (hash lines, `--sizes--`, sizes)."""
    data = data.split(b"--diff--\t", 1)[0]
    hashes, _, sizes = data.partition(b"--sizes--\n")
    size_of: dict[str, int] = {}
    for record in sizes.split(b"\n"):
        size, sep, path = record.partition(b"\t")
        if sep and size.isdigit():
            size_of[path.decode("utf-8", "surrogateescape")] = int(size)
    files: dict[str, FileState] = {}
    for record in hashes.split(b"\n"):
        digest, sep, path = record.partition(b"  ")
        if not sep or len(digest) != 64 or not path.startswith(b"./"):
            continue  # sha256sum escapes odd names with a leading backslash: skipped
        rel = path[2:].decode("utf-8", "surrogateescape")
        files[rel] = FileState(sha256=digest.decode(), size=size_of.get(rel))
    return Manifest(files)


def compare(before: Manifest, after: Manifest) -> list[dict[str, object]]:
    """Created, modified and deleted files, sorted by path (no diffs yet)."""
    changes: list[dict[str, object]] = []
    for path in sorted(before.files.keys() | after.files.keys()):
        old, new = before.files.get(path), after.files.get(path)
        if old == new or (old is not None and new is not None and old.sha256 == new.sha256):
            continue
        kind = "created" if old is None else "deleted" if new is None else "modified"
        changes.append({"path": path, "change": kind,
                        "size": new.size if new is not None else None,
                        "sha256": new.sha256 if new is not None else None})
    return changes


def parse_diffs(data: bytes) -> dict[str, str | None]:
    """The diffs part of `workspace_scan.sh turn`'s output: each path's unified diff, None
    for a binary file (or one without a text version on either side), cut to
    `DIFF_MAX_CHARS`."""
    diffs: dict[str, str | None] = {}
    for block in data.split(b"--diff--\t")[1:]:
        path, _, body = block.partition(b"\0")
        name = path.decode("utf-8", "surrogateescape")
        if not body.strip() or body.startswith(b"Binary files") or b"\0" in body:
            diffs[name] = None
            continue
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            diffs[name] = None
            continue
        if len(text) > DIFF_MAX_CHARS:
            text = text[:DIFF_MAX_CHARS] + f"\n... (diff cut at {DIFF_MAX_CHARS} characters)\n"
        diffs[name] = text
    return diffs


class WorkspaceTracker:
    """Records each turn's changes to the workspace as a `workspace_changes` event."""

    def __init__(self, sandbox: Sandbox, workdir: str, *,
                 flagged_folders: Sequence[str] = ()) -> None:
        self.sandbox = sandbox
        self.workdir = posixpath.normpath(workdir)
        self.flagged_folders = tuple(flagged_folders)
        self._before: Manifest | None = None
        self.enabled = self.workdir not in _UNTRACKED_WORKDIRS
        self._shell = LiveShell(sandbox)

    async def start(self, record: Path | None = None) -> None:
        """Before the first turn: the first manifest and the copy of small files; the
        manifest is also written to `record` (path -> {sha256, size}, JSON)."""
        if not self.enabled or self._before is not None:
            return
        data = await self._scan("init")
        if data is not None:
            self._before = parse_manifest(data)
            if record is not None:
                write_json_atomic(record, json.dumps(
                    {path: {"sha256": f.sha256, "size": f.size}
                     for path, f in sorted(self._before.files.items())}, indent=1))

    async def record(self, writer: TrajectoryWriter | None, step: Step,
                     session_id: str | None = None) -> list[dict] | None:
        """After `step`'s turn: write its event (returns the changes; None when the
        workspace could not be scanned)."""
        if not self.enabled or self._before is None:
            return None
        data = await self._scan("turn")
        if data is None:
            return None
        after = parse_manifest(data)
        changes = compare(self._before, after)
        self._before = after
        if changes:
            diffs = parse_diffs(data)
            for change in changes:
                change["diff"] = diffs.get(str(change["path"]))
                change["flagged"] = is_flagged(str(change["path"]), self.flagged_folders)
        if writer is not None and not writer.closed:
            writer.record("workspace_changes", changes=changes, scene=step.scene,
                          role=step.role.name, turn=step.turn_index,
                          session_turn=step.session_turn, session_id=session_id)
        return changes

    async def aclose(self) -> None:
        await self._shell.aclose()

    async def _scan(self, mode: str) -> bytes | None:
        argv = ["sh", "-c", SCAN_SCRIPT.read_text(), "workspace_scan", mode, self.workdir,
                SHADOW_DIR, str(DIFF_MAX_BYTES)]
        result = await self._shell.run(argv, timeout=_SCAN_TIMEOUT_SEC)  # ~ms, not an exec
        if result is not None and result.exit_code == 0:
            return result.stdout
        try:
            result = await self.sandbox.exec(argv, user="root", timeout=_SCAN_TIMEOUT_SEC,
                                             env={"PATH": SYSTEM_PATH})
        except BenchflowError as exc:
            log.warning("could not scan the workspace for changes: %s", exc)
            return None
        if not result.ok:
            log.warning("could not scan the workspace for changes (exit %s): %s",
                        result.exit_code, result.text(500))
            return None
        return result.stdout


def workspace_tracker(config: RolloutConfig, ctx: AgentContext) -> WorkspaceTracker | None:
    """The tracker of a rollout, or None: no sandbox, or `workspace_changes` off (by
    default off when only built-in agents run: the oracle and nop are not studied)."""
    if ctx.sandbox is None:
        return None
    wanted = config.workspace_changes
    if wanted is None:
        from benchflow.agents.registry import TRUSTED_AGENTS

        wanted = any(role.agent not in TRUSTED_AGENTS
                     for scene in config.scenes for role in scene.roles)
    if not wanted:
        return None
    task = ctx.task
    verifier = task.verifier_mount.rstrip("/")
    workdir = posixpath.normpath(ctx.workdir)
    inside = ([posixpath.relpath(verifier, workdir)]
              if verifier.startswith(workdir.rstrip("/") + "/") else [])
    return WorkspaceTracker(ctx.sandbox, ctx.workdir, flagged_folders=inside)


__all__ = ["DIFF_MAX_BYTES", "WORKSPACE_START", "WorkspaceTracker", "workspace_tracker", "compare", "is_flagged", "parse_diffs",
           "parse_manifest"]
