"""Process settings a big job needs: enough file descriptors for its rollouts in flight,
and a garbage collector that does not keep stopping the event loop while they run."""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
from collections.abc import Iterator

log = logging.getLogger(__name__)

FDS_PER_ROLLOUT = 8
"""A rollout in flight holds about 3 (its log, trajectory and an agent's stderr file) plus
the backend's sockets; 8 leaves room."""


def ensure_fd_limit(concurrency: int) -> int:
    """Raise the soft limit on open files (up to the hard limit) so `concurrency` rollouts
    fit; many systems start at 1024. Returns the soft limit now in force."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = concurrency * FDS_PER_ROLLOUT + 256
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        log.info("raised the open-files limit from %d to %d for %d rollouts at once",
                 soft, target, concurrency)
    if target < wanted:
        log.warning("the open-files limit (hard %d) may be too low for %d rollouts at once: "
                    "raise it (ulimit -Hn) or lower the concurrency", hard, concurrency)
    return target


_DEFAULT_THRESHOLDS = (2000, 10, 10) if sys.version_info >= (3, 13) else (700, 10, 10)
"""CPython's own (3.13 raised the first from 700): a full collection every 10 collections
of the middle generation. Other thresholds are a process's own tuning, left as they are."""
JOB_GC_THRESHOLDS = (10_000, 10, 100)
"""During a job: a young collection once 10,000 objects more are alive, not 700 (a rollout
in flight keeps ~500 alive, so 1,000 starting together made ~800 young collections, each
walking objects that mostly die with their rollout a few seconds later: ~1 ms of CPU per
rollout, halved so), and a full collection every 100 middle ones (and still only once a
quarter of the old objects is new, as always)."""
_jobs_running = 0
_tuned = False
_froze = False
_imports_frozen = False
"""Set by `imports_gc_paused`: the process froze its imports, so a job freezes nothing more
(and never asks `gc.get_freeze_count()`, which walks every frozen object: ~20 ms)."""


@contextlib.contextmanager
def imports_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a command's modules are imported, then
    freeze what exists (the modules, classes and schemas, alive until the process ends).

    Importing benchflow, pydantic and the Docker SDK makes hundreds of thousands of
    long-lived objects: the collector would walk them during the imports and in every
    full collection after, and find nothing to free (~40 ms of a one-task run). Reference
    counting frees everything as usual; the collector is back on for what comes next.
    Only for a console entry point: `gc.freeze` is process-wide.
    """
    global _imports_frozen
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        _imports_frozen = True
        if enabled:
            gc.enable()


@contextlib.contextmanager
def job_gc() -> Iterator[None]:
    """Fewer and shorter full garbage collections while jobs run in this process.

    A full collection walks every tracked object, and 500 rollouts in flight hold about
    300,000 of them: each one stopped the event loop for 200-300 ms, every few seconds
    (`labs/benchmarks/scale.py`). Inside this context the objects that existed
    before the first job (imports, loaded tasks) are frozen out of collections
    (`gc.freeze`, unless `imports_gc_paused` froze the imports already), young
    collections wait for 10,000 new objects and full ones are ten times rarer
    (`JOB_GC_THRESHOLDS`); both are undone when the last job ends. A process
    that tuned its collector itself (thresholds changed, objects frozen, collection
    disabled) is left as it is.
    """
    global _jobs_running, _tuned, _froze
    if _jobs_running == 0 and gc.isenabled() and gc.get_threshold() == _DEFAULT_THRESHOLDS:
        gc.set_threshold(*JOB_GC_THRESHOLDS)
        _tuned = True
        if not _imports_frozen and gc.get_freeze_count() == 0:
            gc.freeze()
            _froze = True
    _jobs_running += 1
    try:
        yield
    finally:
        _jobs_running -= 1
        if _jobs_running == 0:
            if _tuned and gc.get_threshold() == JOB_GC_THRESHOLDS:
                gc.set_threshold(*_DEFAULT_THRESHOLDS)
            if _froze:
                gc.unfreeze()
            _tuned = _froze = False
