"""The verifiers environment package `benchflow-env`: verifiers finds a taskset (and its
default harness and env) by importing the package named by the id and reading `__all__`.
The implementation is `benchflow.train.verifiers`."""

from benchflow.train.verifiers import BenchflowEnv, BenchflowHarness, BenchflowTaskset

__all__ = ["BenchflowEnv", "BenchflowHarness", "BenchflowTaskset"]
