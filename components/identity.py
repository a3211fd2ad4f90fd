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
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{pool}/subject/ns/{namespace}/sa/{ksa}"
    )


def wi_principal(
    project_number: pulumi.Input[str], pool: pulumi.Input[str], namespace: str, ksa: str
) -> pulumi.Output[str]:
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
            f"{name}-sa",
            project=args.project,
            account_id=args.account_id,
            display_name=args.display_name,
            description="GKE node identity: logs, metrics, resource metadata; image pulls per repository",
            opts=child,
        )
        self.email: pulumi.Output[str] = self.account.email
        self.member: pulumi.Output[str] = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        self.bindings = [
            gcp.projects.IAMMember(
                f"{name}-{role.split('/')[1].replace('.', '-').lower()}",
                project=args.project,
                role=role,
                member=self.member,
                opts=child,
            )
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
    #: The serving pools' roles: each gets its namespace (``naming.pool_namespace``) and model-server KSA.
    roles: tuple[str, ...]
    model_server_ksa: str = naming.MODEL_SERVER_KSA
    #: Secret Manager secret id of the model-hub token (None: no secret).
    hub_token_secret_id: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    #: Pulumi ``protect`` on the hub-token Secret: deleting it deletes the token's versions, added out of band.
    protect: bool = False
    #: False on a fleet's other clusters: every cluster of a project shares the Workload Identity pool
    #: ``<project>.svc.id.goog``, so a pool's KSA is one principal fleet-wide and the stack's own cluster already
    #: grants it (a second grant of the same member would drop the binding when either is deleted).
    grant_access: bool = True

    def __post_init__(self) -> None:
        if not self.roles or len(set(self.roles)) != len(self.roles):
            raise ValueError(f"WorkloadIdentityArgs.roles: one entry per pool, at least one, got {list(self.roles)}")


def namespace_labels(namespace: str) -> dict[str, str]:
    """Pod Security admission: enforce ``baseline`` (vLLM needs no privilege), warn on ``restricted``."""
    return {
        naming.PART_OF_LABEL: naming.PART_OF,
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
    }


class WorkloadIdentity(Component):
    """Per serving pool: its namespace, the model-server KSA, and that KSA's direct-WIF grants (object read on the
    weights bucket only, and optionally access to the one hub-token secret). Pass the cluster's Kubernetes
    provider in ``opts.providers``."""

    TYPE = "llm-serving:identity:WorkloadIdentity"

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        self.model_server_ksa_name: str = args.model_server_ksa
        self.namespaces: dict[str, k8s.core.v1.Namespace] = {}
        self.model_server_ksas: dict[str, k8s.core.v1.ServiceAccount] = {}
        self.model_server_principals: dict[str, pulumi.Output[str]] = {}
        self.weights_readers: dict[str, gcp.storage.BucketIAMMember] = {}
        for role in args.roles:
            ns = naming.pool_namespace(role)
            self.namespaces[role] = k8s.core.v1.Namespace(
                f"{name}-ns-{ns}", metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels=namespace_labels(ns)), opts=child
            )
            self.model_server_ksas[role] = k8s.core.v1.ServiceAccount(
                f"{name}-ksa-{role}-{args.model_server_ksa}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=args.model_server_ksa,
                    namespace=self.namespaces[role].metadata.name,
                    labels={
                        naming.PART_OF_LABEL: naming.PART_OF,
                        naming.COMPONENT_LABEL: naming.MODEL_SERVER_COMPONENT,
                    },
                ),
                # Pods mount a projected token only when they need the Kubernetes API; the model server does not.
                automount_service_account_token=False,
                opts=child,
            )
            self.model_server_principals[role] = wi_principal(
                args.project_number, args.workload_pool, ns, args.model_server_ksa
            )
            if not args.grant_access:
                continue
            self.weights_readers[role] = gcp.storage.BucketIAMMember(
                f"{name}-weights-reader-{role}",
                bucket=args.weights_bucket,
                role=WEIGHTS_READER_ROLE,
                member=self.model_server_principals[role],
                opts=child,
            )
        self.hub_token_secret: gcp.secretmanager.Secret | None = None
        self.hub_token_accessors: dict[str, gcp.secretmanager.SecretIamMember] = {}
        if args.hub_token_secret_id is not None and args.grant_access:
            self.hub_token_secret = gcp.secretmanager.Secret(
                f"{name}-hub-token",
                project=args.project,
                secret_id=args.hub_token_secret_id,
                labels=args.labels,
                replication=gcp.secretmanager.SecretReplicationArgs(
                    user_managed=gcp.secretmanager.SecretReplicationUserManagedArgs(
                        replicas=[gcp.secretmanager.SecretReplicationUserManagedReplicaArgs(location=args.region)]
                    )
                ),
                opts=self.child_opts(protect=args.protect),
            )
            for role, principal in self.model_server_principals.items():
                self.hub_token_accessors[role] = gcp.secretmanager.SecretIamMember(
                    f"{name}-hub-token-accessor-{role}",
                    project=args.project,
                    secret_id=self.hub_token_secret.secret_id,
                    role=SECRET_ACCESSOR_ROLE,
                    member=principal,
                    opts=child,
                )
        self.register_outputs(
            {
                "namespaces": {r: n.metadata.name for r, n in self.namespaces.items()},
                "model_server_ksa": args.model_server_ksa,
                "model_server_principals": self.model_server_principals,
            }
        )
