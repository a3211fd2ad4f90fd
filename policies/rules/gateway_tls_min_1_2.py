"""gateway-tls-min-1-2: the gateway's load balancer refuses TLS below 1.2.

A GKE Gateway takes its SSL policy from a GCPGatewayPolicy (``spec.default.sslPolicy``, GKE Inference Gateway deploy guide). Without one,
Google Cloud's default SSL policy applies, whose minimum is TLS 1.0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._common import GATEWAY, GCP_GATEWAY_POLICY, SSL_POLICIES, UNKNOWN, Res, cis_gcp, get, of_type, stack_validator

NAME = "gateway-tls-min-1-2"
SEVERITY = Severity.HIGH
FRAMEWORK = cis_gcp("3.9", "Ensure no HTTPS or SSL proxy load balancers permit SSL policies with weak cipher suites")
GOOD = ("TLS_1_2", "TLS_1_3")
REMEDIATION = (
    "Attach a GCPGatewayPolicy with default.sslPolicy naming an SSL policy whose minTlsVersion is TLS_1_2 "
    "(profile MODERN or RESTRICTED)."
)


def _ssl_policies(resources: list[Res]) -> dict[str, Res]:
    out = {}
    for r in of_type(resources, *SSL_POLICIES):
        name = r.props.get("name")
        out[name if isinstance(name, str) else r.name] = r
    return out


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    ssl = _ssl_policies(resources)
    trusted = set(cfg.get("trustedSslPolicies") or [])
    policies = of_type(resources, GCP_GATEWAY_POLICY)
    for gw in of_type(resources, GATEWAY):
        listeners = get(gw.props, "spec", "listeners", default=[])
        if not isinstance(listeners, list) or not any(
            isinstance(x, dict) and x.get("protocol") == "HTTPS" for x in listeners
        ):
            continue
        names = []
        for p in policies:
            ref = get(p.props, "spec", "targetRef", default={})
            if (
                isinstance(ref, dict)
                and ref.get("kind") == "Gateway"
                and ref.get("name") == gw.k8s_name
                and (p.namespace or "default") == (gw.namespace or "default")
            ):
                names.append(get(p.props, "spec", "default", "sslPolicy"))
        names = [n for n in names if n is not None]
        if UNKNOWN in names:
            continue
        if not names:
            yield (
                gw.urn,
                (
                    f"Gateway {gw.k8s_name} has no GCPGatewayPolicy with default.sslPolicy, so the load "
                    "balancer accepts TLS 1.0: attach an SSL policy with minTlsVersion TLS_1_2"
                ),
            )
            continue
        for n in names:
            short = n.rsplit("/", 1)[-1] if isinstance(n, str) else n
            if short in trusted:
                continue
            pol = ssl.get(short)
            if pol is None:
                yield (
                    gw.urn,
                    (
                        f"Gateway {gw.k8s_name} uses SSL policy {n!r}, which is not in this stack: define it "
                        "here or list it in this policy's trustedSslPolicies"
                    ),
                )
                continue
            tls = pol.props.get("minTlsVersion", "TLS_1_0")
            if tls is not UNKNOWN and tls not in GOOD:
                yield (
                    pol.urn,
                    (f"SSL policy {short} has minTlsVersion {tls} (used by Gateway {gw.k8s_name}): set it to TLS_1_2"),
                )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Gateways use an SSL policy with TLS 1.2 or later.",
    validate=stack_validator(check, (GATEWAY, GCP_GATEWAY_POLICY, *SSL_POLICIES)),
    config_schema=PolicyConfigSchema(
        properties={
            "trustedSslPolicies": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "SSL policies managed outside the stack and verified to require TLS >= 1.2.",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["network", "tls"],
)
