"""Provider overhead: benchflow's own time in a hello-world oracle rollout, per backend,
against the time spent inside the backend's calls.

For each backend it runs N rollouts (image/snapshot cached by a warm-up rollout) and times
every call into the backend: Docker SDK calls for docker (`docker_call`), and for daytona
the SDK calls of the fake (`tests/fakes/daytona_sdk.py`, whose sandboxes are local
containers) with Daytona's documented latencies added: create from a snapshot ~1.5 s,
every other API round trip 50 ms; for modal the calls of its fake (`tests/fakes/modal_sdk.py`)
with the same latencies (create ~1.5 s, exec and file round trips 50 ms). benchflow's added
time is the wall time minus the time inside those calls; the target is < 10% of the
provider's.

    python labs/benchmarks/provider_overhead.py [--runs 5] [--backends docker,daytona,modal]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.fakes

from benchflow import RolloutConfig, Scene  # noqa: E402
from benchflow.rollout import Rollout  # noqa: E402

TASK = REPO / "tasks" / "hello-world"
DAYTONA_LATENCY = {"create": 1.5, "delete": 0.05, "process.exec": 0.05, "fs.upload_file": 0.05,
                   "fs.download_file": 0.05, "snapshot.get": 0.05, "sandbox.get_work_dir": 0.05}
MODAL_LATENCY = {"sandbox.create": 1.5, "sandbox.terminate": 0.05, "sandbox.exec": 0.05,
                 "filesystem.write_bytes": 0.05, "app.lookup": 0.05, "image.from_id": 0.05}
BUSY = [0.0]


def _timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            BUSY[0] += time.perf_counter() - started
    return wrapper


def instrument(backend: str) -> dict[str, Any]:
    """Wrap the backend's calls with timers; returns the provider_config to use."""
    if backend == "docker":
        import benchflow.sandbox.docker.sandbox as docker_backend

        docker_backend.docker_call = _timed(docker_backend.docker_call)
        return {}
    if backend == "modal":
        return instrument_modal()
    from tests.fakes import daytona_sdk as fake

    fake.FakeAsyncDaytona.latency_sec.update(DAYTONA_LATENCY)
    for cls, names in ((fake.FakeAsyncDaytona, ("create", "delete")), (fake.FakeProcess, ("exec",)),
                       (fake.FakeFileSystem, ("upload_file", "download_file")),
                       (fake.FakeSnapshotService, ("get", "create")),
                       (fake.FakeSandbox, ("get_work_dir",))):
        for name in names:
            setattr(cls, name, _timed(getattr(cls, name)))
    return {"client_factory": "tests.fakes.daytona_sdk:FakeAsyncDaytona"}


def instrument_modal() -> dict[str, Any]:
    """Time the modal fake's API calls (an exec's output streams while `wait` runs, so an
    exec is its start plus its `wait`)."""
    from tests.fakes import modal_sdk as fake

    fake.Sandbox.latency_sec.update(MODAL_LATENCY)
    for cls, names in ((fake.Sandbox, ("create", "exec", "terminate", "snapshot_filesystem")),
                       (fake.App, ("lookup",)), (fake.Image, ("from_id",)),
                       (fake.SandboxFilesystem, ("write_bytes", "read_bytes")),
                       (fake.ContainerProcess, ("wait",))):
        for name in names:
            wrapped = vars(cls)[name].fn
            raw = _timed(getattr(wrapped, "__func__", wrapped))
            kind = type(wrapped) if isinstance(wrapped, (staticmethod, classmethod)) else None
            setattr(cls, name, fake._Aio(kind(raw) if kind else raw))
    return dict(fake.PROVIDER_CONFIG)


async def rollout_once(backend: str, provider_config: dict[str, Any], jobs_dir: Path,
                       i: int) -> tuple[float, float]:
    config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="oracle")],
                           environment=backend, provider_config=provider_config,
                           jobs_dir=jobs_dir, job_name=f"bench-{backend}", attempt=i + 1)
    BUSY[0] = 0.0
    started = time.perf_counter()
    result = await Rollout(config).run()
    wall = time.perf_counter() - started
    assert result.reward == 1.0, result.error
    return wall, BUSY[0]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backends", default="docker,daytona,modal")
    args = parser.parse_args()
    print(f"{'backend':<9} {'wall s':>8} {'provider s':>11} {'benchflow s':>12} {'overhead':>9}")
    for backend in args.backends.split(","):
        provider_config = instrument(backend)
        with tempfile.TemporaryDirectory() as tmp:
            await rollout_once(backend, provider_config, Path(tmp), 0)  # warm-up: image cached
            runs = [await rollout_once(backend, provider_config, Path(tmp), i + 1)
                    for i in range(args.runs)]
        wall = statistics.median(w for w, _ in runs)
        busy = statistics.median(b for _, b in runs)
        added = statistics.median(w - b for w, b in runs)
        print(f"{backend:<9} {wall:8.3f} {busy:11.3f} {added:12.3f} {added / busy:9.1%}")


if __name__ == "__main__":
    anyio.run(main)
