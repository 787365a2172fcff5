"""Discovering agents: packaged manifests, `BENCHFLOW_AGENTS_PATH`, and entry points.

Where agents come from, first match wins by name or alias:

1. every folder on `BENCHFLOW_AGENTS_PATH` (a folder with an `agent.toml`, or a folder of
   such folders), so a user's manifest can replace a packaged one;
2. entry points in the group `benchflow.agents`: each loads to an `AgentManifest`, a path
   (as in 1), or a driver class/factory (any object with `install` and `connect`), which
   is registered under the entry point's name;
3. the manifests shipped with benchflow: the source tree's `agents/` folder, or the
   wheel's `benchflow/_agents`.

A manifest that fails to load is reported (`AgentCatalog.errors`, `benchflow agents list`)
and does not hide the others.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchflow.agents.manifest import MANIFEST_FILE, AgentManifest, load_manifest
from benchflow.errors import ConfigError
from benchflow.settings import Settings, agents_path

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "benchflow.agents"
DriverFactory = Callable[[], Any]


def packaged_agents_dir() -> Path | None:
    """The manifests shipped with benchflow: the wheel's `_agents`, else the source tree's."""
    package = Path(__file__).resolve().parents[1]  # benchflow/
    for folder in (package / "_agents", package.parent / "agents"):
        if folder.is_dir() and any(folder.glob(f"*/{MANIFEST_FILE}")):
            return folder
    return None


@dataclass
class AgentCatalog:
    """Every agent found, by canonical name; `resolve()` also accepts aliases."""

    manifests: dict[str, AgentManifest] = field(default_factory=dict)
    factories: dict[str, DriverFactory] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Where a manifest or plugin failed to load -> the message (which names it)."""

    def names(self) -> list[str]:
        return sorted({*self.manifests, *self.factories})

    def resolve(self, name: str) -> str | None:
        """The canonical name for `name` (a name or an alias), or None."""
        if name in self.manifests or name in self.factories:
            return name
        return self.aliases.get(name)

    def manifest(self, name: str) -> AgentManifest:
        """The manifest of `name` or an alias.

        Raises:
            ConfigError: no such manifest; the message lists every known agent and any
                manifest that failed to load.
        """
        canonical = self.resolve(name)
        if canonical is not None and canonical in self.manifests:
            return self.manifests[canonical]
        raise ConfigError(self.unknown_message(name))

    def unknown_message(self, name: str, extra: list[str] | None = None) -> str:
        known = sorted({*(extra or []), *self.names()})
        message = f"unknown agent {name!r}; known agents: {', '.join(known) or '(none)'}"
        if self.errors:
            broken = "; ".join(self.errors.values())
            message += f" (manifests that failed to load: {broken})"
        return message

    def _add_manifest(self, manifest: AgentManifest, source: str) -> None:
        if self.resolve(manifest.name) is not None:
            log.debug("agent %s from %s is shadowed by %s", manifest.name, source,
                      self.sources[self.resolve(manifest.name) or manifest.name])
            return
        self.manifests[manifest.name] = manifest
        self.sources[manifest.name] = source
        for alias in manifest.aliases:
            self.aliases.setdefault(alias, manifest.name)

    def _add_folder(self, folder: Path, source: str) -> None:
        folder = folder.expanduser()
        if (folder / MANIFEST_FILE).is_file():
            candidates = [folder / MANIFEST_FILE]
        elif folder.is_dir():
            candidates = sorted(folder.glob(f"*/{MANIFEST_FILE}"))
        else:
            self.errors[str(folder)] = f"{folder}: not a folder"
            return
        for path in candidates:
            try:
                self._add_manifest(load_manifest(path), f"{source}: {path.parent}")
            except ConfigError as exc:
                self.errors[str(path)] = str(exc)

    def _add_entry_point(self, ep: importlib.metadata.EntryPoint) -> None:
        where = f"entry point {ep.name} ({ep.value})"
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the others
            self.errors[where] = f"{where}: cannot load: {exc!r}"
            return
        if isinstance(obj, AgentManifest):
            self._add_manifest(obj, where)
        elif isinstance(obj, str | Path):
            self._add_folder(Path(obj), where)
        elif callable(obj):
            if self.resolve(ep.name) is None:
                self.factories[ep.name] = obj
                self.sources[ep.name] = where
        else:
            self.errors[where] = (f"{where}: loads a {type(obj).__name__}; expected an "
                                  "AgentManifest, a manifest folder path, or a driver factory")


@functools.cache
def _plugins() -> tuple[importlib.metadata.EntryPoint, ...]:
    """The group's entry points, once per process: scanning the installed packages cost
    more than the rest of a rollout's orchestration."""
    return tuple(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_catalog(settings: Settings | None = None) -> AgentCatalog:
    """Find every agent (see the module docstring for the order). Never raises for a bad
    manifest: those go to `errors`."""
    catalog = AgentCatalog()
    for folder in settings.agents_path if settings is not None else agents_path():
        catalog._add_folder(folder, "BENCHFLOW_AGENTS_PATH")
    for ep in _plugins():
        catalog._add_entry_point(ep)
    packaged = _packaged()
    for name, manifest in packaged.manifests.items():
        catalog._add_manifest(manifest, packaged.sources[name])
    catalog.errors.update(packaged.errors)
    return catalog


@functools.cache
def _packaged() -> AgentCatalog:
    """The manifests shipped with benchflow, read once per process (the installation does
    not change under it; every rollout looks its agents' default models up)."""
    catalog = AgentCatalog()
    folder = packaged_agents_dir()
    if folder is not None:
        catalog._add_folder(folder, "benchflow")
    return catalog


def get_manifest(name: str) -> AgentManifest:
    """The manifest named `name` (or aliased so). Raises ConfigError listing the known agents."""
    return load_catalog().manifest(name)


__all__ = [
    "ENTRY_POINT_GROUP",
    "AgentCatalog",
    "get_manifest",
    "load_catalog",
    "packaged_agents_dir",
]
