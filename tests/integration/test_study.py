"""Studies on real Docker through the `benchflow` command: oracle vs nop (the paired
difference is exactly 1 with an interval excluding 0 and a significant McNemar test),
the scripted coder alone vs coder + reviewer of examples/studies/coder-reviewer, the
reproducibility record, resuming, and `benchflow compare` on the study folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docker
import pytest
import yaml

from benchflow.study.compare import Comparison
from benchflow.study.record import StudyRecord

from .conftest import REPO, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]  # real studies take minutes

BENCHFLOW = Path(sys.executable).parent / "benchflow"
EXAMPLE = REPO / "examples" / "studies" / "coder-reviewer"


def benchflow(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BENCHFLOW), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=1500)


def no_containers_left(study: str, arms: list[str]) -> None:
    client = docker.from_env()
    leaked = [c for arm in arms for c in client.containers.list(
        all=True, filters={"label": f"benchflow.job={study}.{arm}"})]
    for container in leaked:
        container.remove(force=True)
    assert not leaked, f"leaked containers: {[c.name for c in leaked]}"


def compare_json(study_dir: Path, *extra: str) -> Comparison:
    done = benchflow("compare", str(study_dir), "--format", "json", *extra)
    assert done.returncode == 0, done.stderr
    return Comparison.model_validate_json(done.stdout)


@pytest.fixture(scope="module")
def oracle_nop(tmp_path_factory: pytest.TempPathFactory, job_label: str) -> Path:
    """A study of nop (baseline) and oracle on three example tasks, three attempts each."""
    root = tmp_path_factory.mktemp("study")
    name = f"{job_label}-on"
    study = {"name": name, "studies_dir": str(root / "studies"), "k": 3,
             "n_concurrent_trials": 4, "baseline": "nop",
             "datasets": [{"path": str(TASKS),
                           "tasks": ["hello-world", "hello-world-legacy", "fix-python-bug"]}],
             "arms": [{"name": "nop", "agent": "nop"}, {"name": "oracle", "agent": "oracle"}]}
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    try:
        done = benchflow("study", str(path))
    finally:
        no_containers_left(name, ["nop", "oracle"])
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    (root / "report.txt").write_text(done.stdout)
    return root / "studies" / name


def test_oracle_minus_nop_is_one_with_an_interval_excluding_zero(oracle_nop: Path) -> None:
    report = (oracle_nop.parent.parent / "report.txt").read_text()
    assert "Against the baseline nop (paired by task)" in report
    assert max(len(line) for line in report.splitlines()) <= 80
    c = compare_json(oracle_nop)
    nop, oracle = c.arms
    assert (nop.name, oracle.name) == ("nop", "oracle")
    assert (nop.tasks, nop.counted, oracle.counted) == (3, 9, 9)
    assert nop.pass_rate.value == 0.0 and oracle.pass_rate.value == 1.0
    (pair,) = c.pairs
    assert pair.pass_rate_diff.value == 1.0 and pair.pass_rate_diff.excludes_zero
    assert (pair.pass_rate_diff.low, pair.pass_rate_diff.high) == (1.0, 1.0)
    assert (pair.mcnemar.arm_only, pair.mcnemar.baseline_only) == (9, 0)
    assert pair.mcnemar.p_value == pytest.approx(2 / 2 ** 9) and pair.mcnemar.p_value < 0.05
    assert len(pair.won) == 3 and not pair.lost and not pair.tied
    assert oracle.errors == {} and oracle.pass_at_k["3"] == 1.0


def test_the_study_folder_holds_the_reproducibility_record(oracle_nop: Path) -> None:
    record = StudyRecord.model_validate_json((oracle_nop / "study.json").read_bytes())
    assert (oracle_nop / "study.yaml").is_file()
    assert [a.name for a in record.arms] == ["nop", "oracle"]
    assert record.finished_at is not None and record.benchflow_version
    oracle = record.arm("oracle")
    assert oracle is not None and oracle.job == f"{record.name}.oracle"
    assert oracle.agents[0].name == "oracle" and oracle.agents[0].version
    assert oracle.config["n_attempts"] == 3
    assert set(oracle.tasks) == {"tasks/hello-world", "tasks/hello-world-legacy",
                                 "tasks/fix-python-bug"}
    for task in oracle.tasks.values():
        assert task.image and task.image.startswith("sha256:")  # docker's image id
        assert task.content_sha256 and task.git_commit
    images = docker.from_env().images
    assert images.get(oracle.tasks["tasks/fix-python-bug"].image).id == \
        oracle.tasks["tasks/fix-python-bug"].image


def test_running_the_study_again_resumes_with_nothing_left(oracle_nop: Path) -> None:
    done = benchflow("study", str(oracle_nop), "--no-report")
    assert done.returncode == 0, done.stderr
    assert "18 trial(s) already finished; running 0" in done.stderr


def test_compare_formats_of_the_study(oracle_nop: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    done = benchflow("compare", str(oracle_nop), "--format", "html", "-o", str(html))
    assert done.returncode == 0, done.stderr
    assert html.read_text().count('<img class="bf-chart"') == 4
    job = oracle_nop / f"{oracle_nop.name}.oracle"  # a study's arm is a job of its own
    alone = benchflow("compare", str(job), str(oracle_nop / f"{oracle_nop.name}.nop"))
    assert alone.returncode == 0 and f"Against the baseline {oracle_nop.name}.oracle" in \
        alone.stdout
    bad = benchflow("compare", str(oracle_nop), str(oracle_nop))
    assert bad.returncode == 2 and "given twice" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_scripted_coder_alone_against_coder_and_reviewer(tmp_path: Path,
                                                         job_label: str) -> None:
    """The docs' study on the task the reviewer is for (the slow suite runs all four,
    tests/integration/test_study_browser.py)."""
    study = yaml.safe_load((EXAMPLE / "study.yaml").read_text())
    name = f"{job_label}-cr"
    study.update(name=name, studies_dir=str(tmp_path / "studies"), n_concurrent_trials=6)
    study["datasets"][0]["tasks"] = ["coder-reviewer"]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    try:
        done = benchflow("study", str(path))
    finally:
        no_containers_left(name, ["coder-alone", "coder-reviewer"])
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    c = compare_json(tmp_path / "studies" / name)
    alone, pair = c.arm("coder-alone"), c.arm("coder-reviewer")
    assert alone.pass_rate.value == 0.0 and pair.pass_rate.value == 1.0
    assert c.pairs[0].won == ["tasks/coder-reviewer"]
    assert (c.pairs[0].mcnemar.arm_only, c.pairs[0].mcnemar.baseline_only) == (3, 0)
    assert c.pairs[0].mcnemar.p_value == pytest.approx(2 / 2 ** 3)
    # the scripted agents report their usage: the reviewer's turns cost tokens and money
    assert pair.tokens_per_trial[0] > alone.tokens_per_trial[0] > 0
    assert pair.cost_per_trial > alone.cost_per_trial > 0
    record = json.loads((tmp_path / "studies" / name / "study.json").read_text())
    arm = next(a for a in record["arms"] if a["name"] == "coder-reviewer")
    assert set(arm["roles"]) == {"coder", "reviewer"}
    assert arm["agents"] == [{"name": "scripted", "version": "1.0.0", "package": None}]
    assert "Agents: coder-alone: coder = scripted 1.0.0" in c.methods


def test_sigint_cancels_every_arm_and_the_study_resumes(tmp_path: Path, job_label: str) -> None:
    import os
    import signal
    import time

    name = f"{job_label}-sig"
    slow = {"name": "slow", "env": {"SLEEP": "${BF_TEST_SLEEP}"},
            "execute": "sleep \"$SLEEP\"\necho 'Hello, world!' > /app/hello.txt"}
    study = {"name": name, "studies_dir": str(tmp_path / "studies"), "k": 2,
             "n_concurrent_trials": 4,
             "datasets": [{"path": str(TASKS), "tasks": ["hello-world"]}],
             "arms": [{"name": "fast", "agent": "oracle"}, {"name": "slow", "agent": slow}]}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    study_dir = tmp_path / "studies" / name
    client = docker.from_env()

    def running(arm: str) -> int:
        return len(client.containers.list(filters={"label": f"benchflow.job={name}.{arm}"}))

    proc = subprocess.Popen([str(BENCHFLOW), "study", str(path)], cwd=REPO, text=True,
                            env={**os.environ, "BF_TEST_SLEEP": "300"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not (len(list(study_dir.glob(f"{name}.fast/*/*/*/result.json"))) == 2
                   and running("slow") == 2):
            assert time.monotonic() < deadline and proc.poll() is None, "no slow trials"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        no_containers_left(name, ["fast", "slow"])
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "cancelling the study" in err
    slow_job = json.loads((study_dir / f"{name}.slow" / "result.json").read_text())
    assert slow_job["cancelled"] is True
    fast_files = {p: p.read_bytes() for p in study_dir.glob(f"{name}.fast/*/*/*/result.json")}

    resumed = subprocess.run([str(BENCHFLOW), "study", str(study_dir), "--no-report"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "BF_TEST_SLEEP": "0"})
    no_containers_left(name, ["fast", "slow"])
    assert resumed.returncode == 0, resumed.stderr
    assert "2 trial(s) already finished; running 2" in resumed.stderr
    assert {p: p.read_bytes() for p in study_dir.glob(f"{name}.fast/*/*/*/result.json")} == \
        fast_files
    c = compare_json(study_dir)
    assert [a.pass_rate.value for a in c.arms] == [1.0, 1.0] and c.pairs[0].tied


def test_an_arm_with_a_simulated_user(tmp_path: Path, job_label: str) -> None:
    """Arms may differ by their user: the LLM user (answered by benchflow's scripted model
    server) drives one round of the oracle in one arm, none in the other."""
    from benchflow.model_server import ModelServer, parse_script

    name = f"{job_label}-user"
    script = parse_script({"answers": [{"match": "Write your first message", "steps": [
        {"text": "Please write hello.txt."}, {"text": "DONE"}]}]})
    with ModelServer(script) as server:
        user = {"type": "llm", "persona": "a busy maintainer", "model": "persona",
                "base_url": f"{server.url}/v1", "max_rounds": 3}
        study = {"name": name, "studies_dir": str(tmp_path / "studies"), "k": 1,
                 "datasets": [{"path": str(TASKS), "tasks": ["hello-world"]}],
                 "arms": [{"name": "plain", "agent": "oracle"},
                          {"name": "with-user", "agent": "oracle", "user": user}]}
        path = tmp_path / "study.yaml"
        path.write_text(yaml.safe_dump(study, sort_keys=False))
        try:
            done = benchflow("study", str(path), "--no-report")
        finally:
            no_containers_left(name, ["plain", "with-user"])
    assert done.returncode == 0, done.stdout + done.stderr
    study_dir = tmp_path / "studies" / name
    trial = study_dir / f"{name}.with-user" / "oracle" / "tasks" / "hello-world__1"
    rounds = [json.loads(line) for line in (trial / "user_rounds.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in rounds] == ["Please write hello.txt."]
    plain = study_dir / f"{name}.plain" / "oracle" / "tasks" / "hello-world__1"
    assert not (plain / "user_rounds.jsonl").exists()
    assert json.loads((trial / "result.json").read_text())["reward"] == 1.0
