"""Integration fixtures: a real Docker daemon, per-session labels, leak detection.

Every container started by these tests carries the session's job label; at the end
of the session any left behind is removed and reported as a failure.
"""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def job_label() -> Iterator[str]:
    """A job name unique to this test session; every rollout of the tests uses it."""
    name = f"pytest-{uuid.uuid4().hex[:12]}"
    yield name
    client = docker.from_env()
    leaked = client.containers.list(all=True, filters={"label": f"benchflow.job={name}"})
    for container in leaked:
        container.remove(force=True)
    assert not leaked, f"leaked containers: {[c.name for c in leaked]}"
