"""Bad input never shows a traceback: argument lists generated from each command's options.

For `run`, `jobs run`, `tasks check` and `agents show`, hypothesis draws argument lists
from the option grammar (valid values, wrong values, junk tokens) and asserts the exit
code is one of 0, 1, 2, 130, that no traceback or stray exception escapes, and that no
container of the run is left. Sandboxes are the in-memory fake (tests/unit/job), so the
valid combinations run whole jobs in milliseconds.
"""

from __future__ import annotations

import uuid
import warnings
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
    for where in ("benchflow.rollout.rollout", "benchflow.sandbox.early"):  # early starts too
        monkeypatch.setattr(f"{where}.create_sandbox",
                            lambda environment, spec, provider_config=None: FakeSandbox(shared))
    monkeypatch.setattr("benchflow.rollout.rollout.Rollout.hardened",
                        property(lambda self: False))

    async def no_daemon_needed() -> None:
        return None

    monkeypatch.setattr("benchflow.sandbox.docker.provider.DockerProvider.preflight",
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


# -- job and task files ---------------------------------------------------------------------
# Files generated from each format's fields: valid values, values out of their documented
# range (benchflow.bounds), wrong types, unknown keys and `strict`. Whatever the mix: exit
# 0, 1, 2 or 130, no traceback, and bad input is exactly one `error:` line on stderr.

HUGE = int("9" * 401)
JOB_FIELDS = {
    "n_attempts": st.sampled_from([1, 2, 0, -1, 100_000_000, HUGE, "x", 1.5, None]),
    "n_concurrent_trials": st.sampled_from([1, 4, 0, 10**9, "many"]),
    "timeout_multiplier": st.sampled_from([1.0, 0.5, 0, -2, 1e308, float("inf"), "fast"]),
    "retry": st.sampled_from([{"max_attempts": 0}, {"max_attempts": 10**9},
                              {"initial_delay_ms": -1}, {"multiplier": 0.5}, {"retries": 1}, "x"]),
    "environment": st.sampled_from([{"override_memory_mb": HUGE}, {"max_download_mb": 0},
                                    {"override_cpus": 1e9}, {"type": "k8s"}, {"preserv_env": 1},
                                    {"max_download_mb": 64}]),
    "verifier": st.sampled_from([{"max_timeout_sec": -1}, {"override_timeout_sec": 1e300},
                                 {"disable": True}]),
    "log_level": st.sampled_from(["LOUD", 3]),  # valid levels: the console handler outlives
    # CliRunner's captured stderr between examples
    "strict": st.sampled_from([True, False, "no"]),
    "n_attemps": st.just(2),
    "user": st.sampled_from([{"persona": "a tester", "max_rounds": 10**8},
                             {"persona": "a tester", "temperature": "hot"},
                             {"persona": "a tester", "max_rounds": 2}]),
}


def _job_file(root: Path, name: str, fields: dict[str, object]) -> Path:
    import yaml

    data = {"name": name, "jobs_dir": str(root / "jobs"), "agents": [{"name": "nop"}],
            "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}], **fields}
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _check_bad_input_is_one_line(args: list[str], jobs: list[str]) -> None:
    with warnings.catch_warnings():  # `strict: false` and Harbor-only keys warn, by design
        warnings.simplefilter("ignore", UserWarning)
        result = runner.invoke(build_app(), args)
    assert result.exit_code in (0, 1, 2, 130), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), (args, repr(result.exception))
    if result.exit_code == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error"), (args, result.stderr)
    _no_container_left(jobs)


@SETTINGS
@given(fields=st.dictionaries(st.sampled_from(sorted(JOB_FIELDS)), st.none(), max_size=4).flatmap(
    lambda keys: st.fixed_dictionaries({k: JOB_FIELDS[k] for k in keys})))
def test_job_files(fields, fake_sandboxes, files):
    job = f"fuzz-{uuid.uuid4().hex[:8]}"
    _check_bad_input_is_one_line(["jobs", "run", str(_job_file(Path(files["root"]), job, fields))],
                                 [job])


TASK_FIELDS = {
    "agent": st.sampled_from([{"timeout_sec": 30}, {"timeout_sec": 1e12}, {"timeout_sec": -1},
                              {"timeout_sec": "soon"}, {"timout_sec": 5}]),
    "sandbox": st.sampled_from([{"memory_mb": HUGE}, {"memory_mb": 512}, {"cpus": 1e9},
                                {"pids_limit": 1}, {"pids_limit": 256}, {"gpus": 10**6},
                                {"storage_mb": 0}, {"cpuz": 2}]),
    "verifier": st.sampled_from([{"timeout_sec": 60}, {"timeout_sec": float("nan")},
                                 {"hardening": {"nope": True}}]),
    "strict": st.sampled_from([True, False, "no"]),
    "colour": st.just("red"),
    "agents": st.sampled_from([{"r": {"timeout_sec": 1e300}}, {"r": {"idle_timeout_sec": -1}},
                               {"r": {"timeout_sec": 60}}]),
}
TOML_LINES = st.sampled_from(['[agent]\ntimeout_sec = 30\n', '[agent]\ntimeout_sec = 1e12\n',
                              f'[environment]\nmemory_mb = {HUGE}\n', '[environment]\ncpus = 2\n',
                              '[environment]\npids_limit = 8\n', 'sauce = "x"\n',
                              'strict = false\n', '[environment]\nos = "linux"\n',
                              '[environment]\ngpu_types = ["a100"]\n', 'strict = "no"\n'])


def _task_dir(root: Path, fields: dict[str, object] | None, toml: list[str] | None) -> Path:
    import shutil

    import yaml

    task = root / f"task-{uuid.uuid4().hex[:8]}"
    shutil.copytree(REPO / "tasks" / "hello-world", task)
    if toml is None:
        (task / "task.md").write_text(f"---\n{yaml.safe_dump(fields)}---\nWrite hello.txt.\n")
    else:
        (task / "task.md").unlink()
        (task / "verifier").rename(task / "tests")
        (task / "oracle").rename(task / "solution")
        (task / "instruction.md").write_text("Write hello.txt.\n")
        seen: dict[str, str] = {}  # one line per table: TOML refuses a table twice
        for line in toml:
            seen.setdefault(line.split("\n", 1)[0], line)
        (task / "task.toml").write_text("".join(sorted(seen.values(),
                                                       key=lambda x: x.startswith("["))))
    return task


@SETTINGS
@given(fields=st.dictionaries(st.sampled_from(sorted(TASK_FIELDS)), st.none(), max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: TASK_FIELDS[k] for k in keys})),
       toml=st.one_of(st.none(), st.lists(TOML_LINES, max_size=3)), run=st.booleans())
def test_task_files(fields, toml, run, fake_sandboxes, files):
    task = _task_dir(Path(files["root"]), fields, toml)
    job = f"fuzz-{uuid.uuid4().hex[:8]}"
    args = (["run", str(task), "-a", "nop", "--jobs-dir", files["root"] + "/jobs",
             "--job-name", job] if run else ["tasks", "check", str(task)])
    _check_bad_input_is_one_line(args, [job])
