"""The open-files limit is raised for big jobs (a default soft limit of 1024 would run
out at ~300 rollouts in flight)."""

from __future__ import annotations

import resource

from benchflow.job.limits import FDS_PER_ROLLOUT, ensure_fd_limit


def test_the_soft_limit_is_raised_up_to_the_hard_limit(monkeypatch):
    calls = []
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    monkeypatch.setattr(resource, "setrlimit", lambda _, value: calls.append(value))
    assert ensure_fd_limit(10) == 1024 and calls == []  # enough already
    assert ensure_fd_limit(300) == 300 * FDS_PER_ROLLOUT + 256
    assert calls == [(300 * FDS_PER_ROLLOUT + 256, 4096)]
    assert ensure_fd_limit(5000) == 4096  # capped by the hard limit (and warned)
