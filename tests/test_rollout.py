"""A release change, stepped through: old pods draining, new pods starting, and what each pool selects.

The rendered objects of two plans of the same stack are the inputs: the shipped stack (old release) and the same
stack with the pool's release changed (new release). A small model of the Deployment controller's RollingUpdate
(``maxSurge`` / ``maxUnavailable`` from the rendered strategy; a new pod is Ready only after its startup steps; an
old pod leaves the endpoints the moment it starts terminating) walks every intermediate state, and at each state
the pool's rendered InferencePool selector is applied to the pods' rendered labels. The pool must never have fewer
Ready, selected endpoints than its warm minimum.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline.planrun import run_plan
from infra.offline.stackfile import ROOT

from .conftest import one

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
#: Steps a new pod spends starting (cold load) before it is Ready; any value >= 1 gives the same invariant.
STARTUP_STEPS = 3


@dataclass
class Pod:
    labels: dict[str, str]
    new: bool
    starting: int  # steps left before Ready; 0 = Ready
    terminating: bool = False

    @property
    def ready(self) -> bool:
        return self.starting == 0 and not self.terminating


@dataclass
class Rollout:
    """RollingUpdate of ``replicas`` pods from ``old`` to ``new`` template labels (Deployment controller rules:
    at most replicas + max_surge pods that are not terminating, at least replicas - max_unavailable Ready)."""

    old: dict[str, str]
    new: dict[str, str]
    replicas: int
    max_surge: int
    max_unavailable: int
    pods: list[Pod] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pods = [Pod(dict(self.old), new=False, starting=0) for _ in range(self.replicas)]

    def live(self) -> list[Pod]:
        return [p for p in self.pods if not p.terminating]

    def done(self) -> bool:
        return all(p.new and p.ready for p in self.live()) and len(self.live()) == self.replicas

    def step(self) -> None:
        # 1. scale the old ReplicaSet down as far as maxUnavailable allows (Ready pods counted old and new)
        for p in [p for p in self.pods if not p.new and not p.terminating]:
            if sum(q.ready for q in self.pods) - 1 >= self.replicas - self.max_unavailable:
                p.terminating = True
        # 2. surge: create new pods while the live total stays within replicas + maxSurge
        while len(self.live()) < self.replicas + self.max_surge and sum(p.new for p in self.live()) < self.replicas:
            self.pods.append(Pod(dict(self.new), new=True, starting=STARTUP_STEPS))
        # 3. time passes: terminated pods are gone, starting pods progress
        self.pods = [p for p in self.pods if not p.terminating]
        for p in self.pods:
            p.starting = max(0, p.starting - 1)


def selected_ready(selector: dict[str, str], pods: list[Pod]) -> int:
    return sum(p.ready and all(p.labels.get(k) == v for k, v in selector.items()) for p in pods)


def min_selected_during(selector: dict[str, str], rollout: Rollout, max_steps: int = 100) -> int:
    """The fewest Ready, selected endpoints over every state from start to finished rollout."""
    low = selected_ready(selector, rollout.pods)
    for _ in range(max_steps):
        rollout.step()
        # Terminating pods have already left the endpoints; the state between scale-down and scale-up is seen
        # at the next check, as it is in the cluster.
        low = min(low, selected_ready(selector, rollout.pods))
        if rollout.done():
            return low
    raise AssertionError("the rollout did not finish: the model is stuck")


# ---- the rendered inputs ---------------------------------------------------------------------------------------


def _plan_with_release(tmp_path: Path, stack: str, role: str, release: str) -> dict[str, Any]:
    """The stack after the runbook's promotion step: the pool names the new release, and a pool on Hyperdisk ML
    names the new release's hydrated snapshot instead of the old one (the config rules demand exactly that)."""
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    pool = doc["config"]["llm-serving:serving"][role]
    old_release, pool["release"] = pool["release"], release
    if pool["loading"]["path"] == "hyperdisk_ml":
        snaps = doc["config"]["llm-serving:gke"]["weights"]["hyperdisk_ml"]["snapshots"]
        snaps[release] = f"{snaps.pop(old_release)}-next"
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return run_plan(stack, tmp_path).inventory.to_dict()


def _template_labels(inv: dict[str, Any], role: str) -> dict[str, str]:
    return one(inv, DEPLOYMENT, f"vllm-{role}-deployment")["inputs"]["spec"]["template"]["metadata"]["labels"]


def _strategy(inv: dict[str, Any], role: str) -> dict[str, int]:
    return one(inv, DEPLOYMENT, f"vllm-{role}-deployment")["inputs"]["spec"]["strategy"]["rollingUpdate"]


def _pool_selector(inv: dict[str, Any], role: str) -> dict[str, str]:
    return one(inv, POOL, f"vllm-{role}-pool")["inputs"]["spec"]["selector"]["matchLabels"]


@pytest.fixture(scope="module")
def staging_release_change(plans, tmp_path_factory) -> tuple[dict[str, Any], dict[str, Any]]:
    """Staging as shipped, and staging after promoting the canary's release to the stable pool."""
    cfg, _, old = plans["staging"]
    new = _plan_with_release(tmp_path_factory.mktemp("promote"), "staging", "stable", cfg.serving.canary.release)
    return old, new


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_release_change_never_drops_a_pool_below_its_warm_minimum(plans, staging_release_change, replicas):
    cfg, _, _ = plans["staging"]
    old, new = staging_release_change
    old_labels, new_labels = _template_labels(old, "stable"), _template_labels(new, "stable")
    assert old_labels["llm-serving.io/release"] != new_labels["llm-serving.io/release"]  # a real release change
    selector = _pool_selector(new, "stable")
    assert selector == _pool_selector(old, "stable")  # the pool object itself is not touched by the change
    s = _strategy(new, "stable")
    rollout = Rollout(old_labels, new_labels, replicas, s["maxSurge"], s["maxUnavailable"])
    # replicas 1..max: the HPA may hold the pool anywhere in its range when the release changes.
    assert replicas <= cfg.serving.stable.max_replicas
    assert min_selected_during(selector, rollout) >= min(replicas, cfg.serving.stable.min_replicas)
    assert (
        min_selected_during(selector, Rollout(old_labels, new_labels, replicas, s["maxSurge"], s["maxUnavailable"]))
        == replicas
    )


def test_a_release_label_in_the_pool_selector_would_empty_the_pool(staging_release_change):
    """The simulation bites: the selector this program used to render ({pool, release}) drains the pool to 0."""
    old, new = staging_release_change
    old_labels, new_labels = _template_labels(old, "stable"), _template_labels(new, "stable")
    release_pinned = {"llm-serving.io/pool": "stable", "llm-serving.io/release": old_labels["llm-serving.io/release"]}
    s = _strategy(new, "stable")
    assert (
        min_selected_during(release_pinned, Rollout(old_labels, new_labels, 1, s["maxSurge"], s["maxUnavailable"])) == 0
    )


def test_surge_zero_with_unavailable_one_would_drop_the_pool(staging_release_change):
    """And the strategy matters too: maxSurge 0 / maxUnavailable 1 takes the only replica away before the new one
    is Ready."""
    old, new = staging_release_change
    rollout = Rollout(_template_labels(old, "stable"), _template_labels(new, "stable"), 1, 0, 1)
    assert min_selected_during(_pool_selector(new, "stable"), rollout) == 0


def test_every_pool_keeps_surge_and_no_unavailable(plans):
    for stack, (cfg, _, inv) in plans.items():
        for role, _ in cfg.pools():
            assert _strategy(inv, role) == {"maxSurge": 1, "maxUnavailable": 0}, (stack, role)
            labels = copy.deepcopy(_template_labels(inv, role))
            labels["llm-serving.io/release"] = "any-other-release"
            sel = _pool_selector(inv, role)
            assert all(labels.get(k) == v for k, v in sel.items()), "a pod of another release must still be selected"
