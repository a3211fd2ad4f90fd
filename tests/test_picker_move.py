"""Moving a running stack to the picker release of its own (docs/gke.md "Moving an existing stack to the llm-d
Router"): at no point of ``pulumi up`` may a pool point at a picker that is not ready, or lose the one it has.

The scenario: the stack as the previous version planned it (release ``vllm-<role>``, so the pool pointed at
``vllm-<role>-epp``; no patch) against the plan of this version, stepped by the review engine
(infra/offline/review/engine.py: creates/updates by URN match, ``ignoreChanges`` applied, unmatched old resources
deleted). The Pulumi engine runs every create and update whose dependencies are done, in parallel, and deletes what
the program dropped only after all of them (pulumi pkg/resource/deploy/step_generator.go: ``GenerateDeletes`` runs
once registrations end), so a pointer move is safe only if the step that moves it depends on the chart that makes
its target ready. A chart counts as ready when it completes: a remote component finishes after its children, and
the picker's Deployment is awaited until its leader is ready (tests/test_picker_await.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components import naming
from infra.offline.review.engine import Change, dependency_order, steps

from .conftest import resources, serving_roles

POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
PATCH = "kubernetes:inference.networking.k8s.io/v1:InferencePoolPatch"
CHART = "kubernetes:helm.sh/v4:Chart"


def previous_version(inv: dict[str, Any], roles: list[str]) -> dict[str, Any]:
    """``inv`` as the version before this one planned it: each picker released as ``vllm-<role>`` (Chart resource
    ``vllm-<role>-epp``, no ``pool-name`` flag), the pool pointing at ``vllm-<role>-epp``, no patch."""
    old = copy.deepcopy(inv)
    renames: dict[str, str] = {}
    for r in old["resources"]:
        if r["type"] == CHART:
            role = next(x for x in roles if r["name"] == naming.epp_name(x))
            old_name = f"vllm-{role}-epp"
            renames[r["urn"]] = r["urn"].rsplit("::", 1)[0] + "::" + old_name
            r["urn"], r["name"] = renames[r["urn"]], old_name
            r["inputs"]["name"] = f"vllm-{role}"
            r["inputs"]["values"]["router"]["epp"]["flags"].pop("pool-name")
        if r["type"] == POOL:
            role = next(x for x in roles if r["name"] == f"vllm-{x}-pool")
            r["inputs"]["spec"]["endpointPickerRef"]["name"] = f"vllm-{role}-epp"
            r["options"]["ignore_changes"] = []
    old["resources"] = [r for r in old["resources"] if r["type"] != PATCH]
    for r in old["resources"]:
        r["dependencies"] = [renames.get(d, d) for d in r.get("dependencies") or []]
    return old


def _closure(inv: dict[str, Any]) -> dict[str, set[str]]:
    """URN -> every URN it waits for (transitively), from the plan's dependencies and parents."""
    index = {r["urn"]: r for r in inv["resources"]}
    out: dict[str, set[str]] = {}
    for urn in dependency_order(index):
        direct = set(index[urn].get("dependencies") or [])
        out[urn] = set(direct)
        for d in direct:
            out[urn] |= out.get(d, set())
    return out


def _service_of(chart: dict[str, Any]) -> str:
    """The picker Service a chart creates: the chart's own derivation (release cut to 40, then ``-epp``)."""
    return f"{chart['inputs']['name'][: naming.EPP_RELEASE_NAME_CHARS]}-epp"


def pointer_moves(changes: list[Change], new: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(step URN, pool object, Service it points the pool at) for every create/update that sets a pool's picker and
    is acted on (an ``ignoreChanges`` field is listed but not applied)."""
    index = {r["urn"]: r for r in new["resources"]}
    out = []
    for c in changes:
        if c.action not in ("create", "update", "replace") or c.type not in (POOL, PATCH):
            continue
        moved = c.action != "update" or any(
            f.path.startswith("spec.endpointPickerRef") and not f.ignored for f in c.fields
        )
        if moved:
            inputs = index[c.urn]["inputs"]
            out.append((c.urn, inputs["metadata"]["name"], inputs["spec"]["endpointPickerRef"]["name"]))
    return out


def window_problems(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    changes, _ = steps(old, new)
    closure = _closure(new)
    old_services = {_service_of(r): r["urn"] for r in resources(old, CHART)}
    new_services = {_service_of(r): r["urn"] for r in resources(new, CHART)}
    deleted = {c.urn for c in changes if c.action == "delete"}
    problems = []
    pointing = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["spec"]["endpointPickerRef"]["name"] for r in resources(old, POOL)
    }
    for urn, pool, service in pointer_moves(changes, new):
        live_before = service in old_services and old_services[service] not in deleted
        if not live_before and new_services.get(service) not in closure[urn]:
            problems.append(f"{urn.rsplit('::', 1)[-1]} points the pool at {service} before that picker is ready")
        pointing[pool] = service
    for pool, service in sorted(pointing.items()):
        if service not in new_services and (service not in old_services or old_services[service] in deleted):
            problems.append(f"pool {pool} is left pointing at {service}, which no picker serves after the update")
    return problems


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_moving_a_running_stack_never_leaves_a_pool_without_its_picker(plans, stack):
    cfg, plan, inv = plans[stack]
    roles = sorted(serving_roles(cfg, plan))
    old = previous_version(inv, roles)
    changes, _ = steps(old, inv)
    by_action = {(c.type, c.action) for c in changes}
    # The shape of the move: new pickers and patches created, old pickers deleted, pools not moved by their update.
    assert {(CHART, "create"), (CHART, "delete"), (PATCH, "create")} <= by_action
    assert len([c for c in changes if c.type == CHART and c.action == "delete"]) == len(roles)
    assert window_problems(old, inv) == []


def test_a_move_that_never_repoints_the_pool_is_caught(plans):
    """Without the patch the pool (its pointer ignored) would keep naming the deleted picker."""
    cfg, plan, inv = plans["dev"]
    roles = sorted(serving_roles(cfg, plan))
    broken = copy.deepcopy(inv)
    broken["resources"] = [r for r in broken["resources"] if r["type"] != PATCH]
    assert window_problems(previous_version(inv, roles), broken) == [
        f"pool vllm-{role} is left pointing at vllm-{role}-epp, which no picker serves after the update"
        for role in roles
    ]


def test_without_ignore_changes_the_pool_update_would_point_at_a_picker_not_ready(plans):
    """The check catches the window the design removes: drop the pool's ignoreChanges and its own update moves the
    pointer in parallel with the new picker's start."""
    cfg, plan, inv = plans["dev"]
    roles = sorted(serving_roles(cfg, plan))
    old = previous_version(inv, roles)
    broken = copy.deepcopy(inv)
    for r in resources(broken, POOL):
        r["options"]["ignore_changes"] = []
    assert sorted(window_problems(old, broken)) == [
        f"vllm-{role}-pool points the pool at vllm-{role}-router-epp before that picker is ready" for role in roles
    ]


def test_a_patch_that_does_not_wait_for_the_chart_is_caught(plans):
    cfg, plan, inv = plans["dev"]
    roles = sorted(serving_roles(cfg, plan))
    old = previous_version(inv, roles)
    broken = copy.deepcopy(inv)
    for r in resources(broken, PATCH):
        r["dependencies"] = [d for d in r["dependencies"] if CHART not in d]
    assert sorted(window_problems(old, broken)) == [
        f"vllm-{role}-picker-ref points the pool at vllm-{role}-router-epp before that picker is ready"
        for role in roles
    ]


def test_the_previous_version_is_the_one_main_planned():
    """The scenario's old names are the ones the previous version derived (release = the pool's name)."""
    assert naming.epp_release_name("stable") == "vllm-stable-router"
    assert naming.epp_name("stable") == "vllm-stable-router-epp"
    assert json.dumps(naming.previous_epp_pod_selectors("stable")) == json.dumps(
        [{"inferencepool": "vllm-stable-epp"}, {"llm-d-router-gateway": "vllm-stable-epp"}]
    )
