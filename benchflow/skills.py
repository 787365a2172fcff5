"""Skills: folders with a `SKILL.md` (the Agent Skills layout) that agents discover.

A skill's name is its folder's name. Skills reach a rollout from four places, the more
specific winning a name clash: the task (`skills/` beside task.md or task.toml, or
Harbor's `environment.skills_dir`), the rollout (`--skill PATH`, a job's `skills:`), a
scene and a role. `resolve_layers` merges them; `benchflow.agents.skill_placement`
puts a step's skills where its agent looks for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchflow.errors import ConfigError

SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Skill:
    """One skill: its name (the folder's) and the host folder holding its `SKILL.md`."""

    name: str
    source: Path


def load_skill(path: Path) -> Skill:
    """The skill in folder `path`.

    Raises:
        ConfigError: `path` is not a folder with a SKILL.md, or its name is unusable.
    """
    folder = Path(path).expanduser().resolve()
    if not (folder / SKILL_FILE).is_file():
        raise ConfigError(f"skill {path}: no {SKILL_FILE} in that folder (a skill is a folder "
                          f"holding {SKILL_FILE}; pass the folder)")
    if not _NAME.match(folder.name):
        raise ConfigError(f"skill {path}: folder name {folder.name!r} is not a usable skill "
                          "name (letters, digits, '.', '_' and '-'); rename the folder")
    return Skill(name=folder.name, source=folder)


def discover_skills(path: Path) -> list[Skill]:
    """The skills under `path`: `path` itself when it holds a SKILL.md, else each
    subfolder that does (sorted by name). A missing folder has none.

    Raises:
        ConfigError: as `load_skill`.
    """
    folder = Path(path).expanduser()
    if (folder / SKILL_FILE).is_file():
        return [load_skill(folder)]
    if not folder.is_dir():
        return []
    return [load_skill(sub) for sub in sorted(folder.iterdir())
            if sub.is_dir() and (sub / SKILL_FILE).is_file()]


def skills_from_paths(paths: Iterable[Path]) -> list[Skill]:
    """Skills named by paths (a skill folder, or a folder of skills), in order.

    Raises:
        ConfigError: a path holds no skill at all, or as `load_skill`.
    """
    found: list[Skill] = []
    for path in paths:
        skills = discover_skills(path)
        if not skills:
            raise ConfigError(f"skill {path}: neither a skill folder (with {SKILL_FILE}) nor a "
                              f"folder of skill folders")
        found.extend(skills)
    return found


def resolve_layers(layers: Sequence[Iterable[Skill]]) -> dict[str, Skill]:
    """Merge skill layers, least specific first: a later layer's skill replaces an
    earlier one of the same name. Returns name -> skill, in first-seen order."""
    merged: dict[str, Skill] = {}
    for layer in layers:
        for skill in layer:
            merged[skill.name] = skill
    return merged


__all__ = ["SKILL_FILE", "Skill", "discover_skills", "load_skill", "resolve_layers",
           "skills_from_paths"]
