"""`strict: false`: a file's unknown keys become warnings instead of errors.

benchflow's own files (job files, task.md frontmatter) refuse unknown keys, so a typo
never passes silently. A file written for a newer benchflow may say `strict: false`:
its unknown keys are then dropped, each with a warning naming the file and the key,
and everything else is validated as usual (a bad value is still an error).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

T = TypeVar("T")
_MAX_PASSES = 32


def _path(loc: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def _drop(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Delete the key at `loc` (union tags in the path, absent from the data, are skipped);
    returns the path as it is in the data, or None when it is not there."""
    node, path = data, []
    for part in loc[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            continue  # a discriminated union's tag
        path.append(part)
    if isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return (*path, loc[-1])
    return None


def validate_leniently(validate: Callable[[Any], T], data: dict[str, Any], label: str,
                       category: type[Warning] = UserWarning) -> T:
    """`validate(data)` with unknown keys dropped (one warning each) instead of refused.

    Raises:
        ValidationError: any other problem, as `validate` raises it.
    """
    data = copy.deepcopy(data)
    for _ in range(_MAX_PASSES):
        try:
            return validate(data)
        except ValidationError as exc:
            extras = [tuple(e["loc"]) for e in exc.errors() if e["type"] == "extra_forbidden"]
            dropped = [p for p in (_drop(data, loc) for loc in extras) if p is not None]
            if not dropped:
                raise
            for path in dropped:
                warnings.warn(f"{label}: unknown key '{_path(path)}' ignored (strict: false)",
                              category, stacklevel=2)
    return validate(data)


__all__ = ["validate_leniently"]
