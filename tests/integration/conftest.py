"""Integration fixtures: a real Docker daemon, per-session labels, leak detection.

Every container started by these tests carries the session's job label; at the end
of the session any left behind is removed and reported as a failure.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

docker = pytest.importorskip("docker")

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
FIXTURES = Path(__file__).parent / "fixtures"


def _daemon_answers() -> bool:
    try:
        client = docker.from_env()  # collection runs before the session's shared client
    except Exception:  # noqa: BLE001 - any failure means "no daemon"
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001
        return False
    finally:
        client.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _daemon_answers():
        return
    skip = pytest.mark.skip(reason="no Docker daemon answers (run scripts/ensure-docker.sh)")
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(skip)


def reap(proc: subprocess.Popen) -> None:
    """Kill `proc` if it still runs, then reap it with its pipes closed (for a test's
    `finally`: not left to the garbage collector, which warns of an unraisable error)."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def job_containers(job: str, *labels: str, running: bool = False) -> list:
    """The containers of job `job` also carrying `labels` (stopped ones too unless `running`).

    One the daemon lists but cannot inspect, being created or removed at that moment, is
    skipped (docker-py's `ignore_removed`), so that polling while a job starts or removes
    sandboxes cannot fail on it; the session's check (`job_label`) lists without inspecting
    and sees every container left in any state."""
    return docker.from_env().containers.list(
        all=not running, ignore_removed=True,
        filters={"label": [f"benchflow.job={job}", *labels]})


@pytest.fixture
def job_name(job_label: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A job name unique to the test; its containers are checked (and removed) afterwards."""
    name = f"{job_label}-{re.sub(r'[^a-z0-9]+', '-', request.node.name.lower())[:30].strip('-')}"
    yield name
    leaked = job_containers(name)
    for container in leaked:
        container.remove(force=True)
    assert not leaked, f"leaked containers: {[c.name for c in leaked]}"


@pytest.fixture(scope="session")
def job_label() -> Iterator[str]:
    """A job name unique to this test session; every rollout of the tests uses it."""
    name = f"pytest-{uuid.uuid4().hex[:12]}"
    yield name
    api = docker.from_env().api
    leaked = api.containers(all=True, filters={"label": f"benchflow.job={name}"})
    for info in leaked:
        api.remove_container(info["Id"], force=True, v=True)
    # turn snapshots are named by job (`benchflow-turns/<job>:...`): this session's only
    images = [tag for info in api.images(filters={"reference": f"benchflow-turns/{name}*:*"})
              for tag in info.get("RepoTags") or []]
    for tag in images:
        api.remove_image(tag)
    assert not leaked, f"leaked containers: {[info['Names'] for info in leaked]}"
    assert not images, f"leaked turn snapshots: {images}"
