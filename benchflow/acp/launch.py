"""Starting an agent with secrets that never appear on a command line.

API keys, model names and base URLs reach the agent through a file: benchflow
uploads it with mode 0600, and the launcher sources it, deletes it and execs the
agent. Nothing secret is in any argv (`ps`, `/proc/*/cmdline`, docker exec
inspect), and nothing we keep on disk holds it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from benchflow.errors import ConfigError
from benchflow.trace_ids import random_hex

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

LAUNCHER = 'exec 3<"$1" && rm -f -- "$1" && shift && . /dev/fd/3 && exec 3<&- && exec "$@"'
"""The `sh -c` script: open the env file given as $1, delete it, source it from the open
descriptor, then exec the agent argv. Deleting first means the file is gone even if
sourcing fails, and no variable in the file (PATH, or any name) can affect the cleanup."""


def env_file_bytes(env: Mapping[str, str]) -> bytes:
    """`export NAME='value'` lines, one per variable, shell-quoted.

    Raises:
        ConfigError: a name is not a valid shell variable name.
    """
    lines = []
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ConfigError(f"invalid environment variable name for the agent: {name!r}")
        lines.append(f"export {name}={shlex.quote(str(value))}\n")
    return "".join(lines).encode()


def default_env_file_path() -> str:
    """A fresh path inside the sandbox for one launch's env file."""
    return f"/tmp/.benchflow-env-{random_hex(16)}"  # as unguessable as a uuid4


def launch_command(
    argv: Sequence[str], env: Mapping[str, str], env_file: str
) -> tuple[list[str], bytes]:
    """The argv to run in the sandbox and the env file's content.

    The caller uploads the bytes to `env_file` with mode 0600 (owned by the user
    the agent runs as) and starts the returned argv:
    `sh -c '<LAUNCHER>' sh ENV_FILE AGENT_ARGV...`.
    """
    if not argv:
        raise ConfigError("agent launch argv is empty")
    return ["sh", "-c", LAUNCHER, "sh", env_file, *argv], env_file_bytes(env)


def with_umask(argv: Sequence[str], umask: str | None) -> list[str]:
    """`argv` run with file mode mask `umask` (e.g. "002": what it creates is group
    writable), or unchanged when `umask` is None.

    Raises:
        ConfigError: `umask` is not three or four octal digits.
    """
    if umask is None:
        return list(argv)
    if not re.fullmatch(r"[0-7]{3,4}", umask):
        raise ConfigError(f"invalid umask {umask!r}")
    return ["sh", "-c", 'umask "$0" && exec "$@"', umask, *argv]


__all__ = ["LAUNCHER", "default_env_file_path", "env_file_bytes", "launch_command",
           "with_umask"]
