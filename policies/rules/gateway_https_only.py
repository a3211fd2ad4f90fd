"""gateway-https-only: clients reach the service over TLS only.

A plain-HTTP listener is tolerated only as a redirect: every HTTPRoute attached to it (by ``sectionName``, or to the
whole Gateway) must consist of rules that redirect to ``https`` and route to no backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import GATEWAY, HTTP_ROUTE, UNKNOWN, Res, get, of_type, stack_validator

NAME = "gateway-https-only"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: Ways a GKE Gateway listener gets a certificate: Secret refs, pre-shared SSL certificates, Certificate Manager.
CERT_OPTIONS = ("networking.gke.io/pre-shared-certs", "networking.gke.io/cert-manager-certs")
CERTMAP_ANNOTATION = "networking.gke.io/certmap"
REMEDIATION = (
    "Serve only listeners with protocol HTTPS, TLS mode Terminate and a certificate; a plain-HTTP listener "
    "may only carry routes that redirect to https."
)


def attached_routes(gw: Res, listener: str | None, routes: list[Res]) -> list[Res]:
    out = []
    for r in routes:
        if (r.namespace or "default") != (gw.namespace or "default"):
            continue
        for ref in get(r.props, "spec", "parentRefs", default=[]) or []:
            if (
                isinstance(ref, dict)
                and ref.get("name") == gw.k8s_name
                and ref.get("kind", "Gateway") == "Gateway"
                and ref.get("sectionName") in (None, listener)
            ):
                out.append(r)
                break
    return out


def redirect_only(route: Res) -> bool | None:
    rules = get(route.props, "spec", "rules", default=[])
    if rules is UNKNOWN or not isinstance(rules, list) or not rules:
        return None if rules is UNKNOWN else False
    for rule in rules:
        if not isinstance(rule, dict) or rule.get("backendRefs"):
            return False
        redirects = [f for f in rule.get("filters") or [] if isinstance(f, dict) and f.get("type") == "RequestRedirect"]
        if not any(get(f, "requestRedirect", "scheme") == "https" for f in redirects):
            return False
    return True


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    routes = of_type(resources, HTTP_ROUTE)
    for gw in of_type(resources, GATEWAY):
        listeners = get(gw.props, "spec", "listeners", default=[])
        if not isinstance(listeners, list):
            continue
        certmap = get(gw.props, "metadata", "annotations", CERTMAP_ANNOTATION)
        for ln in listeners:
            if not isinstance(ln, dict) or ln.get("protocol") is UNKNOWN:
                continue
            name, proto = ln.get("name"), ln.get("protocol")
            if proto == "HTTP":
                attached = attached_routes(gw, name, routes)
                verdicts = [redirect_only(r) for r in attached]
                if attached and None not in verdicts and all(verdicts):
                    continue
                if None in verdicts:
                    continue
                yield (
                    gw.urn,
                    (
                        f"Gateway {gw.k8s_name} listener {name!r} serves plain HTTP on port {ln.get('port')}: "
                        "remove it, or attach only HTTPRoutes that redirect to https"
                    ),
                )
            elif proto != "HTTPS":
                yield (
                    gw.urn,
                    (
                        f"Gateway {gw.k8s_name} listener {name!r} uses protocol {proto}: serve HTTPS "
                        "(protocol: HTTPS with a TLS certificate)"
                    ),
                )
            else:
                tls = ln.get("tls") or {}
                if tls is UNKNOWN:
                    continue
                if tls.get("mode", "Terminate") != "Terminate":
                    yield (
                        gw.urn,
                        (
                            f"Gateway {gw.k8s_name} listener {name!r} has tls.mode {tls.get('mode')}: set it to "
                            "Terminate at the gateway"
                        ),
                    )
                options = tls.get("options") or {}
                has_cert = (
                    bool(tls.get("certificateRefs"))
                    or bool(certmap)
                    or (isinstance(options, dict) and any(options.get(k) for k in CERT_OPTIONS))
                )
                if not has_cert:
                    yield (
                        gw.urn,
                        (
                            f"Gateway {gw.k8s_name} listener {name!r} has no TLS certificate: set "
                            f"tls.certificateRefs, a {CERT_OPTIONS[1]} option or the {CERTMAP_ANNOTATION} "
                            "annotation"
                        ),
                    )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Gateways serve HTTPS only (plain HTTP may only redirect to https).",
    validate=stack_validator(check, (GATEWAY, HTTP_ROUTE)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["network", "tls"],
)
