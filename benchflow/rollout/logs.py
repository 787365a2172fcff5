"""`rollout.log`: each rollout's log records in its own folder, secrets masked.

Records are routed by a context variable set for the rollout's task (anyio copies the
context into child tasks), so concurrent rollouts of a job never mix their logs. One
router handler on the `benchflow` logger picks the current rollout's file handler, so a
record costs the same with 500 rollouts in flight as with one; a background thread writes
the lines (`RolloutLogFile`), so logging never makes the event loop wait on a disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path

from benchflow.rollout.secrets import REDACTED, host_secret_values

_current_rollout: ContextVar[str | None] = ContextVar("benchflow_rollout", default=None)
_filters: dict[str, _RolloutFilter] = {}
_handlers: dict[str, logging.Handler] = {}
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_APPEND = (os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
           | getattr(os, "O_BINARY", 0))


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


_FORMATTER = logging.Formatter(_FORMAT)
"""Shared by every rollout's handler (a Formatter holds no per-file state)."""


class RolloutLogFile(logging.Handler):
    """A rollout's `rollout.log`. A record is formatted where it is made and queued; one
    background thread writes and flushes the queued lines of every rollout a few times a
    second. The event loop never waits on the disk and never wakes a thread per record
    (hundreds of rollouts log at once), and a crashed run loses at most the last
    `FLUSH_INTERVAL_SEC` of its log.

    Opening makes the folder and the file, and `close()` writes what is queued: both
    block, so a job calls them in a worker thread.
    """

    def __init__(self, path: Path, *, make_parent: bool = True) -> None:
        super().__init__(logging.INFO)
        if make_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # a bare descriptor: one system call to open, one to write a batch (a buffered text
        # file asks fstat, isatty and the position too, each a GIL hand-off in a worker)
        self._fd: int | None = os.open(path, _APPEND, 0o666)
        self._queued: deque[str] = deque()
        self._write_lock = threading.Lock()
        self.setFormatter(_FORMATTER)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
        except Exception:  # noqa: BLE001 - logging's own convention: report, never raise
            self.handleError(record)
            return
        self._queued.append(line)  # thread-safe (deque): no lock on the hot path
        _Flusher.dirty.add(self)
        _Flusher.ensure_running()

    def write_queued(self) -> None:
        """Write and flush the lines queued so far (the flusher thread, and `close`)."""
        with self._write_lock:
            if self._fd is None or not self._queued:
                return
            lines = []
            with contextlib.suppress(IndexError):
                while True:  # popleft, not a swap: a line appended meanwhile is not lost
                    lines.append(self._queued.popleft())
            view = memoryview("".join(lines).encode("utf-8"))
            while view:  # all of it but on a full disk (raised)
                view = view[os.write(self._fd, view):]

    def close(self) -> None:
        """Write what is queued, then close the file (idempotent; blocks). On a full disk the
        file is closed anyway and the OSError raised."""
        try:
            self.write_queued()
        finally:
            _Flusher.dirty.discard(self)
            with self._write_lock:
                fd, self._fd = self._fd, None
            try:
                if fd is not None:
                    os.close(fd)  # frees the descriptor even when it raises
            finally:
                super().close()


FLUSH_INTERVAL_SEC = 0.2


class _Flusher:
    """The daemon thread that writes queued rollout.log lines every `FLUSH_INTERVAL_SEC`."""

    dirty: set[RolloutLogFile] = set()
    _thread: threading.Thread | None = None
    _start_lock = threading.Lock()

    @classmethod
    def ensure_running(cls) -> None:
        if cls._thread is None or not cls._thread.is_alive():
            with cls._start_lock:
                if cls._thread is None or not cls._thread.is_alive():
                    cls._thread = threading.Thread(target=cls._run, daemon=True,
                                                   name="benchflow-rollout-log")
                    cls._thread.start()

    @classmethod
    def _run(cls) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_SEC)
            while cls.dirty:
                handler = cls.dirty.pop()
                try:
                    handler.write_queued()
                except (OSError, ValueError):  # a full disk, a file closed meanwhile
                    pass


@contextlib.contextmanager
def rollout_log(handler: RolloutLogFile, rollout_name: str) -> Iterator[None]:
    """Send benchflow's log records made inside this context to `handler`; the caller
    closes it (`await anyio.to_thread.run_sync(handler.close)`)."""
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
