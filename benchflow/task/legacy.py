"""The legacy layout's `task.toml` (Harbor task.toml schema 1.0 to 1.2), mapped onto `Frontmatter`.

Real Harbor files load unchanged: the keys benchflow honours are mapped (`[environment]`
becomes `sandbox`, `[solution]` becomes `oracle`, `version` becomes `schema_version`);
Harbor keys it does not support yet (`gpu_types`, `tpu`, ...) are dropped with a
`TaskConfigWarning` naming the file and the key. A key that neither benchflow nor Harbor
knows (a typo) is an error, unless the file says `strict = false` (then a warning);
`[verifier.hardening]` is always strict, because it is benchflow's own table, and
`[[steps]]` follow Harbor, which ignores their extra keys.
"""

from __future__ import annotations

import posixpath
import tomllib
import warnings
from typing import Any

from pydantic import BaseModel, ValidationError

from benchflow.errors import TaskInvalidError
from benchflow._suggest import describe, short_repr, suggest, unknown_key
from benchflow.mcp import McpServer
from benchflow.task.models import (
    Artifact,
    CollectHook,
    Frontmatter,
    HardeningConfig,
    HealthcheckSettings,
    TaskConfig,
    TaskConfigWarning,
)

DEFAULT_VERSION = "1.0"

# legacy section -> (native section, {legacy key: native key})
_SECTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "task": ("task", {k: k for k in ("name", "description", "authors", "keywords")}),
    "agent": ("agent", {k: k for k in ("timeout_sec", "install_timeout_sec", "user")}),
    "verifier": ("verifier", {k: k for k in ("timeout_sec", "env", "hardening", "pytest_plugins",
                                             "environment_mode", "environment", "type", "judge",
                                             "command", "options", "collect")}),
    "environment": (
        "sandbox",
        {
            k: k
            for k in (
                "build_timeout_sec",
                "docker_image",
                "cpus",
                "memory_mb",
                "storage_mb",
                "pids_limit",
                "gpus",
                "workdir",
                "env",
                "allow_internet",
                "skills_dir",
                "mcp_servers",
                "healthcheck",
            )
        },
    ),
    "solution": ("oracle", {"env": "env", "timeout_sec": "timeout_sec"}),
}
# Harbor keys benchflow knows but does not support yet: warned as such, never "did you mean".
_HARBOR_ONLY = {
    "environment.gpu_types",
    "environment.os",
    "environment.allowed_hosts",
    "environment.tpu",
    "agent.network_mode",
    "agent.allowed_hosts",
    "verifier.user",
    "verifier.network_mode",
    "verifier.allowed_hosts",
    "task.version",
}
# Harbor keys that change how a task is scored: benchflow cannot honour them, so a task
# using them fails to load (never a silent warning and a different score).
_SCORING = {
    "verifier.user": "benchflow runs the verifier as root",
}
# Harbor writes these in almost every file; they ask for nothing benchflow lacks.
_NOOP_VALUES = {"environment.os": "linux"}
_TOP_LEVEL = {"version", "schema_version", "source", "metadata", "artifacts", "steps",
              "multi_step_reward_strategy", "strict", *_SECTIONS}
_STEP_KEYS = {"name", "agent", "verifier", "min_reward", "artifacts", "healthcheck"}
_STEP_AGENT_KEYS = ("timeout_sec", "user")
_STEP_VERIFIER_KEYS = ("timeout_sec", "env", "environment_mode", "environment", "user", "collect")
_RENAME = {native: legacy for legacy, (native, _) in _SECTIONS.items()}
_SIZE_UNITS = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}


def _is_noop(key: str, value: Any) -> bool:
    """An ignored key whose value changes nothing (`mcp_servers = []`, `os = "linux"`)."""
    return value in ([], {}) or _NOOP_VALUES.get(key) == value


def _warn(label: str, key: str, valid: list[str], detail: str = "", *,
          strict: bool = False) -> None:
    """Warn that `key` was ignored; with `strict`, refuse it unless it is Harbor's (a key
    Harbor knows and benchflow does not support yet)."""
    if strict and key not in _HARBOR_ONLY:
        raise TaskInvalidError(f"{label}: {unknown_key(key, valid)} (a task.toml for a newer "
                               "benchflow may say strict = false to ignore it)")
    guess = None if key in _HARBOR_ONLY else suggest(key.rsplit(".", 1)[-1], valid)
    if guess is not None:
        message = f"{label}: {unknown_key(key, valid)} The key was ignored."
    else:
        message = f"{label}: '{key}' is not supported by benchflow yet and was ignored{detail}"
    warnings.warn(message, TaskConfigWarning, stacklevel=2)


def _size_mb(label: str, key: str, value: Any) -> int:
    """Harbor's deprecated `memory = "2G"` / `storage = "512M"` sizes, in MB."""
    text = value.strip().upper() if isinstance(value, str) else ""
    try:
        if text[-1:] in _SIZE_UNITS:
            return int(float(text[:-1]) * _SIZE_UNITS[text[-1]])
    except (ValueError, OverflowError):
        pass
    raise TaskInvalidError(
        f'{label}: \'environment.{key}\' must be a size such as "2G" or "512M" '
        f"(got {short_repr(value)}): or use {key}_mb = 2048"
    )


def _environment(label: str, table: dict[str, Any], out: dict[str, Any]) -> None:
    """The parts of `[environment]` that need more than a rename."""
    for key in ("memory", "storage"):
        if key in table:
            out[f"{key}_mb"] = _size_mb(label, key, table[key])
    mode = table.get("network_mode")
    if mode == "no-network":
        out["allow_internet"] = False
    elif mode == "public":
        out["allow_internet"] = True
    elif "network_mode" in table:
        _warn(
            label,
            "environment.network_mode",
            [],
            f" (value {short_repr(mode)}; allow_internet applies)",
        )


def _hardening(label: str, table: Any) -> None:
    """`[verifier.hardening]` is benchflow's: unknown keys and non-bool values are errors."""
    if not isinstance(table, dict):
        return  # the model reports the type
    valid = list(HardeningConfig.model_fields)
    for key, value in table.items():
        if key not in valid:
            raise TaskInvalidError(f"{label}: {unknown_key(f'verifier.hardening.{key}', valid)}")
        if not isinstance(value, bool):
            raise TaskInvalidError(
                f"{label}: 'verifier.hardening.{key}' must be true or false "
                f"(got {short_repr(value)})"
            )


def _known(label: str, where: str, table: Any, model: type[BaseModel]) -> Any:
    """A nested Harbor table (`[environment.healthcheck]`, an artifact, an MCP server): keys
    the model lacks are dropped with a warning, as Harbor's models ignore extra keys."""
    if not isinstance(table, dict):
        return table  # the model reports the type
    valid = list(model.model_fields)
    for key in table.keys() - set(valid):
        _warn(label, f"{where}.{key}", valid)
    return {k: v for k, v in table.items() if k in valid}


def _known_list(label: str, where: str, items: Any, model: type[BaseModel]) -> Any:
    if not isinstance(items, list):
        return items
    return [_known(label, f"{where}[{i}]", item, model) for i, item in enumerate(items)]


def _collect_hooks(label: str, where: str, hooks: Any) -> Any:
    """`[[verifier.collect]]`: unknown keys warned (as Harbor ignores them), a UID user kept
    as text."""
    kept = _known_list(label, where, hooks, CollectHook)
    if isinstance(kept, list):
        for hook in kept:
            if isinstance(hook, dict) and isinstance(hook.get("user"), int) and not isinstance(
                    hook["user"], bool):
                hook["user"] = str(hook["user"])
    return kept


def _authors(label: str, authors: Any, strict: bool) -> Any:
    if not isinstance(authors, list):
        return authors
    kept = []
    for index, author in enumerate(authors):
        if isinstance(author, dict):
            for key in sorted(author.keys() - {"name", "email"}):
                _warn(label, f"task.authors[{index}].{key}", ["name", "email"], strict=strict)
            author = {k: v for k, v in author.items() if k in ("name", "email")}
        kept.append(author)
    return kept


def map_task_toml(data: dict[str, Any], label: str) -> dict[str, Any]:
    """Map a parsed Harbor `task.toml` onto the native frontmatter shape.

    A key neither benchflow nor Harbor knows is an error (a typo must not pass silently),
    unless the file says `strict = false`; a Harbor key benchflow does not support yet is
    a warning. (`[[steps]]` tables follow Harbor, which ignores extra keys there.)
    """
    out: dict[str, Any] = {}
    strict = data.get("strict", True)
    if not isinstance(strict, bool):
        raise TaskInvalidError(f"{label}: 'strict' must be true or false "
                               f"(got {short_repr(strict)})")
    for key, value in data.items():
        if key not in _TOP_LEVEL and not _is_noop(key, value):
            _warn(label, key, sorted(_TOP_LEVEL), strict=strict)
    version = data.get("schema_version", data.get("version", DEFAULT_VERSION))
    out["schema_version"] = version
    for key in ("source", "metadata", "artifacts", "multi_step_reward_strategy"):
        if key in data:
            out[key] = data[key]
    if "artifacts" in data:
        out["artifacts"] = _known_list(label, "artifacts", data["artifacts"], Artifact)
    if isinstance(data.get("steps"), list):
        out["steps"] = [_step(label, i, step) for i, step in enumerate(data["steps"])]
    elif "steps" in data:
        out["steps"] = data["steps"]  # the model reports the type
    for legacy, (native, keys) in _SECTIONS.items():
        if legacy not in data:
            continue
        table = data[legacy]
        if not isinstance(table, dict):
            out[native] = table  # the model reports the type under the legacy name
            continue
        mapped: dict[str, Any] = {}
        for key, value in table.items():
            if key in keys:
                mapped[keys[key]] = value
            elif legacy == "environment" and key in ("memory", "storage", "network_mode"):
                continue  # handled by _environment
            elif f"{legacy}.{key}" in _SCORING:
                _refuse(label, f"{legacy}.{key}", value)
            elif not _is_noop(f"{legacy}.{key}", value):
                _warn(label, f"{legacy}.{key}", list(keys), strict=strict)
        if legacy == "environment":
            _environment(label, table, mapped)
            _nested(label, "environment", mapped)
        if (
            legacy == "agent"
            and isinstance(mapped.get("user"), int)
            and not isinstance(mapped["user"], bool)
        ):
            mapped["user"] = str(mapped["user"])  # Harbor accepts a UID
        if legacy == "verifier" and "collect" in mapped:
            mapped["collect"] = _collect_hooks(label, "verifier.collect", mapped["collect"])
        if legacy == "verifier" and "hardening" in mapped:
            _hardening(label, mapped["hardening"])
        if legacy == "verifier" and isinstance(mapped.get("environment"), dict):
            mapped["environment"] = _sandbox_table(label, "verifier.environment",
                                                   mapped["environment"], strict)
        if legacy == "task" and "authors" in mapped:
            mapped["authors"] = _authors(label, mapped["authors"], strict)
        out[native] = mapped
    return out


def _refuse(label: str, key: str, value: Any) -> None:
    """A Harbor key that changes scoring and that benchflow cannot honour stops the load."""
    name = key.rsplit(".", 1)[-1]
    if _is_noop(key, value) or (name == "user" and value in ("root", 0, "0")):
        return
    reason = _SCORING[key.split("].", 1)[-1] if "]." in key else key]
    raise TaskInvalidError(f"{label}: '{key}' is not supported by benchflow and changes how the "
                           f"task is scored ({reason}); remove it to run the task here")


def _sandbox_table(label: str, prefix: str, table: dict[str, Any],
                   strict: bool = False) -> dict[str, Any]:
    """An `[environment]`-shaped table (`[verifier.environment]`) mapped like `[environment]`."""
    keys = _SECTIONS["environment"][1]
    mapped: dict[str, Any] = {}
    for key, value in table.items():
        if key in keys:
            mapped[keys[key]] = value
        elif key not in ("memory", "storage", "network_mode") and not _is_noop(
                f"environment.{key}", value):
            harbor = f"environment.{key}" in _HARBOR_ONLY
            _warn(label, f"{prefix}.{key}", list(keys), strict=strict and not harbor)
    _environment(label, table, mapped)
    _nested(label, prefix, mapped)
    return mapped


def _nested(label: str, prefix: str, mapped: dict[str, Any]) -> None:
    """The tables inside an `[environment]`-shaped table, leniently (see `_known`)."""
    if "healthcheck" in mapped:
        mapped["healthcheck"] = _known(label, f"{prefix}.healthcheck", mapped["healthcheck"],
                                       HealthcheckSettings)
    if "mcp_servers" in mapped:
        mapped["mcp_servers"] = _known_list(label, f"{prefix}.mcp_servers",
                                            mapped["mcp_servers"], McpServer)


def _step_path(label: str, where: str, step: dict[str, Any], value: Any) -> None:
    """`path` in a step: Harbor's step model has no such field (it ignores extra keys) and
    always reads a step's files from `steps/<name>/`; a path saying just that is accepted
    silently, any other is warned about, as Harbor would not use it either."""
    name = step.get("name")
    if isinstance(value, str) and isinstance(name, str) and posixpath.normpath(
            value.strip()) == posixpath.join("steps", name):
        return
    warnings.warn(f"{label}: '{where}.path' = {short_repr(value)} was ignored: a step's files "
                  f"are read from steps/<name>/ (steps/{name}/ here), as Harbor does",
                  TaskConfigWarning, stacklevel=3)


def _step(label: str, index: int, step: Any) -> Any:
    """One `[[steps]]` table: known keys kept, scoring keys refused, the rest warned
    (Harbor's step model ignores extra keys)."""
    if not isinstance(step, dict):
        return step  # the model reports the type
    where = f"steps[{index}]"
    out: dict[str, Any] = {}
    for key, value in step.items():
        if key == "path":
            _step_path(label, where, step, value)
            continue
        if key not in _STEP_KEYS:
            _warn(label, f"{where}.{key}", sorted(_STEP_KEYS))
            continue
        if key == "agent" and isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if k in _STEP_AGENT_KEYS}
            for extra in value.keys() - set(_STEP_AGENT_KEYS):
                _warn(label, f"{where}.agent.{extra}", list(_STEP_AGENT_KEYS))
            if isinstance(out[key].get("user"), int):
                out[key]["user"] = str(out[key]["user"])
        elif key == "verifier" and isinstance(value, dict):
            verifier: dict[str, Any] = {}
            for k, v in value.items():
                if k == "user":
                    _refuse(label, f"{where}.verifier.{k}", v)
                elif k == "collect":
                    verifier[k] = _collect_hooks(label, f"{where}.verifier.collect", v)
                elif k == "environment" and isinstance(v, dict):
                    verifier[k] = _sandbox_table(label, f"{where}.verifier.environment", v)
                elif k in _STEP_VERIFIER_KEYS:
                    verifier[k] = v
                else:
                    _warn(label, f"{where}.verifier.{k}", list(_STEP_VERIFIER_KEYS))
            out[key] = verifier
        elif key == "healthcheck":
            out[key] = _known(label, f"{where}.healthcheck", value, HealthcheckSettings)
        elif key == "artifacts":
            out[key] = _known_list(label, f"{where}.artifacts", value, Artifact)
        else:
            out[key] = value
    return out


def _rename(version_key: str):  # type: ignore[no-untyped-def]
    def rename(path: str) -> str:
        head, dot, rest = path.partition(".")
        if head == "schema_version":
            return version_key + dot + rest
        return _RENAME.get(head, head) + dot + rest

    return rename


def parse_task_toml(text: str, label: str) -> TaskConfig:
    """Parse a legacy `task.toml` into the normalized config.

    Raises:
        TaskInvalidError: bad TOML syntax, a value of the wrong type, or a bad
            `[verifier.hardening]` key.
    """
    try:
        data = tomllib.loads(text.removeprefix("\ufeff"))
    except Exception as exc:  # the parser boundary: any failure means unreadable TOML
        raise TaskInvalidError(
            f"{label}: not valid TOML: {short_repr(str(exc))}; fix the TOML syntax"
        ) from exc
    mapped = map_task_toml(data, label)
    version_key = "version" if "schema_version" not in data else "schema_version"
    try:
        frontmatter = Frontmatter.model_validate(mapped, strict=False)
    except ValidationError as exc:
        raise TaskInvalidError(
            f"{label}: {describe(exc, Frontmatter, _rename(version_key))}"
        ) from exc
    return frontmatter.to_config()


__all__ = ["DEFAULT_VERSION", "map_task_toml", "parse_task_toml"]
