"""Image tags are content hashes; CA injection touches every stage that has a shell."""

from __future__ import annotations

import tarfile

from benchflow.sandbox.images import build_context, image_tag, inject_ca, legacy_chmod


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


def test_copy_chmod_of_one_file_becomes_copy_and_chmod_for_the_legacy_builder():
    text = ("FROM debian:bookworm-slim\n"
            "COPY --chmod=755 test.sh /tests/test.sh\n"
            "  add --chown=1000:1000 --chmod=0644 conf.txt etc/app.conf\n"
            "COPY --chmod=755 a.sh b.sh /bin/\n"   # several sources: left for Docker to refuse
            "COPY --chmod=755 tool /opt/\n"        # directory destination: left unchanged
            'COPY --chmod=755 ["x y", "/z"]\n'     # JSON form: left unchanged
            "COPY plain.txt /plain.txt\n"
            "FROM scratch\nCOPY --chmod=755 bin /bin/tool\n")  # no shell for chmod
    assert legacy_chmod(text).splitlines() == [
        "FROM debian:bookworm-slim",
        "COPY test.sh /tests/test.sh",
        "RUN chmod 755 /tests/test.sh",
        "  add --chown=1000:1000 conf.txt etc/app.conf",
        "  RUN chmod 0644 etc/app.conf",
        "COPY --chmod=755 a.sh b.sh /bin/",
        "COPY --chmod=755 tool /opt/",
        'COPY --chmod=755 ["x y", "/z"]',
        "COPY plain.txt /plain.txt",
        "FROM scratch",
        "COPY --chmod=755 bin /bin/tool",
    ]


def test_build_context_carries_the_rewritten_dockerfile_with_or_without_certs(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm-slim\nCOPY --chmod=755 t.sh /t.sh\n")
    (tmp_path / "t.sh").write_text("echo\n")
    for pems in ([], [b"-----BEGIN CERTIFICATE-----\n"]):
        with tarfile.open(fileobj=build_context(tmp_path, pems)) as tar:
            names = tar.getnames()
            dockerfile = tar.extractfile("Dockerfile").read().decode()
        assert names.count("Dockerfile") == 1 and "t.sh" in names
        assert "RUN chmod 755 /t.sh" in dockerfile and "--chmod" not in dockerfile


def test_final_stage_has_ca_only_when_the_last_stage_is_not_scratch(tmp_path):
    from benchflow.sandbox.images import final_stage_has_ca

    (tmp_path / "Dockerfile").write_text("FROM debian AS build\nRUN true\nFROM scratch\nCOPY a /a\n")
    assert not final_stage_has_ca(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM scratch AS x\nFROM debian:bookworm-slim\n")
    assert final_stage_has_ca(tmp_path)
    assert not final_stage_has_ca(tmp_path / "missing")
