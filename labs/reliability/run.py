"""Reliability lab: faults, hostile inputs, leaks and lost data, on a Docker daemon of its own.

Starts a second dockerd (own data root, exec root, socket and network namespace, no
iptables: the shared daemon, its bridge and its jobs are never touched; benchflow runs in
that namespace too), then

- tries faults: another benchflow's cleanup and a namesake's resume beside a live job,
  a killed benchflow, a daemon restart mid-job and mid-build, Ctrl-C, a fork bomb, an
  agent filling the disk, a 2 GiB sparse file in /logs, 256 MiB of agent output, a full
  disk under the jobs folder; each survived when the run ends as documented (a clear
  error or a retryable one, `jobs resume` finishing the job) with nothing left behind;
- feeds bad inputs (job files, task files, symbolic links, flags); each must be refused
  with exit 2, no traceback and one line naming what is wrong;
- counts leaks (a secret, injected through a job's `${VAR}`, the model endpoint key and
  a task env template and printed by every agent, found in any file the lab's jobs wrote)
  and lost data (a result.json that does not parse or is missing after resume, a .tmp left).

    python labs/reliability/run.py [--skip-faults] [--skip-inputs] [--keep DIR]

Needs root (dockerd, ip netns, mount) and the shared daemon's debian:bookworm-slim image.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.reliability.daemon import SecondDaemon  # noqa: E402

from benchflow.job.models import JobResult  # noqa: E402
from benchflow.rollout.result import RolloutResult  # noqa: E402
from benchflow.sandbox.owner import LABEL_JOB_ID, read_job_id  # noqa: E402

SECRETS = {"LAB_PLAIN": "lab-agent-c4f1e9a07d", "LAB_GATEWAY": "lab-model-7b2e5d9c13",
           "LAB_DB": "lab-task-0e8a6f3b52"}
PRINT_SECRETS = ("echo token=$MY_API_TOKEN model=$BENCHFLOW_PROVIDER_API_KEY db=$DB_PASSWORD; "
                 "echo $MY_API_TOKEN > /logs/agent/token.txt; ")


@dataclass
class Outcome:
    name: str
    ok: bool
    note: str


class Lab:
    def __init__(self, root: Path, daemon: SecondDaemon) -> None:
        self.root = root
        self.daemon = daemon
        self.jobs: list[Path] = []
        self.stranded = 0
        """Containers a failed fault left (swept before the next fault; counted as left)."""
        self.env = {**daemon.env, **SECRETS, "BENCHFLOW_EXTRA_CA_CERTS": "none",
                    "COLUMNS": "300", "NO_COLOR": "1"}

    # -- helpers ------------------------------------------------------------------------------

    def task(self, name: str, dockerfile: str = "", sandbox: str = "{}", timeout: int = 3600
             ) -> Path:
        """A dataset folder holding one task `name` (its agent budget: `timeout`)."""
        task = self.root / "tasks" / name / name
        (task / "environment").mkdir(parents=True, exist_ok=True)
        (task / "verifier").mkdir(exist_ok=True)
        (task / "environment" / "Dockerfile").write_text(
            f"FROM debian:bookworm-slim\n{dockerfile}WORKDIR /app\n")
        (task / "verifier" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
        (task / "task.md").write_text(f"---\nagent: {{timeout_sec: {timeout}}}\n"
                                      f"sandbox: {_with_env(sandbox)}\n---\nDo it.\n")
        return task.parent

    def job(self, name: str, tasks: Path, execute: str, folder: str | None = None,
            extra: str = "", attempts: int = 1) -> tuple[Path, Path]:
        jobs_dir = self.root / (folder or name)
        spec = self.root / f"{folder or name}-{name}.yaml"
        spec.write_text(
            f"name: {name}\njobs_dir: {jobs_dir}\nn_concurrent_trials: 4\nn_attempts: {attempts}\n"
            "retry: {max_attempts: 0}\n"
            "model_endpoint: {base_url: 'http://192.0.2.1:9/v1', api_key_env: LAB_GATEWAY}\n"
            f"agents:\n  - name: sh\n    execute: {json.dumps(PRINT_SECRETS + execute)}\n"
            "    env: {MY_API_TOKEN: '${LAB_PLAIN}', BF_SLEEP: '${BF_SLEEP}'}\n"
            f"datasets:\n  - path: {tasks}\n{extra}")
        self.jobs.append(jobs_dir / name)
        return spec, jobs_dir / name

    def argv(self, args: list[str]) -> list[str]:
        """The benchflow CLI in the lab daemon's network namespace (its relay reachable
        from the lab's sandboxes, as on a real host)."""
        return [*self.daemon.enter, sys.executable, "-c",
                "from benchflow.cli.main import main; main()", *args]

    def cli(self, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(args), capture_output=True, text=True, timeout=900,
                              env={**self.env, "BF_SLEEP": "0", **env}, check=False)

    def start(self, args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(self.argv(args), stdout=out, stderr=subprocess.STDOUT,
                                    env={**self.env, "BF_SLEEP": "0", **env})

    def running(self, job_dir: Path) -> list:
        job_id = read_job_id(job_dir)
        if job_id is None:
            return []
        return [c for c in self.daemon.client().containers.list(
            filters={"label": f"{LABEL_JOB_ID}={job_id}"})]

    def wait(self, predicate: Callable[[], object], proc: subprocess.Popen[bytes] | None,
             limit: float = 600) -> None:
        deadline = time.monotonic() + limit
        while not predicate():
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"exited {proc.returncode} too early")
            if time.monotonic() > deadline:
                raise RuntimeError("timed out")
            time.sleep(0.2)

    def leftovers(self) -> int:
        return len(self.daemon.client().containers.list(all=True))

    def results(self, job_dir: Path) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(job_dir.glob("*/*/*/result.json"))]


def _with_env(sandbox: str) -> str:
    inner = sandbox.strip()[1:-1].strip()
    env = "env: {DB_PASSWORD: '${LAB_DB}'}"
    return "{" + (inner + ", " if inner else "") + env + "}"


# -- faults -------------------------------------------------------------------------------------


def faults(lab: Lab) -> list[Outcome]:
    out: list[Outcome] = []
    tasks = lab.task("sleepy")

    def attempt(name: str, fn: Callable[[], str]) -> None:
        try:
            out.append(Outcome(name, True, fn()))
        except Exception as exc:  # noqa: BLE001 - a fault not survived is a row, not a crash
            out.append(Outcome(name, False, f"{type(exc).__name__}: {exc}"[:90]))
            lab.stranded += lab.leftovers()
            if live.poll() is not None:  # the next fault starts on an empty daemon
                lab.cli(["sandbox", "cleanup", "--all", "--force"])
        print(f"  {'ok ' if out[-1].ok else 'FAIL'} {name}: {out[-1].note}", flush=True)

    spec_a, a_dir = lab.job("N", tasks, "sleep ${BF_SLEEP:-0}", folder="x")
    live = lab.start(["jobs", "run", str(spec_a)], lab.root / "a.log", BF_SLEEP="600")
    lab.wait(lambda: lab.running(a_dir), live)
    (a_box,) = lab.running(a_dir)

    def alive() -> None:
        if [c.id for c in lab.running(a_dir)] != [a_box.id]:
            raise AssertionError("the live job's sandbox was removed")

    def crash(folder: str, name: str) -> Path:
        spec, job_dir = lab.job(name, tasks, "sleep ${BF_SLEEP:-0}", folder=folder)
        proc = lab.start(["jobs", "run", str(spec)], lab.root / f"{folder}.log", BF_SLEEP="600")
        lab.wait(lambda: lab.running(job_dir), proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return job_dir

    def cleanup_beside_live_job() -> str:
        job_dir = crash("z", "M")
        swept = lab.cli(["sandbox", "cleanup"])
        alive()
        if lab.running(job_dir) or "kept 1" not in swept.stdout:
            raise AssertionError(swept.stdout)
        resumed = lab.cli(["jobs", "resume", str(job_dir)])  # the killed job still finishes
        if resumed.returncode != 0:
            raise AssertionError(resumed.stderr[-300:])
        return "leftover removed, live job kept and listed"

    def namesake_resume() -> str:
        job_dir = crash("y", "N")
        resumed = lab.cli(["jobs", "resume", str(job_dir)])
        alive()
        if resumed.returncode != 0 or [r["error"] for r in lab.results(job_dir)] != [None]:
            raise AssertionError(resumed.stderr[-300:])
        return "killed run resumed; same-named live job untouched"

    def cancel() -> str:
        live.send_signal(signal.SIGINT)
        code = live.wait(timeout=300)
        (result,) = lab.results(a_dir)
        if code != 130 or result["error"]["type"] != "cancelled" or lab.running(a_dir):
            raise AssertionError(f"exit {code}, {result['error']}")
        return "exit 130, trial cancelled, sandbox removed"

    attempt("another benchflow's cleanup", cleanup_beside_live_job)
    attempt("a namesake job's resume", namesake_resume)
    attempt("Ctrl-C of the live job", cancel)

    def restart_mid_job() -> str:
        spec, job_dir = lab.job("restart", lab.task("pair"), "sleep ${BF_SLEEP:-0}", attempts=2)
        proc = lab.start(["jobs", "run", str(spec)], lab.root / "restart.log", BF_SLEEP="600")
        lab.wait(lambda: len(lab.running(job_dir)) == 2, proc)
        lab.daemon.restart()
        proc.wait(timeout=600)
        errors = [r["error"] for r in lab.results(job_dir)]
        if not all(e and e["retryable"] and e["type"] == "environment_exec_failed" for e in errors):
            raise AssertionError(str(errors)[:200])
        resumed = lab.cli(["jobs", "resume", str(job_dir)])
        if resumed.returncode != 0 or lab.leftovers():
            raise AssertionError(resumed.stderr[-300:])
        return "retryable, resumed by default, nothing left"

    def restart_mid_build() -> str:
        slow = lab.task("slowbuild", dockerfile="RUN sleep 20\n")
        spec, job_dir = lab.job("build", slow, "true")
        proc = lab.start(["jobs", "run", str(spec)], lab.root / "build.log")
        lab.wait(lambda: lab.daemon.client().containers.list(), proc)
        lab.daemon.restart()
        proc.wait(timeout=600)
        (result,) = lab.results(job_dir)
        if not (result["error"] and result["error"]["retryable"]):
            raise AssertionError(str(result["error"])[:200])
        resumed = lab.cli(["jobs", "resume", str(job_dir)])
        if resumed.returncode != 0 or lab.leftovers():
            raise AssertionError(resumed.stderr[-300:])
        return "build error retryable, resumed, nothing left"

    attempt("daemon restart mid-job", restart_mid_job)
    attempt("daemon restart mid-build", restart_mid_build)

    def one(name: str, execute: str, sandbox: str = "{}", extra: str = "") -> dict:
        spec, job_dir = lab.job(name, lab.task(name, sandbox=sandbox), execute, extra=extra)
        lab.cli(["jobs", "run", str(spec)])
        (result,) = lab.results(job_dir)
        if lab.leftovers():
            raise AssertionError("sandbox left")
        return result

    def fork_bomb() -> str:
        result = one("forkbomb", "setsid perl -e 'fork while 1' & sleep 5; kill -9 -- -$!; "
                                 "sleep 1; true", sandbox="{pids_limit: 64}")
        if result["error"] is not None:
            raise AssertionError(str(result["error"])[:200])
        return "held at pids_limit 64; host unaffected"

    def disk_hog() -> str:
        result = one("diskhog", "for i in $(seq 1 4000); do head -c 1048576 /dev/zero > "
                                "/tmp/f$i; sleep 0.01; done", sandbox="{storage_mb: 64}")
        if result["error"]["type"] != "environment_resource_exhausted":
            raise AssertionError(str(result["error"])[:200])
        return "stopped past storage_mb, warning recorded"

    def sparse_logs() -> str:
        result = one("sparse", "truncate -s 2G /logs/agent/sparse.bin",
                     extra="environment: {max_download_mb: 64, extra_ca_certs: []}\n")
        if not any("download of /logs stopped" in w for w in result["warnings"]):
            raise AssertionError(str(result["warnings"])[:200])
        return "download cut at its cap, recorded"

    def big_output() -> str:
        result = one("bigout", "head -c 268435456 /dev/zero | tr '\\0' a")
        stdout = next((lab.root / "bigout").glob("*/*/*/*/command/stdout.txt"))
        if result["error"] is not None or stdout.stat().st_size < 256 << 20:
            raise AssertionError(str(result["error"])[:200])
        return "256 MiB read whole, on disk"

    attempt("fork bomb", fork_bomb)
    attempt("agent filling the disk", disk_hog)
    attempt("2 GiB sparse file in /logs", sparse_logs)
    attempt("256 MiB of agent output", big_output)
    attempt("disk full under the jobs folder", lambda: disk_full(lab))
    return out


def disk_full(lab: Lab) -> str:
    mount = lab.root / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mount)], check=True)
    try:
        tasks = lab.task("full")
        spec = lab.root / "full.yaml"
        spec.write_text(f"name: full\njobs_dir: {mount}\nn_attempts: 12\nn_concurrent_trials: 3\n"
                        "agents: [{name: nop}]\n"
                        f"datasets: [{{path: {tasks}}}]\n")
        ran = lab.cli(["jobs", "run", str(spec)])
        errors = [line for line in ran.stderr.splitlines() if line.startswith("error")]
        if ran.returncode != 1 or len(errors) != 1 or "Traceback" in ran.stderr:
            raise AssertionError(f"exit {ran.returncode}: {ran.stderr[-300:]}")
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        resumed = lab.cli(["jobs", "resume", str(mount / "full")])
        final = JobResult.model_validate_json((mount / "full" / "result.json").read_text())
        if resumed.returncode != 0 or final.completed_trials != 12 or lab.leftovers():
            raise AssertionError(resumed.stderr[-300:])
        lost = _lost(mount / "full")
        if lost:
            raise AssertionError(f"{lost} result(s) lost")
        shutil.copytree(mount / "full", lab.root / "full-copy")
        lab.jobs.append(lab.root / "full-copy")
        return "exit 1, one line; resume finished all 12"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# -- bad inputs -------------------------------------------------------------------------------


def bad_inputs(lab: Lab) -> list[Outcome]:
    root = lab.root / "inputs"
    root.mkdir()
    host_file = root / "host-secret"
    host_file.write_text("PRIVATE\n")
    good_task = REPO / "tasks" / "hello-world"
    cases: list[tuple] = []  # (name, argv[, env])

    def job(name: str, body: str) -> None:
        path = root / f"{name}.yaml"
        path.write_text(body)
        cases.append((f"job file: {name}", ["jobs", "run", str(path)]))

    import yaml

    base = {"jobs_dir": str(root / "jobs"), "agents": [{"name": "nop"}],
            "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}]}
    huge = int("9" * 401)
    for name, extra in [
        ("n_attempts 1e8", {"n_attempts": 100_000_000}), ("n_attempts 0", {"n_attempts": 0}),
        ("n_attempts text", {"n_attempts": "many"}),
        ("concurrency 1e9", {"n_concurrent_trials": 10**9}),
        ("timeout_multiplier inf", {"timeout_multiplier": float("inf")}),
        ("timeout_multiplier -1", {"timeout_multiplier": -1}),
        ("retry 1e6", {"retry": {"max_attempts": 10**6}}),
        ("retry delay -1", {"retry": {"initial_delay_ms": -1}}),
        ("retry unknown key", {"retry": {"retries": 2}}),
        ("memory 401 digits", {"environment": {"override_memory_mb": huge}}),
        ("cpus 1e9", {"environment": {"override_cpus": 10**9}}),
        ("download 0", {"environment": {"max_download_mb": 0}}),
        ("unknown backend", {"environment": {"type": "k8s"}}),
        ("unknown top key", {"n_attemps": 2}), ("unknown env key", {"environment": {"netwrk": 1}}),
        ("verifier timeout huge", {"verifier": {"max_timeout_sec": 1e20}}),
        ("log level", {"log_level": "loud"}), ("strict not bool", {"strict": "maybe"}),
        ("bad agent name", {"agents": [{"name": "a b", "execute": "x"}]}),
        ("reserved agent", {"agents": [{"name": "oracle", "execute": "x"}]}),
        ("bad task filter", {"datasets": [{"path": str(REPO / "tasks"), "tasks": ["-x"]}]}),
        ("missing dataset", {"datasets": [{"path": "/nonexistent"}]}),
        ("unset ${VAR}", {"agents": [{"name": "c", "execute": "x",
                                      "env": {"K": "${LAB_UNSET_VAR}"}}]}),
        ("user max_rounds 1e8", {"user": {"persona": "a tester", "max_rounds": 10**8}}),
        ("user temperature nan", {"user": {"persona": "a tester", "temperature": float("nan")}}),
    ]:
        job(name, yaml.safe_dump({**base, **extra}))
    job("not yaml", "agents: [unclosed\n")
    job("a list", "- agents\n")

    def task(name: str, frontmatter: str | None = None, toml: str | None = None,
             link: str | None = None) -> Path:
        folder = root / "tasks" / name.replace(" ", "-")
        shutil.copytree(good_task, folder)
        if frontmatter is not None:
            (folder / "task.md").write_text(f"---\n{frontmatter}\n---\nWrite hello.txt.\n")
        if toml is not None:
            (folder / "task.md").unlink()
            (folder / "verifier").rename(folder / "tests")
            (folder / "instruction.md").write_text("Write hello.txt.\n")
            (folder / "task.toml").write_text(toml)
        if link == "task.md":
            (folder / "task.md").unlink()
            (folder / "task.md").symlink_to(host_file)
        elif link == "environment":
            shutil.rmtree(folder / "environment")
            (folder / "environment").symlink_to(root)
        elif link == "verifier":
            (folder / "verifier" / "test.sh").unlink()
            (folder / "verifier" / "test.sh").symlink_to(host_file)
        cases.append((f"task: {name}", ["run", str(folder), "-a", "nop", "--jobs-dir",
                                        str(root / "jobs")]))
        cases.append((f"task check: {name}", ["tasks", "check", str(folder)]))
        return folder

    for name, fm in [("memory 401 digits", f"sandbox: {{memory_mb: {huge}}}"),
                     ("cpus 1e9", "sandbox: {cpus: 1000000000}"),
                     ("timeout 1e12", "agent: {timeout_sec: 1e12}"),
                     ("timeout nan", "agent: {timeout_sec: .nan}"),
                     ("pids 1", "sandbox: {pids_limit: 1}"), ("gpus 1e6", "sandbox: {gpus: 1000000}"),
                     ("unknown key", "sandbox: {cpuz: 2}"), ("unknown top key", "colour: red"),
                     ("hardening typo", "verifier: {hardening: {kil_agent: true}}"),
                     ("not yaml", "agent: [unclosed")]:
        task(name, frontmatter=fm)
    for name, toml in [("toml memory 401 digits", f"[environment]\nmemory_mb = {huge}\n"),
                       ("toml unknown key", 'sauce = "x"\n'),
                       ("toml typo", "[environment]\nmemroy_mb = 4\n"),
                       ("toml strict not bool", 'strict = "no"\n'),
                       ("toml bad size", '[environment]\nmemory = "lots"\n'),
                       ("toml scoring key", '[verifier]\nuser = "agent"\n')]:
        task(name, toml=toml)
    for link in ("task.md", "environment", "verifier"):
        task(f"link {link}", link=link)
    task("scene role timeout 1e300", frontmatter="agents: {r: {agent: nop, timeout_sec: 1.0e+300}}"
         "\nscenes: [{turns: [{role: r}]}]")
    judged = task("verifier.md timeout 1e12")
    (judged / "verifier" / "verifier.md").write_text(
        "---\nstrategy: agent-judge\nagent: claude\ntimeout_sec: 1.0e+12\n---\n")
    scenes = root / "scenes.yaml"
    scenes.write_text(yaml.safe_dump({"scenes": [{"roles": [{"name": "r", "agent": "nop",
                                                             "idle_timeout_sec": 10**12}],
                                                  "turns": [{"role": "r"}]}]}))
    cases.append(("scenes file: idle timeout 1e12", ["run", str(good_task), "--scenes",
                                                      str(scenes), "--jobs-dir",
                                                      str(root / "jobs")]))
    study = root / "study.yaml"
    study.write_text(yaml.safe_dump({
        "name": "huge", "studies_dir": str(root / "studies"), "k": 10**8,
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}],
        "arms": [{"name": "a", "agent": "nop"}, {"name": "b", "agent": "oracle"}]}))
    cases.append(("study file: k 1e8", ["study", str(study)]))
    agents = root / "agents" / "slowpoke"
    agents.mkdir(parents=True)
    (agents / "agent.toml").write_text('name = "slowpoke"\n[launch]\nargv = ["slowpoke"]\n'
                                       "handshake_timeout_sec = 1e300\n")
    cases.append(("agent.toml: handshake 1e300", ["agents", "show", "slowpoke"],
                  {"BENCHFLOW_AGENTS_PATH": str(root / "agents")}))
    hello = str(good_task)
    for name, args in [("-k 0", ["run", hello, "-k", "0"]), ("-k 1e5", ["run", hello, "-k", "100000"]),
                       ("-n 0", ["run", hello, "-n", "0"]),
                       ("--timeout-multiplier -1", ["run", hello, "--timeout-multiplier", "-1"]),
                       ("--max-retries 1000", ["run", hello, "--max-retries", "1000"]),
                       ("--env k8s", ["run", hello, "--env", "k8s"]),
                       ("--network x", ["run", hello, "--network", "x"]),
                       ("-a 'a b'", ["run", hello, "-a", "a b"]),
                       ("missing path", ["run", "/nonexistent/task"]),
                       ("cleanup --all", ["sandbox", "cleanup", "--all"]),
                       ("fork -k 1e5", ["fork", str(root), "--at-turn", "0", "-k", "100000"]),
                       ("--resamples 2e6", ["compare", str(root), "--resamples", "2000000"]),
                       ("--port 70000", ["model-server", str(host_file), "--port", "70000"]),
                       ("resume not a job", ["jobs", "resume", str(root)])]:
        cases.append((f"flag: {name}", args))

    out = []
    for name, args, *env in cases:
        ran = lab.cli(args, **(env[0] if env else {}))
        text = ran.stdout + ran.stderr
        lines = [line for line in ran.stderr.splitlines() if line.strip()]
        clear = ran.returncode == 2 and "Traceback" not in text and "PRIVATE" not in text
        # one line; an unparsable flag gets typer's usage box, which names the flag
        one_line = len(lines) == 1 or (name.startswith("flag: -") and "Invalid value" in text)
        out.append(Outcome(name, clear and one_line, (lines[0] if lines else text.strip())[:100]))
        if not out[-1].ok:
            print(f"  FAIL {name}: exit {ran.returncode}: {text.strip()[:200]}", flush=True)
    return out


# -- leaks and data -----------------------------------------------------------------------------


def leaks(lab: Lab) -> tuple[int, int]:
    files = [p for job in lab.jobs if job.exists() for p in job.rglob("*") if p.is_file()]
    leaked = [p for p in files if any(v.encode() in p.read_bytes() for v in SECRETS.values())]
    for path in leaked:
        print(f"  LEAK {path}")
    return len(files), len(leaked)


def _lost(job_dir: Path) -> int:
    lost = len([p for p in job_dir.rglob("*.tmp")])
    for path in job_dir.glob("*/*/*/result.json"):
        try:
            RolloutResult.model_validate_json(path.read_text())
        except ValueError:
            lost += 1
    for trial in job_dir.glob("*/*/*__*"):
        if trial.is_dir() and not (trial / "result.json").exists():
            lost += 1
    try:
        JobResult.model_validate_json((job_dir / "result.json").read_text())
    except (OSError, ValueError):
        lost += 1
    return lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--skip-inputs", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the lab's folder here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the lab starts its own dockerd and mounts a tmpfs: run it as root")
    root = Path(tempfile.mkdtemp(prefix="bf-reliability-"))
    daemon = SecondDaemon()
    started = time.monotonic()
    try:
        daemon.start()
        daemon.load_base_image()
        lab = Lab(root, daemon)
        print("faults (on the lab's own Docker daemon):", flush=True)
        fault_rows = [] if args.skip_faults else faults(lab)
        print("bad inputs:", flush=True)
        input_rows = [] if args.skip_inputs else bad_inputs(lab)
        n_files, n_leaks = leaks(lab)
        lost = sum(_lost(job) for job in lab.jobs if job.exists())
        left = lab.leftovers() + lab.stranded
    finally:
        daemon.destroy()
        if args.keep:
            shutil.copytree(root, args.keep, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(root, ignore_errors=True)
    survived = sum(r.ok for r in fault_rows)
    clear = sum(r.ok for r in input_rows)
    print()
    print(f"{'measure':<34}{'tried':>8}{'ok':>8}")
    print(f"{'faults tried / survived':<34}{len(fault_rows):>8}{survived:>8}")
    print(f"{'bad inputs tried / clear errors':<34}{len(input_rows):>8}{clear:>8}")
    print(f"{'files scanned / secrets leaked':<34}{n_files:>8}{n_leaks:>8}")
    print(f"{'results lost (unreadable, .tmp)':<34}{'':>8}{lost:>8}")
    print(f"{'containers left on the lab daemon':<34}{'':>8}{left:>8}")
    print(f"({time.monotonic() - started:.0f} s)")
    ok = (survived == len(fault_rows) and clear == len(input_rows) and not n_leaks and not lost
          and not left)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
