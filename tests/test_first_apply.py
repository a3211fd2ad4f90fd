"""A first ``pulumi up`` into a fresh project: awaited objects get the time their rollout needs, and nothing waits
for a model server's rollout that does not need it.

* pulumi-kubernetes waits for a Deployment to become ready, 10 minutes unless ``customTimeouts`` say otherwise.
  A rollout replaces replicas ``maxSurge`` at a time and each step may take the Deployment's
  ``progressDeadlineSeconds`` (Kubernetes' default 600 s), so the wait must cover deadline x ceil(replicas rolled /
  maxSurge), where "replicas rolled" is the most the Deployment can run: its HPA's maxReplicas when one scales it.
* The gateway objects, InferencePools and endpoint pickers must not (even transitively) wait for a model-server
  Deployment: that would put the slowest step of the whole deploy (GPU node, image pull, weight load) in front of
  everything routing needs.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from .conftest import STACKS, resources

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
#: pulumi-kubernetes' default await for a Deployment (its docs: "10 minutes").
PULUMI_DEFAULT_AWAIT_S = 600
#: Kubernetes' default spec.progressDeadlineSeconds.
K8S_DEFAULT_PROGRESS_DEADLINE_S = 600


def seconds(text: str) -> int:
    """Go duration text as pulumi writes custom timeouts ("4720s", "10m", "1h30m")."""
    total, number = 0, ""
    units = {"h": 3600, "m": 60, "s": 1}
    for ch in text:
        if ch.isdigit():
            number += ch
        else:
            total += int(number) * units[ch]
            number = ""
    assert number == "", f"unparsed duration {text!r}"
    return total


def await_problems(inv: dict[str, Any]) -> list[str]:
    hpa_max = {
        r["inputs"]["spec"]["scaleTargetRef"]["name"]: r["inputs"]["spec"]["maxReplicas"] for r in resources(inv, HPA)
    }
    problems = []
    for dep in resources(inv, DEPLOYMENT):
        spec, meta = dep["inputs"]["spec"], dep["inputs"]["metadata"]
        if meta.get("annotations", {}).get("pulumi.com/skipAwait") == "true":
            continue
        name = meta["name"]
        replicas = hpa_max.get(name, spec.get("replicas", 1))
        strategy = spec.get("strategy", {})
        surge = 1 if strategy.get("type") == "Recreate" else strategy.get("rollingUpdate", {}).get("maxSurge", 1)
        steps = 1 if strategy.get("type") == "Recreate" else math.ceil(replicas / max(1, int(surge)))
        need = spec.get("progressDeadlineSeconds", K8S_DEFAULT_PROGRESS_DEADLINE_S) * steps
        timeouts = dep["options"].get("custom_timeouts", {})
        for op in ("create", "update"):
            have = seconds(timeouts[op]) if op in timeouts else PULUMI_DEFAULT_AWAIT_S
            if have < need:
                problems.append(
                    f"Deployment {name}: Pulumi {op} timeout {have} s is below its progress deadline "
                    f"{spec.get('progressDeadlineSeconds', K8S_DEFAULT_PROGRESS_DEADLINE_S)} s x "
                    f"{steps} rollout step(s) = {need} s"
                )
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_every_awaited_deployment_gets_its_rollout_time(plans, stack):
    assert await_problems(plans[stack][2]) == []


def test_model_server_timeout_is_deadline_times_replicas(plans):
    """prod stable: 181.3 s weights + engine init, + 10 s metadata verification = 191.3 s cold load x 1.5 = 287 s
    -> startup window 29 x 10 s = 290 s, + 900 s node/image slack = 1190 s progress deadline; the HPA may run 4
    replicas, replaced one at a time: 4 x 1190 = 4760 s."""
    _, _, inv = plans["prod"]
    (dep,) = [r for r in resources(inv, DEPLOYMENT) if r["inputs"]["metadata"]["name"] == "vllm-stable"]
    assert dep["inputs"]["spec"]["progressDeadlineSeconds"] == 1190
    assert dep["options"]["custom_timeouts"] == {"create": "4760s", "update": "4760s"}


def test_a_short_timeout_is_caught(plans):
    inv = copy.deepcopy(plans["prod"][2])
    (dep,) = [r for r in resources(inv, DEPLOYMENT) if r["inputs"]["metadata"]["name"] == "vllm-canary"]
    dep["options"].pop("custom_timeouts")
    assert await_problems(inv) == [
        "Deployment vllm-canary: Pulumi create timeout 600 s is below its progress deadline 1190 s x 2 rollout "
        "step(s) = 2380 s",
        "Deployment vllm-canary: Pulumi update timeout 600 s is below its progress deadline 1190 s x 2 rollout "
        "step(s) = 2380 s",
    ]


# ---- no avoidable serialisation ----------------------------------------------------------------------------


def waits_for(inv: dict[str, Any]) -> dict[str, set[str]]:
    """URN -> every URN it transitively waits for (a dependency on a component covers its children)."""
    children: dict[str, list[str]] = {}
    for r in inv["resources"]:
        if r["parent"]:
            children.setdefault(r["parent"], []).append(r["urn"])
    deps = {r["urn"]: r["dependencies"] for r in inv["resources"]}
    out: dict[str, set[str]] = {}
    for urn in deps:
        seen: set[str] = set()
        stack = list(deps[urn])
        while stack:
            u = stack.pop()
            if u in seen or u not in deps:
                continue
            seen.add(u)
            stack += children.get(u, []) + deps[u]
        out[urn] = seen
    return out


ROUTING_TYPES = (
    "kubernetes:gateway.networking.k8s.io/v1:Gateway",
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    "kubernetes:inference.networking.k8s.io/v1:InferencePool",
    "kubernetes:helm.sh/v4:Chart",
    "kubernetes:networking.gke.io/v1:GCPBackendPolicy",
    "kubernetes:networking.gke.io/v1:HealthCheckPolicy",
    "gcp:compute/address:Address",
)


def serialisation_problems(inv: dict[str, Any]) -> list[str]:
    model_servers = {r["urn"] for r in resources(inv, DEPLOYMENT) if r["name"].startswith("vllm-")}
    closure = waits_for(inv)
    return [
        f"{r['type']} {r['name']} waits for model-server Deployment(s) "
        f"{sorted(u.rsplit('::', 1)[-1] for u in closure[r['urn']] & model_servers)}"
        for r in inv["resources"]
        if r["type"] in ROUTING_TYPES and closure[r["urn"]] & model_servers
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_routing_never_waits_for_a_model_server_rollout(plans, stack):
    inv = plans[stack][2]
    assert any(r["type"] == "kubernetes:inference.networking.k8s.io/v1:InferencePool" for r in inv["resources"])
    assert serialisation_problems(inv) == []


def test_a_routing_object_behind_a_rollout_is_caught(plans):
    inv = copy.deepcopy(plans["dev"][2])
    deployment = next(r["urn"] for r in resources(inv, DEPLOYMENT) if r["name"] == "vllm-stable-deployment")
    pool = next(r for r in inv["resources"] if r["name"] == "vllm-stable-pool")
    pool["dependencies"].append(deployment)
    # The pool, and transitively what waits for the pool: the picker chart and the API route.
    assert sorted(serialisation_problems(inv)) == [
        "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute inference-gateway-api-route waits for model-server "
        "Deployment(s) ['vllm-stable-deployment']",
        "kubernetes:helm.sh/v4:Chart vllm-stable-router-epp waits for model-server Deployment(s) ['vllm-stable-deployment']",
        "kubernetes:inference.networking.k8s.io/v1:InferencePool vllm-stable-pool waits for model-server "
        "Deployment(s) ['vllm-stable-deployment']",
    ]
