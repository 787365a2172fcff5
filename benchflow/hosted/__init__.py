"""Hosted-benchmark runs from the command line (`rollout login|check|benchmarks`): stored
endpoint credentials, readiness checks, and registry datasets pulled into a workspace."""

from benchflow.hosted.checks import Check, run_checks
from benchflow.hosted.login import LoginConfig, load_login, save_login
from benchflow.hosted.workspace import PulledBenchmark, default_registry_ref, pull_benchmark

__all__ = ["Check", "LoginConfig", "PulledBenchmark", "default_registry_ref", "load_login",
           "pull_benchmark", "run_checks", "save_login"]
