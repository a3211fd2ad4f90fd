"""create-after-dependencies: a first ``pulumi up`` into a fresh project creates things in an order that works.

* A resource of a Google API that the stack itself enables (a ``gcp:projects/service:Service`` in the stack) must
  depend, directly or transitively, on that enablement: otherwise the engine may create it first and the API
  answers "has not been used in project … or it is disabled".
* An IAM grant to a Workload Identity principal (``principal://…/workloadIdentityPools/<project>.svc.id.goog/…``)
  must depend on a GKE cluster: the ``<project>.svc.id.goog`` pool exists only once a cluster with Workload Identity
  does, and a grant to a principal of a pool that does not exist is rejected.

Dependencies are followed as the engine follows them: a resource waits for everything it lists, and waiting
for a component means waiting for all of that component's children.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pulumi_policy import ReportViolation, Severity, StackValidationArgs, StackValidationPolicy

from ._common import CLUSTER, config, plain

NAME = "create-after-dependencies"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Make the resource depend on what it needs first: the project service that enables its API "
    "(depends_on the ProjectServices component), and for a grant to a Workload Identity principal the "
    "GKE cluster (build the principal from the cluster's workload_identity_config.workload_pool output)."
)

SERVICE = "gcp:projects/service:Service"
SERVICE_IDENTITY = "gcp:projects/serviceIdentity:ServiceIdentity"
#: The API behind each pulumi-gcp module this program uses (module = the part of the type token before ``/``).
MODULE_APIS: dict[str, str] = {
    "gcp:artifactregistry": "artifactregistry.googleapis.com",
    "gcp:certificatemanager": "certificatemanager.googleapis.com",
    "gcp:cloudrunv2": "run.googleapis.com",
    "gcp:compute": "compute.googleapis.com",
    "gcp:container": "container.googleapis.com",
    "gcp:dns": "dns.googleapis.com",
    "gcp:iap": "iap.googleapis.com",
    "gcp:logging": "logging.googleapis.com",
    "gcp:monitoring": "monitoring.googleapis.com",
    "gcp:networkservices": "networkservices.googleapis.com",
    "gcp:secretmanager": "secretmanager.googleapis.com",
    "gcp:serviceaccount": "iam.googleapis.com",
    "gcp:storage": "storage.googleapis.com",
    "gcp:vertex": "aiplatform.googleapis.com",
}
WIF_POOL_SUFFIX = ".svc.id.goog/"


def api_of(resource_type: str, props: dict[str, Any]) -> str | None:
    """The API a resource is created through, or None when the program does not track it."""
    if resource_type == SERVICE_IDENTITY:
        service = props.get("service")
        return service if isinstance(service, str) else None
    return MODULE_APIS.get(resource_type.split("/", 1)[0])


def _wif_member(props: dict[str, Any]) -> str | None:
    members = [props.get("member"), *list(props.get("members") or [])]
    for m in members:
        if isinstance(m, str) and m.startswith(("principal://", "principalSet://")) and WIF_POOL_SUFFIX in m:
            return m
    return None


class Graph:
    """What each resource waits for, as the engine resolves it (components stand for all their children)."""

    def __init__(self, resources: Iterable[Any]) -> None:
        self.resources = {r.urn: r for r in resources}
        self.children: dict[str, list[str]] = {}
        for r in self.resources.values():
            if r.parent is not None:
                self.children.setdefault(r.parent.urn, []).append(r.urn)
        self._closure: dict[str, frozenset[str]] = {}

    def _descendants(self, urn: str) -> list[str]:
        out, stack = [], list(self.children.get(urn, []))
        while stack:
            u = stack.pop()
            out.append(u)
            stack.extend(self.children.get(u, []))
        return out

    def waits_for(self, urn: str) -> frozenset[str]:
        """Every URN the resource transitively waits for."""
        if urn in self._closure:
            return self._closure[urn]
        seen: set[str] = set()
        stack = [d.urn for d in self.resources[urn].dependencies]
        while stack:
            u = stack.pop()
            if u in seen or u not in self.resources:
                continue
            seen.add(u)
            stack.extend(self._descendants(u))
            stack.extend(d.urn for d in self.resources[u].dependencies)
        self._closure[urn] = frozenset(seen)
        return self._closure[urn]


def check(resources: list[Any]) -> Iterator[tuple[str, str]]:
    graph = Graph(resources)
    props = {r.urn: plain(r.props) for r in resources}
    enabled = {props[r.urn].get("service"): r.urn for r in resources if r.resource_type == SERVICE}
    clusters = {r.urn for r in resources if r.resource_type == CLUSTER}
    for r in sorted(resources, key=lambda x: x.urn):
        p = props[r.urn]
        api = api_of(r.resource_type, p)
        if api in enabled and r.resource_type != SERVICE and enabled[api] not in graph.waits_for(r.urn):
            yield (
                r.urn,
                (
                    f"{r.resource_type} {r.name} is created through {api}, which this stack enables, but does "
                    f"not depend on its enablement ({enabled[api].rsplit('::', 1)[-1]}): on a fresh project "
                    "it can be created before the API is on"
                ),
            )
        member = _wif_member(p) if "IAM" in r.resource_type or "Iam" in r.resource_type else None
        if member is not None and clusters and not (clusters & graph.waits_for(r.urn)):
            pool = member.split("/workloadIdentityPools/", 1)[1].split("/", 1)[0]
            yield (
                r.urn,
                (
                    f"{r.resource_type} {r.name} grants to the Workload Identity principal of pool {pool}, but "
                    "does not depend on the GKE cluster that creates that pool: on a fresh project the grant "
                    "is rejected"
                ),
            )


def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    config(args)  # no properties; read so an unexpected config fails loudly rather than being ignored
    for urn, message in check(list(args.resources)):
        report_violation(message, urn)


POLICY = StackValidationPolicy(
    name=NAME,
    description="Every resource waits for the API enablement it needs, and Workload Identity grants for the cluster.",
    validate=validate,
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["ordering", "first-apply"],
)
