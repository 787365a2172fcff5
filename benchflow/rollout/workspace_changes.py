"""What each turn did to the workspace: a `workspace_changes` trajectory event per turn.

Before the first turn the workspace's files are hashed (sha256, size; `.git` left out)
and a root-only copy of the small ones is kept. After each turn a stat walk lists every
file's status (size, ctime, inode; nothing read) and only the files whose status
changed since they were last hashed (or is not to be trusted, see `Listing`) are hashed
again; for each whose hash changed, a unified diff against its copy is printed (files of
at most `DIFF_MAX_BYTES`; binary files get none) and the copy updated. A turn that
changed nothing costs one `find`; one that changed files, one more call hashing and
diffing just those. The calls go to `workspace_scan.sh` in a root shell kept open for the
agent phase (`LiveShell`: a few ms instead of an exec's round trips; `exec` when the
backend has no live processes). This sits between two turns, on the critical path of a
role switch, where an agent's own work competes with it for the sandbox's CPU: fewer and
smaller processes is what keeps the switch short. The manifests are compared here
(created, modified, deleted, by sha256). Changes to the task's test, verifier or config
files are flagged (`is_flagged`). The event carries the scene, role and turn of the turn
that made them.

A failure to scan is logged and skips that turn's event: the record never fails a rollout.
"""

from __future__ import annotations

import fnmatch
import functools
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
_ARGUMENT_BYTES = 64 * 1024
"""Paths handed to one `workspace_scan.sh turn`: a command line is bounded (ARG_MAX)."""
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
    status: bytes | None = field(default=None, compare=False)
    """"<size> <ctime> <inode>" as listed when the file was hashed; None when
    that status cannot be trusted to show the next change (`Listing`)."""


@dataclass
class Manifest:
    """The workspace's regular files: path -> (sha256, size, status)."""

    files: dict[str, FileState] = field(default_factory=dict)


@dataclass
class Listing:
    """`workspace_scan.sh list`: each file's status (size, ctime, inode), no content.

    A file whose status is the one it had when last hashed is not hashed again. Any write
    sets a file's ctime to the (coarse: a clock tick) current time, and nothing an agent
    can do sets it back (`touch -d` sets the mtime and, to now, the ctime: the mtime is
    not needed), so a status listed before the stamp's ctime (`stamp_ns`: the stamp is
    written just before the walk) changes with any later write. A status listed with a
    ctime in the stamp's own tick or later could be followed by a write in that same tick
    that leaves size and ctime as they were: such a status is not trusted (None) and its
    file is hashed again at the next scan (what git does with its "racily clean"
    entries). Not caught, as by git, make or rsync: a write through a shared memory map
    the kernel has not stamped yet, or a clock set back.
    """

    stamp_ns: int | None
    files: dict[str, tuple[int, bytes | None]]
    """Workspace path -> (size, status, or None when it is not to be trusted)."""


def _ns(stamp: bytes) -> int:
    """find's "%C@" ("<seconds>.<fraction>") in nanoseconds."""
    seconds, _, fraction = stamp.partition(b".")
    return int(seconds) * 1_000_000_000 + int((fraction + b"000000000")[:9])


def parse_listing(data: bytes) -> Listing:
    """The status records of `workspace_scan.sh list` (or `init`, before its hashes): the
    stamp's first, then "<size> <ctime> <inode> ./<path>". Thousands of files a turn:
    each record is split once, and ctimes are compared as floats (rounding never makes a
    later ctime look earlier: at worst a status is not trusted)."""
    records = data.split(b"\0--hashes--\0", 1)[0].split(b"\0")
    stamp_ns: int | None = None
    stamp = float("-inf")  # no stamp: nothing is trusted
    first = records[0].split(b" ", 3) if records else []
    if len(first) == 4 and not first[3].startswith(b"./"):
        try:
            stamp_ns, stamp = _ns(first[1]), float(first[1])
        except ValueError:
            pass
    files: dict[str, tuple[int, bytes | None]] = {}
    for record in records:
        status, sep, path = record.partition(b" ./")  # the status has no "/"
        fields = status.split(b" ")
        if not sep or len(fields) != 3 or not fields[0].isdigit():
            continue
        try:
            trusted = float(fields[1]) < stamp
        except ValueError:
            continue
        files[path.decode("utf-8", "surrogateescape")] = (int(fields[0]),
                                                           status if trusted else None)
    return Listing(stamp_ns, files)


def parse_hashes(data: bytes) -> dict[str, str]:
    """The "<sha256>  ./<path>" lines of `workspace_scan.sh init` or `turn`: path -> sha256."""
    data = data.split(b"\0--hashes--\0", 1)[-1].split(b"--diff--\t", 1)[0]
    hashes: dict[str, str] = {}
    for record in data.split(b"\n"):
        digest, sep, path = record.partition(b"  ")
        if not sep or len(digest) != 64 or not path.startswith(b"./"):
            continue
        hashes[path[2:].decode("utf-8", "surrogateescape")] = digest.decode()
    return hashes


def to_hash(before: Manifest, listing: Listing) -> tuple[list[str], list[str]]:
    """What a scan must look at: the files to hash (new, or their status changed or is
    not trusted) and the files gone, each sorted. The others are as they were."""
    present = []
    for path, (_, status) in listing.files.items():
        old = before.files.get(path)
        if status is None or old is None or old.status != status:
            present.append(path)
    return sorted(present), sorted(p for p in before.files if p not in listing.files)


def updated(before: Manifest, listing: Listing, hashes: dict[str, str]) -> Manifest:
    """The manifest after a scan: `hashes` for the files hashed, the others as `before`
    had them. A file listed but neither hashed nor unchanged (gone between the walk and
    the hashing) is left out: it is gone."""
    files: dict[str, FileState] = {}
    for path, (size, status) in listing.files.items():
        digest, old = hashes.get(path), before.files.get(path)
        if digest is not None:
            files[path] = FileState(digest, size, status)
        elif old is not None and status is not None and old.status == status:
            files[path] = old
    return Manifest(files)


def turn_arguments(present: list[str], gone: list[str], sizes: Listing) -> list[str]:
    """`workspace_scan.sh turn`'s arguments: the gone files first ("-"), then the present
    ones ("+" at most `DIFF_MAX_BYTES`, "=" larger)."""
    return ([f"-./{path}" for path in gone]
            + [f"{'+' if sizes.files[path][0] <= DIFF_MAX_BYTES else '='}./{path}"
               for path in present])


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
                 flagged_folders: Sequence[str] = (), state_dir: str = SHADOW_DIR) -> None:
        self.sandbox = sandbox
        self.state_dir = state_dir
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
            self._before = updated(Manifest(), parse_listing(data), parse_hashes(data))
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
        data = await self._scan("list")
        if data is None:
            return None
        listing = parse_listing(data)
        present, gone = to_hash(self._before, listing)
        hashes: dict[str, str] = {}
        diffs: dict[str, str | None] = {}
        for chunk in _chunks(turn_arguments(present, gone, listing)):
            data = await self._scan("turn", chunk)
            if data is None:
                return None
            hashes.update(parse_hashes(data))
            diffs.update(parse_diffs(data))
        after = updated(self._before, listing, hashes)
        changes = compare(self._before, after)
        self._before = after
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

    async def _scan(self, mode: str, arguments: Sequence[str] = ()) -> bytes | None:
        argv = ["sh", "-c", _script(), "workspace_scan", mode, self.workdir, self.state_dir,
                str(DIFF_MAX_BYTES), *arguments]
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


@functools.cache
def _script() -> str:
    return SCAN_SCRIPT.read_text()


def _chunks(arguments: list[str], limit: int = _ARGUMENT_BYTES) -> list[list[str]]:
    """`arguments` in runs of at most `limit` bytes (one a run when longer): a command
    line has a bounded length (ARG_MAX)."""
    runs: list[list[str]] = []
    size = limit
    for argument in arguments:
        length = len(argument.encode("utf-8", "surrogateescape")) + 1
        if size + length > limit:
            runs.append([])
            size = 0
        runs[-1].append(argument)
        size += length
    return runs


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


__all__ = ["DIFF_MAX_BYTES", "WORKSPACE_START", "FileState", "Listing", "Manifest",
           "WorkspaceTracker", "compare", "is_flagged", "parse_diffs", "parse_hashes",
           "parse_listing", "to_hash", "turn_arguments", "updated", "workspace_tracker"]
