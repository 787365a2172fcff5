"""Which paths of a compose service `main` can write too: the volumes and host folders the
project (as `docker compose config --format json` resolves it) mounts in both.

A file taken from a sidecar is evidence the agent cannot forge only when the agent's
container cannot write it: a named volume, a host folder (or one above or below it) or a
`volumes_from` shared with `main`, writable there, is a way in.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

MAIN = "main"


@dataclass(frozen=True)
class _Mount:
    kind: str
    """`volume` (named), `bind` (a host folder), `anonymous` (a volume without a name)."""
    source: str
    """The volume's name, the host folder, or for an anonymous one `<service>:<target>`."""
    target: str
    writable: bool


def _under(path: str, folder: str) -> bool:
    path, folder = posixpath.normpath(path), posixpath.normpath(folder)
    return path == folder or folder == "/" or path.startswith(folder + "/")


def _own_mounts(service: str, spec: dict[str, Any]) -> list[_Mount]:
    mounts = []
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, dict) or volume.get("type") not in ("volume", "bind"):
            continue  # tmpfs and the like belong to one container
        target = str(volume.get("target", ""))
        source = str(volume.get("source") or "")
        kind = volume["type"] if source else "anonymous"
        mounts.append(_Mount(kind, source or f"{service}:{target}", target,
                             not volume.get("read_only", False)))
    return mounts


def _mounts(project: dict[str, Any], service: str) -> list[_Mount]:
    """The service's mounts, with those it takes from other services (`volumes_from`)."""
    services = project.get("services") or {}
    spec = services.get(service) or {}
    mounts = _own_mounts(service, spec)
    for entry in spec.get("volumes_from") or ():
        name, _, mode = str(entry).partition(":")
        if name == "container" or name not in services:
            continue  # another container than the project's: nothing to compare
        read_only = mode == "ro"
        mounts += [_Mount(m.kind, m.source, m.target, m.writable and not read_only)
                   for m in _own_mounts(name, services[name])]
    return mounts


def main_can_write(project: dict[str, Any], service: str, path: str) -> str | None:
    """Why `main` can write `path` of `service` (None when it cannot through a mount)."""
    if service == MAIN:
        return "it is in main"
    main = [m for m in _mounts(project, MAIN) if m.writable]
    for mount in _mounts(project, service):
        if not _under(path, mount.target):
            continue
        here = posixpath.join(mount.source, posixpath.relpath(path, mount.target))
        for other in main:
            if other.kind != mount.kind:
                continue
            same = (_under(here, other.source) or _under(other.source, here)
                    if mount.kind == "bind" else other.source == mount.source)
            if same:
                what = {"bind": "host folder", "volume": "volume",
                        "anonymous": "volume"}[mount.kind]
                return (f"{what} {mount.source!r} (at {mount.target} in {service!r}) is "
                        f"writable in main at {other.target}")
    return None


__all__ = ["main_can_write"]
