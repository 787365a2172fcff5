"""Names of saved Modal snapshots (the agent install cache): `name -> image id`.

`snapshot_filesystem` returns an image id (`im-...`) but Modal has no image names, so the
mapping lives in benchflow's cache folder (`<cache_dir>/modal/snapshots.json`, one section
per SDK module and app). A stale entry (the image expired) is dropped when Modal says so.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from benchflow.sandbox.modal.config import ModalConfig
from benchflow.settings import get_settings

_lock = threading.Lock()


class SnapshotIndex:
    """The snapshot names of one app, in a JSON file shared by every process."""

    def __init__(self, config: ModalConfig, path: Path | None = None) -> None:
        self.path = path or get_settings().cache_dir / "modal" / "snapshots.json"
        self.section = f"{config.sdk_module}:{config.app_name}"

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _store(self, data: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)

    def get(self, name: str) -> str | None:
        """The image id saved as `name`, if any."""
        value = self._load().get(self.section, {}).get(name)
        return value if isinstance(value, str) else None

    def put(self, name: str, image_id: str) -> None:
        with _lock:
            data = self._load()
            data.setdefault(self.section, {})[name] = image_id
            self._store(data)

    def forget(self, name: str) -> None:
        with _lock:
            data = self._load()
            if data.get(self.section, {}).pop(name, None) is not None:
                self._store(data)


__all__ = ["SnapshotIndex"]
