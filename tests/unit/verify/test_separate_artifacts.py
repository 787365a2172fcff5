"""What a separate verifier is given: symlinks that lead out of a carried-over artifact are
dropped on the host, so a report cannot be a window onto the verifier's own files."""

from __future__ import annotations

import os
from pathlib import Path

from benchflow.verify.separate import drop_escaping_links


def test_links_leading_out_of_the_artifact_are_dropped(tmp_path):
    out = tmp_path / "app" / "out"
    (out / "sub").mkdir(parents=True)
    (out / "report.json").write_text("{}")
    (tmp_path / "app" / "input.txt").write_text("beside the artifact")
    links = {
        "answer.json": "/tests/expected.json",           # absolute: the verifier's file
        "up.txt": "../input.txt",                         # relative, out of the artifact
        "sub/deep.txt": "../../../tests/expected.json",  # deeper, further out
        "sub/sneaky.txt": "../sub/../../input.txt",       # comes back in, then leaves
        "same.json": "report.json",                       # inside: kept
        "sub/back.json": "../report.json",                # inside: kept
        "dangling.txt": "missing.txt",                    # inside though missing: kept
        "here": ".",                                      # inside: kept
        "via.txt": "here/../input.txt",                   # reads inside, leads out
    }
    for name, target in links.items():
        os.symlink(target, out / name)
    dropped = drop_escaping_links(out)
    assert sorted(p.relative_to(out).as_posix() for p in dropped) == [
        "answer.json", "sub/deep.txt", "sub/sneaky.txt", "up.txt", "via.txt"]
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_symlink())
    assert left == ["dangling.txt", "here", "same.json", "sub/back.json"]
    assert (out / "sub" / "back.json").read_text() == "{}"
    assert (out / "report.json").read_text() == "{}"


def test_an_artifact_that_is_itself_a_link_is_dropped(tmp_path):
    (tmp_path / "real.txt").write_text("x")
    link = tmp_path / "report.txt"
    os.symlink("real.txt", link)
    assert drop_escaping_links(link) == [link]
    assert not link.is_symlink() and (tmp_path / "real.txt").exists()


def test_plain_files_and_folders_are_left_alone(tmp_path):
    file = tmp_path / "a.txt"
    file.write_text("a")
    assert drop_escaping_links(file) == [] and file.read_text() == "a"
    assert drop_escaping_links(tmp_path / "missing") == []
    folder = tmp_path / "d"
    (folder / "e").mkdir(parents=True)
    assert drop_escaping_links(folder) == [] and Path(folder / "e").is_dir()
