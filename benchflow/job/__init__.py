"""Jobs: a job file's agents x tasks x attempts, run with bounded concurrency.

`load_job_config` reads a job file; `prepare_job` resolves datasets and plans trials
before anything starts; `Job` runs them with retries and cancellation and writes the
job's result.json; `prepare_resume` plans the rest of an interrupted job.
"""

import importlib

# Exports load on first use: a light module of the package (`limits`, `loop`) is imported
# without the whole job machinery.
_EXPORTS = {
    "JobConfig": "config", "load_job_config": "config", "parse_job_config": "config",
    "ResolvedDataset": "datasets", "TaskEntry": "datasets", "resolve_datasets": "datasets",
    "Job": "job", "PlannedRollout": "job",
    "Aggregates": "models", "JobResult": "models", "RolloutRef": "models", "aggregate": "models",
    "RetryPolicy": "retry",
    "PreparedJob": "runner", "make_job": "runner", "prepare_job": "runner",
    "start_new_job": "runner",
    "prepare_resume": "resume",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchflow.job' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"benchflow.job.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Aggregates",
    "Job",
    "JobConfig",
    "JobResult",
    "PlannedRollout",
    "PreparedJob",
    "ResolvedDataset",
    "RetryPolicy",
    "RolloutRef",
    "TaskEntry",
    "aggregate",
    "load_job_config",
    "make_job",
    "parse_job_config",
    "prepare_job",
    "prepare_resume",
    "resolve_datasets",
    "start_new_job",
]
