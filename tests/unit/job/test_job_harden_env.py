"""`harden:` in job files and `--harden/--no-harden`, and task env templates in real runs
(in-memory sandboxes: what reaches test.sh, what the result records, what stops a run)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.errors import ConfigError
from benchflow.job.config import parse_job_config
from benchflow.job.plan import rollout_config
from benchflow.job.runner import make_job, prepare_job, start_new_job
from benchflow.settings import host_env

pytestmark = pytest.mark.anyio

TEMPLATED = """---
task:
  name: templated
verifier:
  timeout_sec: 20
  env:
    API_KEY: ${BF_TEST_TEMPLATE_KEY}
    MODE: ${BF_TEST_TEMPLATE_MODE:-fast}
---
Write hello.
"""


def config(tmp_path, dataset, **extra):
    return parse_job_config({"name": "job1", "jobs_dir": str(tmp_path / "jobs"),
                             "agents": [{"name": "oracle"}],
                             "datasets": [{"path": str(dataset)}], **extra})


async def run(cfg):
    prepared = prepare_job(cfg, lookup=host_env)
    start_new_job(prepared)
    job = make_job(prepared)
    await job.run()
    return job.results


@pytest.mark.parametrize("harden", [True, False, None])
def test_harden_in_a_job_file_reaches_every_rollout(tmp_path, dataset, harden):
    extra = {} if harden is None else {"harden": harden}
    cfg = config(tmp_path, dataset, **extra)
    prepared = prepare_job(cfg, lookup=host_env)
    assert {trial.config.harden for trial in prepared.trials} == {harden}
    entry_config = rollout_config(cfg, prepared.trials[0].config.scenes, "bench",
                                  prepared.datasets[0].tasks[0], 1)
    assert entry_config.harden is harden


async def test_no_harden_is_a_warning_in_the_result_of_an_untrusted_agent(
        tmp_path, dataset, behaviour):
    cfg = config(tmp_path, dataset, harden=False,
                 agents=[{"name": "cmd", "execute": "echo hi"}, {"name": "oracle"}],
                 datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    results = {r.agent_name: r for r in await run(cfg)}
    assert results["cmd"].reward == 1.0 and results["cmd"].hardened is False
    assert len(results["cmd"].warnings) == 1 and "hardening is off" in results["cmd"].warnings[0]
    assert results["oracle"].warnings == []  # unhardened anyway: nothing was weakened


async def test_env_templates_reach_test_sh_and_stay_out_of_the_log(
        tmp_path, dataset, behaviour, monkeypatch):
    (dataset / "alpha" / "task.md").write_text(TEMPLATED)
    monkeypatch.setenv("BF_TEST_TEMPLATE_KEY", "sk-template-secret-42")
    monkeypatch.delenv("BF_TEST_TEMPLATE_MODE", raising=False)
    cfg = config(tmp_path, dataset, datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    (result,) = await run(cfg)
    assert result.reward == 1.0, result.error
    test_sh = next(env for argv, _, env in behaviour.execs if "test.sh" in " ".join(argv))
    assert test_sh["API_KEY"] == "sk-template-secret-42" and test_sh["MODE"] == "fast"
    rollout_dir = tmp_path / "jobs" / "job1" / "oracle" / "bench" / "alpha__1"
    for path in rollout_dir.rglob("*"):
        if path.is_file():
            assert b"sk-template-secret-42" not in path.read_bytes(), path


def test_an_unset_template_variable_stops_the_job_before_anything_starts(
        tmp_path, dataset, behaviour, monkeypatch):
    (dataset / "alpha" / "task.md").write_text(TEMPLATED)
    monkeypatch.delenv("BF_TEST_TEMPLATE_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"verifier\.env API_KEY .*BF_TEST_TEMPLATE_KEY"):
        prepare_job(config(tmp_path, dataset), lookup=host_env)
    assert behaviour.starts == 0


def test_benchflow_run_exits_2_naming_the_unset_variable(tmp_path, dataset, behaviour,
                                                          monkeypatch):
    (dataset / "alpha" / "task.md").write_text(TEMPLATED)
    monkeypatch.delenv("BF_TEST_TEMPLATE_KEY", raising=False)
    result = CliRunner().invoke(app, ["run", str(dataset / "alpha"), "--harden",
                                      "--jobs-dir", str(tmp_path / "jobs")])
    text = result.output + (getattr(result, "stderr", "") or "")
    assert result.exit_code == 2, text
    assert "BF_TEST_TEMPLATE_KEY" in text and "verifier.env" in text and "Traceback" not in text
    assert behaviour.starts == 0 and not (tmp_path / "jobs").exists()


@pytest.mark.parametrize(("flag", "expected"), [(["--harden"], True), (["--no-harden"], False),
                                                ([], None)])
def test_benchflow_run_harden_flags_map_onto_the_rollout_config(tmp_path, dataset, monkeypatch,
                                                                flag, expected):
    seen = []

    def fake_run_new_job(prepared, *, otel=False, trace_listen=None):
        seen.extend(trial.config.harden for trial in prepared.trials)
        return 0

    monkeypatch.setattr("benchflow.cli.run.run_new_job", fake_run_new_job)
    result = CliRunner().invoke(app, ["run", str(dataset / "alpha"), *flag,
                                      "--jobs-dir", str(tmp_path / "jobs")])
    assert result.exit_code == 0, result.output
    assert seen == [expected]
