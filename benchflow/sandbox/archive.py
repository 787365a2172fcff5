"""Tar archives for moving files in and out of sandboxes (shared by every backend)."""

from __future__ import annotations

import errno
import io
import logging
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchflow.sandbox.spec import SpecTree

log = logging.getLogger(__name__)


def tar_bytes(files: Mapping[str, tuple[bytes, int]], trees: Sequence[SpecTree] = ()) -> bytes:
    """A tar of `{path: (data, mode)}` (a path ending in "/" is a directory), then `trees`
    (see `add_tree`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for tree in trees:
            add_tree(tar, tree)
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name.strip("/"))
            info.mode, info.mtime = mode, int(time.time())
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def add_tree(tar: tarfile.TarFile, tree: SpecTree) -> None:
    """Add the host folder `tree.src` as `tree.dst` (modes and links as on the host, as
    `tar_path` does); `root_only`: uid/gid 0 and no group/other permission bits; `link`:
    a symbolic link to `dst`."""

    def member(info: tarfile.TarInfo) -> tarfile.TarInfo:
        if tree.root_only:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode &= ~0o077
        return info

    tar.add(tree.src, arcname=tree.dst.strip("/"), filter=member)
    if tree.link is not None:
        info = tarfile.TarInfo(tree.link.strip("/"))
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, tree.dst, 0o777
        info.mtime = int(time.time())
        tar.addfile(info)


def tar_path(src: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(src, arcname=arcname.lstrip("/"))
    return buf.getvalue()


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks (a streamed archive), so tarfile
    reads it member by member without holding it whole."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._left:
            try:
                self._left = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


def extract(chunks: Iterator[bytes], src: str, dst: Path,
            limit_bytes: int | None = None) -> str | None:
    """Extract a get_archive stream of `src` to `dst` as it arrives (safely: the sandbox is
    untrusted), at most `limit_bytes` of file content; returns a note saying what was left
    out when the limit stopped it, else None.

    The stream is never held in memory whole: a sandbox's 2 GiB file costs a buffer, and
    past the limit the download stops (the rest is never read).
    """
    root = Path(src.rstrip("/")).name or "root"
    dst.parent.mkdir(parents=True, exist_ok=True)
    kept = 0
    with tarfile.open(fileobj=io.BufferedReader(_ChunkReader(chunks), 1 << 20),
                      mode="r|") as tar:
        for member in tar:
            parts = member.name.split("/", 1)
            if parts[0] != root:
                continue
            if limit_bytes is not None and member.isfile() and kept + member.size > limit_bytes:
                return (f"the download of {src} stopped at {limit_bytes // (1 << 20)} MB "
                        f"(download_limit_mb): {member.name} ({member.size} bytes) and what "
                        "followed it were not kept")
            member.name = dst.name if len(parts) == 1 else f"{dst.name}/{parts[1]}"
            try:
                tar.extract(member, dst.parent, filter="data")
            except (tarfile.TarError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise  # the host's disk is full: not this member's fault
                log.warning("skipped %s while downloading %s: %s", member.name, src, exc)
                continue
            if member.isfile():
                kept += member.size
    return None


__all__ = ["add_tree", "extract", "tar_bytes", "tar_path"]
