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


class _Api:
    """`exec_inspect` answers in turn, per exec (the last one repeats)."""

    def __init__(self, answers: dict[str, list[object]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def exec_inspect(self, exec_id: str) -> dict[str, object]:
        self.asked.append(exec_id)
        queue = self.answers[exec_id]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, dict)
        return answer


def test_wait_started_waits_for_a_pid_or_the_end():
    import docker.errors

    from benchflow.sandbox.docker.process import wait_started

    starting = {"Running": True, "Pid": 0}
    api = _Api({"a": [starting, starting, {"Running": True, "Pid": 42}],
                "ended": [{"Running": False, "Pid": 0, "ExitCode": 0}],
                "gone": [docker.errors.NotFound("no such exec")]})
    wait_started(api, ["a", "ended", "gone"])
    assert api.asked == ["a", "a", "a", "ended", "gone"]


def test_wait_started_gives_up_on_an_exec_that_never_starts():
    from benchflow.errors import SandboxExecError
    from benchflow.sandbox.docker.process import wait_started

    api = _Api({"stuck": [{"Running": True, "Pid": 0}]})
    with pytest.raises(SandboxExecError, match="did not start") as caught:
        wait_started(api, ["stuck"], timeout_sec=0)  # the deadline has passed at once
    assert caught.value.transient
