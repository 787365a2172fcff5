"""File access for task folders: strict UTF-8 reads, content hashes, git commits."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
import time
from pathlib import Path

from benchflow.errors import TaskEscapeError, TaskInvalidError

_SKIP_DIRS = frozenset({".git", "__pycache__"})
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def read_text(path: Path, label: str) -> str:
    """Read a task file as UTF-8 (a leading BOM is dropped).

    Raises:
        TaskInvalidError: the file cannot be read or is not UTF-8.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TaskInvalidError(
            f"{label}: cannot be read ({exc.strerror or exc}): check the file's permissions"
        ) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TaskInvalidError(
            f"{label}: is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
            "re-save the file as UTF-8"
        ) from exc


def check_contained(root: Path, label: Path) -> None:
    """Refuse a task folder holding a symbolic link that resolves outside it.

    A linked `task.md`, `instruction.md`, `environment/` or test file would send a host
    file (a key, `/etc/shadow`) into the sandbox, the trajectory and the results. Links
    within the folder stay allowed. `root` is the resolved task folder, `label` the path
    as the user gave it (named in the message).

    Raises:
        TaskEscapeError: naming the first such link, where it leads and the fix.
    """
    base = os.path.realpath(root)
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            full = os.path.join(folder, name)
            if not os.path.islink(full):
                continue
            target = os.path.realpath(full)
            if target != base and not target.startswith(base + os.sep):
                rel = os.path.relpath(full, root)
                raise TaskEscapeError(
                    f"{label / rel}: is a symbolic link to {os.readlink(full)}, which is outside "
                    "the task folder: copy the file into the task instead of linking to it")


def is_file(path: Path) -> bool:
    """`path.is_file()` that answers False instead of raising (bad names, permissions)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """`path.is_dir()` that answers False instead of raising."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def content_hash(root: Path) -> str:
    """sha256 over every file under `root`: relative POSIX path and bytes, in sorted order.

    `.git` and `__pycache__` folders are skipped (they change without the task changing);
    a symlink is hashed by its target string, never followed. Unreadable files hash
    their error name, so the call does not raise for a folder that exists.
    """
    entries: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            full = Path(folder, name)
            entries.append((full.relative_to(root).as_posix(), full))
    digest = hashlib.sha256()
    for rel, full in sorted(entries):
        data: bytes
        try:
            if full.is_symlink():
                data = b"symlink:" + os.readlink(full).encode("utf-8", "surrogateescape")
            else:
                data = full.read_bytes()
        except OSError as exc:
            data = f"unreadable:{type(exc).__name__}".encode()
        rel_bytes = rel.encode("utf-8", "surrogateescape")
        digest.update(len(rel_bytes).to_bytes(8, "big") + rel_bytes)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


_git_heads: dict[str, tuple[float, str | None]] = {}
_git_locks: dict[str, threading.Lock] = {}
_git_locks_lock = threading.Lock()


def git_commit_id(folder: Path, max_age_sec: float = 0.0) -> str | None:
    """HEAD of the git repository containing `folder`, or None (no git, no repo, any failure).

    With `max_age_sec` > 0 an answer looked up for the same folder less than that long ago
    is reused, and concurrent callers for one folder wait for a single `git` process:
    hundreds of rollouts of one task starting at once run git once, not hundreds of times.
    """
    if max_age_sec <= 0:
        return _rev_parse_head(folder)
    key = str(folder)
    with _git_locks_lock:
        lock = _git_locks.setdefault(key, threading.Lock())
    with lock:
        known, commit = recent_git_commit_id(folder, max_age_sec)
        if known:
            return commit
        commit = _rev_parse_head(folder)
        _git_heads[key] = (time.monotonic(), commit)
        return commit


def recent_git_commit_id(folder: Path, max_age_sec: float) -> tuple[bool, str | None]:
    """(True, HEAD) when `git_commit_id(folder, max_age_sec)` has an answer at most that
    old, without blocking; (False, None) when it would have to run git."""
    hit = _git_heads.get(str(folder))
    if hit is not None and time.monotonic() - hit[0] < max_age_sec:
        return True, hit[1]
    return False, None


def _rev_parse_head(folder: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and _SHA.fullmatch(commit) else None


__all__ = ["check_contained", "content_hash", "git_commit_id", "is_dir", "is_file", "read_text"]
