"""Jobs: many rollouts, bounded concurrency, aggregate results."""

from benchflow.job.job import Job, Trial
from benchflow.job.models import Aggregates, JobResult, TrialRef, aggregate

__all__ = ["Aggregates", "Job", "JobResult", "Trial", "TrialRef", "aggregate"]
