"""Error messages for task files: dotted key paths, nearest valid names, expected types."""

from __future__ import annotations

import difflib
import re
import reprlib
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

_HINTS = {
    # Names people carry over from the other layout or from Harbor.
    "environment": "sandbox",
    "solution": "oracle",
    "version": "schema_version",
    "tests": "verifier",
    "instruction": "the markdown body below the frontmatter",
}

_MAX_ERRORS = 5

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlevel = 2


def short_repr(value: Any) -> str:
    """A bounded repr (safe on huge or self-referencing YAML structures)."""
    try:
        return _repr.repr(value)
    except Exception:  # noqa: BLE001 - a repr of arbitrary data must never break a message
        return f"<{type(value).__name__}>"


def suggest(key: str, valid: Iterable[str]) -> str | None:
    """The valid name closest to `key`, or None when nothing is close."""
    valid = list(valid)
    if key in _HINTS and _HINTS[key] in valid:
        return _HINTS[key]
    matches = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_key(dotted: str, valid: Sequence[str]) -> str:
    """`unknown key 'a.b' — did you mean 'c'?` (or the list of valid keys)."""
    key = dotted.rsplit(".", 1)[-1]
    guess = suggest(key, valid)
    if guess is not None:
        return f"unknown key '{dotted}' — did you mean '{guess}'?"
    return f"unknown key '{dotted}' (valid keys: {', '.join(sorted(valid))})"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside `X`, `X | None` or `Annotated[X, ...]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    if origin is Annotated:
        return _model_in(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _fields_at(root: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """Field names of the model reached by following `loc` from `root`."""
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        annotation = field.annotation
        inner = _model_in(annotation)
        if inner is None and get_origin(annotation) is list:
            inner = _model_in(get_args(annotation)[0])
        model = inner
    return list(model.model_fields) if model is not None else []


def _unknown(root: type[BaseModel], loc: tuple[Any, ...], path: str) -> str:
    """An unknown key; a top-level key that belongs in a section is pointed there."""
    valid = _fields_at(root, loc[:-1])
    if len(loc) == 1 and suggest(str(loc[0]), valid) is None:
        homes = [f"{s}.{loc[0]}" for s in valid if str(loc[0]) in _fields_at(root, (s,))]
        if homes:
            return f"unknown key '{path}' — did you mean {' or '.join(repr(h) for h in homes)}?"
    return unknown_key(path, valid)


def dotted(loc: Sequence[Any]) -> str:
    """('sandbox', 'env', 'X') -> 'sandbox.env.X'; list indexes read as [i]."""
    out = ""
    for part in loc:
        if part == "[key]":
            out += " (key)"
        elif isinstance(part, int):
            out += f"[{part}]"
        elif part == "":
            out += '.""' if out else '""'
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def describe(
    exc: ValidationError,
    root: type[BaseModel],
    rename: Callable[[str], str] = lambda path: path,
) -> str:
    """One line per problem (at most five), naming the dotted path and the fix."""
    lines = []
    errors = exc.errors(include_url=False)
    for err in errors[:_MAX_ERRORS]:
        loc = tuple(err["loc"])
        path = rename(dotted(loc))
        if err["type"] == "extra_forbidden":
            lines.append(_unknown(root, loc, path))
            continue
        msg = re.sub(r"a valid dictionary or instance of \w+", "a mapping of keys", str(err["msg"]))
        if msg.startswith("Input should be"):
            msg = "must be" + msg[len("Input should be") :]
        elif msg == "Field required":
            msg = "is required"
        elif msg == "Keys should be strings":
            msg = "is not a valid key: keys must be strings"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        lines.append(f"'{path}' {msg} (got {short_repr(err.get('input'))})")
    if len(errors) > _MAX_ERRORS:
        lines.append(f"... and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(lines)


__all__ = ["describe", "dotted", "short_repr", "suggest", "unknown_key"]
