"""`environment.provider_config` for the modal backend."""

from __future__ import annotations

from pydantic import Field, model_validator

from benchflow._models import FrozenModel


class ModalConfig(FrozenModel):
    """Keys of `environment.provider_config` (job file) for `--env modal`."""

    app_name: str = "benchflow"
    """The Modal app sandboxes are created under (looked up, created when missing)."""
    sandbox_timeout_sec: int = Field(default=4 * 3600, ge=1, le=24 * 3600)
    """A sandbox's maximum lifetime: Modal terminates it then even if benchflow died."""
    idle_timeout_sec: int | None = Field(default=None, ge=1)
    """Terminate a sandbox idle this long (Modal's `idle_timeout`; off by default)."""
    gpu_type: str = "any"
    """The GPU type a task's `gpus = N` asks for (`<gpu_type>:N`, e.g. `A10G`, `H100`)."""
    max_sandboxes: int = Field(default=100, ge=1)
    """Sandboxes alive at once from this process, whatever the job's concurrency."""
    creates_per_sec: float = Field(default=5.0, ge=0)
    """Creates started per second (Modal's default rate limit is 5/s)."""
    rate_limit_retries: int = Field(default=5, ge=0)
    """Creates refused with `ResourceExhaustedError` are retried this often ..."""
    backoff_sec: float = Field(default=1.0, ge=0)
    """... after `backoff_sec * 2**attempt` seconds (also between stream resumes)."""
    create_timeout_sec: float = Field(default=300.0, gt=0)
    stream_retries: int = Field(default=3, ge=0)
    """A live process's dropped stdout/stderr is resumed this often before it counts as lost."""
    snapshot_timeout_sec: int = Field(default=300, ge=1)
    region: str | None = None
    """A single region sandboxes run in (Modal's `region=`, e.g. `us-east`)."""
    regions: list[str] | None = Field(default=None, min_length=1)
    """Several regions Modal may choose from (give `region` or `regions`, not both)."""
    verbose: bool = False
    """Modal's detailed sandbox logging (`verbose=True` at create)."""
    price_per_cpu_hour: float = Field(default=0.1419, ge=0)
    """USD per physical core hour (Modal's published sandbox rate): `cost` in result.json."""
    price_per_gib_hour: float = Field(default=0.0242, ge=0)
    """USD per GiB of memory per hour (Modal's published sandbox rate)."""
    sdk_module: str = "modal"
    """The module providing `App`, `Image` and `Sandbox` (tests: `tests.fakes.modal_sdk`)."""

    @model_validator(mode="after")
    def _one_region_key(self) -> ModalConfig:
        if self.region is not None and self.regions is not None:
            raise ValueError("give region or regions, not both")
        return self

    @property
    def region_arg(self) -> str | list[str] | None:
        """Modal's `region=` argument (a string or a list), None when unset."""
        return self.region if self.region is not None else self.regions


__all__ = ["ModalConfig"]
