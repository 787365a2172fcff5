"""The one renderer for everything a shell runs: strict jinja2 with a quoting filter.

Agent install scripts, launch argv and launch env values are jinja2 templates. A name
a template uses but the context lacks is an error (`StrictUndefined`), and values go
through `{{ value | q }}` (`shlex.quote`) wherever a shell will read them. Templates
may `{% include %}` the shared snippets in `benchflow/agents/scripts/`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchflow.errors import ConfigError

if TYPE_CHECKING:  # jinja2 loads when an agent's templates are rendered, not on import
    import jinja2

SHARED_SCRIPTS = Path(__file__).parent / "scripts"


def _environment(search_path: list[Path]) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(p) for p in search_path]),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["q"] = quote
    return env


def quote(value: Any) -> str:
    """Shell-quote `value` (the `q` filter): `shlex.split(quote(s)) == [s]` for every string."""
    return shlex.quote(str(value))


def render_file(path: Path, context: Mapping[str, Any]) -> str:
    """Render the template file `path`; includes resolve beside it, then in the shared scripts.

    Raises:
        ConfigError: the template is missing, malformed, or uses an undefined name.
    """
    import jinja2

    env = _environment([path.parent, SHARED_SCRIPTS])
    try:
        return env.get_template(path.name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise ConfigError(f"{path}: template {exc.name!r} not found") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{exc.filename or path}:{exc.lineno}: template syntax error: "
                          f"{exc.message}") from exc
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"{path}: {exc.message}") from exc


def render_string(source: str, context: Mapping[str, Any], *, where: str) -> str:
    """Render one template string (a launch argument or env value); `where` names it in errors.

    Raises:
        ConfigError: the template is malformed or uses an undefined name.
    """
    import jinja2

    env = _environment([SHARED_SCRIPTS])
    try:
        return env.from_string(source).render(**context)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{where}: template syntax error: {exc.message}") from exc
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"{where}: {exc.message}") from exc


__all__ = ["SHARED_SCRIPTS", "quote", "render_file", "render_string"]
