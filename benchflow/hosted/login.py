"""`rollout login`'s settings: the agent endpoint, its token and the registry, in a 0600 file.

```text
<config dir>/rollout.json      {"endpoint": ..., "token": ... | null, "token_env": ... | null,
                                "registry": ..., "workspace": ...}
```

The config dir is `BENCHFLOW_CONFIG_DIR`, else `$XDG_CONFIG_HOME/benchflow`, else
`~/.config/benchflow`. With `token_env` the file names a host variable and holds no secret;
otherwise the token is stored in the file, which only its owner can read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from benchflow.errors import ConfigError
from benchflow.settings import get_settings, host_env

CONFIG_FILE = "rollout.json"


class LoginConfig(BaseModel):
    """What `rollout login` stored (every field optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str | None = None
    token: str | None = None
    token_env: str | None = None
    registry: str | None = None
    workspace: str | None = None

    def __repr__(self) -> str:  # never the token
        return (f"LoginConfig(endpoint={self.endpoint!r}, token={'***' if self.token else None},"
                f" token_env={self.token_env!r}, registry={self.registry!r})")

    def resolved_token(self) -> str | None:
        """The token: the stored one, else the value of `token_env` on this host."""
        if self.token:
            return self.token
        return host_env(self.token_env) if self.token_env else None

    def auth_header(self) -> str | None:
        """`Authorization` for the endpoint: `Bearer ${VAR}` (expanded at run time, never
        written) with `token_env`, the stored token otherwise."""
        if self.token_env:
            return f"Bearer ${{{self.token_env}}}"
        return f"Bearer {self.token}" if self.token else None


def config_path(config_dir: Path | None = None) -> Path:
    return (config_dir or get_settings().config_dir) / CONFIG_FILE


def load_login(config_dir: Path | None = None) -> LoginConfig:
    """The stored settings (empty when `rollout login` never ran).

    Raises:
        ConfigError: the file exists but is not a valid config.
    """
    path = config_path(config_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return LoginConfig()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        return LoginConfig.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise ConfigError(f"{path}: not a rollout login file ({str(exc).splitlines()[0]}): "
                          "run `rollout login` again") from None


def save_login(config: LoginConfig, config_dir: Path | None = None) -> Path:
    """Write `config` to the config file with mode 0600 (created 0600, never wider)."""
    path = config_path(config_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, config.model_dump_json(indent=2, exclude_none=True).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


__all__ = ["CONFIG_FILE", "LoginConfig", "config_path", "load_login", "save_login"]
