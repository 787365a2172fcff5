"""Tar archives for moving files in and out of sandboxes (shared by every backend)."""

from __future__ import annotations

import io
import logging
import tarfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

log = logging.getLogger(__name__)


def tar_bytes(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """A tar of `{path: (data, mode)}`; a path ending in "/" is a directory."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
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


def tar_path(src: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(src, arcname=arcname.lstrip("/"))
    return buf.getvalue()


def extract(chunks: Iterator[bytes], src: str, dst: Path) -> None:
    """Extract a get_archive stream of `src` to `dst` (safely: the sandbox is untrusted)."""
    data = b"".join(chunks)
    root = Path(src.rstrip("/")).name or "root"
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            if parts[0] != root:
                continue
            member.name = dst.name if len(parts) == 1 else f"{dst.name}/{parts[1]}"
            try:
                tar.extract(member, dst.parent, filter="data")
            except (tarfile.TarError, OSError) as exc:
                log.warning("skipped %s while downloading %s: %s", member.name, src, exc)




__all__ = ["extract", "tar_bytes", "tar_path"]
