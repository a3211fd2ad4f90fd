"""What ``pulumi up`` waits for on the endpoint picker (components/gateway/objects.py ``picker_await_annotations``):
the post-renderer the Chart resource really carries, and a small model of the Deployment status a ``Recreate``
rollout of a leader-elected picker goes through, judged the way pulumi-kubernetes judges its conditions.

Sources of the model:
* status sequence: kubernetes pkg/controller/deployment/recreate.go ``rolloutRecreate`` (old ReplicaSet to zero and
  a status write with no new ReplicaSet, so ``updatedReplicas`` 0; the new ReplicaSet only once the old is
  inactive) and sync.go ``calculateStatus`` (``readyReplicas`` sums every ReplicaSet's ready pods);
* readiness: llm-d-router v0.10.0 cmd/epp/runner/health.go ``Check`` (with more than one replica ``readiness``
  needs the leader lease: one ready pod at most);
* judging: pulumi-kubernetes provider/pkg/await/condition/jsonpath.go ``Satisfied`` (not before
  ``status.observedGeneration`` reaches ``metadata.generation``), provider/pkg/jsonpath/jsonpath.go ``Parse`` /
  ``Matches`` (``{.path}=value``; a missing path does not match; the value compared as ``fmt.Sprint``), and the
  built-in Deployment await (provider/pkg/await/deployment.go: ``Available`` and ready replicas >= spec.replicas).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from typing import Any

import pytest
import yaml

from components import naming
from components.gateway import chart_filter
from components.gateway import objects as o
from components.gateway.component import CHART_FILTER_SCRIPT

from .conftest import resources

_EXPR = re.compile(r"^jsonpath=\{\.([A-Za-z.]+)\}=([^=]+)$")


@dataclass(frozen=True)
class DeploymentState:
    """The fields of a Deployment the awaits read, after one controller step."""

    step: str
    generation: int
    observed: int | None
    updated: int | None  # status.updatedReplicas (omitted from the object when 0)
    ready: int | None  # status.readyReplicas (omitted when 0)
    available: bool
    spec_replicas: int

    def obj(self) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if self.observed is not None:
            status["observedGeneration"] = self.observed
        if self.updated:
            status["updatedReplicas"] = self.updated
        if self.ready:
            status["readyReplicas"] = self.ready
        return {"metadata": {"generation": self.generation}, "spec": {"replicas": self.spec_replicas}, "status": status}


def recreate_rollout(replicas: int) -> list[DeploymentState]:
    """What the provider observes after it applied a template change (gen 1 -> 2) to a running picker, under
    ``Recreate`` with leader election; before the change one old pod led."""
    s0 = DeploymentState("running, old leader ready", 1, 1, replicas, 1, replicas == 1, replicas)
    return [
        replace(s0, step="spec updated, not yet observed", generation=2),
        # rolloutRecreate: old RS scaled to 0, status written with newRS == nil; the old pod may still count ready
        replace(s0, step="old ReplicaSet scaled down", generation=2, observed=2, updated=0, available=False),
        replace(s0, step="old pods gone", generation=2, observed=2, updated=0, ready=0, available=False),
        replace(s0, step="new pods created", generation=2, observed=2, updated=replicas, ready=0, available=False),
        replace(
            s0, step="new leader ready", generation=2, observed=2, updated=replicas, ready=1, available=replicas == 1
        ),
    ]


def fresh_create(replicas: int) -> list[DeploymentState]:
    s = DeploymentState("created, no status", 1, None, None, None, False, replicas)
    return [
        s,
        replace(s, step="pods created", observed=1, updated=replicas),
        replace(s, step="leader ready", observed=1, updated=replicas, ready=1, available=replicas == 1),
    ]


def provider_satisfied(wait_for: str, obj: dict[str, Any]) -> bool:
    """pulumi-kubernetes' verdict on a ``pulumi.com/waitFor`` value (a JSON list: all must hold)."""
    generation, observed = obj["metadata"].get("generation"), obj["status"].get("observedGeneration")
    if generation is not None and observed is not None and observed < generation:
        return False
    for expr in json.loads(wait_for):
        m = _EXPR.match(expr)
        assert m, f"not the provider's strict jsonpath={{.path}}=value form: {expr!r}"
        value: Any = obj
        for part in m.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None or str(value) != m.group(2):
            return False
    return True


def builtin_satisfied(state: DeploymentState) -> bool:
    return state.available and state.observed == state.generation and (state.ready or 0) >= state.spec_replicas


def _wait_for(replicas: int) -> str:
    (deployment, _service) = o.picker_await_annotations("stable", replicas)
    return deployment[3]


def _first(states: list[DeploymentState], ok) -> str | None:
    return next((s.step for s in states if ok(s)), None)


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_a_picker_rollout_is_done_when_a_new_pod_leads(replicas):
    wait_for = _wait_for(replicas)
    assert _first(recreate_rollout(replicas), lambda s: provider_satisfied(wait_for, s.obj())) == "new leader ready"
    assert _first(fresh_create(replicas), lambda s: provider_satisfied(wait_for, s.obj())) == "leader ready"


def test_the_builtin_await_never_finishes_for_a_leader_elected_picker():
    assert _first(recreate_rollout(2), builtin_satisfied) is None
    assert _first(fresh_create(2), builtin_satisfied) is None
    assert _first(recreate_rollout(1), builtin_satisfied) == "new leader ready"


def test_ready_replicas_alone_would_pass_on_the_old_pod():
    """Why the condition also names ``updatedReplicas``: right after the old ReplicaSet is scaled down the status
    is current (observedGeneration = 2) and still counts the old leader ready."""
    only_ready = json.dumps(["jsonpath={.status.readyReplicas}=1"])
    assert (
        _first(recreate_rollout(2), lambda s: provider_satisfied(only_ready, s.obj())) == "old ReplicaSet scaled down"
    )


def test_the_service_is_not_awaited():
    (_deployment, service) = o.picker_await_annotations("canary", 2)
    assert service == ("Service", "vllm-canary-router-epp", "pulumi.com/skipAwait", "true")


# ---- the post-renderer the plan carries ----------------------------------------------------------------------------


#: The shape the v0.10.0 chart renders (routerlib templates/_deployment.yaml, _service.yaml: block metadata, labels,
#: the Deployment with no annotations) plus one object the filter drops.
def _rendered(release: str) -> str:
    epp = f"{release}-epp"
    return f"""---
# Source: llm-d-router-gateway/templates/epp.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {epp}
  namespace: llm
  labels:
    app.kubernetes.io/name: {epp}
spec:
  replicas: 2
  strategy:
    type: Recreate
---
# Source: llm-d-router-gateway/templates/epp.yaml
apiVersion: v1
kind: Service
metadata:
  name: {epp}
  namespace: llm
  labels:
    app.kubernetes.io/name: {epp}
spec:
  type: ClusterIP
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: {release}
"""


#: Picker replicas per shipped GKE stack, from the stack files (dev tolerates one picker; staging/prod run two).
EPP_REPLICAS = {"dev": 1, "dev-cohost-gke": 1, "staging": 2, "prod": 2}


def test_every_chart_post_renderer_annotates_its_own_picker(plans, tmp_path):
    """Run the exact command each Chart resource carries, from an unrelated working directory, on the chart's shape."""
    seen = 0
    for stack, (_cfg, _plan, inv) in plans.items():
        for chart in resources(inv, "kubernetes:helm.sh/v4:Chart"):
            release = chart["inputs"]["name"]
            args = [sys.executable, *chart["inputs"]["postRenderer"]["args"]]
            res = subprocess.run(
                args, input=_rendered(release), capture_output=True, text=True, check=True, timeout=30, cwd=tmp_path
            )
            docs = {d["kind"]: d for d in yaml.safe_load_all(res.stdout) if d}
            assert set(docs) == {"Deployment", "Service"}, stack
            n = EPP_REPLICAS[stack]
            assert docs["Deployment"]["metadata"]["annotations"] == {
                "pulumi.com/waitFor": f'["jsonpath={{.status.updatedReplicas}}={n}", "jsonpath={{.status.readyReplicas}}=1"]'
            }, stack
            assert docs["Service"]["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}, stack
            assert docs["Deployment"]["metadata"]["labels"] == {"app.kubernetes.io/name": f"{release}-epp"}
            seen += 1
    assert seen >= len(EPP_REPLICAS)


def test_post_renderer_refuses_what_it_cannot_annotate(tmp_path):
    """A picker the chart did not render (renamed by a chart bump) fails the Helm render with the reason."""
    src = o.picker_await_annotations("stable", 2)
    args = [sys.executable, "-c", CHART_FILTER_SCRIPT.read_text(encoding="utf-8")]
    for a in src:
        args += ["--annotate", *a]
    res = subprocess.run(args, input=_rendered("vllm-other"), capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == (
        "llm-serving chart post-renderer: expected one Deployment named 'vllm-stable-router-epp' to annotate with "
        "pulumi.com/waitFor, found 0\n"
    )


def test_annotate_keeps_existing_annotations_and_refuses_an_override():
    doc = (
        "\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  annotations:\n"
        '    cloud.google.com/neg: \'{"exposed_ports":{"9002":{}}}\'\nspec: {}\n'
    )
    out = yaml.safe_load(chart_filter.annotate(doc, "pulumi.com/skipAwait", "true"))
    assert out["metadata"]["annotations"] == {
        "pulumi.com/skipAwait": "true",
        "cloud.google.com/neg": '{"exposed_ports":{"9002":{}}}',
    }
    with pytest.raises(chart_filter.PostRenderError, match=r"already sets annotation cloud\.google\.com/neg"):
        chart_filter.annotate(doc, "cloud.google.com/neg", "x")
    assert naming.epp_name("stable") == "vllm-stable-router-epp"
