"""Image tags are content hashes; CA injection touches every stage that has a shell."""

from __future__ import annotations

from benchflow.sandbox.images import image_tag, inject_ca


def test_tag_changes_with_content_mode_and_certs(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (tmp_path / "app.py").write_text("print(1)\n")
    first = image_tag("My Task/1", tmp_path, [])
    assert first == image_tag("My Task/1", tmp_path, [])
    assert first.startswith("benchflow/my-task-1:")
    (tmp_path / "app.py").write_text("print(2)\n")
    second = image_tag("My Task/1", tmp_path, [])
    assert second != first
    (tmp_path / "app.py").chmod(0o755)
    assert image_tag("My Task/1", tmp_path, []) != second
    assert image_tag("My Task/1", tmp_path, [b"pem"]) != image_tag("My Task/1", tmp_path, [])


def test_ca_injected_after_each_from_except_scratch():
    text = ("FROM debian:bookworm-slim AS build\nRUN pip install x\n"
            "FROM scratch\nCOPY --from=build /x /x\nfrom --platform=linux/amd64 debian\n")
    out = inject_ca(text).splitlines()
    installs = [i for i, line in enumerate(out) if line.startswith("RUN sh ")]
    assert len(installs) == 2
    assert out[installs[0] - 2] == "FROM debian:bookworm-slim AS build"
    assert out[installs[0] + 2] == "RUN pip install x"  # after COPY, RUN, ENV: the stage's own steps
    scratch = out.index("FROM scratch")
    assert out[scratch + 1] == "COPY --from=build /x /x"
    assert out[installs[1] - 2].startswith("from --platform")


def test_final_stage_has_ca_only_when_the_last_stage_is_not_scratch(tmp_path):
    from benchflow.sandbox.images import final_stage_has_ca

    (tmp_path / "Dockerfile").write_text("FROM debian AS build\nRUN true\nFROM scratch\nCOPY a /a\n")
    assert not final_stage_has_ca(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM scratch AS x\nFROM debian:bookworm-slim\n")
    assert final_stage_has_ca(tmp_path)
    assert not final_stage_has_ca(tmp_path / "missing")
