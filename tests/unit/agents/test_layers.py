"""Agent install layers: what a layer's key covers, and what the rollout records."""

from __future__ import annotations

import dataclasses

from benchflow.agents.catalog import load_catalog
from benchflow.agents.image_cache import AgentImagePlan, install_cache_outcome
from benchflow.agents.layers import AgentLayer, layer_key, layer_volume
from benchflow.agents.python_wheels import SandboxPlatform

from .conftest import AGENTS

BOOKWORM = SandboxPlatform(arch="x86_64", libc="glibc", libc_version=(2, 36), python=(3, 11))


def test_every_shipped_agent_installs_as_a_layer() -> None:
    catalog = load_catalog()
    shipped = sorted(p.name for p in AGENTS.iterdir() if (p / "agent.toml").is_file())
    assert shipped == ["claude", "codex", "gemini", "opencode", "scripted"]
    assert all(catalog.manifest(name).install.layer for name in shipped)


def test_the_key_follows_what_the_install_depends_on() -> None:
    catalog = load_catalog()
    claude, scripted = catalog.manifest("claude"), catalog.manifest("scripted")
    key = layer_key(claude, BOOKWORM)
    assert layer_key(claude, BOOKWORM) == key  # stable
    # a JS agent: not the image's python, but its node and C library
    assert layer_key(claude, dataclasses.replace(BOOKWORM, python=(3, 12))) == key
    assert layer_key(claude, dataclasses.replace(BOOKWORM, node_major=22)) != key
    assert layer_key(claude, dataclasses.replace(BOOKWORM, node_major=18)) == key  # too old:
    # benchflow's node either way
    assert layer_key(claude, dataclasses.replace(BOOKWORM, libc_version=(2, 31))) != key
    assert layer_key(claude, dataclasses.replace(BOOKWORM, libc="musl")) != key
    assert layer_key(claude, dataclasses.replace(BOOKWORM, arch="aarch64")) != key
    # a python agent: its python
    assert layer_key(scripted, dataclasses.replace(BOOKWORM, python=(3, 12))) != layer_key(
        scripted, BOOKWORM)
    # another version of the agent is another layer
    newer = claude.model_copy(update={"version": "9.9.9"})
    assert layer_key(newer, BOOKWORM) != key
    assert layer_volume(newer, BOOKWORM).startswith("benchflow-agent-claude-9.9.9-")


def test_the_outcome_says_whether_anything_was_installed_or_cached() -> None:
    cached = AgentLayer(agent="claude", volume="v", target="/t", filled=False)
    filled = dataclasses.replace(cached, filled=True)
    miss = AgentImagePlan(tag="t", hit=False, base_image="b")
    hit = dataclasses.replace(miss, hit=True)
    assert install_cache_outcome(None, False, [cached, cached]) == "hit"
    assert install_cache_outcome(None, False, [cached, filled]) == "saved"
    assert install_cache_outcome(hit, False, [cached]) == "hit"
    assert install_cache_outcome(miss, True, [cached]) == "saved"
    assert install_cache_outcome(miss, False, [filled]) == "installed"  # a snapshot failed
    assert install_cache_outcome(None, False) == "installed"  # no cache at all
    assert install_cache_outcome(hit, False) == "hit"
