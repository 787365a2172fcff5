"""`benchflow agents ...`: the agents benchflow can run, and what each needs."""

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from benchflow.agents.agent_env import PROVIDER_API_KEY_ENV, format_model
from benchflow.agents.catalog import load_catalog
from benchflow.agents.registry import BUILTIN_AGENTS, lookup_agent
from benchflow.cli._common import console, err_console, user_errors
from benchflow.settings import host_env

app = typer.Typer(help="List and describe the agents benchflow can run.", no_args_is_help=True)

_BUILTIN_DESCRIPTIONS = {
    "oracle": "runs the task's solution script (oracle/solve.sh)",
    "nop": "does nothing (checks a task's zero-reward path)",
    "model": "benchflow's own tool-calling loop on an OpenAI-compatible model "
             "(-m MODEL --model-base-url URL)",
}


@app.command("list")
def list_agents() -> None:
    """Every agent: built-ins, packaged manifests, BENCHFLOW_AGENTS_PATH and plugins."""
    catalog = load_catalog()
    table = Table(title="agents")
    for column in ("agent", "aliases", "version", "protocol", "description", "source"):
        table.add_column(column)
    for name in sorted(BUILTIN_AGENTS):
        table.add_row(name, "", "", "built-in", _BUILTIN_DESCRIPTIONS.get(name, ""), "benchflow")
    for name in catalog.names():
        if name in catalog.manifests:
            m = catalog.manifests[name]
            table.add_row(m.name, ", ".join(m.aliases), m.version, m.protocol, m.description,
                          catalog.sources[name])
        else:
            table.add_row(name, "", "", "plugin", "driver from an entry point",
                          catalog.sources[name])
    console.print(table)
    for error in catalog.errors.values():
        err_console.print(f"[red]invalid agent:[/] {error}", highlight=False, soft_wrap=True)


@app.command("show")
def show(name: Annotated[str, typer.Argument(help="agent name or alias")]) -> None:
    """What NAME installs and runs, its default model, and which credentials it needs
    (whether each is set here; values are never shown)."""
    if name in BUILTIN_AGENTS:
        console.print(f"[bold]{name}[/] (built-in): {_BUILTIN_DESCRIPTIONS.get(name, '')}")
        return
    with user_errors():
        catalog, canonical = lookup_agent(name)
        m = catalog.manifest(canonical)
    rows = [
        ("name", m.name), ("aliases", ", ".join(m.aliases) or "-"),
        ("description", m.description), ("protocol", m.protocol), ("version", m.version),
        ("folder", str(m.folder)), ("package", m.install.package or "-"),
        ("install script", m.install.script or "-"),
        ("install timeout", f"{m.install.timeout_sec:g} s" if m.install.timeout_sec
         else "the task's agent.install_timeout_sec"),
        ("needs", ", ".join(filter(None, [
            f"node >= {m.install.node}" if m.install.node else "",
            f"python3 >= {m.install.python}" if m.install.python else ""])) or "-"),
        ("launch", " ".join(m.launch.argv)),
        ("default model", format_model(m, None) or "-"),
        ("model format", f"{m.model.format} (via {m.model.select})"),
    ]
    mapping = m.env_mapping
    for ours, theirs in (("API key", mapping.api_key), ("base URL", mapping.base_url),
                         ("model", mapping.model)):
        if theirs:
            rows.append((f"{ours} variable", theirs))
    table = Table(show_header=False, title=f"agent {m.name}")
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    if not m.credentials:
        console.print("credentials: none needed")
        return
    creds = Table(title="credentials (any one option per provider)")
    for column in ("provider", "variables / files", "status"):
        creds.add_column(column)
    for option in m.credentials:
        needs = [*option.env, *(f.host for f in option.files)]
        ready = (all(host_env(n) for n in option.env)
                 and all(Path(f.host).expanduser().is_file() for f in option.files))
        status = "[green]set[/]" if ready else "[yellow]missing[/]"
        creds.add_row(option.provider or "any", ", ".join(needs), status)
    console.print(creds)
    if mapping.api_key:
        console.print(f"{PROVIDER_API_KEY_ENV} is also accepted, passed as {mapping.api_key}.")


__all__ = ["app"]
