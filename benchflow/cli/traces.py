"""`benchflow traces serve`: receive agent traces for runs started elsewhere."""

import threading
from pathlib import Path
from typing import Annotated

import typer

from benchflow import bounds as B
from benchflow.cli._common import err_console, user_errors

app = typer.Typer(name="traces", no_args_is_help=True,
                  help="Agent traces (OTLP/HTTP) joined to the attempts of a jobs folder.")


@app.command("serve")
def serve_command(
    port: Annotated[int, typer.Option("--port", min=0, max=B.MAX_PORT,
                                      help="0 picks a free port")] = 4318,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir", help="the jobs folder")] = Path("jobs"),
) -> None:
    """Listen for OTLP/HTTP spans and file each into the rollout folder of its trace id
    (found from the rollouts' trajectory headers and results); spans of unknown trace ids
    go to JOBS_DIR/.unmatched_traces/ and join their rollout when it appears."""
    from benchflow.traces import JobsIndex, TraceListener, TraceStore

    with user_errors():
        index = JobsIndex(jobs_dir)
        index.scan()
        store = TraceStore(jobs_dir / ".unmatched_traces", resolver=index)
        listener = TraceListener(store, host, port).start()
    err_console.print(f"agent traces: OTLP/HTTP on {listener.url} -> {jobs_dir} "
                      f"({len(index.trace_ids)} attempts known); Ctrl-C stops", highlight=False)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        listener.stop()
        counts = store.counts
        err_console.print(f"{counts.spans} spans ({counts.matched_spans} filed, "
                          f"{counts.unmatched_spans} of unknown trace ids), "
                          f"{counts.malformed_requests + counts.oversized_requests} bad "
                          "requests", highlight=False)
