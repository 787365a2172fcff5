"""`sandboxes.jsonl` in the job folder: every cloud sandbox a job made, so none is lost.

A backend appends one line before it asks for a sandbox (`creating`, with the labels it
sends), one when it has the id (`created`) and one when it is gone (`deleted`). After a
crash, `benchflow sandbox cleanup --env NAME --job JOB` deletes what the provider still
lists under the job's labels; the ledger tells what was ever made and what is accounted for.
"""

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from benchflow._models import FrozenModel

LEDGER_NAME = "sandboxes.jsonl"
_lock = threading.Lock()


class LedgerEntry(FrozenModel):
    """One line of the ledger."""

    event: Literal["creating", "created", "deleted", "duplicate_deleted"]
    provider: str
    rollout: str
    sandbox_id: str | None = None
    create_token: str


def record(path: Path | None, entry: LedgerEntry) -> None:
    """Append `entry` (and flush) when the rollout has a ledger; a no-op otherwise."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock, path.open("a", encoding="utf-8") as fh:
        fh.write(entry.model_dump_json() + "\n")
        fh.flush()


def read(path: Path) -> Iterator[LedgerEntry]:
    """Every entry of the ledger at `path` (a torn last line is skipped)."""
    if not path.is_file():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            yield LedgerEntry.model_validate(json.loads(line))
        except (ValueError, TypeError):
            continue


def unaccounted(path: Path, provider: str | None = None) -> list[str]:
    """Ids created (by `provider`, if given) and never recorded as deleted."""
    alive: dict[str, None] = {}
    for entry in read(path):
        if entry.sandbox_id is None or (provider is not None and entry.provider != provider):
            continue
        if entry.event == "created":
            alive[entry.sandbox_id] = None
        else:
            alive.pop(entry.sandbox_id, None)
    return list(alive)


__all__ = ["LEDGER_NAME", "LedgerEntry", "read", "record", "unaccounted"]
