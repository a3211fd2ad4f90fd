"""Custom Metrics Stackdriver Adapter: the HPA's path to Managed Service for Prometheus (GKE inference autoscaling guide and samples).

Objects follow upstream ``adapter_new_resource_model.yaml`` (GoogleCloudPlatform/k8s-stackdriver): its own
namespace and KSA, the delegated-auth bindings an aggregated API server needs, read access to pods/nodes, the
three APIService registrations, and external-metrics read for the HPA controller. Its Google identity is the KSA
itself through direct Workload Identity Federation (no Google service account), granted only
``roles/monitoring.viewer``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from ..identity import wi_principal

NAMESPACE = "custom-metrics"
KSA = "custom-metrics-stackdriver-adapter"
#: Pinned release of the adapter (the GKE docs' current manifest version). Pinned by tag, not digest: the digest
#: could not be resolved from this offline build environment (no registry access); set
#: ``observability.adapter_image_digest`` after ``crane digest`` to pin it immutably (the image then becomes
#: ``<repo>:<tag>@sha256:…``, and the tag is kept only for readability).
IMAGE_REPOSITORY = "gcr.io/gke-release/custom-metrics-stackdriver-adapter"
IMAGE_TAG = "v0.15.2-gke.1"
#: The one project-level role granted to a workload: reading Cloud Monitoring time series is only grantable on
#: the project (metrics are not a per-object IAM resource), and the adapter must read the GMP series of every
#: pool to serve ``custom.metrics.k8s.io``. Read-only: it cannot write metrics, alerting or dashboards.
MONITORING_VIEWER = "roles/monitoring.viewer"
LABELS = {"run": KSA, "k8s-app": KSA}
#: Requests = limits as upstream: 250m CPU / 400Mi memory is the upstream production manifest's sizing.
RESOURCES = {"cpu": "250m", "memory": "400Mi"}
#: API groups / versions the adapter serves; v1beta2 custom metrics is preferred (higher versionPriority).
API_SERVICES = (
    ("custom.metrics.k8s.io", "v1beta1", 100),
    ("custom.metrics.k8s.io", "v1beta2", 200),
    ("external.metrics.k8s.io", "v1beta1", 100),
)


def image(digest: str | None) -> str:
    return f"{IMAGE_REPOSITORY}:{IMAGE_TAG}" + (f"@{digest}" if digest else "")


@dataclass(frozen=True)
class CustomMetricsAdapterArgs:
    project: str
    project_number: pulumi.Input[str]
    #: The cluster's Workload Identity pool output (the grant waits for the cluster).
    workload_pool: pulumi.Input[str]
    image_digest: str | None = None
    #: Grant the adapter's principal its project read role. False in a fleet's other clusters: every cluster of a
    #: project shares one Workload Identity pool, so their adapters are one principal and the config cluster's grant
    #: covers them (a second grant of the same binding would remove it for all when deleted).
    grant_viewer: bool = True


class CustomMetricsAdapter(Component):
    TYPE = "llm-serving:observability:CustomMetricsAdapter"

    def __init__(self, name: str, args: CustomMetricsAdapterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        meta = k8s.meta.v1.ObjectMetaArgs
        subject = k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=KSA, namespace=NAMESPACE)

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata=meta(name=NAMESPACE, labels={naming.PART_OF_LABEL: naming.PART_OF}), opts=child
        )
        ns_child = self.child_opts(depends_on=[self.namespace])
        self.ksa = k8s.core.v1.ServiceAccount(
            f"{name}-ksa", metadata=meta(name=KSA, namespace=NAMESPACE), opts=ns_child
        )
        self.auth_delegator = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-auth-delegator",
            metadata=meta(name="custom-metrics:system:auth-delegator"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="system:auth-delegator"
            ),
            subjects=[subject],
            opts=ns_child,
        )
        self.auth_reader = k8s.rbac.v1.RoleBinding(
            f"{name}-auth-reader",
            metadata=meta(name="custom-metrics-auth-reader", namespace="kube-system"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name="extension-apiserver-authentication-reader"
            ),
            subjects=[subject],
            opts=ns_child,
        )
        self.resource_reader = k8s.rbac.v1.ClusterRole(
            f"{name}-resource-reader",
            metadata=meta(name="custom-metrics-resource-reader"),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=[""], resources=["pods", "nodes", "nodes/stats"], verbs=["get", "list", "watch"]
                )
            ],
            opts=child,
        )
        self.resource_reader_binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-resource-reader-binding",
            metadata=meta(name="custom-metrics-resource-reader"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="custom-metrics-resource-reader"
            ),
            subjects=[subject],
            opts=ns_child,
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(name=KSA, namespace=NAMESPACE, labels=LABELS),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                # One replica as upstream: the HPA controller retries on its 15 s sync, and a second replica
                # would double Cloud Monitoring read traffic without serving anything a retry does not.
                replicas=1,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=LABELS),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=meta(labels=LABELS),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name=KSA,
                        node_selector={"kubernetes.io/os": "linux"},
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="pod-custom-metrics-stackdriver-adapter",
                                image=image(args.image_digest),
                                image_pull_policy="IfNotPresent",
                                command=[
                                    "/adapter",
                                    "--use-new-resource-model=true",
                                    "--fallback-for-container-metrics=true",
                                ],
                                resources=k8s.core.v1.ResourceRequirementsArgs(requests=RESOURCES, limits=RESOURCES),
                            )
                        ],
                    ),
                ),
            ),
            opts=self.child_opts(depends_on=[self.ksa]),
        )
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=meta(name=KSA, namespace=NAMESPACE, labels=LABELS),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector=LABELS,
                ports=[k8s.core.v1.ServicePortArgs(port=443, target_port=443, protocol="TCP")],
            ),
            opts=ns_child,
        )
        self.api_services = [
            k8s.apiregistration.v1.APIService(
                f"{name}-{version}-{group.split('.')[0]}",
                metadata=meta(name=f"{version}.{group}"),
                spec=k8s.apiregistration.v1.APIServiceSpecArgs(
                    group=group,
                    version=version,
                    # Upstream registers the adapter without a CA bundle (its serving cert is self-signed).
                    insecure_skip_tls_verify=True,
                    group_priority_minimum=100,
                    version_priority=priority,
                    service=k8s.apiregistration.v1.ServiceReferenceArgs(name=KSA, namespace=NAMESPACE),
                ),
                opts=self.child_opts(depends_on=[self.service]),
            )
            for group, version, priority in API_SERVICES
        ]
        self.external_reader = k8s.rbac.v1.ClusterRole(
            f"{name}-external-metrics-reader",
            metadata=meta(name="external-metrics-reader"),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["external.metrics.k8s.io"], resources=["*"], verbs=["list", "get", "watch"]
                )
            ],
            opts=child,
        )
        self.external_reader_binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-external-metrics-reader-binding",
            metadata=meta(name="external-metrics-reader"),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="external-metrics-reader"
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(
                    kind="ServiceAccount", name="horizontal-pod-autoscaler", namespace="kube-system"
                )
            ],
            opts=child,
        )
        self.principal = wi_principal(args.project_number, args.workload_pool, NAMESPACE, KSA)
        # See MONITORING_VIEWER: the one justified project-level read role.
        self.monitoring_viewer = (
            gcp.projects.IAMMember(
                f"{name}-monitoring-viewer",
                project=args.project,
                role=MONITORING_VIEWER,
                member=self.principal,
                opts=child,
            )
            if args.grant_viewer
            else None
        )
        self.register_outputs({"principal": self.principal, "image": image(args.image_digest)})
