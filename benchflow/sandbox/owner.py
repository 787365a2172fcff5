"""Who owns a sandbox: the job instance it belongs to and the process holding its lease.

Every container, network and image benchflow creates carries two labels besides
`benchflow.job` (the job's name, which two job folders may share):

| label | value |
|---|---|
| `benchflow.job-id` | the job *instance*: a random id kept in `<jobs_dir>/<job>/.job-id`, so a resumed job keeps it and a job of the same name in another folder has another |
| `benchflow.owner` | the lease: `<host>/<pid>/<boot id>.<process start ticks>` of the process that made it |

Before anything is removed, its lease is checked (`Owner.state`): a sandbox whose owner
still runs on this host is live and is never touched unless forced; one whose process is
gone (or whose pid now belongs to another process, or the host rebooted) is a leftover.
A lease from another host cannot be checked from here: it counts as unknown.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from benchflow.sandbox.labels import LABEL_JOB

log = logging.getLogger(__name__)

LABEL_JOB_ID = "benchflow.job-id"
LABEL_OWNER = "benchflow.owner"
JOB_ID_FILE = ".job-id"
"""The job instance id's file in the job folder."""

OwnerState = Literal["self", "alive", "gone", "unknown"]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), "" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else ""


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


@dataclass(frozen=True)
class Owner:
    """A process's lease on what it created: host name, pid and a start token (boot id and
    start ticks) that tells a reused pid from the original process."""

    host: str
    pid: int
    started: str = ""

    @classmethod
    def current(cls) -> Owner:
        """This process (computed once per pid: a forked worker gets its own)."""
        return _current(os.getpid())

    def label(self) -> str:
        return f"{self.host}/{self.pid}/{self.started}"

    @classmethod
    def parse(cls, value: str | None) -> Owner | None:
        """The owner a label names, or None when it is missing or malformed."""
        if not value:
            return None
        host, _, rest = value.partition("/")
        pid, _, started = rest.partition("/")
        if not host or not pid.isdigit():
            return None
        return cls(host=host, pid=int(pid), started=started)

    def state(self) -> OwnerState:
        """`self` (this process), `alive` (another live process on this host), `gone`
        (its process ended, or the host rebooted since) or `unknown` (another host)."""
        me = Owner.current()
        if self.host != me.host:
            return "unknown"
        if self == me:
            return "self"
        boot, _, ticks = self.started.partition(".")
        my_boot = me.started.partition(".")[0]
        if boot and my_boot and boot != my_boot:
            return "gone"  # made before this host's last boot
        if not pid_alive(self.pid):
            return "gone"
        if ticks and _start_ticks(self.pid) not in ("", ticks):
            return "gone"  # the pid was reused by a newer process
        return "alive"

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


@functools.cache
def _current(pid: int) -> Owner:
    return Owner(host=socket.gethostname() or "localhost", pid=pid,
                 started=f"{_boot_id()}.{_start_ticks(pid)}")


_job_ids: dict[Path, str] = {}


def job_instance_id(job_dir: Path) -> str:
    """The id of the job instance in `job_dir`: read from its `.job-id`, made there the
    first time (a resumed job keeps its id; another folder of the same name has its own).

    Never raises: when the folder cannot be written (a full disk) the id is derived from
    the folder's absolute path, which still tells two folders apart.
    """
    key = Path(os.path.abspath(job_dir))
    known = _job_ids.get(key)
    if known is not None:
        return known
    path = key / JOB_ID_FILE
    value = ""
    try:
        value = path.read_text().strip()
    except OSError:
        pass
    if not value:
        candidate = secrets.token_hex(8)
        try:
            key.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "w") as fh:
                fh.write(candidate + "\n")
            value = candidate
        except FileExistsError:  # another rollout of the job made it meanwhile
            value = _read_id(path)
        except OSError as exc:
            import hashlib

            log.warning("could not write %s (%s): the job id comes from its path", path, exc)
            value = hashlib.sha256(str(key).encode()).hexdigest()[:16]
    _job_ids[key] = value
    return value


def read_job_id(job_dir: Path) -> str | None:
    """The job instance id saved in `job_dir`, or None (no such job folder, or a job of an
    older benchflow). Never creates it."""
    return _read_id(Path(job_dir) / JOB_ID_FILE) or None


def _read_id(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def owner_labels(job_name: str, job_id: str) -> dict[str, str]:
    """The labels tying a sandbox to its job instance and to this process's lease."""
    return {LABEL_JOB: job_name, LABEL_JOB_ID: job_id, LABEL_OWNER: Owner.current().label()}


@dataclass(frozen=True)
class CleanupScope:
    """Which leftovers a cleanup removes.

    `job_id` (one job instance) or `job_name` (every instance of that name; sandboxes of
    older benchflow versions carry only the name) narrow it; with neither, every
    sandbox benchflow made is considered. A sandbox whose owner is alive (another process
    on this host) is skipped unless `force`; one whose owner cannot be checked (another
    host, or no lease) is skipped unless the scope names its job or `force`.
    """

    job_id: str | None = None
    job_name: str | None = None
    force: bool = False

    @property
    def names_a_job(self) -> bool:
        return self.job_id is not None or self.job_name is not None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the labels put a sandbox in this scope (before its lease is checked)."""
        if self.job_id is not None and labels.get(LABEL_JOB_ID):
            return labels[LABEL_JOB_ID] == self.job_id
        if self.job_id is not None and self.job_name is None:
            return False  # an id was asked for and the sandbox has none
        return self.job_name is None or labels.get(LABEL_JOB) == self.job_name

    def skip_reason(self, labels: Mapping[str, str]) -> str | None:
        """None when a sandbox in scope may be removed, else why it is kept."""
        owner = Owner.parse(labels.get(LABEL_OWNER))
        state = owner.state() if owner is not None else "unknown"
        if state in ("self", "gone") or self.force:
            return None
        if state == "alive":
            assert owner is not None
            return f"live: its job runs in {owner.describe()}"
        if self.names_a_job:
            return None
        where = f"{owner.describe()}" if owner is not None else "an unknown process"
        return f"owner unknown: made by {where} (another host or an older benchflow)"


@dataclass
class CleanupReport:
    """What a cleanup removed and what it kept, with why."""

    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def extend(self, other: CleanupReport) -> None:
        self.removed += other.removed
        self.skipped += other.skipped


__all__ = ["JOB_ID_FILE", "LABEL_JOB_ID", "LABEL_OWNER", "CleanupReport", "CleanupScope",
           "Owner", "job_instance_id", "owner_labels", "pid_alive", "read_job_id"]
