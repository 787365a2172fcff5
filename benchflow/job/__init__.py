"""Jobs: a job file's agents x tasks x attempts, run with bounded concurrency.

`load_job_config` reads a job file; `prepare_job` resolves datasets and plans trials
before anything starts; `Job` runs them with retries and cancellation and writes the
job's result.json; `prepare_resume` plans the rest of an interrupted job.
"""

from benchflow.job.config import JobConfig, load_job_config, parse_job_config
from benchflow.job.datasets import ResolvedDataset, TaskEntry, resolve_datasets
from benchflow.job.job import Job, Trial
from benchflow.job.models import Aggregates, JobResult, TrialRef, aggregate
from benchflow.job.retry import RetryPolicy
from benchflow.job.runner import PreparedJob, make_job, prepare_job, start_new_job



def __getattr__(name: str) -> object:
    if name == "prepare_resume":  # on demand: only `jobs resume` needs it
        from benchflow.job.resume import prepare_resume

        return prepare_resume
    raise AttributeError(f"module 'benchflow.job' has no attribute {name!r}")


__all__ = [
    "Aggregates",
    "Job",
    "JobConfig",
    "JobResult",
    "PreparedJob",
    "ResolvedDataset",
    "RetryPolicy",
    "TaskEntry",
    "Trial",
    "TrialRef",
    "aggregate",
    "load_job_config",
    "make_job",
    "parse_job_config",
    "prepare_job",
    "prepare_resume",
    "resolve_datasets",
    "start_new_job",
]
