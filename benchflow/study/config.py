"""The study file: named arms (run configurations) over the same tasks and attempts.

```yaml
name: reviewer-study          # the study folder: <studies_dir>/<name> (default: file name)
studies_dir: studies
k: 3                          # attempts per task and arm
baseline: coder-alone         # default: the first arm
datasets: [{path: tasks, tasks: [coder-reviewer]}]
# any other job-file key (environment, model_endpoint, retry, timeout_multiplier, harden,
# skills, mcp_config, n_concurrent_trials, ...) applies to every arm
arms:
  - name: coder-alone
    agent: {name: scripted, model: ./coder.yaml, scenes: ./coder-alone.yaml}
  - name: coder-reviewer
    agent: scripted:./coder-reviewer.yaml     # NAME[:MODEL] shorthand
    harden: true                              # an arm's job-file key replaces the study's
```

Each arm becomes one job file (`agents: [<its agent>]`, the study's datasets and `k`
as `n_attempts`), validated by the job layer like any other; its job is named
`<study>.<arm>` and lives in the study folder. Relative paths are relative to the
current directory, as in job files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from benchflow._config_files import read_config_file
from benchflow._models import FrozenModel
from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig, parse_job_config, with_absolute_paths
from benchflow.roles import ROLE_NAME, RoleAgent, parse_agent_spec
from benchflow import bounds as B

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
STUDY_KEYS = ("name", "description", "studies_dir", "k", "baseline", "arms")
ARM_KEYS = ("name", "description", "agent", "roles")
SET_BY_STUDY = ("name", "jobs_dir", "n_attempts", "datasets", "agents")
"""Job-file keys a study sets for every arm (so arms run the same tasks and attempts)."""


class ArmSpec(FrozenModel):
    """One arm as written: its name, its agent entry and the job-file keys it overrides."""

    name: str = Field(pattern=_NAME)
    description: str | None = None
    agent: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)


class StudySpec(FrozenModel):
    """The study file, validated: study keys, the arms, and the job-file keys they share."""

    name: str = Field(pattern=_NAME)
    description: str | None = None
    studies_dir: Path = Path("studies")
    k: int = Field(default=1, ge=1, le=B.MAX_ATTEMPTS)
    baseline: str | None = None
    arms: list[ArmSpec] = Field(min_length=2)
    shared: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> StudySpec:
        seen: set[str] = set()
        for arm in self.arms:
            if arm.name in seen:
                raise ValueError(f"arm name {arm.name!r} is given twice: give each arm its own "
                                 "name")
            seen.add(arm.name)
        if self.baseline is not None and self.baseline not in seen:
            raise ValueError(f"baseline {self.baseline!r} is not an arm (arms: "
                             f"{', '.join(a.name for a in self.arms)})")
        return self

    @property
    def baseline_arm(self) -> str:
        return self.baseline or self.arms[0].name

    @property
    def study_dir(self) -> Path:
        return self.studies_dir / self.name

    def job_name(self, arm: str) -> str:
        """The job (and folder) name of an arm: unique to the study, so container labels
        and `benchflow sandbox cleanup --job` never mix two studies' arms."""
        return f"{self.name}.{arm}"

    def job_data(self, arm: ArmSpec) -> dict[str, Any]:
        """The job file an arm stands for."""
        return {**self.shared, **arm.overrides, "name": self.job_name(arm.name),
                "jobs_dir": self.study_dir, "n_attempts": self.k, "agents": [arm.agent]}

    def job_configs(self, source: Path | str = "study") -> dict[str, JobConfig]:
        """Every arm's job config, paths made absolute.

        Raises:
            ConfigError: an arm's job file is invalid (naming the arm and the field).
        """
        out = {}
        for index, arm in enumerate(self.arms):
            where = f"{source}: arms[{index}] ({arm.name})"
            try:
                config = parse_job_config(self.job_data(arm), where)
            except ConfigError as exc:
                raise ConfigError(str(exc).replace("invalid job file", "invalid arm", 1)) from None
            out[arm.name] = with_absolute_paths(config)
        return out


def _agent_entry(value: Any, where: str) -> dict[str, Any]:
    """An arm's `agent`: a job-file agent entry, or the `NAME[:MODEL]` shorthand."""
    if isinstance(value, str):
        name, sep, model = value.partition(":")
        return {"name": name, **({"model": model} if sep and model else {})}
    if isinstance(value, dict):
        entry = dict(value)
        if "roles" in entry:
            entry["roles"] = _role_mapping(entry["roles"], f"{where}.agent.roles")
        return entry
    raise ConfigError(f"{where}.agent: expected a job-file agent entry ({{name: ..., model: "
                      "...}}) or NAME[:MODEL]")


def _role_mapping(value: Any, where: str) -> dict[str, str]:
    """`roles` as the job file writes it, `{role: "AGENT[:MODEL]"}`, from that mapping or
    a list of `NAME=AGENT[:MODEL]` strings (the `--role` form).

    Raises:
        ConfigError: not a mapping or list, a malformed entry, a role given twice.
    """
    pairs: list[tuple[str, Any]]
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        pairs = [v.partition("=")[::2] for v in value]
        bad = next((v for v in value if "=" not in v), None)
        if bad is not None:
            raise ConfigError(f"{where}: {bad!r}: expected NAME=AGENT[:MODEL], e.g. "
                              "reviewer=codex:gpt-5.4")
    else:
        raise ConfigError(f"{where}: expected {{role: AGENT[:MODEL]}} or a list of "
                          "NAME=AGENT[:MODEL]")
    if not pairs:
        raise ConfigError(f"{where}: empty: assign an agent to at least one role")
    out: dict[str, str] = {}
    for name, spec in pairs:
        name = str(name).strip()
        if not ROLE_NAME.match(name):
            raise ConfigError(f"{where}: {name or '(empty)'!r} is not a role name (letters, "
                              "digits, '_', '.', '-')")
        if name in out:
            raise ConfigError(f"{where}: role {name!r} given twice: give each role once")
        if not isinstance(spec, str):
            raise ConfigError(f"{where}.{name}: expected AGENT[:MODEL], e.g. codex:gpt-5.4")
        out[name] = str(parse_agent_spec(spec, where=f"{where}.{name}"))
    return out


_FILLS = {"name": "agent", "model": "model", "scenes": "scenes", "env": "env",
          "description": "description"}
"""An arm's `agent` keys that carry over into its `roles` entry (`name` plays the roles
not listed)."""


def _roles_entry(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The job-file `{roles: ...}` agent entry of an arm that sets `roles`."""
    entry: dict[str, Any] = {"roles": _role_mapping(raw["roles"], f"{where}.roles")}
    agent = raw.get("agent")
    if agent is None:
        return entry
    if isinstance(agent, str):
        fill: RoleAgent = parse_agent_spec(agent, where=f"{where}.agent")
        return {**entry, "agent": fill.agent,
                **({"model": fill.model} if fill.model is not None else {})}
    if not isinstance(agent, dict):
        raise ConfigError(f"{where}.agent: expected NAME[:MODEL] or {{name, model, scenes, "
                          "env}} (the agent of the roles `roles` leaves out)")
    if "roles" in agent:
        raise ConfigError(f"{where}.agent.roles: the arm sets roles already: give them once")
    extra = sorted(set(agent) - set(_FILLS))
    if extra:
        raise ConfigError(f"{where}.agent.{extra[0]}: not with the arm's roles: its agent "
                          f"only plays the other roles (keys: {', '.join(_FILLS)})")
    return {**entry, **{_FILLS[k]: v for k, v in agent.items()}}


def parse_study(data: Any, source: Path | str = "study") -> StudySpec:
    """Validate a parsed study file.

    Raises:
        ConfigError: a bad or unknown key, an arm name given twice, fewer than two arms, an
            arm setting what the study fixes (naming the file, the field and the fix).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a study file is a mapping (name, k, datasets, arms, ...), "
                          f"not a {type(data).__name__}")
    if "agents" in data:
        raise ConfigError(f"{source}: agents: a study's agents are its arms: move each into "
                          "arms: [{name: ..., agent: ...}]")
    if "n_attempts" in data:
        raise ConfigError(f"{source}: n_attempts: a study names its attempts per task `k`")
    if "datasets" not in data:
        raise ConfigError(f"{source}: datasets: required: the tasks every arm runs")
    arms_data = data.get("arms")
    if not isinstance(arms_data, list):
        raise ConfigError(f"{source}: arms: required: a list of {{name, agent}} (two or more)")
    arms: list[dict[str, Any]] = []
    for index, raw in enumerate(arms_data):
        where = f"{source}: arms[{index}]"
        if not isinstance(raw, dict) or "name" not in raw or not (
                "agent" in raw or "roles" in raw):
            raise ConfigError(f"{where}: an arm needs `name` and `agent` (or `roles`)")
        if any(arm["name"] == raw["name"] for arm in arms):
            raise ConfigError(f"{where}.name: arm name {raw['name']!r} is given twice: give "
                              "each arm its own name")
        fixed = sorted(set(raw) & set(SET_BY_STUDY) - {"name"})
        if fixed:
            raise ConfigError(f"{where}.{fixed[0]}: set by the study for every arm (the same "
                              "tasks and attempts): remove it from the arm")
        overrides = {k: v for k, v in raw.items() if k not in ARM_KEYS}
        arms.append({"name": raw["name"], "description": raw.get("description"),
                     "agent": (_roles_entry(raw, where) if "roles" in raw
                               else _agent_entry(raw["agent"], where)),
                     "overrides": overrides})
    study = {k: data[k] for k in STUDY_KEYS if k in data and k != "arms"}
    study.setdefault("name", Path(str(source)).stem)
    shared = {k: v for k, v in data.items() if k not in STUDY_KEYS}
    try:
        return StudySpec.model_validate({**study, "arms": arms, "shared": shared})
    except ValidationError as exc:
        problems = "; ".join(f"{_loc(e['loc'])}{e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None


def _loc(loc: tuple[Any, ...]) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc]
    return "".join(parts).lstrip(".") + ": " if parts else ""


def load_study(path: Path | str) -> StudySpec:
    """Read a study file (YAML, or JSON by its suffix).

    Raises:
        ConfigError: unreadable, or invalid (see `parse_study`).
    """
    path = Path(path)
    return parse_study(read_config_file(path, "study file"), path)


__all__ = ["ArmSpec", "StudySpec", "load_study", "parse_study"]
