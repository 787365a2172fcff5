"""How a rollout drives an agent, whatever its kind (oracle, nop, ACP, command, model, http).

A driver installs its agent once per rollout and opens a connection per session: the
rollout keeps one connection while consecutive steps have the same role in the same
scene, and opens a new one when the role or scene changes.

A driver may set `needs_sandbox = False` (the model agent without tools, an HTTP
endpoint): a rollout of a task without an environment (a QA item) then starts no
sandbox at all and `AgentContext.sandbox` is None. `driver_needs_sandbox()` reads it.
"""

from __future__ import annotations

import anyio
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from benchflow.agents.agent_env import AgentEndpoint
from benchflow.config import ModelEndpoint, Role
from benchflow.errors import ConfigError
from benchflow.mcp import McpServer
from benchflow.paths import RolloutPaths
from benchflow.sandbox.base import Sandbox
from benchflow.steps import Step
from benchflow.task import Task
from benchflow.trace_ids import TraceIds

if TYPE_CHECKING:
    from benchflow.agents.python_wheels import SandboxPlatform
    from benchflow.tools.server import ToolServer
    from benchflow.verify.fold import HardenFold
    from benchflow.verify.ors import OrsEpisode
    from benchflow.trajectory.writer import TrajectoryWriter


@dataclass(frozen=True)
class AgentUser:
    """The sandbox user agents run as, and the home it can write."""

    name: str
    uid: int
    home: str


@dataclass(frozen=True)
class RoleAccess:
    """The Unix user a role runs as, and what it may write (`rollout/role_access.py`)."""

    role: str
    user: str
    uid: int
    home: str
    workspace: str
    """`read-write` or `read-only`."""
    scratch: str
    """The role's own folder (mode 700), writable whatever its workspace access."""
    umask: str | None = None
    """Set on the role's processes (002 when several roles share write access)."""


@dataclass
class AgentContext:
    """What every driver may use during one rollout."""

    sandbox: Sandbox | None
    task: Task
    paths: RolloutPaths
    workdir: str
    agent_user: str | None
    instruction_path: str
    timeout_multiplier: float = 1.0
    trajectory: TrajectoryWriter | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    solution_dir: Path | None = None
    """The solution the oracle runs now: the current step's in a multi-step task, else None
    (the task's own `solution_dir`)."""
    mcp_servers: list[McpServer] = field(default_factory=list)
    """MCP servers ACP sessions are given (the task's and the rollout's)."""
    created_user: AgentUser | None = None
    """The agent user, once `ensure_agent_user` has created it (once per rollout)."""
    python_paths: dict[str, str | None] = field(default_factory=dict)
    """The `PYTHONPATH` each installed ACP agent runs with, by agent name."""
    oracle_placed: Path | None = None
    """The solution folder now at /oracle (placed by the oracle, or by the sandbox's start)."""
    task_input: Mapping[str, Any] = field(default_factory=dict)
    """A QA item's inputs: the HTTP payload's `task.input`, the tool server's kwargs."""
    task_metadata: Mapping[str, Any] = field(default_factory=dict)
    """A QA item's metadata (with its `item_id`), in the HTTP payload."""
    tool_server: ToolServer | None = None
    """The rollout's tool server for ACP agents (`rollout/acp_tools.py`), while it runs."""
    ors_episode: OrsEpisode | None = None
    """The Open Reward Standard episode of an `ors-episode` task, while it runs."""
    endpoint_score: float | None = None
    endpoint_passed: bool | None = None
    """What an HTTP agent's endpoint last reported (its score, its pass), for result.json."""
    agent_layers: frozenset[str] = frozenset()
    """Registered agents whose install layer is mounted, complete and read-only, in the
    sandbox (`benchflow.agents.layers`): their install only links it onto PATH."""
    platform: SandboxPlatform | None = None
    """What the sandbox's image offers agent runtimes (arch, libc, python, node), once
    probed: the first install probes it, or it is known from the image before start."""
    agent_deadline: float | None = None
    """`anyio.current_time()` at which the agent phase's budget (agent.timeout_sec x multiplier,
    across every turn, scene and user round) runs out; None outside the agent phase."""
    trace: TraceIds | None = None
    """The rollout's run id, trace id and root span id (also in `env` as TRACEPARENT)."""
    dataset_name: str | None = None
    rollout_name: str | None = None
    model_endpoint: ModelEndpoint | None = None
    """The model endpoint as the host reaches it (base_url, key variable), for drivers that
    call a model themselves (the model agent)."""
    agent_endpoint: AgentEndpoint | None = None
    """The model endpoint as the agents in the sandbox call it (URL, each role's key)."""
    model_keys: Mapping[str, str] = field(default_factory=dict)
    """Each role's key for benchflow's model server or relay (calls are attributed by it)."""
    resume_sessions: dict[str, str] = field(default_factory=dict)
    """ACP session ids to restore (session/load) at a role's next connect, by role name
    (a forked rollout's roles that had turns before the fork); taken when used."""
    roles: dict[str, RoleAccess] = field(default_factory=dict)
    """Each role's own Unix user and access, by role name (empty: every role runs as
    `agent_user`, as in a one-role rollout)."""
    harden_fold: HardenFold | None = None
    """The hardening baseline and harden.sh, pending, to run in the agent's one command
    (`benchflow.verify.fold`): set by the rollout in place of the baseline's own exec."""

    def require_sandbox(self, who: str) -> Sandbox:
        """The sandbox, or a ConfigError naming `who` when this rollout has none."""
        if self.sandbox is None:
            raise ConfigError(f"{who} needs a sandbox, but this rollout has none (a QA item "
                              "without an environment)")
        return self.sandbox

    def scaled(self, seconds: float) -> float:
        return seconds * self.timeout_multiplier

    def bounded(self, seconds: float) -> float:
        """`seconds`, cut to what is left of the agent phase's budget (at least 10 ms)."""
        if self.agent_deadline is None:
            return seconds
        return max(min(seconds, self.agent_deadline - anyio.current_time()), 0.01)

    @property
    def agent_timeout_sec(self) -> float:
        """What one turn may take: the agent phase's remaining budget."""
        return self.bounded(self.scaled(self.task.config.agent.timeout_sec))

    def turn_timeout_sec(self, own_sec: float | None) -> float:
        """A turn's budget: a role's own (smaller) `timeout_sec` if set, within the phase's."""
        if own_sec is None:
            return self.agent_timeout_sec
        return min(self.scaled(own_sec), self.agent_timeout_sec)

    @property
    def install_timeout_sec(self) -> float:
        return self.scaled(self.task.config.agent.install_timeout_sec)


@dataclass
class StepOutcome:
    """What one prompt produced, for the result's counters."""

    stop_reason: str | None = None
    n_tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    agent_text: str = ""
    reported_usage: bool = False
    """The agent reported the turn's tokens itself (over ACP, or the model agent's client)."""
    incomplete_tool_calls: list[str] = field(default_factory=list)
    """Ids of tool calls the agent reported without arguments or output (benchflow fills
    them from the model calls it relayed)."""


class AgentConnection(Protocol):
    """One open session of an agent in a role."""

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome: ...


class AgentDriver(Protocol):
    """One kind of agent: installs it, connects sessions."""

    name: str

    async def install(self, ctx: AgentContext) -> None: ...

    def connect(self, ctx: AgentContext, role: Role, scene: str
                ) -> AbstractAsyncContextManager[AgentConnection]: ...


@dataclass(frozen=True)
class DriverCapabilities:
    """What a rollout asks of a driver instead of testing its class."""

    cached_install: bool = False
    """Its install is committed into the agent image cache (so it installs first)."""
    mcp_sessions: bool = False
    """Its sessions take MCP servers (the ACP agents' tool server reaches it)."""
    network_install: bool = True
    """Installing it may download in the sandbox (the sandbox starts online for it)."""


BUILTIN_CAPABILITIES = DriverCapabilities(network_install=False)
"""The built-in drivers' (oracle, nop, model): nothing installed from the network."""


def driver_capabilities(driver: object) -> DriverCapabilities:
    """`driver.capabilities`, or the defaults of a driver that declares none (a command
    or entry-point agent: benchflow cannot see into its install)."""
    return getattr(driver, "capabilities", None) or DriverCapabilities()


def driver_needs_sandbox(driver: object) -> bool:
    """Whether `driver` needs a sandbox to run (True unless it says `needs_sandbox = False`)."""
    return bool(getattr(driver, "needs_sandbox", True))
