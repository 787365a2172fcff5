"""`rollout.log`: each rollout's log records in its own folder, secrets masked.

Records are routed by a context variable set for the rollout's task (anyio copies the
context into child tasks), so concurrent rollouts of a job never mix their logs. One
router handler on the `benchflow` logger picks the current rollout's file handler, so a
record costs the same with 500 rollouts in flight as with one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path

from benchflow.rollout.secrets import REDACTED, host_secret_values

_current_rollout: ContextVar[str | None] = ContextVar("benchflow_rollout", default=None)
_filters: dict[str, _RolloutFilter] = {}
_handlers: dict[str, logging.Handler] = {}
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


class _RolloutRouter(logging.Handler):
    """Hands each record to the file handler of the rollout it was made in (if any)."""

    def handle(self, record: logging.LogRecord) -> bool:  # no lock needed: a dict lookup
        target = _handlers.get(_current_rollout.get() or "")
        if target is None or record.levelno < target.level:
            return False
        return bool(target.handle(record))

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover - handle() routes
        self.handle(record)


_ROUTER = _RolloutRouter()


def mask_in_rollout_log(values: Iterable[str]) -> None:
    """Mask these values too in the current rollout's log (e.g. env templates' host values)."""
    found = _filters.get(_current_rollout.get() or "")
    if found is not None:
        found.secrets = sorted({*found.secrets, *(v for v in values if v)}, key=len,
                               reverse=True)


@contextlib.contextmanager
def rollout_log(path: Path, rollout_name: str) -> Iterator[None]:
    """Send benchflow's log records made inside this context to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_FORMAT))
    rollout_filter = _RolloutFilter(rollout_name)
    handler.addFilter(rollout_filter)
    _filters[rollout_name] = rollout_filter
    _handlers[rollout_name] = handler
    logger = logging.getLogger("benchflow")
    if logger.getEffectiveLevel() > logging.INFO:  # rollout.log records INFO and up, always
        logger.setLevel(logging.INFO)
    if _ROUTER not in logger.handlers:
        logger.addHandler(_ROUTER)
    token = _current_rollout.set(rollout_name)
    try:
        yield
    finally:
        _current_rollout.reset(token)
        _filters.pop(rollout_name, None)
        _handlers.pop(rollout_name, None)
        if not _handlers:
            logger.removeHandler(_ROUTER)
        handler.close()
