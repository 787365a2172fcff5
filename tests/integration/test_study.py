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

from .conftest import REPO, TASKS, reap

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
    study_dir = tmp_path / "studies" / name
    script = "examples/studies/coder-reviewer/script.yaml"
    # per-role rows come from each result's `roles`: the sums of result.json's numbers
    for arm, roles in ((alone, ["coder"]), (pair, ["coder", "reviewer"])):
        sums = role_sums(study_dir / f"{name}.{arm.name}")
        assert [r.role for r in arm.roles] == list(sums) == roles
        for row in arm.roles:
            assert (row.agents, row.models, row.usage_sources) == (["scripted"], [script],
                                                                  ["acp"])
            assert (row.trials, row.tokens_reported, row.input_tokens, row.output_tokens,
                    row.n_prompts, row.n_tool_calls) == sums[row.role][:6]
            assert row.cost == pytest.approx(sums[row.role][6])
    assert pair.roles[1].n_prompts == 3 and pair.roles[0].n_prompts == 6  # coder: 2 turns
    assert_role_rows(study_dir, [("coder-alone", "coder"), ("coder-reviewer", "coder"),
                                 ("coder-reviewer", "reviewer")], tmp_path)
    record = json.loads((study_dir / "study.json").read_text())
    arm = next(a for a in record["arms"] if a["name"] == "coder-reviewer")
    assert arm["roles"] == {role: {"agent": "scripted", "model": script,
                                   "agents_used": ["scripted"], "models_used": [script]}
                            for role in ("coder", "reviewer")}
    assert arm["agents"] == [{"name": "scripted", "version": "1.0.0", "package": None}]
    assert f"Agents: coder-alone: coder = scripted 1.0.0 ({script})" in c.methods


def role_sums(job_dir: Path) -> dict[str, tuple]:
    """Per role, summed over the job's result.json `roles`: (trials, trials with tokens,
    input, output, prompts, tool calls, cost)."""
    sums: dict[str, list] = {}
    for path in sorted(job_dir.glob("*/*/*/result.json")):
        for name, role in json.loads(path.read_text())["roles"].items():
            row = sums.setdefault(name, [0, 0, 0, 0, 0, 0, 0.0])
            tokens = role["tokens"]
            row[0] += 1
            row[1] += tokens is not None
            row[2] += tokens["input"] if tokens else 0
            row[3] += tokens["output"] if tokens else 0
            row[4] += role["n_prompts"]
            row[5] += role["n_tool_calls"]
            row[6] += role["cost"] or 0.0
    return {name: tuple(row) for name, row in sums.items()}


def assert_role_rows(study_dir: Path, rows: list[tuple[str, str]], tmp_path: Path) -> None:
    """The per-role rows (arm, role) in every format: the table, markdown, and the html
    report's table and its tokens-per-role figure."""
    table = benchflow("compare", str(study_dir)).stdout
    section = table.split("Tokens and cost per role", 1)[1].split("\n\n", 1)[0]
    assert [tuple(line.split()[:2]) for line in section.splitlines()[3:]
            if not line.startswith("per trial")] == rows
    markdown = benchflow("compare", str(study_dir), "--format", "markdown").stdout
    section = markdown.split("## Tokens and cost per role", 1)[1].split("\n## ", 1)[0]
    assert [tuple(cells.split(" | ")[:2]) for cells in
            (line.strip("| ") for line in section.splitlines() if line.startswith("| "))
            ][1:] == rows
    html = tmp_path / f"{study_dir.name}.html"
    assert benchflow("compare", str(study_dir), "--format", "html", "-o",
                     str(html)).returncode == 0
    page = html.read_text()
    section = page.split("Tokens and cost per role", 1)[1].split("</table>", 1)[0]
    import re

    assert re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td>", section) == rows
    assert 'alt="Tokens per role"' in page


def test_study_arms_assign_agents_per_role(tmp_path: Path, job_label: str) -> None:
    """examples/studies/which-reviewer: arms assign an agent and a model (the scripted
    agent's script) to each role of the task's own scenes, with `roles:` as a mapping and
    as NAME=AGENT[:MODEL] strings; study.json names each role's agent and the model its
    results say it used, and the comparison's per-role rows show them."""
    example = REPO / "examples" / "studies" / "which-reviewer"
    study = yaml.safe_load((example / "study.yaml").read_text())
    name = f"{job_label}-roles"
    study.update(name=name, studies_dir=str(tmp_path / "studies"))
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    try:
        done = benchflow("study", str(path))
    finally:
        no_containers_left(name, ["careful", "rubber-stamp"])
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    study_dir = tmp_path / "studies" / name
    script = "examples/studies/coder-reviewer/script.yaml"
    stamp = "examples/studies/which-reviewer/rubber-stamp.yaml"
    record = StudyRecord.model_validate_json((study_dir / "study.json").read_bytes())
    careful, lazy = record.arm("careful"), record.arm("rubber-stamp")
    assert careful.config["agents"][0]["roles"] == {"coder": f"scripted:{script}",
                                                    "reviewer": f"scripted:{script}"}
    assert lazy.config["agents"][0]["roles"] == {"coder": f"scripted:{script}",
                                                 "reviewer": f"scripted:{stamp}"}
    assert {n: (r.agent, r.model, r.agents_used, r.models_used)
            for n, r in lazy.roles.items()} == {
        "coder": ("scripted", script, ["scripted"], [script]),
        "reviewer": ("scripted", stamp, ["scripted"], [stamp])}
    # the trials ran the task's own scenes: coder, reviewer, coder
    trial = study_dir / f"{name}.rubber-stamp" / "scripted" / "tasks" / "coder-reviewer__1"
    result = json.loads((trial / "result.json").read_text())
    assert {n: (r["agent"], r["model"], r["n_prompts"]) for n, r in result["roles"].items()} \
        == {"coder": ("scripted", script, 2), "reviewer": ("scripted", stamp, 1)}
    c = compare_json(study_dir)
    assert [a.pass_rate.value for a in c.arms] == [1.0, 0.0]
    assert c.pairs[0].lost == ["tasks/coder-reviewer"]
    for arm in c.arms:
        sums = role_sums(study_dir / f"{name}.{arm.name}")
        assert {r.role: (r.input_tokens, r.output_tokens) for r in arm.roles} == {
            role: row[2:4] for role, row in sums.items()}
    reviewer = c.arm("rubber-stamp").roles[1]
    assert (reviewer.role, reviewer.models, reviewer.tokens_per_trial) == (
        "reviewer", [stamp], (600, 20))  # the rubber stamp's own usage, per trial
    assert f"reviewer = scripted 1.0.0 ({stamp})" in c.methods
    assert_role_rows(study_dir, [("careful", "coder"), ("careful", "reviewer"),
                                 ("rubber-stamp", "coder"), ("rubber-stamp", "reviewer")],
                     tmp_path)


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
        reap(proc)
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
