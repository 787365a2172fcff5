"""The sandbox meter: lifetime x resources x rates, on a fake clock."""

from __future__ import annotations

from benchflow.sandbox.cost import Rates, SandboxMeter, sandbox_cost
from benchflow.sandbox.daytona.config import DaytonaConfig
from benchflow.sandbox.daytona.sandbox import DaytonaSandbox
from benchflow.sandbox.modal.config import ModalConfig
from benchflow.sandbox.modal.sandbox import ModalSandbox
from benchflow.sandbox.spec import SandboxSpec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_meter_prices_the_lifetime_only():
    clock = Clock()
    meter = SandboxMeter(Rates(cpu_hour=0.1, gib_hour=0.02, disk_gib_hour=0.001), cpus=2,
                         memory_mb=4096, storage_mb=10240, clock=clock)
    assert meter.cost_usd is None  # never started
    meter.start()
    clock.now += 1800  # half an hour
    assert meter.cost_usd == round(0.5 * (2 * 0.1 + 4 * 0.02 + 10 * 0.001), 8)
    meter.stop()
    clock.now += 3600  # deleted: no longer billed
    assert meter.seconds == 1800
    meter.stop()  # idempotent
    assert meter.seconds == 1800


def test_cloud_backends_report_a_cost_docker_does_not():
    spec = SandboxSpec(name="t", cpus=1, memory_mb=1024)
    modal = ModalSandbox(spec, ModalConfig(price_per_cpu_hour=1.0, price_per_gib_hour=1.0))
    daytona = DaytonaSandbox(spec, DaytonaConfig())
    for box in (modal, daytona):
        clock = Clock()
        box.meter.clock = clock
        assert sandbox_cost(box) is None
        box.meter.start()
        clock.now += 3600
        assert sandbox_cost(box) is not None and sandbox_cost(box) > 0
    assert sandbox_cost(modal) == 2.0  # one core and one GiB for an hour at 1 USD each
    assert sandbox_cost(None) is None
