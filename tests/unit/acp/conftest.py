"""Fixtures for driving the real scripted ACP agent through a host-local sandbox."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from benchflow.acp import AcpSession, AcpTimeouts
from benchflow.trajectory import Event, TrajectoryHeader, TrajectoryWriter, iter_events, load
from tests.fakes.local_sandbox import LocalSandbox

AGENT = Path(__file__).resolve().parents[3] / "agents" / "scripted" / "agent.py"


class Harness:
    """A sandbox, a trajectory file and a script for the scripted agent."""

    def __init__(self, tmp: Path, sandbox: LocalSandbox) -> None:
        self.tmp = tmp
        self.sandbox = sandbox
        self.workdir = sandbox.root
        self.trajectory_path = tmp / "trajectory" / "acp_trajectory.jsonl"
        self.writer = TrajectoryWriter(
            self.trajectory_path, TrajectoryHeader(job_name="test", rollout_name="r")
        )
        self.script_path = tmp / "script.json"
        self.stderr_path = tmp / "agent" / "coder.stderr.txt"

    def script(self, *turns: dict[str, Any], role: str = "coder") -> Path:
        self.script_path.write_text(json.dumps({"roles": {role: {"turns": list(turns)}}}))
        return self.script_path

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "SCRIPTED_AGENT_SCRIPT": str(self.script_path),
            "SCRIPTED_AGENT_STATE_DIR": str(self.tmp / "agent-state"),
            "BENCHFLOW_ROLE": "coder",
            **extra,
        }

    def session(self, **overrides: Any) -> AbstractAsyncContextManager[AcpSession]:
        kwargs: dict[str, Any] = {
            "argv": [sys.executable, str(AGENT)],
            "cwd": str(self.workdir),
            "env": self.env(),
            "role": "coder",
            "scene": "main",
            "trajectory": self.writer,
            "stderr_path": self.stderr_path,
            "timeouts": AcpTimeouts(
                handshake_sec=20, idle_sec=None, wall_sec=60, cancel_grace_sec=2
            ),
        }
        kwargs.update(overrides)
        return AcpSession.open(self.sandbox, **kwargs)

    def events(self) -> list[Event]:
        return load(self.trajectory_path)

    def raw_events(self) -> list[Event]:
        return list(iter_events(self.trajectory_path))

    def of_type(self, type_: str, merged: bool = True) -> list[Any]:
        return [e for e in (self.events() if merged else self.raw_events()) if e.type == type_]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    sandbox = LocalSandbox(tmp_path / "work")
    await sandbox.start()
    h = Harness(tmp_path, sandbox)
    try:
        yield h
    finally:
        h.writer.close()
        await sandbox.stop(delete=False)
