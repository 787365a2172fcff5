"""Which rollout folder of a jobs folder has a trace id (for `benchflow traces serve`).

A rollout's trace id is in its trajectory's header (written when the agent starts) and
in its result.json (written when it ends). The index reads each such file once (again
when it changed) and rescans the jobs folder when asked for an id it does not know,
at most every `rescan_sec`.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

_HEADERS = "*/*/*/*/trajectory/acp_trajectory.jsonl"
_RESULTS = "*/*/*/*/result.json"


def _trace_id_in(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            text = handle.readline() if path.suffix == ".jsonl" else handle.read(1 << 20)
        value = json.loads(text).get("trace_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


class JobsIndex:
    """trace id -> rollout folder, for every rollout under `jobs_dir`."""

    def __init__(self, jobs_dir: Path, rescan_sec: float = 0.25) -> None:
        self.jobs_dir = jobs_dir
        self.rescan_sec = rescan_sec
        self._seen: dict[Path, float] = {}
        self._folders: dict[str, Path] = {}
        self._last_scan = float("-inf")
        self._lock = threading.Lock()

    def scan(self) -> None:
        """Read the headers and results that are new or changed since the last scan."""
        with self._lock:
            self._last_scan = time.monotonic()
            for pattern, depth in ((_HEADERS, 1), (_RESULTS, 0)):
                for path in self.jobs_dir.glob(pattern):
                    try:
                        mtime = path.stat().st_mtime
                    except OSError:
                        continue
                    if self._seen.get(path) == mtime:
                        continue
                    self._seen[path] = mtime
                    trace_id = _trace_id_in(path)
                    if trace_id:
                        folder = path.parent
                        for _ in range(depth):
                            folder = folder.parent
                        self._folders[trace_id] = folder

    def __call__(self, trace_id: str) -> Path | None:
        """The folder of `trace_id`, rescanning once when it is not known yet."""
        folder = self._folders.get(trace_id)
        if folder is None and time.monotonic() - self._last_scan >= self.rescan_sec:
            self.scan()
            folder = self._folders.get(trace_id)
        return folder

    @property
    def trace_ids(self) -> dict[str, Path]:
        return dict(self._folders)


__all__ = ["JobsIndex"]
