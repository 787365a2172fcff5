"""Per-turn workspace changes (`rollout/workspace_changes`): comparing manifests, reading
the scan's output, choosing what to hash again from a stat walk, and the tracker with the
real `workspace_scan.sh` on a host folder (`LocalSandbox`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from benchflow.config import Role
from benchflow.rollout.workspace_changes import (
    DIFF_MAX_BYTES,
    DIFF_MAX_CHARS,
    FileState,
    Listing,
    Manifest,
    WorkspaceTracker,
    _chunks,
    compare,
    is_flagged,
    parse_diffs,
    parse_hashes,
    parse_listing,
    to_hash,
    turn_arguments,
    updated,
)
from benchflow.steps import Step
from tests.fakes.local_sandbox import LocalSandbox


def sha(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def manifest(files: dict[str, bytes]) -> Manifest:
    return Manifest({p: FileState(sha(c), len(c)) for p, c in files.items()})


def test_compare_finds_created_modified_and_deleted_files():
    before = manifest({"a.py": b"1", "b.py": b"2", "keep": b"k", "dir/c.txt": b"c"})
    after = manifest({"a.py": b"1!", "keep": b"k", "dir/c.txt": b"c", "new file.md": b"hi"})
    assert compare(before, after) == [
        {"path": "a.py", "change": "modified", "size": 2, "sha256": sha(b"1!")},
        {"path": "b.py", "change": "deleted", "size": None, "sha256": None},
        {"path": "new file.md", "change": "created", "size": 2, "sha256": sha(b"hi")},
    ]
    assert compare(after, after) == []
    restatted = Manifest({p: FileState(f.sha256, f.size, b"1 2 3 4")
                          for p, f in after.files.items()})
    assert compare(after, restatted) == []  # a new status alone is no change


def test_diffs_are_split_by_path_binary_has_none_and_long_ones_are_cut():
    long_diff = "+" + "x" * (DIFF_MAX_CHARS + 10) + "\n"
    out = (b"--diff--\ta.py\0--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-1\n+1!\n"
           b"--diff--\tbin\0Binary files a/bin and b/bin differ\n"
           b"--diff--\tbig\0" + long_diff.encode() + b"--diff--\tgone\0")
    diffs = parse_diffs(out)
    assert diffs["a.py"] == "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-1\n+1!\n"
    assert diffs["bin"] is None and diffs["gone"] is None
    assert diffs["big"] is not None and diffs["big"].endswith("characters)\n")
    assert len(diffs["big"]) < DIFF_MAX_CHARS + 100


def test_test_verifier_and_config_files_are_flagged():
    for path in ("pyproject.toml", "src/conftest.py", "tests/helpers.py", "pkg/test_x.py",
                 "web/app.spec.ts", "x_test.go", "checks/verify.sh"):
        assert is_flagged(path, ["checks"]), path
    for path in ("src/app.py", "README.md", "testdata.txt", "checksum.py"):
        assert not is_flagged(path, ["checks"]), path


# -- the stat walk ----------------------------------------------------------------------

STAMP = b"0 100.500000000 7 /tmp/state/stamp\0"


def test_a_status_is_trusted_only_when_listed_before_the_stamps_clock_tick():
    data = (STAMP + b"3 100.499999999 11 ./old.txt\0"
            b"5 100.500000000 12 ./same tick.txt\0"
            b"8 100.6 13 ./dir/later\0"
            b"9 100.4 14 ./a ./b\0")
    listing = parse_listing(data)
    assert listing.stamp_ns == 100_500_000_000
    assert listing.files == {"old.txt": (3, b"3 100.499999999 11"),
                             "same tick.txt": (5, None), "dir/later": (8, None),
                             "a ./b": (9, b"9 100.4 14")}


def test_without_a_stamp_no_status_is_trusted():
    listing = parse_listing(b"3 100.1 11 ./a\0")
    assert listing.stamp_ns is None and listing.files == {"a": (3, None)}


def test_init_output_holds_the_listing_then_the_hashes():
    data = (STAMP + b"1 1.0 5 ./a b\0--hashes--\0"
            + f"{sha(b'x')}  ./a b\n\\{sha(b'y')}  ./odd\\\\name\n".encode())
    assert parse_listing(data).files == {"a b": (1, b"1 1.0 5")}
    assert parse_hashes(data) == {"a b": sha(b"x")}  # sha256sum's escaped names: skipped


def listing(files: dict[str, tuple[int, bytes | None]]) -> Listing:
    return Listing(stamp_ns=1, files=files)


def test_only_new_changed_untrusted_and_gone_files_are_looked_at():
    before = Manifest({"same": FileState("s1", 1, b"1 a"), "edited": FileState("s2", 2, b"2 a"),
                       "racy": FileState("s3", 3, None), "gone": FileState("s4", 4, b"4 a")})
    now = listing({"same": (1, b"1 a"), "edited": (2, b"2 b"), "racy": (3, b"3 a"),
                   "new": (9, b"9 a"), "untrusted": (5, None)})
    before.files["untrusted"] = FileState("s5", 5, b"5 a")
    present, gone = to_hash(before, now)
    assert (present, gone) == (["edited", "new", "racy", "untrusted"], ["gone"])

    after = updated(before, now, {"edited": "s2", "new": "n", "racy": "r"})
    assert after.files["same"] is before.files["same"]  # not hashed: kept
    assert after.files["edited"] == FileState("s2", 2) and after.files["edited"].status == b"2 b"
    assert after.files["racy"].status == b"3 a"  # trusted from now on
    assert "untrusted" not in after.files  # hashed but no hash came back: it went away
    assert "gone" not in after.files
    assert [c["path"] for c in compare(before, after)] == ["gone", "new", "racy", "untrusted"]


def test_turn_arguments_give_the_gone_first_and_mark_large_files():
    sizes = listing({"small": (DIFF_MAX_BYTES, b"x"), "large": (DIFF_MAX_BYTES + 1, b"y")})
    assert turn_arguments(["large", "small"], ["old/x"], sizes) == [
        "-./old/x", "=./large", "+./small"]


def test_long_argument_lists_are_cut_into_runs():
    arguments = [f"+./{i:04d}" for i in range(100)]  # 7 bytes, with the separator 8
    runs = _chunks(arguments, limit=80)
    assert [len(run) for run in runs] == [10] * 10
    assert [a for run in runs for a in run] == arguments
    assert _chunks([]) == []


# -- the tracker, with the real script on a host folder ---------------------------------


class Recording(WorkspaceTracker):
    """A tracker that notes each call of the script (mode and arguments)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, list[str]]] = []

    async def _scan(self, mode, arguments=()):
        self.calls.append((mode, list(arguments)))
        return await super()._scan(mode, arguments)


STEP = Step(scene="s", scene_index=0, turn_index=0, role=Role(name="coder", agent="x"),
            prompt="p")


@pytest.fixture
async def tracker(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("keep\n")
    (work / "edit.txt").write_text("one\ntwo\n")
    (work / "gone.txt").write_text("bye\n")
    next_tick(tmp_path)  # the files' status is older than the first scan's stamp: trusted
    tracker = Recording(LocalSandbox(tmp_path), str(work), state_dir=str(tmp_path / "state"))
    await tracker.start(tmp_path / "start.json")
    assert tracker._before is not None and sorted(tracker._before.files) == [
        "edit.txt", "gone.txt", "keep.txt"]
    tracker.calls.clear()
    yield tracker
    await tracker.aclose()


def next_tick(folder: Path) -> None:
    """Wait until the file system's clock moves on (a tick is 1-10 ms): what is written
    from now on has a later ctime than what was written before."""
    probe = folder / ".tick"
    probe.write_text("0")
    first = probe.stat().st_ctime_ns
    while probe.stat().st_ctime_ns == first:
        probe.write_text("1")
    probe.unlink()


@pytest.mark.anyio
async def test_a_turn_that_changed_nothing_runs_only_the_stat_walk(tracker):
    assert await tracker.record(None, STEP) == []
    assert [mode for mode, _ in tracker.calls] == ["list"]


@pytest.mark.anyio
async def test_a_turn_hashes_and_diffs_only_what_it_touched(tracker):
    work = Path(tracker.workdir)
    (work / "edit.txt").write_text("one\nTWO\n")
    (work / "gone.txt").unlink()
    (work / "sub").mkdir()
    (work / "sub" / "new.py").write_text("x = 1\n")
    (work / "big.bin").write_bytes(b"\0" * (DIFF_MAX_BYTES + 1))
    changes = {c["path"]: c for c in await tracker.record(None, STEP)}
    assert tracker.calls[0] == ("list", [])
    assert tracker.calls[1] == ("turn", ["-./gone.txt", "=./big.bin", "+./edit.txt",
                                         "+./sub/new.py"])
    assert {p: c["change"] for p, c in changes.items()} == {
        "big.bin": "created", "edit.txt": "modified", "gone.txt": "deleted",
        "sub/new.py": "created"}
    assert "-two\n+TWO\n" in changes["edit.txt"]["diff"]
    assert "-bye\n" in changes["gone.txt"]["diff"]
    assert changes["big.bin"]["diff"] is None and changes["big.bin"]["size"] == DIFF_MAX_BYTES + 1
    assert changes["sub/new.py"]["sha256"] == sha(b"x = 1\n")

    (work / "sub" / "new.py").write_text("x = 2\n")  # the next diff is against this turn's
    changes = await tracker.record(None, STEP)
    assert [c["path"] for c in changes] == ["sub/new.py"]
    assert "-x = 1\n+x = 2\n" in changes[0]["diff"]


@pytest.mark.anyio
async def test_an_edit_that_keeps_size_and_mtime_is_still_seen(tracker):
    path = Path(tracker.workdir) / "edit.txt"
    assert await tracker.record(None, STEP) == []
    assert [mode for mode, _ in tracker.calls] == ["list"]
    before = path.stat()
    path.write_text("one\nTWO\n")  # same size; the mtime put back: the ctime tells
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    changes = await tracker.record(None, STEP)
    assert [(c["path"], c["change"]) for c in changes] == [("edit.txt", "modified")]
    assert "-two\n+TWO\n" in changes[0]["diff"]


@pytest.mark.anyio
async def test_a_file_turned_folder_and_back_keeps_its_copies_right(tracker):
    work = Path(tracker.workdir)
    (work / "edit.txt").unlink()
    (work / "edit.txt").mkdir()
    (work / "edit.txt" / "inner").write_text("in\n")
    changes = await tracker.record(None, STEP)
    assert [(c["path"], c["change"]) for c in changes] == [
        ("edit.txt", "deleted"), ("edit.txt/inner", "created")]
    (work / "edit.txt" / "inner").unlink()
    (work / "edit.txt").rmdir()
    (work / "edit.txt").write_text("back\n")
    changes = await tracker.record(None, STEP)
    assert [(c["path"], c["change"]) for c in changes] == [
        ("edit.txt", "created"), ("edit.txt/inner", "deleted")]
    assert changes[0]["diff"].endswith("+back\n")
    (work / "edit.txt").write_text("back again\n")
    changes = await tracker.record(None, STEP)
    assert "-back\n+back again\n" in changes[0]["diff"]
