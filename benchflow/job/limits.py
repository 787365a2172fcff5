"""Process limits a big job needs: enough file descriptors for its rollouts in flight."""

from __future__ import annotations

import logging

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
