"""Every rollout stage the docs list, driven as successive stack files and reviewed step by step through
``llm-serving diff OLD NEW --format json --exit-code`` (infra/offline/rollout_stages.py plans them): the exact
actions of each step, and the docs' generated "what the diff shows" tables.

What the expectations say, stage by stage (worked out from the runbooks, not read back):

* a weight change is the HTTPRoute's (or Cloud Run's traffic, or the Vertex endpoint's split) plus alert policies
  updated in place: a pool that starts or stops carrying traffic switches its no-traffic alert and the canary
  comparison on or off and pages at another severity; nothing is ever created or deleted by a weight;
* stage 100 swaps the HPA bounds (rules/rollout.py): both HPAs, the queue-at-max alerts' guards, the dashboard's
  bound lines and the Deployments' rollout timeouts (an option, no provider call) follow;
* a release change rolls exactly that pool's pods (its HPA minimum); on Hyperdisk ML the new release's disk, volume
  and claim are created and the old ones deleted; on Vertex AI the deployed model is replaced (a new upload and
  deployment beside the old one);
* a rollback from stage 100 is the same set of in-place updates as settle.
"""

from __future__ import annotations

from typing import Any

import pytest

from infra.offline import docs
from infra.offline.rollout_stages import cached_measure, table

Action = tuple[str, str, str, bool, bool, int]

#: prod (docs/rollout.md): stage -> (diff --exit-code, [(kind, name, action, delete_before_replace, protected, restarts_pods)]).
PROD: dict[str, tuple[int, list[Action]]] = {
    "0 (dark)": (
        1,
        [
            ("GCPTrafficExtension", "inference-gateway-model-armor", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 2),
            ("ConfigMap", "vllm-canary-scripts", "update", False, False, 0),
            ("NetworkPolicy", "vllm-canary-netpol", "update", False, False, 0),
            ("PodDisruptionBudget", "vllm-canary-pdb", "update", False, False, 0),
        ],
    ),
    "5": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-canary-ttft-worse-than-stable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-endpoint-picker-unavailable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
        ],
    ),
    "25": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
        ],
    ),
    "50": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
        ],
    ),
    "100": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-queue-building-at-max-replicas", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-canary", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-stable", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 0),
        ],
    ),
    "promote": (
        1,
        [
            ("GCPTrafficExtension", "inference-gateway-model-armor", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 2),
            ("ConfigMap", "vllm-stable-scripts", "update", False, False, 0),
            ("NetworkPolicy", "vllm-stable-netpol", "update", False, False, 0),
            ("PodDisruptionBudget", "vllm-stable-pdb", "update", False, False, 0),
        ],
    ),
    "settle": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-canary-ttft-worse-than-stable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-endpoint-picker-unavailable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-queue-building-at-max-replicas", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-canary", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-stable", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 0),
        ],
    ),
    "rollback": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-canary-ttft-worse-than-stable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-endpoint-picker-unavailable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-queue-building-at-max-replicas", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-canary", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-stable", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 0),
        ],
    ),
}

#: staging (docs/rollout.md, rehearsed on Hyperdisk ML): stage -> (diff --exit-code, [(kind, name, action, delete_before_replace, protected, restarts_pods)]).
STAGING: dict[str, tuple[int, list[Action]]] = {
    "0 (dark)": (
        1,
        [
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 1),
            ("ConfigMap", "vllm-canary-scripts", "update", False, False, 0),
            ("NetworkPolicy", "vllm-canary-netpol", "update", False, False, 0),
            ("PodDisruptionBudget", "vllm-canary-pdb", "update", False, False, 0),
        ],
    ),
    "5": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-canary-ttft-worse-than-stable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-endpoint-picker-unavailable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
        ],
    ),
    "25": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
        ],
    ),
    "50": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
        ],
    ),
    "100": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-queue-building-at-max-replicas", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-canary", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-stable", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 0),
        ],
    ),
    "promote": (
        3,
        [
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 1),
            ("ConfigMap", "vllm-stable-scripts", "update", False, False, 0),
            ("NetworkPolicy", "vllm-stable-netpol", "update", False, False, 0),
            ("PodDisruptionBudget", "vllm-stable-pdb", "update", False, False, 0),
            (
                "PersistentVolume",
                "platform-weight-volumes-pv-weights-qwen3-32b-fp8-2026-08-23-1-stable",
                "delete",
                False,
                False,
                0,
            ),
            (
                "PersistentVolume",
                "platform-weight-volumes-pv-weights-qwen3-32b-fp8-2026-11-20-1-stable",
                "create",
                False,
                False,
                0,
            ),
            (
                "PersistentVolumeClaim",
                "platform-weight-volumes-pvc-stable-weights-qwen3-32b-fp8-2026-08-23-1",
                "delete",
                False,
                False,
                0,
            ),
            (
                "PersistentVolumeClaim",
                "platform-weight-volumes-pvc-stable-weights-qwen3-32b-fp8-2026-11-20-1",
                "create",
                False,
                False,
                0,
            ),
            ("Disk", "platform-weights-weights-qwen3-32b-fp8-2026-08-23-1", "delete", False, False, 0),
            ("Disk", "platform-weights-weights-qwen3-32b-fp8-2026-11-20-1", "create", False, False, 0),
        ],
    ),
    "settle": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-canary-ttft-worse-than-stable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-endpoint-picker-unavailable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-queue-building-at-max-replicas", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-canary", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-stable", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 0),
        ],
    ),
    "rollback": (
        1,
        [
            # Each pool's Cloud Armor tenant budget follows its weight (ceil(budget x weight / 100)).
            ("RegionSecurityPolicy", "inference-gateway-canary-tenants", "update", False, False, 0),
            ("RegionSecurityPolicy", "inference-gateway-stable-tenants", "update", False, False, 0),
            ("HTTPRoute", "inference-gateway-api-route", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-canary-ttft-worse-than-stable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-endpoint-picker-unavailable", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-queue-building-at-max-replicas", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "observability-alert-stable-queue-building-at-max-replicas", "update", False, False, 0),
            ("Dashboard", "observability-dashboard", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-canary", "update", False, False, 0),
            ("HorizontalPodAutoscaler", "observability-hpa-stable", "update", False, False, 0),
            ("Deployment", "vllm-canary-deployment", "update", False, False, 0),
            ("Deployment", "vllm-stable-deployment", "update", False, False, 0),
        ],
    ),
}

#: staging-vertex (docs/vertex.md): stage -> (diff --exit-code, [(kind, name, action, delete_before_replace, protected, restarts_pods)]).
STAGING_VERTEX: dict[str, tuple[int, list[Action]]] = {
    "50": (
        1,
        [
            ("EndpointTraffic", "vertex-traffic", "update", False, False, 0),
        ],
    ),
    "100": (
        1,
        [
            ("AlertPolicy", "vertex-observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("Dashboard", "vertex-observability-dashboard", "update", False, False, 0),
            ("DeployedModel", "vertex-canary", "update", False, False, 0),
            ("DeployedModel", "vertex-stable", "update", False, False, 0),
            ("EndpointTraffic", "vertex-traffic", "update", False, False, 0),
        ],
    ),
    "promote": (
        3,
        [
            (
                "AlertPolicy",
                "vertex-observability-alert-canary-canary-ttft-worse-than-stable",
                "update",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "vertex-observability-alert-stable-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-stable-kv-cache-saturated", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-stable-ttft-p95-over-objective", "update", False, False, 0),
            ("Dashboard", "vertex-observability-dashboard", "update", False, False, 0),
            ("BucketIAMMember", "vertex-weights-reader", "replace", False, False, 0),
            ("DeployedModel", "vertex-stable", "replace", False, False, 1),
            ("EndpointTraffic", "vertex-traffic", "update", False, False, 0),
        ],
    ),
    "settle": (
        1,
        [
            (
                "AlertPolicy",
                "vertex-observability-alert-canary-canary-ttft-worse-than-stable",
                "update",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "vertex-observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("Dashboard", "vertex-observability-dashboard", "update", False, False, 0),
            ("DeployedModel", "vertex-canary", "update", False, False, 0),
            ("DeployedModel", "vertex-stable", "update", False, False, 0),
            ("EndpointTraffic", "vertex-traffic", "update", False, False, 0),
        ],
    ),
    "rollback": (
        1,
        [
            (
                "AlertPolicy",
                "vertex-observability-alert-canary-canary-ttft-worse-than-stable",
                "update",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "vertex-observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-canary-no-traffic-on-serving-pool", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "vertex-observability-alert-stable-no-traffic-on-serving-pool", "update", False, False, 0),
            ("Dashboard", "vertex-observability-dashboard", "update", False, False, 0),
            ("DeployedModel", "vertex-canary", "update", False, False, 0),
            ("DeployedModel", "vertex-stable", "update", False, False, 0),
            ("EndpointTraffic", "vertex-traffic", "update", False, False, 0),
        ],
    ),
}


# ---- dev-cloudrun: against today's Cloud Run resources ------------------------------------------------------------
# Another change reworks Cloud Run's revisions and traffic (components/cloud_run, infra/targets/cloud_run); these
# expectations are today's resources and are kept apart so that change can update them in one place.

#: dev-cloudrun (docs/cloud-run.md): stage -> (diff --exit-code, [(kind, name, action, delete_before_replace, protected, restarts_pods)]).
DEV_CLOUDRUN: dict[str, tuple[int, list[Action]]] = {
    "2 (canary at 0)": (
        1,
        [
            ("Revision", "cloud-run-revision-canary", "create", False, False, 0),
            ("Traffic", "cloud-run-traffic", "update", False, False, 0),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-canary-canary-ttft-worse-than-stable",
                "create",
                False,
                False,
                0,
            ),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-canary-concurrency-cap-at-max-instances",
                "create",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "cloud-run-observability-alert-canary-itl-p95-over-objective", "create", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-canary-kv-cache-saturated", "create", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-canary-ttft-p95-over-objective", "create", False, False, 0),
            ("Dashboard", "cloud-run-observability-dashboard", "update", False, False, 0),
        ],
    ),
    "3 (5)": (
        1,
        [
            ("Traffic", "cloud-run-traffic", "update", False, False, 0),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-canary-canary-ttft-worse-than-stable",
                "update",
                False,
                False,
                0,
            ),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-canary-concurrency-cap-at-max-instances",
                "update",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "cloud-run-observability-alert-canary-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-canary-ttft-p95-over-objective", "update", False, False, 0),
        ],
    ),
    "3 (25)": (
        1,
        [
            ("Traffic", "cloud-run-traffic", "update", False, False, 0),
        ],
    ),
    "3 (50)": (
        1,
        [
            ("Traffic", "cloud-run-traffic", "update", False, False, 0),
        ],
    ),
    "3 (100)": (
        1,
        [
            ("Traffic", "cloud-run-traffic", "update", False, False, 0),
        ],
    ),
    "4 (promote)": (
        3,
        [
            ("Revision", "cloud-run-revision-canary", "delete", False, False, 0),
            ("Revision", "cloud-run-revision-stable", "replace", False, False, 0),
            ("Traffic", "cloud-run-traffic", "update", False, False, 0),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-canary-canary-ttft-worse-than-stable",
                "delete",
                False,
                False,
                0,
            ),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-canary-concurrency-cap-at-max-instances",
                "delete",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "cloud-run-observability-alert-canary-itl-p95-over-objective", "delete", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-canary-kv-cache-saturated", "delete", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-canary-ttft-p95-over-objective", "delete", False, False, 0),
            (
                "AlertPolicy",
                "cloud-run-observability-alert-stable-concurrency-cap-at-max-instances",
                "update",
                False,
                False,
                0,
            ),
            ("AlertPolicy", "cloud-run-observability-alert-stable-itl-p95-over-objective", "update", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-stable-kv-cache-saturated", "update", False, False, 0),
            ("AlertPolicy", "cloud-run-observability-alert-stable-ttft-p95-over-objective", "update", False, False, 0),
            ("Dashboard", "cloud-run-observability-dashboard", "update", False, False, 0),
        ],
    ),
}


def _actions(stack: str) -> dict[str, tuple[int, list[Action]]]:
    return {
        s.stage.name: (s.exit_code, [(t.rsplit(":", 1)[-1], n, a, d, p, r) for t, n, a, d, p, r in s.actions()])
        for s in cached_measure(stack)
    }


@pytest.mark.parametrize(
    ("stack", "expected"), [("prod", PROD), ("staging", STAGING), ("staging-vertex", STAGING_VERTEX)]
)
def test_every_stage_does_exactly_what_the_runbook_says(stack: str, expected: dict[str, Any]) -> None:
    assert _actions(stack) == expected


def test_every_cloud_run_stage_does_exactly_what_the_runbook_says() -> None:
    assert _actions("dev-cloudrun") == DEV_CLOUDRUN


@pytest.mark.parametrize("stack", ["prod", "staging", "staging-vertex", "dev-cloudrun"])
def test_no_weight_change_creates_or_deletes_anything(stack: str) -> None:
    """The stages that only move weights (and bounds) touch nothing but in-place updates."""
    for step in cached_measure(stack):
        if step.stage.name in ("5", "25", "50", "100", "settle", "rollback", "3 (5)", "3 (25)", "3 (50)", "3 (100)"):
            assert {c["action"] for c in step.doc["changes"]} == {"update"}, step.stage.name
            assert step.exit_code == 1


@pytest.mark.parametrize("stack", ["prod", "staging", "staging-vertex", "dev-cloudrun"])
def test_the_docs_tables_are_the_measured_ones(stack: str) -> None:
    section = next(s for s in docs.SECTIONS if s.name == f"rollout-diff-{stack}")
    found = docs._pattern(section.name).search(section.page.read_text(encoding="utf-8"))
    assert found is not None, f"{section.page}: no {section.name} section"
    assert found.group(0) == docs._block(section.name, table(cached_measure(stack))), (
        "run `.venv/bin/python -m infra.offline.docs --write`"
    )
