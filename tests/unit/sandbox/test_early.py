"""`benchflow.sandbox.early`: a sandbox started on a thread before its rollout asks for it is
claimed by the rollout whose spec is the same (once), and removed when nobody claims it."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from benchflow.errors import SandboxStartError
from benchflow.sandbox import early, registry
from benchflow.sandbox.base import SandboxCapabilities
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.spec import SandboxSpec


class ThreadSandbox:
    """Records which thread started it; `gate` (when set) holds its start until released."""

    capabilities = SandboxCapabilities()
    backend = "early-fake"

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.started_on: str | None = None
        self.stops = 0
        self.entered = threading.Event()

    async def start(self) -> None:
        self.entered.set()
        if EarlyProvider.marks:
            early.backend_waits()  # what is left is the backend's wait
        if EarlyProvider.gate is not None:
            await anyio.to_thread.run_sync(EarlyProvider.gate.wait)
        if EarlyProvider.fail:
            raise SandboxStartError("docker API error: 500 Server Error: boom", transient=True)
        self.started_on = threading.current_thread().name

    async def stop(self, delete: bool = True) -> None:
        self.stops += 1


class EarlyProvider(SandboxProvider):
    name = "early-fake"
    capabilities = SandboxCapabilities()
    early_start = True
    gate: threading.Event | None = None
    fail = False
    marks = False
    made: list[ThreadSandbox] = []

    def create(self, spec: SandboxSpec) -> ThreadSandbox:
        box = ThreadSandbox(spec)
        EarlyProvider.made.append(box)
        return box

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        return []


class LateProvider(EarlyProvider):
    name = "late-fake"
    early_start = False


@pytest.fixture(autouse=True)
def providers(monkeypatch):
    for cls in (EarlyProvider, LateProvider):
        monkeypatch.setitem(registry.BUILTIN, cls.name, (f"{__name__}:{cls.__name__}", None))
    monkeypatch.setattr(EarlyProvider, "made", [])
    monkeypatch.setattr(EarlyProvider, "gate", None)
    monkeypatch.setattr(EarlyProvider, "fail", False)
    monkeypatch.setattr(EarlyProvider, "marks", False)
    yield
    early.discard_early()


SPEC = SandboxSpec(name="t", labels={"benchflow.job": "j", "benchflow.rollout": "r"})


def test_the_rollout_with_the_same_spec_claims_it_started_on_its_own_thread():
    started = early.start_early("early-fake", SPEC)
    assert started is not None
    claimed = early.claim_early("early-fake", SandboxSpec(**SPEC.model_dump()))
    assert claimed is started
    claimed.wait()
    assert claimed.sandbox.started_on == "benchflow-early-sandbox"
    assert early.claim_early("early-fake", SPEC) is None  # one rollout claims it, once
    early.discard_early()
    assert claimed.sandbox.stops == 0  # the rollout's now: its cleanup removes it


@pytest.mark.parametrize(("backend", "spec"), [
    ("early-fake", SPEC.model_copy(update={"labels": {"benchflow.rollout": "other"}})),
    ("late-fake", SPEC)])
def test_another_spec_or_backend_does_not_claim_it_and_the_end_removes_it(backend, spec):
    started = early.start_early("early-fake", SPEC)
    assert started is not None
    assert early.claim_early(backend, spec) is None
    early.discard_early()
    assert started.sandbox.started_on is not None and started.sandbox.stops == 1


def test_discard_waits_for_a_start_under_way_then_removes_it():
    EarlyProvider.gate = threading.Event()
    started = early.start_early("early-fake", SPEC)
    assert started is not None and started.sandbox.entered.wait(30)
    done = threading.Event()
    discarding = threading.Thread(target=lambda: (early.discard_early(), done.set()))
    discarding.start()
    assert started.sandbox.stops == 0  # not before the start has ended
    EarlyProvider.gate.set()
    discarding.join(30)
    assert done.is_set() and started.sandbox.stops == 1


def test_a_failed_start_raises_in_the_claiming_rollout_and_leaves_nothing_to_remove():
    EarlyProvider.fail = True
    started = early.start_early("early-fake", SPEC)
    assert started is not None
    with pytest.raises(SandboxStartError, match="boom"):
        started.wait()
    early.discard_early()
    assert started.sandbox.stops == 0


def test_backends_without_early_starts_compose_tasks_and_a_second_start_do_not_start():
    assert early.start_early("late-fake", SPEC) is None
    assert early.start_early("early-fake",
                             SPEC.model_copy(update={"compose_file": Path("compose.yaml")})) is None
    assert EarlyProvider.made == []
    assert early.start_early("early-fake", SPEC) is not None
    assert early.start_early("early-fake", SPEC) is None  # one pending at a time
    assert len(EarlyProvider.made) == 1


def test_the_caller_goes_on_once_the_backend_waits_not_before():
    EarlyProvider.gate, EarlyProvider.marks = threading.Event(), True
    started = early.start_early("early-fake", SPEC)
    assert started is not None
    started.until_backend_waits()  # returns while the start is still held at the gate
    assert started.sandbox.entered.is_set() and started.sandbox.started_on is None
    early.backend_waits()  # on another thread than an early start's: nothing happens
    EarlyProvider.gate.set()
    started.wait()
    assert started.sandbox.started_on == "benchflow-early-sandbox"


def test_a_start_that_never_says_it_waits_lets_the_caller_go_on_when_it_ends():
    EarlyProvider.fail = True
    started = early.start_early("early-fake", SPEC)
    assert started is not None
    started.until_backend_waits()  # the failed start ended: not stuck
    with pytest.raises(SandboxStartError):
        started.wait()
