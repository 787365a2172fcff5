"""`SnapshotGate`: calls run together, a snapshot runs alone (it waits for the calls in
flight; calls made meanwhile wait for it)."""

from __future__ import annotations

import anyio
import pytest

from benchflow.sandbox.snapshot_gate import SnapshotGate

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_calls_run_together():
    gate, inside = SnapshotGate(), []
    release = anyio.Event()

    async def call(i: int) -> None:
        async with gate:
            inside.append(i)
            await release.wait()

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(call, i)
        await anyio.wait_all_tasks_blocked()
        assert (sorted(inside), gate.calls) == ([0, 1, 2], 3)
        release.set()
    assert gate.calls == 0


async def test_a_snapshot_waits_for_the_calls_in_flight_and_holds_new_ones():
    gate, order = SnapshotGate(), []
    finish_call = anyio.Event()

    async def call(name: str, hold: anyio.Event | None = None) -> None:
        async with gate:
            order.append(f"{name} in")
            if hold is not None:
                await hold.wait()
            order.append(f"{name} out")

    async def snapshot() -> None:
        async with gate.snapshot():
            order.append("snapshot")

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "early", finish_call)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(snapshot)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(call, "late")
        await anyio.wait_all_tasks_blocked()
        assert order == ["early in"]  # the snapshot waits for it, the late call for both
        finish_call.set()
    assert order == ["early in", "early out", "snapshot", "late in", "late out"]


async def test_snapshots_take_turns_and_a_call_waits_for_both():
    gate, order = SnapshotGate(), []
    first_saved, second_saved = anyio.Event(), anyio.Event()

    async def snapshot(name: str, hold: anyio.Event) -> None:
        async with gate.snapshot():
            order.append(f"{name} in")
            await hold.wait()
            order.append(f"{name} out")

    async def call() -> None:
        async with gate:
            order.append("call")

    async with anyio.create_task_group() as tg:
        tg.start_soon(snapshot, "first", first_saved)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(snapshot, "second", second_saved)
        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        assert order == ["first in"]
        first_saved.set()
        await anyio.wait_all_tasks_blocked()
        assert order == ["first in", "first out", "second in"]  # the call still waits
        second_saved.set()
    assert order == ["first in", "first out", "second in", "second out", "call"]


async def test_a_snapshot_cancelled_while_it_waits_lets_the_calls_go_on():
    gate = SnapshotGate()
    finish_call, reached = anyio.Event(), []

    async def call(hold: anyio.Event | None = None) -> None:
        async with gate:
            reached.append(hold is None)
            if hold is not None:
                await hold.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, finish_call)
        await anyio.wait_all_tasks_blocked()
        waiting = anyio.CancelScope()

        async def snapshot() -> None:
            with waiting:
                async with gate.snapshot():
                    raise AssertionError("the snapshot ran inside a call")

        tg.start_soon(snapshot)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        assert reached == [False]  # the late call waits for the snapshot
        waiting.cancel()
        await anyio.wait_all_tasks_blocked()
        assert reached == [False, True]  # cancelled: the late call went on
        finish_call.set()
    assert gate.calls == 0
