"""Owner leases and cleanup scopes: what a cleanup may remove, decided from labels."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchflow.sandbox.labels import LABEL_JOB
from benchflow.sandbox.owner import (
    JOB_ID_FILE,
    LABEL_JOB_ID,
    LABEL_OWNER,
    CleanupScope,
    Owner,
    job_instance_id,
    owner_labels,
    read_job_id,
)


def test_the_current_process_owns_what_it_makes():
    labels = owner_labels("N", "abc")
    assert labels[LABEL_JOB] == "N" and labels[LABEL_JOB_ID] == "abc"
    owner = Owner.parse(labels[LABEL_OWNER])
    assert owner == Owner.current() and owner.pid == os.getpid()
    assert owner.state() == "self"


def test_a_live_process_on_this_host_is_alive_and_an_ended_one_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        lease = Owner.current().started.partition(".")[0]
        from benchflow.sandbox.owner import _start_ticks

        owner = Owner(Owner.current().host, child.pid, f"{lease}.{_start_ticks(child.pid)}")
        assert owner.state() == "alive"
        reused = Owner(owner.host, child.pid, f"{lease}.1")  # same pid, another start time
        assert reused.state() == "gone"
    finally:
        child.communicate(b"")
    assert owner.state() == "gone"


def test_another_host_or_another_boot_cannot_be_live():
    me = Owner.current()
    assert Owner("some-other-host", me.pid, me.started).state() == "unknown"
    if me.started.partition(".")[0]:
        assert Owner(me.host, me.pid, "00000000.1").state() == "gone"


@pytest.mark.parametrize("value", ["", "host", "host/x/1", "/1/2"])
def test_a_malformed_lease_is_none(value):
    assert Owner.parse(value) is None


def _labels(job: str, job_id: str | None, owner: Owner | None) -> dict[str, str]:
    labels = {LABEL_JOB: job}
    if job_id is not None:
        labels[LABEL_JOB_ID] = job_id
    if owner is not None:
        labels[LABEL_OWNER] = owner.label()
    return labels


def _live_other() -> tuple[subprocess.Popen[bytes], Owner]:
    from benchflow.sandbox.owner import _start_ticks

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    boot = Owner.current().started.partition(".")[0]
    return child, Owner(Owner.current().host, child.pid, f"{boot}.{_start_ticks(child.pid)}")


def test_no_scope_removes_only_leftovers_and_says_why_it_keeps_the_rest():
    child, live = _live_other()
    try:
        scope = CleanupScope()
        assert scope.skip_reason(_labels("N", "a", live)) == (
            f"live: its job runs in process {child.pid} on {live.host}")
        assert scope.skip_reason(_labels("N", "a", Owner.current())) is None
        assert "owner unknown" in scope.skip_reason(_labels("N", None, None))
        assert "owner unknown" in scope.skip_reason(_labels("N", "a", Owner("elsewhere", 1)))
        assert CleanupScope(force=True).skip_reason(_labels("N", "a", live)) is None
    finally:
        child.communicate(b"")
    assert CleanupScope().skip_reason(_labels("N", "a", live)) is None  # its owner is gone


def test_a_job_scope_matches_its_instance_not_its_namesake():
    mine = CleanupScope(job_id="a")
    assert mine.matches(_labels("N", "a", None))
    assert not mine.matches(_labels("N", "b", None))  # the same name in another folder
    assert not mine.matches(_labels("N", None, None))  # an older benchflow's: by name only
    named = CleanupScope(job_id="a", job_name="N")
    assert named.matches(_labels("N", None, None)) and not named.matches(_labels("M", None, None))
    assert not named.matches(_labels("N", "b", None))
    assert CleanupScope(job_name="N").skip_reason(_labels("N", None, None)) is None
    assert CleanupScope().matches(_labels("anything", "x", None))


def test_a_job_keeps_its_instance_id_and_a_namesake_gets_another(tmp_path):
    first = job_instance_id(tmp_path / "x" / "N")
    assert (tmp_path / "x" / "N" / JOB_ID_FILE).read_text().strip() == first
    assert read_job_id(tmp_path / "x" / "N") == first
    assert job_instance_id(tmp_path / "y" / "N") != first
    assert read_job_id(tmp_path / "z" / "N") is None and not (tmp_path / "z").exists()
