"""Comparing workspace manifests and reading the scan's output (`rollout/workspace_changes`)."""

from __future__ import annotations

import hashlib

from benchflow.rollout.workspace_changes import (
    DIFF_MAX_CHARS,
    compare,
    is_flagged,
    parse_diffs,
    parse_manifest,
)


def sha(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def manifest_bytes(files: dict[str, bytes]) -> bytes:
    hashes = b"".join(f"{sha(c)}  ./{p}\n".encode() for p, c in files.items())
    sizes = b"".join(f"{len(c)}\t{p}\n".encode() for p, c in files.items())
    return hashes + b"--sizes--\n" + sizes + b"--diff--\ta.py\0-1\n+1!\n"


def test_compare_finds_created_modified_and_deleted_files():
    before = parse_manifest(manifest_bytes({"a.py": b"1", "b.py": b"2", "keep": b"k",
                                            "dir/c.txt": b"c"}))
    after = parse_manifest(manifest_bytes({"a.py": b"1!", "keep": b"k", "dir/c.txt": b"c",
                                           "new file.md": b"hi"}))
    assert compare(before, after) == [
        {"path": "a.py", "change": "modified", "size": 2, "sha256": sha(b"1!")},
        {"path": "b.py", "change": "deleted", "size": None, "sha256": None},
        {"path": "new file.md", "change": "created", "size": 2, "sha256": sha(b"hi")},
    ]
    assert compare(after, after) == []


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
