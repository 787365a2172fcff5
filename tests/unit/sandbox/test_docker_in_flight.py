"""A process exiting at once waits for its container requests under way, and starts none."""

from __future__ import annotations

import threading

import pytest

from benchflow.errors import SandboxStartError
from benchflow.sandbox.docker.errors import InFlight


def test_settle_waits_for_a_create_under_way_then_refuses_new_ones():
    gate, inside, answered = InFlight(), threading.Event(), threading.Event()
    release = threading.Event()

    def create() -> None:
        with gate.request(creates=True):
            inside.set()
            release.wait()
        answered.set()

    worker = threading.Thread(target=create)
    worker.start()
    inside.wait()
    assert gate.settle(0) is False  # the create is still under way
    settled: list[bool] = []
    waiter = threading.Thread(target=lambda: settled.append(gate.settle(60)))
    waiter.start()
    release.set()
    waiter.join()
    worker.join()
    assert answered.is_set() and settled == [True]
    with pytest.raises(SandboxStartError, match="exiting"), gate.request(creates=True):
        pass


def test_removals_still_run_after_settle_and_are_waited_for():
    gate = InFlight()
    gate.settle(0)
    with gate.request(creates=False):
        assert gate.settle(0) is False
    assert gate.settle(0) is True
