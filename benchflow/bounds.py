"""The documented range of every number benchflow reads from a job file, a task file or
a command-line flag (docs/reference/bounds.md). A value outside is bad input: exit 2 and
one line naming the file, the field and the range, before anything starts.

The upper bounds are far beyond any real run; they exist so that a typo (`n_attempts:
100000000`, a 401-digit `memory_mb`) is refused at once instead of exhausting the host.
"""

from __future__ import annotations

MAX_ATTEMPTS = 10_000
"""`n_attempts` / `-k`: attempts per (agent, task)."""
MAX_CONCURRENCY = 4_096
DEFAULT_CONCURRENCY = 4
"""Rollouts a job runs at once unless told (`n_concurrent_trials`, `-n`)."""
"""`n_concurrent_trials` / `-n`."""
MAX_TRIALS = 1_000_000
"""Trials in one job: agents x tasks x attempts."""
MAX_TIMEOUT_MULTIPLIER = 1_000.0
MAX_SECONDS = 7 * 24 * 3600
"""Any timeout, in seconds (one week)."""
MAX_CPUS = 1_024
MAX_MEMORY_MB = 16 * 1024 * 1024
"""16 TiB."""
MAX_STORAGE_MB = 1024 * 1024 * 1024
"""1 PiB."""
MAX_GPUS = 64
MIN_PIDS, MAX_PIDS = 16, 4_194_304
"""`pids_limit`: Linux's own maximum pid count is 4,194,304."""
MAX_RETRIES = 100
"""`retry.max_attempts` / `--max-retries`."""
MAX_DELAY_MS = 86_400_000
"""`retry.initial_delay_ms` and `retry.max_delay_ms` (one day)."""
MAX_BACKOFF_MULTIPLIER = 100.0
MAX_DOWNLOAD_MB = 1 << 20
"""`environment.max_download_mb` (1 TiB)."""
MAX_TASKS = 1_000_000
"""`max_tasks` / `--max-tasks`."""
MAX_TURNS = 10_000
"""The model agent's `max_turns`."""
MAX_WORKERS = 10_000
"""`ray_workers`."""
MAX_RESAMPLES = 1_000_000
"""`compare --resamples`: bootstrap resamples and permutation draws."""
MAX_SEED = 2**32 - 1
"""`compare --seed` (numpy's seed range)."""
MAX_PORT = 65_535
MAX_NODE_MAJOR = 1_000
"""agent.toml `install.node`: a Node.js major version."""

__all__ = ["DEFAULT_CONCURRENCY", "MAX_ATTEMPTS", "MAX_BACKOFF_MULTIPLIER", "MAX_CONCURRENCY", "MAX_CPUS",
           "MAX_DELAY_MS", "MAX_DOWNLOAD_MB", "MAX_GPUS", "MAX_MEMORY_MB", "MAX_PIDS",
           "MAX_NODE_MAJOR", "MAX_PORT", "MAX_RESAMPLES", "MAX_RETRIES",
           "MAX_SECONDS", "MAX_SEED", "MAX_STORAGE_MB", "MAX_TASKS", "MAX_TIMEOUT_MULTIPLIER",
           "MAX_TRIALS", "MAX_TURNS", "MAX_WORKERS", "MIN_PIDS"]
