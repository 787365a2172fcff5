"""Bad input never shows a traceback: argument lists generated from each command's options.

For `run`, `jobs run`, `tasks check` and `agents show`, hypothesis draws argument lists
from the option grammar (valid values, wrong values, junk tokens) and asserts the exit
code is one of 0, 1, 2, 130, that no traceback or stray exception escapes, and that no
container of the run is left. Sandboxes are the in-memory fake (tests/unit/job), so the
valid combinations run whole jobs in milliseconds.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchflow.cli.main import build_app

from .job.conftest import Behaviour, FakeSandbox

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
JUNK = st.one_of(st.sampled_from(["", "-", "--", "--nope", "💥", "a b", "../..", "-1", "1e999",
                                  "{", "none", "k8s"]),
                 st.text(max_size=8))


def _option(flag: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.tuples(st.just(flag), st.one_of(values, JUNK)).map(list)


def _args(parts: list[st.SearchStrategy[list[str]]]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.one_of(*parts, JUNK.map(lambda j: [j])), max_size=5).map(
        lambda groups: [token for group in groups for token in group])


@pytest.fixture
def fake_sandboxes(monkeypatch: pytest.MonkeyPatch) -> Behaviour:
    shared = Behaviour()
    monkeypatch.setattr("benchflow.rollout.rollout.create_sandbox",
                        lambda environment, spec, provider_config=None: FakeSandbox(shared))
    monkeypatch.setattr("benchflow.rollout.rollout.Rollout.hardened",
                        property(lambda self: False))

    async def no_daemon_needed() -> None:
        return None

    monkeypatch.setattr("benchflow.sandbox.docker_provider.DockerProvider.preflight",
                        lambda self: no_daemon_needed())
    return shared


@pytest.fixture
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fuzz")
    bad_yaml = root / "bad.yaml"
    bad_yaml.write_text("agents: [unclosed\n")
    bad_field = root / "bad-field.yaml"
    bad_field.write_text("agents: [{name: nop}]\ndatasets: [{path: .}]\nretry: {max_attempts: -1}\n")
    good = root / "good.yaml"
    good.write_text(f"jobs_dir: {root / 'jobs'}\nagents: [{{name: nop}}]\n"
                    f"datasets: [{{path: {REPO / 'tasks'}, tasks: [hello-world]}}]\n")
    scenes = root / "scenes.yaml"
    scenes.write_text("- roles: [{name: r, agent: nop}]\n  turns: [{role: nobody}]\n")
    return {"root": str(root), "bad_yaml": str(bad_yaml), "bad_field": str(bad_field),
            "good": str(good), "scenes": str(scenes), "missing": str(root / "missing")}


def _check(args: list[str], jobs: list[str]) -> None:
    result = runner.invoke(build_app(), args)
    assert result.exit_code in (0, 1, 2, 130), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), (args, repr(result.exception))
    _no_container_left(jobs)


def _no_container_left(jobs: list[str]) -> None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception:  # noqa: BLE001 - no daemon: nothing could have started
        return
    for job in jobs:
        assert not client.containers.list(all=True, filters={"label": f"benchflow.job={job}"})


PATHS = st.sampled_from([str(REPO / "tasks" / "hello-world"), str(REPO / "tasks" / "nope"),
                         str(REPO / "README.md")])

RUN_OPTIONS = [
    _option("-a", st.sampled_from(["oracle", "nop", "claude", "no-such-agent"])),
    _option("-m", st.sampled_from(["m1", "anthropic/x"])),
    _option("-k", st.sampled_from(["1", "2", "0"])),
    _option("-n", st.sampled_from(["1", "4", "0"])),
    _option("--env", st.sampled_from(["docker", "daytona", "modal", "nosuch"])),
    _option("--preserve-env", st.sampled_from(["never", "always", "on_failure"])),
    _option("--network", st.sampled_from(["public", "none", "model-only"])),
    _option("--ca-cert", st.sampled_from(["none", "/nonexistent/ca.pem"])),
    _option("-t", st.sampled_from(["hello-world", "other"])),
    _option("--model-base-url", st.sampled_from(["http://127.0.0.1:9", "ftp://x"])),
    _option("--model-api-key-env", st.sampled_from(["UNSET_VAR_X", "1bad"])),
    _option("--timeout-multiplier", st.sampled_from(["1", "0", "-2"])),
    _option("--max-retries", st.sampled_from(["0", "3", "-1"])),
]

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(path=PATHS, rest=_args(RUN_OPTIONS), scenes=st.booleans())
def test_run(path, rest, scenes, fake_sandboxes, files):
    job = f"fuzz-{uuid.uuid4().hex[:8]}"
    extra = ["--scenes", files["scenes"]] if scenes else []
    _check(["run", path, *rest, *extra, "--jobs-dir", files["root"] + "/jobs",
            "--job-name", job], [job])


@SETTINGS
@given(which=st.sampled_from(["bad_yaml", "bad_field", "good", "missing"]),
       rest=_args([_option("-n", st.sampled_from(["1", "0"])),
                   _option("-k", st.sampled_from(["1", "0"])),
                   _option("--env", st.sampled_from(["docker", "modal"]))]))
def test_jobs_run(which, rest, fake_sandboxes, files):
    job = f"fuzz-{uuid.uuid4().hex[:8]}"
    job_file = files[which]
    if which == "good":  # a fresh job name each time (a taken one is exit 2 anyway)
        text = Path(job_file).read_text()
        job_file = str(Path(files["root"]) / f"{job}.yaml")
        Path(job_file).write_text(f"name: {job}\n{text}")
    _check(["jobs", "run", job_file, *rest], [job])


@SETTINGS
@given(path=st.one_of(PATHS, st.just(str(REPO / "tasks")), JUNK), rest=_args([]))
def test_tasks_check(path, rest, files):
    _check(["tasks", "check", path, *rest], [])


@SETTINGS
@given(name=st.one_of(st.sampled_from(["claude", "oracle", "nop", "codex", "cladue"]), JUNK),
       rest=_args([]))
def test_agents_show(name, rest):
    _check(["agents", "show", name, *rest], [])


def test_the_grammar_reaches_real_runs(fake_sandboxes, files):
    """The generated lists include valid ones: those run whole (fake) jobs, exit 0."""
    result = runner.invoke(build_app(), ["run", str(REPO / "tasks" / "hello-world"), "-a", "nop",
                                         "--jobs-dir", files["root"] + "/jobs"])
    assert result.exit_code == 0, result.output
    assert fake_sandboxes.starts == 1
    named = Path(files["root"]) / "named.yaml"
    named.write_text("name: grammar-check\n" + Path(files["good"]).read_text())
    result = runner.invoke(build_app(), ["jobs", "run", str(named)])
    assert result.exit_code == 0, result.output


def test_bad_options_name_the_option():
    result = runner.invoke(build_app(), ["run", str(REPO / "tasks" / "hello-world"),
                                         "-a", "a b"])
    assert result.exit_code == 2 and "-a/--agent" in result.output
    result = runner.invoke(build_app(), ["run", str(REPO / "tasks" / "hello-world"),
                                         "--preserve-env", "sometimes"])
    assert result.exit_code == 2 and "--preserve-env" in result.output
    assert "Traceback" not in result.output
