"""`benchflow datasets list|pull`: registry datasets by name (see `benchflow.job.pull`)."""

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from benchflow.cli._common import console, user_errors
from benchflow.hosted.workspace import default_registry_ref
from benchflow.job.pull import pull

if TYPE_CHECKING:
    from benchflow.job.registry import Registry

app = typer.Typer(help="List and pull registry datasets.", no_args_is_help=True)

RegistryOption = Annotated[str | None, typer.Option(
    "--registry",
    help="registry.json path or URL (default: BENCHFLOW_REGISTRY, else the shipped one)")]


@app.command("list")
def list_command(registry: RegistryOption = None) -> None:
    """List the registry's datasets and versions."""
    from benchflow.job.registry import load_registry

    with user_errors():
        loaded = load_registry(default_registry_ref(registry))
    console.print(registry_table(loaded, "dataset"))


def registry_table(loaded: "Registry", noun: str) -> Table:
    """A loaded registry's packages, one row each (`noun`: dataset or benchmark)."""
    table = Table(title=f"{noun}s in {loaded.source}")
    for column in (noun, "version", "tasks", "description"):
        table.add_column(column)
    for d in loaded.datasets:
        table.add_row(d.name, d.version, str(len(d.tasks)), d.description or "")
    return table


@app.command("pull")
def pull_command(
    dataset: Annotated[str, typer.Argument(help="NAME or NAME@VERSION")],
    registry: RegistryOption = None,
) -> None:
    """Fetch DATASET's tasks into the local cache (a second pull fetches nothing)."""
    with user_errors():
        pulled = pull(dataset, default_registry_ref(registry))
    state = "pulled" if pulled.fetched else "already cached"
    console.print(f"{pulled.name}@{pulled.version}: {len(pulled.tasks)} task(s) {state} "
                  f"({pulled.lock_file})", highlight=False)
