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


def test_job_gc_makes_full_collections_rarer_and_freezes_what_existed_then_undoes_it():
    import gc

    from benchflow.job.limits import _DEFAULT_THRESHOLDS, JOB_GC_THRESHOLDS, job_gc

    before = gc.get_threshold()
    gc.set_threshold(*_DEFAULT_THRESHOLDS)
    gc.unfreeze()
    try:
        with job_gc():
            assert gc.get_threshold() == JOB_GC_THRESHOLDS
            assert gc.get_freeze_count() > 0
            with job_gc():  # a second job in the same process
                pass
            assert gc.get_threshold() == JOB_GC_THRESHOLDS  # the first is still running
            assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == _DEFAULT_THRESHOLDS
        assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*before)


def test_the_collector_left_untuned_is_this_interpreters_default():
    # 3.13 raised CPython's first threshold from 700 to 2000: a job there was left untuned
    import subprocess
    import sys

    from benchflow.job.limits import _DEFAULT_THRESHOLDS

    out = subprocess.run([sys.executable, "-c", "import gc; print(gc.get_threshold())"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(_DEFAULT_THRESHOLDS)


def test_job_gc_leaves_a_collector_the_process_tuned_itself():
    import gc

    from benchflow.job.limits import job_gc

    before = gc.get_threshold()
    gc.set_threshold(5000, 20, 20)
    try:
        with job_gc():
            assert gc.get_threshold() == (5000, 20, 20)
            assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == (5000, 20, 20)
    finally:
        gc.set_threshold(*before)


def test_a_job_after_frozen_imports_does_not_walk_the_frozen_objects(monkeypatch):
    import gc

    from benchflow.job import limits

    def walked() -> int:
        raise AssertionError("gc.get_freeze_count() walks every frozen object")

    before = gc.get_threshold()
    gc.set_threshold(*limits._DEFAULT_THRESHOLDS)
    monkeypatch.setattr(limits, "_imports_frozen", True)
    monkeypatch.setattr(gc, "get_freeze_count", walked)
    try:
        with limits.job_gc():
            assert gc.get_threshold() == limits.JOB_GC_THRESHOLDS  # still tuned
        assert gc.get_threshold() == limits._DEFAULT_THRESHOLDS
    finally:
        gc.set_threshold(*before)
