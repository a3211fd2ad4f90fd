"""What a step does to running things, beyond replace-or-update: the pods a workload change restarts, the data a
delete loses, the changes Kubernetes or Google Cloud will not apply in place, and what the plan cannot show.

Platform rules, each with its source:

* **pod restarts** - a Deployment or StatefulSet rolls its pods when, and only when, ``spec.template`` changes
  (Kubernetes docs, "Deployments: Updating a Deployment": "A Deployment's rollout is triggered if and only if the
  Deployment's Pod template (that is, .spec.template) is changed"; "StatefulSets: Update strategies"). A replicas or
  strategy change rolls nothing. How many: the HPA's ``minReplicas`` when an HPA scales it (the program leaves
  ``spec.replicas`` to the HPA: ``ignore_changes``), else ``spec.replicas`` (default 1). A replaced workload's pods
  are all deleted and recreated.
* **claims Kubernetes will not resize** - a bound PersistentVolumeClaim's ``spec`` is immutable except
  ``resources.requests`` (Kubernetes API validation, ``ValidatePersistentVolumeClaimUpdate``), which may only grow,
  and only when its StorageClass sets ``allowVolumeExpansion: true`` (Kubernetes docs, "Persistent Volumes:
  Expanding Persistent Volumes Claims": "You can only expand a PVC if its storage class's allowVolumeExpansion
  field is set to true"). Anything else is rejected by the API server at apply.
* **node recreation** - a GKE node pool's ``machineType`` / ``diskType`` / ``diskSizeGb`` / ``imageType`` / version
  change is an in-place ``UpdateNodePool`` that "initiates an upgrade operation that migrates the nodes in the node
  pool" (GKE API reference, ``UpdateNodePoolRequest``): every node, and every pod on it, is recreated.
* **Vertex AI** - a replaced deployed model uploads a new Model and deploys it on ``minReplicaCount`` new machines
  (a cold start each) before the old deployment is undeployed (``components/vertex/provider.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from .engine import Change
from .paths import ABSENT, parse_path, resolve

WORKLOADS: Final = frozenset({"kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet"})
HPA: Final = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
PVC: Final = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS: Final = "kubernetes:storage.k8s.io/v1:StorageClass"
DEPLOYED_MODEL: Final = "pulumi-python:dynamic/vertex:DeployedModel"
NODE_POOL: Final = "gcp:container/nodePool:NodePool"
#: UpdateNodePoolRequest fields that migrate every node (see the module docstring).
NODE_RECREATING: Final = (
    "nodeConfig.machineType",
    "nodeConfig.diskType",
    "nodeConfig.diskSizeGb",
    "nodeConfig.imageType",
    "version",
)

#: What deleting (or replacing) one of these loses.
HOLDS_DATA: Final[dict[str, str]] = {
    "gcp:storage/bucket:Bucket": "holds data: the release weights and manifests (every object in the bucket)",
    "gcp:compute/disk:Disk": "holds data: the hydrated release weights on the disk",
    "gcp:secretmanager/secret:Secret": "holds data: every version of the secret (its value is added out of band)",
    "gcp:artifactregistry/repository:Repository": "holds data: every image in the repository (pods pull by digest)",
    "gcp:compute/address:Address": "holds an address: the reserved IP clients and DNS point at is released",
    "gcp:compute/reservation:Reservation": "holds capacity: the reserved GPU machines may not be obtainable again",
    "gcp:container/cluster:Cluster": "holds every workload of the cluster and its state",
    "gcp:dns/managedZone:ManagedZone": "holds data: every record of the zone",
    "kubernetes:core/v1:PersistentVolume": "holds a binding: claims bound to it lose their volume",
}


def _k8s_id(inputs: Mapping[str, Any]) -> tuple[str, str]:
    meta = inputs.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _hpa_minimums(new: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for r in new.values():
        if r.get("type") != HPA:
            continue
        inputs = r.get("inputs") or {}
        spec = inputs.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        ns, _ = _k8s_id(inputs)
        if isinstance(spec.get("minReplicas"), int):
            out[(ns, str(ref.get("kind")), str(ref.get("name")))] = spec["minReplicas"]
    return out


def _pods(r: Mapping[str, Any], hpas: Mapping[tuple[str, str, str], int]) -> int:
    inputs = r.get("inputs") or {}
    ns, name = _k8s_id(inputs)
    kind = str(inputs.get("kind") or "")
    if (ns, kind, name) in hpas:
        return hpas[(ns, kind, name)]
    replicas = (inputs.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) else 1


def _template_changed(c: Change) -> bool:
    return any(not f.ignored and f.path.startswith("spec.template") for f in c.fields)


def _storage_classes(new: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {
        _k8s_id(r.get("inputs") or {})[1]: r.get("inputs") or {} for r in new.values() if r.get("type") == STORAGE_CLASS
    }


def _quantity_bytes(q: Any) -> float | None:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    if isinstance(q, (int, float)) and not isinstance(q, bool):
        return float(q)
    if not isinstance(q, str):
        return None
    for suffix, factor in units.items():
        if q.endswith(suffix) and q[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(q[: -len(suffix)]) * factor
    return float(q) if q.replace(".", "", 1).isdigit() else None


def _pvc_refusal(c: Change, new: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why the API server rejects this claim update, or None."""
    if c.action != "update":
        return None
    for f in c.fields:
        if f.ignored or f.path.startswith("options") or not f.path.startswith("spec"):
            continue
        if f.path != "spec.resources.requests.storage":
            return f"cannot apply in place: a bound claim's spec is immutable except resources.requests ({f.path})"
        old_b, new_b = _quantity_bytes(f.old), _quantity_bytes(f.new)
        if old_b is not None and new_b is not None and new_b < old_b:
            return f"cannot apply in place: a claim cannot shrink ({f.old} -> {f.new})"
        sc_name = str(resolve(new.get("inputs") or {}, parse_path("spec.storageClassName")))
        sc = classes.get(sc_name)
        if sc is not None and sc.get("allowVolumeExpansion") is not True:
            return (
                f"cannot apply in place: StorageClass {sc_name} has allowVolumeExpansion: "
                f"{str(sc.get('allowVolumeExpansion')).lower()}, so Kubernetes rejects the resize "
                f"{f.old} -> {f.new} after any disk behind it was already resized"
            )
    return None


def annotate(
    changes: list[Change], old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> tuple[list[Change], list[str]]:
    """The changes with restarts and notes added, and the errors (changes that cannot apply)."""
    hpas = _hpa_minimums(new)
    classes = _storage_classes(new)
    out: list[Change] = []
    errors: list[str] = []
    for c in changes:
        notes = list(c.notes)
        restarts = 0
        r = new.get(c.urn)
        if c.type in WORKLOADS and r is not None and (c.action == "replace" or _template_changed(c)):
            restarts = _pods(r, hpas)
            notes.append(f"restarts {restarts} pod{'s' if restarts != 1 else ''}")
        if c.type == DEPLOYED_MODEL and c.action == "replace" and r is not None:
            n = resolve(r.get("inputs") or {}, parse_path("deployed_model.dedicatedResources.minReplicaCount"))
            restarts = n if isinstance(n, int) else 1
            notes.append(
                f"uploads a new model and deploys it on {restarts} new machine{'s' if restarts != 1 else ''} "
                "(a cold start each) before the old deployment is undeployed"
            )
        if c.type == NODE_POOL and c.action == "update":
            hit = [f.path for f in c.fields if not f.ignored and f.path in NODE_RECREATING]
            if hit:
                notes.append(f"recreates every node of the pool ({', '.join(hit)}: an UpdateNodePool node migration)")
        if c.action in ("delete", "replace") and c.type in HOLDS_DATA:
            notes.append(HOLDS_DATA[c.type])
        if c.type == PVC and r is not None:
            refusal = _pvc_refusal(c, r, classes)
            if refusal:
                notes.append(refusal)
                errors.append(f"{c.type}::{c.name}: {refusal}")
        out.append(replace(c, restarts_pods=restarts, notes=tuple(dict.fromkeys(notes))))
    return out, errors


# ---- what the plan cannot show ----------------------------------------------------------------------------------

#: The contract's traffic numbers a pool's capacity depends on (stack output ``traffic.contract``).
TRAFFIC_KEYS: Final = (
    "peak_arrival_rate_rps",
    "prompt_tokens",
    "output_tokens",
    "target_utilization",
    "ttft_p95_ms",
    "itl_p95_ms",
)


def warnings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A traffic, contract or weight change for a pool sized "unmeasured": its replicas are configured, not derived
    from a throughput, so the diff cannot show whether capacity still carries the traffic."""
    out: list[str] = []
    o_out, n_out = old.get("outputs") or {}, new.get("outputs") or {}
    o_traffic, n_traffic = o_out.get("traffic") or {}, n_out.get("traffic") or {}
    o_contract, n_contract = o_traffic.get("contract") or {}, n_traffic.get("contract") or {}
    # An old plan made by a program that did not export `traffic` records no numbers to compare: absent is not a
    # change (an upgrade of this program would otherwise warn that every contract number changed).
    changed = [k for k in TRAFFIC_KEYS if o_contract and o_contract.get(k, ABSENT) != n_contract.get(k, ABSENT)]
    pools_new = ((n_out.get("capacity") or {}).get("pools")) or {}
    pools_old = ((o_out.get("capacity") or {}).get("pools")) or {}
    for role in sorted(pools_new):
        p = pools_new[role]
        if p.get("throughput") != "unmeasured":
            continue
        reasons = [f"contract.{k}" for k in changed]
        o_w = (o_traffic.get("weights") or {}).get(role)
        n_w = (n_traffic.get("weights") or {}).get(role)
        if o_w is not None and n_w is not None and o_w != n_w:
            reasons.append(f"weight {o_w} -> {n_w}")
        if role not in pools_old and reasons:
            reasons.append("new pool")
        if reasons:
            out.append(
                f"pool {role} is sized unmeasured ({', '.join(reasons)} changed): its replica bounds "
                f"({p.get('min_replicas')}-{p.get('max_replicas')}) are configured, not derived from a measured "
                "throughput, so this diff cannot show whether they carry the traffic (docs/capacity.md, measuring a "
                "release)"
            )
    return out


def release_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A release id whose content changed between the plans: releases are immutable (a new content needs a new id)."""
    o = (old.get("outputs") or {}).get("releases") or {}
    n = (new.get("outputs") or {}).get("releases") or {}
    out = []
    for rid in sorted(set(o) & set(n)):
        if o[rid] != n[rid]:
            keys = sorted(k for k in set(o[rid]) | set(n[rid]) if o[rid].get(k) != n[rid].get(k))
            out.append(
                f"release {rid} was edited in place ({', '.join(keys)} changed): releases are immutable, so pods "
                "serving it would silently change content under the same id; give the new content a new release id "
                "(llm-serving:releases)"
            )
    return out
