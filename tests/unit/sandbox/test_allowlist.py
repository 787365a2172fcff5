"""Hosts of a `model-only` sandbox's allowlist: addresses as networks, names as domains."""

from benchflow.sandbox.allowlist import Allowlist, split_hosts


def test_addresses_become_networks_and_names_domains():
    allowed = split_hosts(["10.1.2.3", "LLM.example.com", "[2001:db8::1]", "10.1.2.3"])
    assert allowed == Allowlist(cidrs=("10.1.2.3/32", "2001:db8::1/128"),
                                domains=("llm.example.com",))
    assert not allowed.empty
    assert split_hosts([]).empty
