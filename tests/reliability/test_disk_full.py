"""A full disk under the jobs folder ends the job cleanly, and resume finishes it.

The jobs folder is a small tmpfs this test mounts (and unmounts); sandboxes are the
in-memory fake, so the only fault is the disk. Expected: exit 1 with one line naming
the file and the fix, no traceback, no `.tmp` file left, every result.json on disk
valid, every sandbox removed; after the disk grows, `jobs resume` runs what is left and
writes the job's result.json.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import build_app
from benchflow.job.models import JobResult
from benchflow.rollout.result import RolloutResult

from ..unit.job.conftest import Behaviour, FakeSandbox, write_task

runner = CliRunner()


@pytest.fixture
def fake_sandboxes(monkeypatch: pytest.MonkeyPatch) -> Behaviour:
    shared = Behaviour()
    for where in ("benchflow.rollout.rollout", "benchflow.sandbox.early"):  # early starts too
        monkeypatch.setattr(f"{where}.create_sandbox",
                            lambda environment, spec, provider_config=None: FakeSandbox(shared, spec))

    async def no_daemon_needed() -> None:
        return None

    monkeypatch.setattr("benchflow.sandbox.docker.provider.DockerProvider.preflight",
                        lambda self: no_daemon_needed())
    return shared


@pytest.fixture
def small_disk(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_disk_full_ends_the_job_cleanly_and_resume_finishes_it(tmp_path, small_disk,
                                                              fake_sandboxes):
    for name in ("alpha", "bravo", "charlie", "delta"):
        write_task(tmp_path / "bench", name)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: full\njobs_dir: {small_disk}\nn_attempts: 8\nn_concurrent_trials: 2\n"
                    f"agents: [{{name: oracle}}]\ndatasets: [{{path: {tmp_path / 'bench'}}}]\n")
    ran = runner.invoke(build_app(), ["jobs", "run", str(spec)])
    assert ran.exit_code == 1, ran.output
    errors = [line for line in ran.output.splitlines() if line.startswith("error")]
    assert len(errors) == 1, (ran.output, ran.stderr, repr(ran.exception))
    assert "No space left on device" in errors[0] and "benchflow jobs resume" in errors[0]
    assert "Traceback" not in ran.output
    job = small_disk / "full"
    assert not [p for p in _files(job) if p.name.endswith(".tmp")]
    written = [RolloutResult.model_validate_json(p.read_text())
               for p in job.glob("*/*/*/result.json")]
    assert len(written) < 32  # the disk filled before the end
    assert fake_sandboxes.live == 0  # every sandbox removed

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    resumed = runner.invoke(build_app(), ["jobs", "resume", str(job)])
    assert resumed.exit_code == 0, resumed.output
    final = JobResult.model_validate_json((job / "result.json").read_text())
    assert final.total_trials == 32 and final.completed_trials == 32
    assert len(list(job.glob("*/*/*/result.json"))) == 32
    assert not [p for p in _files(job) if p.name.endswith(".tmp")]
