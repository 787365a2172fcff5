"""rollout.log: records of the rollout's own context, in order, written off the event loop."""

from __future__ import annotations

import logging
import threading
import time

from benchflow.rollout.logs import FLUSH_INTERVAL_SEC, RolloutLogFile, rollout_log

log = logging.getLogger("benchflow.test_rollout_log")


def test_every_line_in_order_from_several_threads_once_closed(tmp_path):
    handler = RolloutLogFile(tmp_path / "r1" / "rollout.log")
    with rollout_log(handler, "r1"):
        def burst(name: str) -> None:
            for i in range(500):
                log.info("%s %d", name, i)

        workers = [threading.Thread(target=burst, args=(f"t{n}",)) for n in range(3)]
        for w in workers:
            w.start()  # threads do not inherit the context: only this thread's records count
        burst("main")
        for w in workers:
            w.join()
    handler.close()
    lines = (tmp_path / "r1" / "rollout.log").read_text().splitlines()
    assert [line.rsplit(": ", 1)[1] for line in lines] == [f"main {i}" for i in range(500)]


def test_lines_reach_the_file_before_the_rollout_ends(tmp_path):
    path = tmp_path / "rollout.log"
    handler = RolloutLogFile(path)
    with rollout_log(handler, "r2"):
        log.warning("still running, token=%s", "abc")
        deadline = time.monotonic() + 120  # a guard against a hang only: it polls an event
        while "still running" not in path.read_text() and time.monotonic() < deadline:
            time.sleep(FLUSH_INTERVAL_SEC / 4)
        assert "still running, token=abc" in path.read_text()
    handler.close()
    handler.close()  # idempotent
    assert path.read_text().count("still running") == 1


def test_another_rollouts_records_stay_out(tmp_path):
    first, second = RolloutLogFile(tmp_path / "a.log"), RolloutLogFile(tmp_path / "b.log")
    with rollout_log(first, "a"):
        log.info("from a")
        with rollout_log(second, "b"):
            log.info("from b")
    first.close()
    second.close()
    assert "from b" not in (tmp_path / "a.log").read_text()
    assert "from a" not in (tmp_path / "b.log").read_text()
    assert "from b" in (tmp_path / "b.log").read_text()
