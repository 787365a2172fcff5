"""Studies in the viewer: the root itself may be a study folder (its arms are its jobs),
or hold study folders, each served under `/studies/<name>/` as a viewer of its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from benchflow.study.record import RECORD, StudyRecord


@dataclass(frozen=True)
class StudyInfo:
    """A study folder: its name, baseline and arms (name -> job folder)."""

    name: str
    baseline: str
    arms: dict[str, str]
    running: bool


def study_of(folder: Path) -> StudyInfo | None:
    """The study `folder` holds (its study.json), or None."""
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        record = StudyRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    running = any(not (folder / arm.job / "result.json").is_file() for arm in record.arms)
    return StudyInfo(record.name, record.baseline, {a.name: a.job for a in record.arms},
                     running)


def studies_in(root: Path) -> list[StudyInfo]:
    """The study folders directly under `root`, by name."""
    if not root.is_dir():
        return []
    found = [study_of(p) for p in sorted(root.iterdir()) if p.is_dir()]
    return [s for s in found if s is not None]


__all__ = ["StudyInfo", "studies_in", "study_of"]
