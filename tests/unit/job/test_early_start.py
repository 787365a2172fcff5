"""`benchflow run` starts its first trial's sandbox before the rollout machinery runs
(`benchflow.sandbox.early`): that trial's rollout adopts it (one sandbox per trial, the
same spec), and when nothing adopts it (the job fails before, or is interrupted) it is
removed. `benchflow jobs run` starts nothing early."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.sandbox import early, registry

from .conftest import FakeProvider, FakeSandbox

runner = CliRunner()


class EarlyFakeProvider(FakeProvider):
    early_start = True


@pytest.fixture
def early_fake(behaviour, monkeypatch):
    """The `fake` backend, starting sandboxes early; every other rollout's too."""
    monkeypatch.setitem(registry.BUILTIN, "fake",
                        (f"{__name__}:EarlyFakeProvider", None))
    yield behaviour
    early.discard_early()


def run(dataset, tmp_path, *args: str):
    return runner.invoke(app, ["run", str(dataset / "alpha"), "-a", "oracle", "--env", "fake",
                               "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "e", *args])


def test_the_first_trial_adopts_the_sandbox_started_early(tmp_path, dataset, early_fake):
    done = run(dataset, tmp_path, "-k", "2")
    assert done.exit_code == 0, done.output
    first = early_fake.sandboxes[0]
    assert first.spec is not None and first.spec.labels["benchflow.rollout"].endswith("alpha__1")
    assert first.spec.labels["benchflow.job"] == "e"  # cleanup --job finds it from the start
    # two trials, two sandboxes: the early one ran trial 1 (its solve and its verify)
    assert (early_fake.starts, early_fake.stops) == (2, 2)
    assert len(early_fake.sandboxes) == 2
    ran = [argv for argv, _, _ in early_fake.execs]
    assert any("solve.sh" in " ".join(a) for a in ran)
    assert first.files  # the instruction placed at its start


def test_a_job_failing_after_the_early_start_removes_that_sandbox(tmp_path, dataset,
                                                                 early_fake, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the rest of the command is set up

    monkeypatch.setattr("benchflow.cli.jobs.run_job_loop", broken)
    done = run(dataset, tmp_path)
    assert done.exit_code != 0
    assert len(early_fake.sandboxes) == 1
    assert (early_fake.starts, early_fake.stops) == (1, 1)


def test_jobs_run_starts_nothing_early(tmp_path, dataset, early_fake, monkeypatch):
    begun = []
    monkeypatch.setattr("benchflow.job.runner.start_early",
                        lambda *args, **kwargs: begun.append(args))
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\njobs_dir: {tmp_path / 'jobs'}\nenvironment: {{type: fake}}\n"
                   f"agents: [{{name: oracle}}]\ndatasets: [{{path: {dataset}}}]\n")
    done = runner.invoke(app, ["jobs", "run", str(job)])
    assert done.exit_code == 0, done.output
    assert begun == [] and early_fake.starts == 3


def test_the_run_path_asks_for_an_early_start(tmp_path, dataset, early_fake, monkeypatch):
    # the pin for the test above: with the same patch, `benchflow run` does ask
    begun = []
    monkeypatch.setattr("benchflow.job.runner.start_early",
                        lambda *args, **kwargs: begun.append(args))
    done = run(dataset, tmp_path)
    assert done.exit_code == 0, done.output
    assert len(begun) == 1 and isinstance(early_fake.sandboxes[0], FakeSandbox)
