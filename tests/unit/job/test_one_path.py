"""One orchestration path: `benchflow run` is a job; task scenes reach every entry point."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.cli.run import run_job_data
from benchflow.config import RolloutConfig, Scene
from benchflow.job.config import parse_job_config
from benchflow.job.models import JobResult
from benchflow.job.runner import prepare_job
from benchflow.rollout import Rollout

from .conftest import write_task

REPO = Path(__file__).resolve().parents[3]
CODER_REVIEWER = REPO / "tasks" / "coder-reviewer"
runner = CliRunner()

RUN_DEFAULTS = dict(agent="oracle", model=None, attempts=1, concurrency=4, job_name="j",
                    env="docker", force_build=False, preserve_env="never", ca_cert=None,
                    task_filter=None, scenes_file=None, network=None, timeout_multiplier=1.0,
                    max_retries=3)


def test_run_options_become_a_job_config(tmp_path):
    data = run_job_data(REPO / "tasks" / "hello-world", jobs_dir=tmp_path,
                        **{**RUN_DEFAULTS, "agent": "claude", "model": "m1", "network": "none",
                           "ca_cert": ["none"], "attempts": 2, "max_retries": 1})
    config = parse_job_config(data)
    assert config.agents[0].name == "claude" and config.agents[0].model == "m1"
    assert config.datasets[0].path == REPO / "tasks"
    assert config.datasets[0].tasks == ["hello-world"]
    assert config.environment.network == "none" and config.environment.extra_ca_certs == []
    assert (config.n_attempts, config.retry.max_attempts) == (2, 1)


def test_a_taken_default_job_name_gets_a_suffix(tmp_path):
    first = run_job_data(REPO / "tasks" / "hello-world", jobs_dir=tmp_path,
                         **{**RUN_DEFAULTS, "job_name": None})
    (tmp_path / first["name"]).mkdir()
    second = run_job_data(REPO / "tasks" / "hello-world", jobs_dir=tmp_path,
                          **{**RUN_DEFAULTS, "job_name": None})
    assert second["name"] == first["name"] + "-2"


def test_benchflow_run_is_a_resumable_job(tmp_path, dataset, behaviour):
    jobs = tmp_path / "jobs"
    done = runner.invoke(app, ["run", str(dataset), "-a", "oracle", "-k", "2", "--jobs-dir",
                               str(jobs), "--job-name", "viarun", "--env", "fake"])
    assert done.exit_code == 0, done.output
    job_dir = jobs / "viarun"
    saved = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert (saved.total_trials, saved.completed_trials, saved.metrics) == (6, 6, {"mean": 1.0})
    assert (job_dir / "manifest.json").is_file() and (job_dir / "config.json").is_file()
    (job_dir / "oracle" / "bench" / "bravo__1" / "result.json").unlink()
    resumed = runner.invoke(app, ["jobs", "resume", str(job_dir)])
    assert resumed.exit_code == 0, resumed.output
    assert "5 trial(s) already finished; running 1" in resumed.output
    assert behaviour.starts == 7


def test_benchflow_run_retries_transient_failures(tmp_path, dataset, behaviour):
    behaviour.start_failures = 1
    done = runner.invoke(app, ["run", str(dataset / "alpha"), "--jobs-dir", str(tmp_path / "j"),
                               "--job-name", "retried", "--env", "fake"])
    assert done.exit_code == 0, done.output
    (result_file,) = (tmp_path / "j" / "retried").glob("*/*/*/result.json")
    assert '"retried_errors": [\n    {' in result_file.read_text()


def test_job_files_take_the_rollout_options(tmp_path, dataset):
    script = tmp_path / "model.yaml"
    script.write_text("name: s\nsteps:\n  - text: done\n")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    config = parse_job_config({
        "name": "opts", "jobs_dir": str(tmp_path / "jobs"),
        "environment": {"network": "model-only", "extra_ca_certs": [str(tmp_path / "ca.pem")]},
        "model_endpoint": {"script": str(script)},
        "agents": [{"name": "nop"}], "datasets": [{"path": str(dataset)}]})
    prepared = prepare_job(config)
    rollout = prepared.trials[0].config
    assert rollout.network == "model-only"
    assert rollout.model_endpoint is not None and rollout.model_endpoint.script == script
    assert rollout.extra_ca_certs == (tmp_path / "ca.pem",)


def test_task_scenes_are_used_by_job_files(tmp_path):
    config = parse_job_config({"name": "sc", "jobs_dir": str(tmp_path),
                               "agents": [{"name": "nop"}],
                               "datasets": [{"path": str(REPO / "tasks"),
                                             "tasks": ["coder-reviewer", "hello-world"]}]})
    trials = prepare_job(config).trials
    by_task = {t.ref.task_name: t.config.scenes for t in trials}
    (scene,) = by_task["coder-reviewer"]
    assert [r.name for r in scene.roles] == ["coder", "reviewer"] and len(scene.turns) == 3
    assert all(r.agent == "nop" for r in scene.roles)
    assert len(by_task["hello-world"][0].turns) == 1


def test_task_scenes_are_used_by_the_python_api_unless_scenes_are_given():
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, agent="nop"))
    (scene,) = rollout.config.scenes
    assert [t.role for t in scene.turns] == ["coder", "reviewer", "coder"]
    assert rollout.rollout_name.startswith("nop/tasks/coder-reviewer")
    given = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[Scene.single(agent="nop")]))
    assert len(given.config.scenes[0].turns) == 1


def test_a_rollout_config_needs_scenes_or_an_agent():
    with pytest.raises(ValueError, match="give `scenes`, or `agent`"):
        RolloutConfig(task_path=CODER_REVIEWER)


def test_a_broken_task_still_gets_a_rollout_that_records_it(tmp_path):
    broken = write_task(tmp_path, "broken")
    (broken / "verifier" / "test.sh").unlink()
    rollout = Rollout(RolloutConfig(task_path=broken, agent="nop", jobs_dir=tmp_path / "jobs"))
    assert rollout.config.scenes == [Scene.single(agent="nop")]


@pytest.mark.anyio
async def test_the_oracle_runs_the_solution_once_whatever_the_scenes(tmp_path, behaviour):
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, agent="oracle",
                                    jobs_dir=tmp_path, job_name="once"))
    assert len(rollout.config.scenes[0].turns) == 3
    result = await rollout.run()
    assert result.error is None and result.n_prompts == 3
    solves = [argv for argv, _, _ in behaviour.execs if "solve.sh" in " ".join(argv)]
    assert len(solves) == 1


def _slow_task(root: Path, timeout_sec: float) -> Path:
    folder = write_task(root, "slow")
    text = (folder / "task.md").read_text().replace("timeout_sec: 30", f"timeout_sec: {timeout_sec}")
    (folder / "task.md").write_text(text)
    return folder


def _turns(n: int, timeout_sec: float | None = None) -> list[Scene]:
    from benchflow.config import Role, Turn

    role = Role(name="r", agent="cmd", timeout_sec=timeout_sec)
    return [Scene(roles=[role], turns=[Turn(role="r", prompt=f"step {i}") for i in range(n)])]


@pytest.mark.anyio
@pytest.mark.parametrize(("turns", "expected"), [(2, None), (4, "agent_execution_timeout")])
async def test_agent_timeout_bounds_the_whole_phase_across_turns(tmp_path, behaviour, turns,
                                                                 expected):
    from benchflow.agents.command import CommandAgent

    behaviour.delay_sec = 400  # each turn: 400 s (fake time) of a 1000 s budget for the phase
    task = _slow_task(tmp_path, 1000)
    rollout = Rollout(RolloutConfig(task_path=task, scenes=_turns(turns),
                                    jobs_dir=tmp_path / "jobs", job_name="budget"),
                      drivers={"cmd": CommandAgent("cmd", "sleep 1")})
    clock = asyncio.get_running_loop()
    result = await rollout.run()
    assert (result.error.type if result.error else None) == expected
    if expected is None:
        assert behaviour.agent_commands == 2 and clock.jumped == 800
    else:  # the 3rd turn got what was left (200 s, less the real time spent), never 400
        assert behaviour.agent_commands == 3 and 800 < clock.jumped <= 1000
    if expected:
        assert "across all its turns" in result.error.message or "timeout" in result.error.message


@pytest.mark.anyio
async def test_a_role_may_set_a_smaller_budget_per_turn(tmp_path, behaviour):
    from benchflow.agents.command import CommandAgent

    behaviour.delay_sec = 0.4  # fake time
    task = _slow_task(tmp_path, 30)
    rollout = Rollout(RolloutConfig(task_path=task, scenes=_turns(1, timeout_sec=0.2),
                                    jobs_dir=tmp_path / "jobs", job_name="role-budget"),
                      drivers={"cmd": CommandAgent("cmd", "sleep 1")})
    result = await rollout.run()
    assert result.error is not None and result.error.type == "agent_execution_timeout"
    assert "0.2" in result.error.message


@pytest.mark.anyio
@pytest.mark.parametrize(("reward", "disabled", "kept"), [
    ("1", False, False), ("0", False, True), ("0.5", False, True), ("1", True, False)])
async def test_preserve_on_failure_keeps_only_failed_rollouts(tmp_path, behaviour, monkeypatch,
                                                              reward, disabled, kept):
    from .conftest import FakeSandbox

    deletes: list[bool] = []
    original = FakeSandbox.stop

    async def stop(self, delete: bool = True) -> None:
        deletes.append(delete)
        await original(self, delete)

    monkeypatch.setattr(FakeSandbox, "stop", stop)
    behaviour.reward = reward
    task = write_task(tmp_path, "keep")
    result = await Rollout(RolloutConfig(task_path=task, agent="oracle", jobs_dir=tmp_path / "j",
                                         job_name="keep", preserve_env="on_failure",
                                         verifier_disabled=disabled)).run()
    assert deletes == [not kept]
    assert result.failed is kept and result.passed is (reward == "1" and not disabled)


def test_metrics_skip_rollouts_that_were_not_scored():
    from benchflow.job.config import MetricConfig
    from benchflow.job.metrics import compute_metrics
    from benchflow.rollout.result import ErrorInfo, RolloutResult

    def result(reward, error=None):
        return RolloutResult(job_name="j", rollout_name="a/d/t__1", task_name="t",
                             dataset_name="d", agent_name="a", attempt=1, reward=reward,
                             error=ErrorInfo(type=error, message="m") if error else None)

    results = [result(1.0), result(None), result(None, "agent_execution_failed")]
    assert compute_metrics(results, [MetricConfig(type="mean")]) == {"mean": 0.5}
    assert compute_metrics([result(None)], [MetricConfig(type="mean")]) == {"mean": None}


def test_log_level_sets_the_console_and_rollout_log_keeps_info(tmp_path, dataset, behaviour):
    import logging

    from benchflow.cli._common import _Console, configure_logging, set_console_level

    configure_logging(None)
    set_console_level("error")
    assert _Console.handler is not None and _Console.handler.level == logging.ERROR
    assert logging.getLogger("benchflow").getEffectiveLevel() <= logging.INFO
    set_console_level("debug")
    assert logging.getLogger("benchflow").getEffectiveLevel() == logging.DEBUG
    configure_logging("warning")  # an explicit --log-level wins over the job file's
    set_console_level("debug")
    assert _Console.handler.level == logging.WARNING
    done = runner.invoke(app, ["run", str(dataset / "alpha"), "--jobs-dir", str(tmp_path / "j"),
                               "--job-name", "logs", "--env", "fake"])
    assert done.exit_code == 0, done.output
    (log,) = (tmp_path / "j" / "logs").glob("*/*/*/rollout.log")
    assert " INFO " in log.read_text()
    configure_logging(None)
