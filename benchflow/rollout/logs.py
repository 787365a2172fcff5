"""`rollout.log`: each rollout's log records in its own folder, secrets masked.

Records are routed by a context variable set for the rollout's task (anyio copies the
context into child tasks), so concurrent rollouts of a job never mix their logs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from benchflow.rollout.secrets import REDACTED, host_secret_values

_current_rollout: ContextVar[str | None] = ContextVar("benchflow_rollout", default=None)
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _RolloutFilter(logging.Filter):
    def __init__(self, rollout_name: str) -> None:
        super().__init__()
        self.rollout_name = rollout_name
        self.secrets = host_secret_values()

    def filter(self, record: logging.LogRecord) -> bool:
        if _current_rollout.get() != self.rollout_name:
            return False
        message = record.getMessage()
        for secret in self.secrets:
            message = message.replace(secret, REDACTED)
        record.msg, record.args = message, None
        record.rollout_name = self.rollout_name
        return True


@contextlib.contextmanager
def rollout_log(path: Path, rollout_name: str) -> Iterator[None]:
    """Send benchflow's log records made inside this context to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_RolloutFilter(rollout_name))
    logger = logging.getLogger("benchflow")
    logger.addHandler(handler)
    token = _current_rollout.set(rollout_name)
    try:
        yield
    finally:
        _current_rollout.reset(token)
        logger.removeHandler(handler)
        handler.close()
