"""How promptly timeouts and stops act: the timing claims the tests no longer make.

The tests check *that* a timeout fires and in which phase, on a clock they jump
(`tests/fakes/clock.py`), so they pass on however loaded a machine. How long the real
thing takes is measured here, on the real clock:

  acp idle       a scripted ACP agent (host subprocess) says one thing, then hangs:
                 seconds from the idle limit to `prompt()` raising (session/cancel sent,
                 the agent's cancelled answer awaited, the agent killed)
  acp wall       the agent streams an update every 50 ms past the wall-clock budget (3 s
                 from `open()`): seconds from the budget to `prompt()` raising
  acp handshake  the "agent" never answers (`sleep`): seconds past the handshake limit
  docker stop    a started DockerSandbox (init as PID 1): seconds `stop()` takes

Each is printed as the median and maximum over `--repeat` runs, with the load average.
Targets: an ACP timeout acts within 1 s of its limit; a stop takes under 2 s (no 10 s
SIGTERM grace).

    python labs/benchmarks/timeouts.py [--repeat 5] [--no-docker]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for tests.fakes.local_sandbox

from benchflow.acp import AcpSession, AcpTimeouts  # noqa: E402
from benchflow.errors import AgentTimeout  # noqa: E402
from benchflow.sandbox.docker import DockerSandbox  # noqa: E402
from benchflow.sandbox.spec import SandboxSpec  # noqa: E402
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter  # noqa: E402
from tests.fakes.local_sandbox import LocalSandbox  # noqa: E402

AGENT = REPO / "agents" / "scripted" / "agent.py"
LIMIT_SEC = 1.0


async def _acp_late(actions: list[dict], timeouts: AcpTimeouts, limit: float,
                    argv: list[str] | None = None, from_open: bool = False) -> float:
    """Seconds between the limit and the AgentTimeout, for one session; the limit counts
    from the prompt, or (wall, handshake) from `open()`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "script.json"
        script.write_text(json.dumps({"turns": [{"actions": actions}]}))
        sandbox = LocalSandbox(root / "work")
        await sandbox.start()
        writer = TrajectoryWriter(root / "t.jsonl", TrajectoryHeader(job_name="b", rollout_name="r"))
        env = {"SCRIPTED_AGENT_SCRIPT": str(script), "SCRIPTED_AGENT_STATE_DIR": str(root / "s")}
        started = time.monotonic()
        try:
            async with AcpSession.open(sandbox, argv=argv or [sys.executable, str(AGENT)],
                                       cwd=str(sandbox.root), env=env, trajectory=writer,
                                       timeouts=timeouts) as session:
                if argv is None:
                    started = started if from_open else time.monotonic()
                    await session.prompt("go")
        except AgentTimeout:
            return time.monotonic() - started - limit
        finally:
            writer.close()
            await sandbox.stop(delete=False)
    raise SystemExit("the timeout never fired")


async def acp_idle() -> float:
    timeouts = AcpTimeouts(idle_sec=LIMIT_SEC, cancel_grace_sec=30)
    return await _acp_late([{"type": "message", "text": "x"}, {"type": "hang"}], timeouts,
                           LIMIT_SEC)


async def acp_wall() -> float:
    # the budget counts from open(): 3 s leave the handshake done and the stream running
    # (a cancel that reaches the scripted agent before its prompt handler is lost)
    timeouts = AcpTimeouts(idle_sec=30, wall_sec=3 * LIMIT_SEC, cancel_grace_sec=30)
    return await _acp_late([{"type": "slow_stream", "count": 100_000, "interval": 0.05}],
                           timeouts, 3 * LIMIT_SEC, from_open=True)


async def acp_handshake() -> float:
    return await _acp_late([], AcpTimeouts(handshake_sec=LIMIT_SEC), LIMIT_SEC,
                           argv=["sleep", "3600"], from_open=True)


async def docker_stop() -> float:
    box = DockerSandbox(SandboxSpec(name="bench-stop", docker_image="debian:bookworm-slim",
                                    labels={"benchflow.job": "bench-timeouts"}))
    await box.start()
    started = time.monotonic()
    await box.stop()
    return time.monotonic() - started


async def main(repeat: int, docker: bool) -> None:
    cases: dict[str, Callable[[], Awaitable[float]]] = {
        "acp idle": acp_idle, "acp wall": acp_wall, "acp handshake": acp_handshake}
    if docker:
        cases["docker stop"] = docker_stop
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {repeat} runs each")
    print(f"{'case':<14} {'median s':>9} {'max s':>7}   (ACP: seconds after the limit)")
    for name, case in cases.items():
        seconds = [await case() for _ in range(repeat)]
        print(f"{name:<14} {statistics.median(seconds):>9.3f} {max(seconds):>7.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args()
    anyio.run(main, args.repeat, not args.no_docker)
