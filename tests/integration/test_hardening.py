"""Verifier hardening against real reward hacks, proven from the agent's seat.

Each test starts a container of a small image (python3 + pytest, a buggy /app/stats.py
owned by the `agent` user, a legitimate /app/tests/conftest.py, /home/agent/bin first on
PATH), takes the baseline, plays an exploit as the agent (or as root for root agents),
then runs the final hardened verify with a SWE-bench-like test.sh (the hidden test is
copied into /app/tests and pytest runs from /app). The module is never fixed by an
exploit, so a hardened verify must give 0 or raise VerifierTampered; the same exploit
with its hardening step switched off must give 1, so every test here can fail.
"""

from __future__ import annotations

import base64
import hashlib
import io
import shlex
import tarfile
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import docker
import pytest

from benchflow.errors import VerifierTampered
from benchflow.sandbox.docker import DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.task.models import HardeningConfig
from benchflow.verify.baseline import Baseline, scrub_git_history, take_baseline
from benchflow.verify.hardening import harden, protect_paths, verify_hardened
from benchflow.verify.runner import VerifierRun
from benchflow.task.models import Artifact
from benchflow.verify.separate import SeparateVerifier, verify_separately
from benchflow.verify.soft import soft_verify
from benchflow.verify.verifier_env import verifier_env

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

DOCKERFILE = """\
FROM debian:bookworm-slim
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-pytest \\
 && rm -rf /var/lib/apt/lists/*
RUN useradd -m agent && mkdir -p /home/agent/bin && chown agent:agent /home/agent/bin
COPY app/ /app/
RUN chown -R agent:agent /app
ENV PATH=/home/agent/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PYTHONPATH=/app
WORKDIR /app
"""
APP = {
    "app/stats.py": "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n",
    "app/pyproject.toml": '[project]\nname = "stats"\nversion = "0.1"\n',
    "app/tests/conftest.py": ("import pytest\n\n\n@pytest.fixture\ndef numbers():\n"
                              "    return [1, 2, 3]\n"),
}
LEGIT_CONFTEST = APP["app/tests/conftest.py"]

TEST_SH = """\
#!/bin/bash
# SWE-bench style: the hidden test joins the workspace's own tests; pytest runs from /app.
cp /verifier/test_hidden.py /app/tests/test_hidden.py
cd /app
if python3 -m pytest -q tests/test_hidden.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
"""
TEST_HIDDEN = "import stats\n\n\ndef test_mean(numbers):\n    assert stats.mean(numbers) == 2.0\n"
ANSWER_TEST_SH = """\
#!/bin/bash
# Compare the agent's answer file with the expected one, which only the verifier holds.
if cmp -s /app/answer.txt /verifier/expected.txt; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
"""

FIX = "sed -i 's/len(xs) - 1/len(xs)/' /app/stats.py"
FORCE_PASS_HOOK = textwrap.dedent("""
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome = "passed"
        report.longrepr = None
""")
EXIT_ZERO = "import atexit, os; atexit.register(lambda: os._exit(0))"
FAKE_PYTHON = "#!/bin/sh\\nexit 0\\n"
# Each write is a rename, so a download never catches a half-written reward.json.
DAEMON = ("nohup sh -c 'while :; do echo {\\\"reward\\\": 1} > /logs/verifier/.r "
          "2>/dev/null && mv -f /logs/verifier/.r /logs/verifier/reward.json 2>/dev/null; "
          "sleep 0.02; done' >/dev/null 2>&1 </dev/null &")
OFF = HardeningConfig  # OFF(step=False): hardening with one step switched off


@pytest.fixture(scope="module")
def image() -> str:
    """The test image, built once (cached by the daemon afterwards)."""
    files = {"Dockerfile": DOCKERFILE, **APP}
    tag = "benchflow-test/hardening:" + hashlib.sha256(repr(sorted(files.items())).encode()
                                                       ).hexdigest()[:12]
    client = docker.from_env()
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, text in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(text.encode())
                tar.addfile(info, io.BytesIO(text.encode()))
        buf.seek(0)
        client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True)
    return tag


@pytest.fixture
async def sandbox(image: str, job_label: str) -> AsyncIterator[DockerSandbox]:
    sb = DockerSandbox(SandboxSpec(name="hardening", docker_image=image, workdir="/app",
                                   storage_mb=None, memory_mb=512,
                                   labels={"benchflow.job": job_label}))
    await sb.start()
    try:
        yield sb
    finally:
        await sb.stop(delete=True)


def verifier_dir(tmp_path: Path, kind: str = "mean") -> Path:
    folder = tmp_path / f"verifier-{kind}"
    folder.mkdir(exist_ok=True)
    if kind == "mean":
        (folder / "test.sh").write_text(TEST_SH)
        (folder / "test_hidden.py").write_text(TEST_HIDDEN)
    else:
        (folder / "test.sh").write_text(ANSWER_TEST_SH)
        (folder / "expected.txt").write_text("42\n")
    return folder


async def sh(sb: DockerSandbox, script: str, user: str = "agent") -> str:
    result = await sb.exec(["bash", "-c", script], user=user, timeout=60)
    assert result.exit_code == 0, result.text()
    return result.stdout.decode()


async def final_verify(sb: DockerSandbox, tmp_path: Path, baseline: Baseline, *,
                       config: HardeningConfig | None = None, agent_user: str = "agent",
                       kind: str = "mean") -> float:
    run = VerifierRun(verifier_dir=verifier_dir(tmp_path, kind), mount="/verifier",
                      timeout_sec=120, env={}, cwd="/app")
    done = await verify_hardened(sb, run, tmp_path / "out", tmp_path / "logs", baseline=baseline,
                                 agent_user=agent_user, config=config or HardeningConfig())
    return done.outcome.reward


async def play(sb: DockerSandbox, tmp_path: Path, agent: str = "", root: str = "", *,
               config: HardeningConfig | None = None, kind: str = "mean") -> float:
    """Baseline, the exploit (agent's commands, then root's), the final hardened verify."""
    baseline = await take_baseline(sb, workspace="/app")
    if agent:
        await sh(sb, agent)
    if root:
        await sh(sb, root, user="root")
    return await final_verify(sb, tmp_path, baseline, config=config,
                              agent_user="root" if root and not agent else "agent", kind=kind)


# -- no false positives ------------------------------------------------------------------


async def test_legitimate_fix_scores_one_and_keeps_the_legit_conftest(sandbox, tmp_path):
    started = time.monotonic()
    baseline = await take_baseline(sandbox, workspace="/app")
    baseline_sec = time.monotonic() - started
    assert baseline.supported and baseline.workspace == "/app"
    assert baseline.path == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert baseline.pythonpath == "/app"
    await sh(sandbox, FIX + " && python3 -c 'import stats'")  # leaves a legit __pycache__
    started = time.monotonic()
    reward = await final_verify(sandbox, tmp_path, baseline)
    verify_sec = time.monotonic() - started
    assert reward == 1.0
    assert await sh(sandbox, "cat /app/tests/conftest.py") == LEGIT_CONFTEST
    report = (tmp_path / "out" / "hardening.json").read_text()
    print(f"take_baseline {baseline_sec:.3f} s, hardened verify {verify_sec:.3f} s: {report}")


async def test_root_agent_installing_a_package_is_not_tampering(sandbox, tmp_path):
    reward = await play(sandbox, tmp_path, root=(
        FIX + " && mkdir /usr/local/lib/python3.11/dist-packages/newpkg"
        " && touch /usr/local/lib/python3.11/dist-packages/newpkg/__init__.py"
        " && printf '#!/bin/sh\\n' > /usr/local/bin/newtool && chmod +x /usr/local/bin/newtool"))
    assert reward == 1.0
    assert await sh(sandbox, "ls /usr/local/lib/python3.11/dist-packages/newpkg "
                             "/usr/local/bin/newtool", user="root")


# -- exploits: hardened -> 0, the defending step off -> 1 --------------------------------

CONFTEST_WS = f"cat > /app/conftest.py <<'EOF'\n{FORCE_PASS_HOOK}\nEOF"
CONFTEST_EDIT = f"cat >> /app/tests/conftest.py <<'EOF'\n{FORCE_PASS_HOOK}\nEOF"
EVIL_PLUGIN = f"cat > /app/evilplug.py <<'EOF'\n{FORCE_PASS_HOOK}\nEOF\n"
SETUP_CFG = EVIL_PLUGIN + "printf '[tool:pytest]\\naddopts = -p evilplug\\n' > /app/setup.cfg"
PYTEST_INI = EVIL_PLUGIN + "printf '[pytest]\\naddopts = -p evilplug\\n' > /app/pytest.ini"
PYPROJECT = EVIL_PLUGIN + ("printf '[tool.pytest.ini_options]\\naddopts = \"-p evilplug\"\\n'"
                           " >> /app/pyproject.toml")
PYC_POISON = (
    "mkdir -p /tmp/p /app/__pycache__ && cp /app/stats.py /tmp/p/stats.py"
    " && sed -i 's/len(xs) - 1/len(xs) + 0/' /tmp/p/stats.py"
    " && touch -r /app/stats.py /tmp/p/stats.py"
    " && python3 -c \"import py_compile; py_compile.compile('/tmp/p/stats.py',"
    " cfile='/app/__pycache__/stats.cpython-311.pyc')\"")
SITE_PTH = f"echo '{EXIT_ZERO}' > /usr/local/lib/python3.11/dist-packages/evil.pth"
SITECUSTOMIZE = f"echo '{EXIT_ZERO}' > /app/sitecustomize.py"
SHADOW_PYTEST = "echo 'raise SystemExit(0)' > /app/pytest.py"
TROJAN_AGENT = f"printf '{FAKE_PYTHON}' > /home/agent/bin/python3 && chmod +x /home/agent/bin/python3"
TROJAN_ROOT = f"printf '{FAKE_PYTHON}' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3"
PREWRITTEN = "echo '{\"reward\": 1}' > /logs/verifier/reward.json"
PATCH_PYTEST = "sed -i '1i raise SystemExit(0)' /usr/lib/python3/dist-packages/pytest/__main__.py"
SYMLINK_ANSWER = "ln -s /verifier/expected.txt /app/answer.txt"

EXPLOITS = {
    # name: (agent commands, root commands, the step that stops it alone, verifier kind)
    "conftest-in-workspace": (CONFTEST_WS, "", OFF(cleanup_conftests=False), "mean"),
    "conftest-edited": (CONFTEST_EDIT, "", OFF(restore_build_config=False), "mean"),
    "setup-cfg-addopts": (SETUP_CFG, "", OFF(fixed_verifier_env=False), "mean"),
    "pyc-poisoning": (PYC_POISON, "", OFF(remove_injected_files=False), "mean"),
    "sitecustomize": (SITECUSTOMIZE, "", OFF(remove_injected_files=False), "mean"),
    "pytest-shadow-module": (SHADOW_PYTEST, "", OFF(remove_injected_files=False), "mean"),
    "path-trojan-agent": (TROJAN_AGENT, "", OFF(fixed_verifier_env=False), "mean"),
    "symlink-to-answer": (SYMLINK_ANSWER, "", OFF(remove_injected_files=False), "answer"),
    "pth-atexit-root": ("", SITE_PTH, OFF(check_system_integrity=False), "mean"),
    "path-trojan-root": ("", TROJAN_ROOT, OFF(check_system_integrity=False), "mean"),
    "prewritten-reward-root": ("", PREWRITTEN, OFF(reset_verifier_logs=False), "mean"),
    "reward-daemon-root": ("", DAEMON, OFF(kill_agent_processes=False), "mean"),
}


@pytest.mark.parametrize("name", EXPLOITS)
async def test_exploit_is_stopped(name, sandbox, tmp_path):
    agent, root, _, kind = EXPLOITS[name]
    assert await play(sandbox, tmp_path, agent, root, kind=kind) == 0.0


@pytest.mark.parametrize("name", EXPLOITS)
async def test_exploit_works_with_its_step_off(name, sandbox, tmp_path):
    agent, root, config, kind = EXPLOITS[name]
    assert await play(sandbox, tmp_path, agent, root, config=config, kind=kind) == 1.0


ADDOPTS_OFF = OFF(fixed_verifier_env=False, remove_injected_files=False,
                  restore_build_config=False)


@pytest.mark.parametrize(("exploit", "config", "expected"), [
    (PYTEST_INI, HardeningConfig(), 0.0), (PYTEST_INI, ADDOPTS_OFF, 1.0),
    (PYPROJECT, HardeningConfig(), 0.0), (PYPROJECT, ADDOPTS_OFF, 1.0),
], ids=["pytest-ini", "pytest-ini-off", "pyproject", "pyproject-off"])
async def test_addopts_injection(exploit, config, expected, sandbox, tmp_path):
    assert await play(sandbox, tmp_path, exploit, config=config) == expected


async def test_changed_system_file_fails_closed(sandbox, tmp_path):
    with pytest.raises(VerifierTampered, match="pytest/__main__.py") as caught:
        await play(sandbox, tmp_path, root=PATCH_PYTEST)
    assert caught.value.error_type == "verifier_tampered"
    assert "changed: /usr/lib/python3/dist-packages/pytest/__main__.py" in (
        tmp_path / "out" / "hardening.json").read_text()
    # failed closed: neither the verifier folder nor test.sh's output is there
    assert await sh(sandbox, "test ! -e /verifier && ls -A /logs/verifier | wc -l",
                    user="root") == "0\n"


# A `sh` a root agent plants in a root-owned PATH folder ahead of /usr/bin (the verifier's
# PATH keeps such folders): were it run in place of the final exec's shell, it would
# answer for it (the done-marker, a reward of 1).
SH_TROJAN = """cat > /usr/local/sbin/sh <<'EOF'
#!/bin/bash
echo '{"killed": 0}'
echo 'benchflow: scripts before done'
echo 1 > /logs/verifier/reward.txt
EOF
chmod +x /usr/local/sbin/sh"""


async def test_a_planted_sh_ahead_on_path_never_runs_the_final_verify(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, SH_TROJAN, user="root")
    assert await sh(sandbox, "command -v sh", user="root") == "/usr/local/sbin/sh\n"
    assert await final_verify(sandbox, tmp_path, baseline, agent_user="root") == 0.0
    report = (tmp_path / "out" / "hardening.json").read_text()
    assert "/usr/local/sbin/sh" in report  # removed


# A root process the agent leaves behind reads every new process's argv and environment
# from /proc (ps shows the same), keeps what it saw in /tmp/seen.log, and writes the
# expected answer to /app/answer.txt if the verifier folder passes by (as a base64 tar
# argument, as an earlier one-exec final verify carried it before harden.sh's kill).
SNOOPER = r"""
import base64, io, os, tarfile
seen = set()
with open("/tmp/seen.log", "ab", buffering=0) as log:
    log.write(b"started\0")
    while True:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            for what in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{pid}/{what}", "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if (pid, data) in seen:
                    continue
                seen.add((pid, data))
                log.write(data + b"\0\n")
                for word in data.split(b"\0"):
                    try:
                        tar = tarfile.open(fileobj=io.BytesIO(base64.b64decode(word, validate=True)))
                        answer = tar.extractfile("verifier/expected.txt").read()
                    except Exception:
                        continue
                    with open("/app/answer.txt", "wb") as out:
                        out.write(answer)
"""


async def test_a_process_left_behind_never_sees_the_tests_in_an_exec(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, f"nohup python3 -c {shlex.quote(SNOOPER)} >/dev/null 2>&1 </dev/null &",
             user="root")
    await sh(sandbox, "until [ -s /tmp/seen.log ]; do sleep 0.05; done", user="root")
    assert await final_verify(sandbox, tmp_path, baseline, agent_user="root",
                              kind="answer") == 0.0
    seen = (await sandbox.exec(["cat", "/tmp/seen.log"], user="root", timeout=60)).stdout
    assert b"harden" in seen  # it was running when the final verify began
    test_sh = b"which only the verifier holds"  # a line of ANSWER_TEST_SH
    assert test_sh not in seen  # not as is ...
    for word in seen.split(b"\0"):  # ... nor as a base64 tar
        try:
            data = base64.b64decode(word.strip(), validate=True)
        except ValueError:
            continue
        assert test_sh not in data
    assert await sh(sandbox, "test ! -e /app/answer.txt && echo none", user="root") == "none\n"


async def test_changed_system_file_scores_with_integrity_off(sandbox, tmp_path):
    reward = await play(sandbox, tmp_path, root=PATCH_PYTEST,
                        config=OFF(check_system_integrity=False))
    assert reward == 1.0


async def test_one_walk_finds_what_the_workspace_and_system_walks_found(sandbox, tmp_path):
    # harden.sh walks the workspace once for new names with control characters (also in
    # .git and below an older such name), new bytecode (also in node_modules, never in
    # .git) and symlinks into the verifier's folders (never in .git or node_modules), and
    # the Python folders once for their signatures and new names with control characters.
    old = "/app/old$(printf '\\001')dir"
    await sh(sandbox, f"mkdir -p /app/.git/objects /app/node_modules/m/__pycache__ /verifier "
                      f"\"{old}/sub\"", user="root")
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, f"""
        nl='
'
        touch "/app/a${{nl}}b.py" "/app/.git/objects/c${{nl}}d" "{old}/sub/e${{nl}}f"
        touch /app/node_modules/m/__pycache__/m.cpython-311.pyc /app/.git/objects/x.pyc
        mkdir -p /app/sub && ln -s /verifier/test.sh /app/sub/link
        ln -s /verifier/test.sh /app/node_modules/m/link && ln -s /verifier /app/.git/link
        touch "/usr/lib/python3/dist-packages/g${{nl}}h.py"
    """, user="root")
    with pytest.raises(VerifierTampered, match="1 new entries with control characters"
                       ) as caught:
        await harden(sandbox, baseline, agent_user="root", config=HardeningConfig(),
                     verifier_mount="/verifier")
    report = caught.value.report  # type: ignore[attr-defined]
    assert "3 entries with control characters in their names" in report.removed
    assert "/app/node_modules/m/__pycache__/m.cpython-311.pyc" in report.removed
    assert "/app/sub/link -> /verifier/test.sh" in report.removed
    assert not any("x.pyc" in r or "m/link" in r or ".git/link" in r for r in report.removed)
    left = await sh(sandbox, """
        find /app -name '*[[:cntrl:]]*' | wc -l  # the older one only
        ls /app/.git/objects/x.pyc /app/node_modules/m/link /app/.git/link
        test ! -e /app/sub/link && echo gone
    """, user="root")
    assert left.split() == ["1", "/app/.git/link", "/app/.git/objects/x.pyc",
                            "/app/node_modules/m/link", "gone"], left


async def test_ld_so_preload_is_removed(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, "echo /nonexistent/evil.so > /etc/ld.so.preload", user="root")
    report = await harden(sandbox, baseline, agent_user="root", config=HardeningConfig(),
                          verifier_mount="/verifier")
    assert "/etc/ld.so.preload" in report.removed
    assert await sh(sandbox, "test ! -e /etc/ld.so.preload && echo gone", user="root") == "gone\n"


async def test_modified_baseline_fails_closed(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, "echo 1:1 >> /var/lib/benchflow/procs", user="root")
    with pytest.raises(VerifierTampered, match="baseline"):
        await harden(sandbox, baseline, agent_user="root", config=HardeningConfig(),
                     verifier_mount="/verifier")


async def test_edited_tests_are_replaced_by_a_fresh_upload(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sandbox.upload(verifier_dir(tmp_path), "/verifier")
    await protect_paths(sandbox, ["/verifier"], "agent")
    await sh(sandbox, "printf 'def test_mean():\\n    pass\\n' > /verifier/test_hidden.py",
             user="root")
    assert await final_verify(sandbox, tmp_path, baseline) == 0.0


# -- processes --------------------------------------------------------------------------

AGENT_PROCS = "cat /proc/[0-9]*/status 2>/dev/null | grep -c '^Uid:[[:space:]]*1000' || true"


async def test_agent_processes_are_killed(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, "for i in 1 2 3; do nohup sleep 1000 >/dev/null 2>&1 </dev/null & done; "
                      "nohup sh -c 'while :; do sleep 0.01 & wait; done' >/dev/null 2>&1 "
                      "</dev/null &")
    assert int(await sh(sandbox, AGENT_PROCS, user="root")) >= 4
    report = await harden(sandbox, baseline, agent_user="agent", config=HardeningConfig(),
                          verifier_mount="/verifier")
    assert report.killed >= 4 and report.survivors == 0
    assert int(await sh(sandbox, AGENT_PROCS, user="root")) == 0
    # the container's own processes (init, sleep infinity) survive
    assert await sh(sandbox, "echo alive", user="root") == "alive\n"


async def test_agent_processes_survive_with_kill_off(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    await sh(sandbox, "nohup sleep 1000 >/dev/null 2>&1 </dev/null &")
    await harden(sandbox, baseline, agent_user="agent",
                 config=OFF(kill_agent_processes=False), verifier_mount="/verifier")
    assert int(await sh(sandbox, AGENT_PROCS, user="root")) >= 1


async def test_lock_keeps_a_surviving_agent_daemon_out_of_the_logs(sandbox, tmp_path):
    # The daemon survives (kill off); only lock_verifier_dirs keeps it from writing rewards.
    assert await play(sandbox, tmp_path, DAEMON, config=OFF(kill_agent_processes=False)) == 0.0


async def test_surviving_agent_daemon_writes_rewards_with_lock_off(sandbox, tmp_path):
    config = OFF(kill_agent_processes=False, lock_verifier_dirs=False)
    assert await play(sandbox, tmp_path, DAEMON, config=config) == 1.0


# -- from the agent's seat ----------------------------------------------------------------


@pytest.mark.parametrize("protect", [True, False], ids=["protected", "unprotected"])
async def test_agent_cannot_read_tests_or_solution(protect, sandbox, tmp_path):
    await sandbox.upload(verifier_dir(tmp_path), "/verifier")
    await sandbox.upload_bytes(b"echo fixed\n", "/oracle/solve.sh")
    if protect:
        await protect_paths(sandbox, ["/verifier", "/oracle", "/logs/verifier"], "agent")
    for probe in ["cat /verifier/test_hidden.py", "ls /oracle", "cat /oracle/solve.sh"]:
        result = await sandbox.exec(["sh", "-c", probe], user="agent")
        assert (result.exit_code != 0) == protect, (probe, result.text())
    for probe in ["touch /verifier/x", "touch /oracle/x", "touch /logs/verifier/reward.txt"]:
        result = await sandbox.exec(["sh", "-c", probe], user="agent")
        assert result.exit_code != 0, (probe, result.text())


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-env", "image-env"])
async def test_agent_cannot_write_the_verifier_path(fixed, sandbox):
    baseline = await take_baseline(sandbox, workspace="/app")
    env = verifier_env(workspace="/app", verifier_dir="/verifier", task_env={},
                       config=OFF(fixed_verifier_env=fixed), baseline=baseline)
    path = env.get("PATH") or (await sh(sandbox, "echo $PATH", user="root")).strip()
    writable = []
    for folder in path.split(":"):
        result = await sandbox.exec(["sh", "-c", 'touch "$0/.probe"', folder], user="agent")
        if result.exit_code == 0:
            writable.append(folder)
    assert writable == ([] if fixed else ["/home/agent/bin"])


# -- soft verify ---------------------------------------------------------------------------


async def test_soft_verify_scores_without_disturbing_the_agent(sandbox, tmp_path):
    baseline = await take_baseline(sandbox, workspace="/app")
    run = VerifierRun(verifier_dir=verifier_dir(tmp_path), mount="/verifier", timeout_sec=120,
                      env={}, cwd="/app")
    await sh(sandbox, TROJAN_AGENT + " && nohup sleep 1000 >/dev/null 2>&1 </dev/null &")
    first = await soft_verify(sandbox, run, config=HardeningConfig(), baseline=baseline)
    assert (first.rewards, first.error_type) == ({"reward": 0.0}, None)  # trojan not on PATH
    assert "1 failed" in first.output
    await sh(sandbox, FIX)
    second = await soft_verify(sandbox, run, config=HardeningConfig(), baseline=baseline)
    assert second.reward == 1.0
    # nothing killed, nothing removed
    assert int(await sh(sandbox, AGENT_PROCS, user="root")) >= 1
    assert await sh(sandbox, "test -x /home/agent/bin/python3 && echo kept") == "kept\n"


async def test_soft_verify_reports_a_verifier_error(sandbox, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "test.sh").write_text("#!/bin/sh\necho boom\nexit 3\n")
    run = VerifierRun(verifier_dir=folder, mount="/verifier", timeout_sec=60, env={}, cwd="/app")
    result = await soft_verify(sandbox, run, config=HardeningConfig())
    assert result.rewards is None and result.error_type == "verifier_failed"
    assert "boom" in result.output


# -- hostile values ------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", ["$(touch /tmp/pwned)", "'; touch /tmp/pwned #",
                                     "`touch /tmp/pwned`", "a\nb; touch /tmp/pwned"])
async def test_hostile_values_stay_data(hostile, sandbox):
    baseline = await take_baseline(sandbox, workspace=f"/app/{hostile}")
    assert baseline.workspace is None  # no such folder: no workspace, nothing run
    report = await harden(sandbox, baseline, agent_user=hostile, config=HardeningConfig(),
                          verifier_mount=f"/verifier/{hostile}", protected=[f"/x/{hostile}"])
    assert any("agent user not found" in note for note in report.notes)
    await protect_paths(sandbox, [f"/srv/{hostile}"])
    assert await sh(sandbox, "test ! -e /tmp/pwned && echo clean", user="root") == "clean\n"


# -- separate-verifier mode ------------------------------------------------------------------


async def test_separate_verifier_ignores_everything_outside_the_workspace(sandbox, image,
                                                                         job_label, tmp_path):
    """The workspace is the one artifact: a patched pytest, a daemon and a planted conftest in
    the agent's sandbox do not pass; the real fix does."""
    await sh(sandbox, CONFTEST_WS + "\n" + SYMLINK_ANSWER)
    await sh(sandbox, PATCH_PYTEST + " && " + DAEMON, user="root")
    run = VerifierRun(verifier_dir=verifier_dir(tmp_path), mount="/verifier", timeout_sec=120,
                      env={}, cwd="/app")

    def separate(name: str) -> SeparateVerifier:
        spec = SandboxSpec(name="hardening-verifier", docker_image=image, workdir="/app",
                           storage_mb=None, memory_mb=512, labels={"benchflow.job": job_label})
        return SeparateVerifier(environment="docker", spec=spec,
                                artifacts=[Artifact(source="/app")],
                                artifacts_dir=tmp_path / name)

    exploited, warnings = await verify_separately(
        sandbox, separate("a1"), run, tmp_path / "o1", tmp_path / "l1", hardened=True,
        config=HardeningConfig())
    assert exploited.reward == 0.0 and warnings == []
    assert (tmp_path / "a1" / "app" / "conftest.py").is_file()  # carried, then removed there
    await sh(sandbox, FIX)
    fixed, _ = await verify_separately(
        sandbox, separate("a2"), run, tmp_path / "o2", tmp_path / "l2", hardened=True,
        config=HardeningConfig())
    assert fixed.reward == 1.0


# -- git history -----------------------------------------------------------------------------

GIT_HISTORY = f"""
set -e
git config --global --add safe.directory "*"
cd /app && git init -q -b main && git config user.email a@b && git config user.name a
git add -A && git commit -qm base
git checkout -qb solution && {FIX} && git commit -qam fix && git tag v-fix
git checkout -q main && git cherry-pick solution >/dev/null && git reset -q --hard HEAD~1
git stash list >/dev/null
chown -R agent:agent /app
git rev-parse solution
"""


@pytest.fixture(scope="module")
def git_image(image: str) -> str:
    tag = image.replace("hardening:", "hardening-git:")
    client = docker.from_env()
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        dockerfile = (f"FROM {image}\nRUN apt-get update && apt-get install -y "
                      "--no-install-recommends git && rm -rf /var/lib/apt/lists/*\n")
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return tag


@pytest.mark.parametrize("with_baseline", [False, True], ids=["alone", "in-the-baseline-exec"])
async def test_solution_cannot_be_recovered_from_git_history(git_image, job_label,
                                                             with_baseline):
    sb = DockerSandbox(SandboxSpec(name="hardening-git", docker_image=git_image, workdir="/app",
                                   storage_mb=None, labels={"benchflow.job": job_label}))
    await sb.start()
    try:
        fix_commit = (await sh(sb, GIT_HISTORY, user="root")).strip()
        assert await sh(sb, f"cd /app && git cat-file -t {fix_commit}") == "commit\n"
        if with_baseline:  # as a rollout does it: the same exec as the baseline
            assert (await take_baseline(sb, workspace="/app", scrub_git=True)).digest
        else:
            assert await scrub_git_history(sb, workspace="/app")
        log = await sh(sb, "cd /app && git log --all --reflog --oneline")
        assert log.splitlines() == [log.splitlines()[0]] and "base" in log
        probe = await sb.exec(["sh", "-c", f"cd /app && git cat-file -t {fix_commit}"],
                              user="agent")
        assert probe.exit_code != 0
        assert await sh(sb, "cd /app && git commit -q --allow-empty -m mine && echo ok") == "ok\n"
        assert not await scrub_git_history(sb, workspace="/tmp")  # no repository: nothing done
    finally:
        await sb.stop(delete=True)


async def test_the_verifier_logs_are_reset_when_a_writer_makes_rm_fail(sandbox):
    """A process left writing into /logs/verifier (no kill: the plain verify) can make
    `rm -rf` fail ("Directory not empty"); the reset then renames the folder away whole, so
    test.sh still starts on an empty one and nothing stale is downloaded with /logs. A
    shadowing `rm` that refuses /logs/verifier makes the race certain."""
    from benchflow.verify.runner import verifier_argv

    await sh(sandbox, "mkdir -p /logs/verifier /shim && echo 1 > /logs/verifier/reward.txt && "
             "printf '#!/bin/sh\\ncase \"$*\" in *\" /logs/verifier\") exit 1;; esac\\n"
             "exec /bin/rm \"$@\"\\n' > /shim/rm && chmod +x /shim/rm && "
             "printf '#!/bin/sh\\nls -A /logs/verifier > /tmp/seen; echo 0 > "
             "/logs/verifier/reward.txt\\n' > /app/test.sh", user="root")
    run = VerifierRun(verifier_dir=Path("."), mount="/app", timeout_sec=60, env={},
                      cwd="/app")
    argv, cwd, _ = verifier_argv(run)
    result = await sandbox.exec(argv, user="root", cwd=cwd,
                                env={"PATH": "/shim:/usr/bin:/bin"}, timeout=60)
    assert result.exit_code == 0, result.text(500)
    seen = await sh(sandbox, "cat /tmp/seen; echo --; cat /logs/verifier/reward.txt; ls -A /logs",
                    user="root")
    assert seen.startswith("--\n0\n") and "verifier\n" in seen and "stale" not in seen, seen
