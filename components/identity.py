"""Identities of the platform: node service accounts with the minimum roles, and Workload Identity for
serving workloads — direct Workload Identity Federation principals (Workload Identity Federation for GKE docs), no Google service account
keys and no Google service account impersonation for pods."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from . import naming
from .base import Component

#: The only project-level role a node service account holds: GKE's documented minimum for a custom node service
#: account ("Kubernetes Engine Default Node Service Account": write logs and metrics, read monitoring, write
#: resource metadata). Image pulls are granted per repository instead.
NODE_PROJECT_ROLES: tuple[str, ...] = ("roles/container.defaultNodeServiceAccount",)
WEIGHTS_READER_ROLE = "roles/storage.objectViewer"
SECRET_ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"


def workload_pool(project_id: str) -> str:
    """The cluster's Workload Identity pool: ``<project>.svc.id.goog``."""
    return f"{project_id}.svc.id.goog"


def principal_text(project_number: str, pool: str, namespace: str, ksa: str) -> str:
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
            f"{pool}/subject/ns/{namespace}/sa/{ksa}")


def wi_principal(project_number: pulumi.Input[str], pool: pulumi.Input[str], namespace: str,
                 ksa: str) -> pulumi.Output[str]:
    """IAM member of one Kubernetes service account under direct Workload Identity Federation (Workload Identity
    Federation for GKE docs): ``principal://iam.googleapis.com/projects/<number>/locations/global/
    workloadIdentityPools/<project>.svc.id.goog/subject/ns/<ns>/sa/<ksa>``.

    ``pool`` must be the cluster's own ``workload_identity_config.workload_pool`` output: the pool exists only
    once the cluster does, so a grant to the principal that did not wait for the cluster fails on a first apply.
    Taking the pool from the cluster carries that dependency in the data."""
    return pulumi.Output.all(project_number, pool).apply(lambda a: principal_text(a[0], a[1], namespace, ksa))


# ---- node service accounts ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeServiceAccountArgs:
    project: str
    #: 6-30 characters, lowercase (``gke-gpu-<accelerator>``, ``gke-system``).
    account_id: str
    display_name: str
    roles: tuple[str, ...] = NODE_PROJECT_ROLES


class NodeServiceAccount(Component):
    """A dedicated node service account holding only :data:`NODE_PROJECT_ROLES` at project level."""

    TYPE = "llm-serving:identity:NodeServiceAccount"

    def __init__(self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa", project=args.project, account_id=args.account_id, display_name=args.display_name,
            description="GKE node identity: logs, metrics, resource metadata; image pulls per repository", opts=child)
        self.email: pulumi.Output[str] = self.account.email
        self.member: pulumi.Output[str] = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        self.bindings = [
            gcp.projects.IAMMember(f"{name}-{role.split('/')[1].replace('.', '-').lower()}", project=args.project,
                                   role=role, member=self.member, opts=child)
            for role in args.roles
        ]
        self.register_outputs({"email": self.email})


# ---- Workload Identity for serving workloads -------------------------------------------------------------------

@dataclass(frozen=True)
class WorkloadIdentityArgs:
    project: str
    region: str
    project_number: pulumi.Input[str]
    #: The cluster's Workload Identity pool, as the cluster outputs it (see :func:`wi_principal`).
    workload_pool: pulumi.Input[str]
    weights_bucket: pulumi.Input[str]
    #: Kubernetes service accounts per namespace; the model server's KSA reads weights.
    namespace: str = naming.SERVING_NAMESPACE
    model_server_ksa: str = naming.MODEL_SERVER_KSA
    #: Secret Manager secret id of the model-hub token (None: no secret).
    hub_token_secret_id: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


def namespace_labels(namespace: str) -> dict[str, str]:
    """Pod Security admission: enforce ``baseline`` (vLLM needs no privilege), warn on ``restricted``."""
    return {
        naming.PART_OF_LABEL: naming.PART_OF,
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
    }


class WorkloadIdentity(Component):
    """The serving namespace, the model-server KSA, and its direct-WIF grants: object read on the weights
    bucket only, and (optionally) access to the one hub-token secret. Pass the cluster's Kubernetes provider in
    ``opts.providers``."""

    TYPE = "llm-serving:identity:WorkloadIdentity"

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        k8s_child = child = self.child_opts()
        self.namespace_name: str = args.namespace
        self.model_server_ksa_name: str = args.model_server_ksa
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns-{args.namespace}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace, labels=namespace_labels(args.namespace)),
            opts=k8s_child)
        self.model_server_ksa = k8s.core.v1.ServiceAccount(
            f"{name}-ksa-{args.model_server_ksa}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.model_server_ksa, namespace=self.namespace.metadata.name,
                labels={naming.PART_OF_LABEL: naming.PART_OF, naming.COMPONENT_LABEL: naming.MODEL_SERVER_COMPONENT}),
            # Pods mount a projected token only when they need the Kubernetes API; the model server does not.
            automount_service_account_token=False,
            opts=k8s_child)
        self.model_server_principal = wi_principal(args.project_number, args.workload_pool, args.namespace,
                                                   args.model_server_ksa)
        self.weights_reader = gcp.storage.BucketIAMMember(
            f"{name}-weights-reader", bucket=args.weights_bucket, role=WEIGHTS_READER_ROLE,
            member=self.model_server_principal, opts=child)
        self.hub_token_secret: gcp.secretmanager.Secret | None = None
        self.hub_token_accessor: gcp.secretmanager.SecretIamMember | None = None
        if args.hub_token_secret_id is not None:
            self.hub_token_secret = gcp.secretmanager.Secret(
                f"{name}-hub-token", project=args.project, secret_id=args.hub_token_secret_id, labels=args.labels,
                replication=gcp.secretmanager.SecretReplicationArgs(
                    user_managed=gcp.secretmanager.SecretReplicationUserManagedArgs(
                        replicas=[gcp.secretmanager.SecretReplicationUserManagedReplicaArgs(location=args.region)])),
                opts=child)
            self.hub_token_accessor = gcp.secretmanager.SecretIamMember(
                f"{name}-hub-token-accessor", project=args.project, secret_id=self.hub_token_secret.secret_id,
                role=SECRET_ACCESSOR_ROLE, member=self.model_server_principal, opts=child)
        self.register_outputs({
            "namespace": self.namespace.metadata.name, "model_server_ksa": self.model_server_ksa.metadata.name,
            "model_server_principal": self.model_server_principal,
        })
