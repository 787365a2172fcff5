"""Agent installs per agent: how long a never-seen pairing of two cached agents takes to start.

Each agent is first installed alone (its own cache entry: a layer per agent, or before
layers a snapshot image per set of agents). Then, N times, a rollout of the pairing (a
coder/reviewer scene: agent A and agent B) goes through setup, sandbox start and agent
install, up to the moment the first prompt would be sent, and is cleaned up. Before each
run any snapshot image of that very pairing is removed (`benchflow-agent/<a>_<b>:*`), so
every run is a pairing never seen before, on the code before layers as on the code after
(only that task image's snapshots are removed: give it a task of your own, e.g. a copy of
hello-world with a changed Dockerfile, so that nobody else's cache is touched).

Prints each run's setup / start / install split, their median, and the floor: a bare
container of the task image created, started and removed through the Docker SDK.
Target: the pairing ready in under 3 s.

    python labs/benchmarks/agent_layers.py [--agents claude codex] [--task tasks/hello-world]
                                           [--runs 5] [--harden]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import docker

from benchflow import RolloutConfig, Scene
from benchflow.config import Role, Turn
from benchflow.rollout import Rollout
from benchflow.sandbox.docker import DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings

REPO = Path(__file__).resolve().parents[2]
DUMMY_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY")


def scene(agents: list[str]) -> Scene:
    roles = [Role(name=f"r{i}-{a}", agent=a) for i, a in enumerate(agents)]
    return Scene(roles=roles, turns=[Turn(role=r.name) for r in roles])


async def start_once(task: Path, agents: list[str], jobs: Path, i: int,
                     harden: bool) -> tuple[dict[str, float], str | None]:
    """setup, start, install_agent of one rollout of `agents` (no prompt), then cleanup."""
    config = RolloutConfig(task_path=task, scenes=[scene(agents)], jobs_dir=jobs,
                           job_name="bench-layers", attempt=i + 1, harden=harden,
                           verifier_disabled=True)
    rollout = Rollout(config)
    times: dict[str, float] = {}
    try:
        for name in ("setup", "start", "install_agent"):
            started = time.perf_counter()
            await getattr(rollout, name)()
            times[name] = time.perf_counter() - started
    finally:
        with anyio.CancelScope(shield=True):
            await rollout.cleanup()
            if rollout.network is not None:
                await rollout.network.aclose()
    return times, rollout.result.agent_install_cache


def drop_pairing_images(client: docker.DockerClient, agents: list[str], base: str) -> int:
    """Remove snapshot images of exactly this set of agents on the task image `base` (the
    code before layers); snapshots of other images, perhaps someone else's, stay."""
    repo = f"benchflow-agent/{'_'.join(sorted(agents))}"
    images = client.images.list(name=repo, filters={"label": f"benchflow.agent-cache={base}"})
    for image in images:
        client.images.remove(image.id, force=True)
    return len(images)


def floor_once(client: docker.DockerClient, image: str) -> float:
    started = time.perf_counter()
    container = client.containers.create(image, ["sleep", "infinity"], init=True,
                                         labels={"benchflow.job": "bench-layers"})
    container.start()
    container.remove(force=True)
    return time.perf_counter() - started


async def main(agents: list[str], task: Path, runs: int, harden: bool) -> None:
    client = docker.from_env()
    spec = SandboxSpec(name=task.name, environment_dir=task / "environment",
                       extra_ca_certs=get_settings().extra_ca_certs)
    image = await DockerSandbox(spec).prepare_image()
    with tempfile.TemporaryDirectory() as tmp:
        jobs = Path(tmp)
        for agent in agents:  # each agent cached alone first
            times, cache = await start_once(task, [agent], jobs, 900 + agents.index(agent),
                                            harden)
            print(f"{agent} alone: {sum(times.values()):.1f} s (install cache: {cache})")
        walls: list[float] = []
        splits: dict[str, list[float]] = {"setup": [], "start": [], "install_agent": []}
        for i in range(runs):
            dropped = drop_pairing_images(client, agents, image)
            times, cache = await start_once(task, agents, jobs, i, harden)
            wall = sum(times.values())
            walls.append(wall)
            for name, sec in times.items():
                splits[name].append(sec)
            print(f"run {i + 1}: {wall:5.2f} s = setup {times['setup']:.2f} + start "
                  f"{times['start']:.2f} + install {times['install_agent']:.2f} "
                  f"(cache: {cache}; pairing images dropped before: {dropped}; "
                  f"load {os.getloadavg()[0]:.1f})")
        floors = [floor_once(client, image) for _ in range(runs)]
    median = statistics.median(walls)
    pairing = " + ".join(agents)
    print(f"\nnever-seen pairing {pairing} ready to prompt, median of {runs}: {median:.2f} s "
          f"(target < 3 s)")
    for name, values in splits.items():
        print(f"  {name:<14} {statistics.median(values):6.2f} s")
    print(f"bare container create + start + remove, median of {runs}: "
          f"{statistics.median(floors):.2f} s")
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", nargs=2, default=["claude", "codex"])
    parser.add_argument("--task", type=Path, default=REPO / "tasks" / "hello-world")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--harden", action="store_true",
                        help="take the hardening baseline too (as untrusted agents do)")
    args = parser.parse_args()
    logging.getLogger("benchflow").setLevel(logging.ERROR)  # not the no-hardening warning
    for key in DUMMY_KEYS:  # no model is called: the agents only need to look configured
        os.environ.setdefault(key, "bench-not-a-key")
    anyio.run(main, args.agents, args.task.resolve(), args.runs, args.harden)
