"""ACP throughput: session updates per second through benchflow's client and trajectory writer.

The scripted ACP agent streams N small `agent_message_chunk` updates (`u0\\n`, `u1\\n`, ...)
in one turn, as fast as it can. benchflow reads them from the agent's stdout, numbers
each one, converts it to a trajectory event and appends it to `acp_trajectory.jsonl`.
The rate is N / (time of the prompt); benchflow's CPU time per update is printed too, as
it does not depend on how busy the machine is (the agent shares the CPUs). Memory is
sampled while the stream runs: it must stay flat (updates are streamed to the file, never
accumulated; the few MiB of growth are the turn's agent text that `PromptOutcome` keeps,
bounded at 1-2 million characters).

Two paths:
  local   the agent is a host subprocess (tests/fakes/local_sandbox.py): client + writer
          with no container in between;
  docker  the agent runs in a real DockerSandbox (the coder-reviewer image, installed by
          the manifest driver) and its stdout comes through the Docker exec stream.

Afterwards every trajectory is re-read (streaming) to check all N updates were recorded,
in order, with strictly increasing `seq`. Target: at least 20,000 updates/s.

    python labs/benchmarks/acp_throughput.py [--updates 100000] [--repeat 3] [--path local|docker|both]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for tests.fakes.local_sandbox

from benchflow.acp import AcpSession, AcpTimeouts
from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.base import AgentContext
from benchflow.agents.catalog import get_manifest
from benchflow.config import Role
from benchflow.paths import RolloutPaths
from benchflow.sandbox.docker import LABEL_JOB, DockerSandbox, preflight
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.steps import Step
from benchflow.task import load_task
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter
from tests.fakes.local_sandbox import LocalSandbox

AGENT = REPO / "agents" / "scripted" / "agent.py"
TASK = REPO / "tasks" / "coder-reviewer"  # debian + python3: what the scripted agent needs
TARGET_PER_SEC = 20_000
MB = 1024 * 1024


def rss_bytes() -> int:
    """This process's resident set size now (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


@dataclass
class Measure:
    """One run: rate, and RSS sampled against the number of updates recorded so far."""

    path: str
    n: int
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time during the prompt
    samples: list[tuple[int, int]] = field(default_factory=list)  # (events written, rss)

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds else 0.0

    def rss_at(self, fraction: float) -> int:
        """RSS at the first sample past `fraction` of the stream."""
        want = self.n * fraction
        return next((rss for done, rss in self.samples if done >= want), self.samples[-1][1])


async def sample_rss(writer: TrajectoryWriter, into: list[tuple[int, int]],
                     every: float = 0.02) -> None:
    while True:
        into.append((writer.n_events, rss_bytes()))
        await anyio.sleep(every)


def write_script(folder: Path, n: int) -> Path:
    path = folder / "stream.json"
    path.write_text(json.dumps({"roles": {"bench": {"turns": [{"actions": [
        {"type": "stream", "count": n, "text": "u", "numbered": True}]}]}}}))
    return path


async def timed_prompt(measure: Measure, writer: TrajectoryWriter,
                       prompt: Callable[[], Awaitable[object]]) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(sample_rss, writer, measure.samples)
        started, cpu_started = time.perf_counter(), time.process_time()
        await prompt()
        measure.seconds = time.perf_counter() - started
        measure.cpu_seconds = time.process_time() - cpu_started
        measure.samples.append((writer.n_events, rss_bytes()))
        tg.cancel_scope.cancel()


# -- the two paths ------------------------------------------------------------------


async def run_local(n: int, tmp: Path) -> tuple[Measure, Path]:
    sandbox = LocalSandbox(tmp / "work")
    await sandbox.start()
    trajectory = tmp / "local" / "acp_trajectory.jsonl"
    writer = TrajectoryWriter(trajectory, TrajectoryHeader(job_name="bench", rollout_name="local"))
    env = {"SCRIPTED_AGENT_SCRIPT": str(write_script(tmp, n)),
           "SCRIPTED_AGENT_STATE_DIR": str(tmp / "agent-state"), "BENCHFLOW_ROLE": "bench"}
    measure = Measure("local", n)
    try:
        async with AcpSession.open(
            sandbox, argv=[sys.executable, str(AGENT)], cwd=str(sandbox.root), env=env,
            role="bench", scene="main", trajectory=writer, stderr_path=tmp / "local.stderr",
            timeouts=AcpTimeouts(handshake_sec=30, wall_sec=600),
        ) as session:
            await timed_prompt(measure, writer, lambda: session.prompt("stream"))
    finally:
        writer.close()
        await sandbox.stop(delete=False)
    return measure, trajectory


@asynccontextmanager
async def docker_sandbox(job: str) -> AsyncIterator[DockerSandbox]:
    task = load_task(TASK)
    sandbox = DockerSandbox(SandboxSpec(
        name="acp-throughput", environment_dir=task.environment_dir,
        workdir=task.config.sandbox.workdir, extra_ca_certs=get_settings().extra_ca_certs,
        labels={LABEL_JOB: job}))
    await sandbox.start()
    try:
        yield sandbox
    finally:
        await sandbox.stop()


async def run_docker(n: int, tmp: Path) -> tuple[Measure, Path]:
    await preflight()
    task = load_task(TASK)
    paths = RolloutPaths(tmp / "docker")
    measure = Measure("docker", n)
    async with docker_sandbox(f"bench-acp-throughput-{int(time.time())}") as sandbox:
        writer = TrajectoryWriter(paths.trajectory,
                                  TrajectoryHeader(job_name="bench", rollout_name="docker"))
        ctx = AgentContext(sandbox=sandbox, task=task, paths=paths, workdir=sandbox.workdir,
                           agent_user=None, instruction_path="/tmp/instruction.md",
                           trajectory=writer)
        driver = AcpAgentDriver(get_manifest("scripted"))
        try:
            await driver.install(ctx)
            role = Role(name="bench", agent="scripted", model=str(write_script(tmp, n)))
            step = Step(scene="main", scene_index=0, turn_index=0, role=role, prompt="stream")
            async with driver.connect(ctx, role, "main") as conn:
                await timed_prompt(measure, writer, lambda: conn.prompt(step))
        finally:
            writer.close()
    return measure, paths.trajectory


# -- checking and reporting ------------------------------------------------------------


def check_trajectory(path: Path, n: int) -> None:
    """All n chunks recorded, in order, seq strictly increasing (read streaming)."""
    last_seq, i = -1, 0
    with path.open("rb") as fh:
        next(fh)  # header
        for line in fh:
            event = json.loads(line)
            assert event["seq"] > last_seq, f"seq {event['seq']} after {last_seq}"
            last_seq = event["seq"]
            if event["type"] == "agent_message":
                assert event["text"] == f"u{i}\n", (i, event["text"])
                i += 1
    assert i == n, f"recorded {i} of {n} updates"


def report(runs: list[Measure], trajectory: Path) -> None:
    rates = sorted(m.rate for m in runs)
    median = rates[len(rates) // 2]
    cpu = sorted(m.n / m.cpu_seconds for m in runs)[len(runs) // 2]
    first = runs[0]  # later runs reuse memory the first one freed: only its growth is telling
    start, mid, end = first.rss_at(0.1), first.rss_at(0.5), first.samples[-1][1]
    verdict = "ok" if median >= TARGET_PER_SEC else f"BELOW the {TARGET_PER_SEC:,}/s target"
    print(f"{first.path:>6}: {first.n:,} updates/turn, median {median:,.0f} updates/s "
          f"over {len(runs)} runs (min {rates[0]:,.0f}, max {rates[-1]:,.0f}): {verdict}")
    print(f"        benchflow's own cost: {1e6 / cpu:.0f} us of CPU per update "
          f"(= {cpu:,.0f} updates per CPU-second; the rest is the agent and the machine)")
    print(f"        RSS at 10% / 50% / 100% of the first stream: {start / MB:.1f} / {mid / MB:.1f}"
          f" / {end / MB:.1f} MiB (growth {(end - start) / MB:+.1f} MiB); peak RSS "
          f"{peak_rss_bytes() / MB:.1f} MiB; trajectory {trajectory.stat().st_size / MB:.1f} MiB"
          f" with all {first.n:,} updates in order")


async def run_path(name: str, n: int, repeat: int) -> None:
    runs = []
    with tempfile.TemporaryDirectory() as tmp_name:
        for i in range(repeat):
            folder = Path(tmp_name) / f"{name}-{i}"
            folder.mkdir()
            measure, trajectory = await (run_local if name == "local" else run_docker)(n, folder)
            check_trajectory(trajectory, n)
            runs.append(measure)
        report(runs, trajectory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--path", choices=("local", "docker", "both"), default="both")
    args = parser.parse_args()
    if args.path != "both":
        anyio.run(run_path, args.path, args.updates, args.repeat, backend="asyncio")
        return
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, load average {load}; target {TARGET_PER_SEC:,} updates/s")
    for name in ("local", "docker"):  # one process each, so memory figures are its own
        argv = [sys.executable, __file__, "--path", name, "--updates", str(args.updates),
                "--repeat", str(args.repeat)]
        subprocess.run(argv, check=True)


if __name__ == "__main__":
    main()
