"""Every Kubernetes object of every stack plan (whoever registers it) validates against the Kubernetes API
schema of the cluster's minor version (``gke.min_version``), in strict mode (unknown fields are errors).

kubernetes-validate ships the built-in API schemas only. Objects of CustomResourceDefinition groups
(Gateway API, Inference Extension, Managed Prometheus, GKE policies) have no schema there; a kind whose
group is a built-in group but has no schema is a typo and fails here."""

from __future__ import annotations

import kubernetes_validate
import pytest

from infra.offline.inventory import Inventory

from .conftest import STACKS

#: API groups served by the Kubernetes API server itself ("" is the core group).
BUILTIN_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)


def api_group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


@pytest.mark.parametrize("stack", STACKS)
def test_manifests_validate_for_the_cluster_minor_version(plans, stack):
    cfg, _, inv = plans[stack]
    version = cfg.gke.minor_version
    objects = Inventory.from_dict(inv).manifests()
    assert objects, "the plan has no Kubernetes objects"
    failures, validated, custom = [], 0, set()
    for fname, obj in objects.items():
        group = api_group(obj["apiVersion"])
        if group not in BUILTIN_GROUPS:
            custom.add(f"{obj['apiVersion']}/{obj['kind']}")
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
            validated += 1
        except kubernetes_validate.SchemaNotFoundError as err:
            failures.append(f"{fname}: {err.message}")
        except kubernetes_validate.ValidationError as err:
            where = "/".join(str(p) for p in err.path)
            failures.append(f"{fname}: {where}: {err.message}")
    assert failures == []
    # The platform's own objects are among those validated (namespace, KSA; Hyperdisk ML volumes on staging).
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects.values()}
    assert {("Namespace", "llm-serving"), ("ServiceAccount", "model-server")} <= kinds
    if stack == "staging":
        assert {k for k, _ in kinds} >= {"StorageClass", "PersistentVolume", "PersistentVolumeClaim"}
    assert validated > 0


def test_a_wrong_field_is_rejected():
    """Strict mode catches what a typo would silently drop."""
    bad = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "x", "namespace": "y"},
        "spec": {"accessMode": ["ReadOnlyMany"]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.34", strict=True)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate({"apiVersion": "apps/v1", "kind": "Deploymnet", "metadata": {"name": "x"}}, "1.34")
