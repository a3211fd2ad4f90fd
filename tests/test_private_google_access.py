"""Private Google Access: the DNS zone and the model servers' NetworkPolicy must agree, or weights cannot
be streamed from gs:// (pods would resolve storage.googleapis.com to addresses their egress forbids)."""

from __future__ import annotations

import ipaddress

import pytest

from .conftest import STACKS, one, resources


@pytest.mark.parametrize("stack", STACKS)
def test_googleapis_resolves_into_the_egress_allowed_by_networkpolicy(plans, stack):
    _, _, inv = plans[stack]
    zone = one(inv, "gcp:dns/managedZone:ManagedZone")
    assert zone["inputs"]["dnsName"] == "googleapis.com." and zone["inputs"]["visibility"] == "private"
    records = {r["inputs"]["name"]: r["inputs"] for r in resources(inv, "gcp:dns/recordSet:RecordSet")}
    assert records["*.googleapis.com."]["rrdatas"] == ["private.googleapis.com."]
    vips = [ipaddress.ip_address(a) for a in records["private.googleapis.com."]["rrdatas"]]
    policies = [
        r["inputs"]
        for r in resources(inv, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r["inputs"]["metadata"]["name"].startswith("vllm-")
    ]
    assert policies
    for pol in policies:
        https_blocks = [
            ipaddress.ip_network(peer["ipBlock"]["cidr"])
            for rule in pol["spec"]["egress"]
            for peer in rule.get("to", [])
            if "ipBlock" in peer and any(p.get("port") == 443 for p in rule.get("ports", []))
        ]
        for vip in vips:
            assert any(vip in block for block in https_blocks), (pol["metadata"]["name"], vip)
