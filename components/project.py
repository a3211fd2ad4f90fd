"""Project services the platform needs, enabled once and never disabled on destroy."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from .base import Component

#: APIs the platform uses: GKE, Compute (VMs, reservations, Hyperdisk ML, load balancers), Artifact
#: Registry, Container Scanning (the registry's vulnerability scanning does nothing without it), Container
#: File System (GKE image streaming, ``gcfsConfig``), Monitoring and Logging (Managed Prometheus, dashboards,
#: alerts), Network Services (GKE Gateway / Inference Gateway), Certificate Manager (gateway TLS), Secret Manager
#: (hub token), IAM and IAM Credentials (Workload Identity Federation), Cloud Storage (weights), Cloud DNS
#: (private googleapis.com zone).
PLATFORM_SERVICES: tuple[str, ...] = (
    "artifactregistry.googleapis.com",
    "certificatemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "containerfilesystem.googleapis.com",
    "containerscanning.googleapis.com",
    "dns.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "networkservices.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
)


@dataclass(frozen=True)
class ProjectServicesArgs:
    project: str
    services: tuple[str, ...] = PLATFORM_SERVICES


class ProjectServices(Component):
    """Enables each API with ``disable_on_destroy=False``: tearing down one stack must not switch off an
    API that other stacks or teams in the project still use."""

    TYPE = "llm-serving:project:ProjectServices"

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        self.services: dict[str, gcp.projects.Service] = {}
        for api in sorted(set(args.services)):
            self.services[api] = gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=args.project,
                service=api,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=self.child_opts(),
            )
        self.enabled = pulumi.Output.all(*[s.service for s in self.services.values()])
        self.register_outputs({"enabled": self.enabled})
