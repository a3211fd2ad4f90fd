"""Every Cloud Run rollout stage is one converging ``pulumi up`` (issue 23), driven against a simulator of Cloud Run's
documented revision model (tests/cloud_run_sim.py: what each rule is and where Cloud Run states it).

Each stage plans the real program under the mock monitor (the prod Cloud Run fixture, which starts with a 0 %
canary, or the shipped dev-cloudrun stack), applies the inventory with the engine stand-in (the real dynamic
providers, the simulator as their transport), and then checks:

* the apply raised nothing and no mutating call failed (no 409, no 404, no 400);
* no revision creation moved traffic;
* the live split is exactly the plan's (revision names, percents, tags), every revision it names is ready and was
  created from exactly the template the plan rendered for that pool;
* a second apply of the same plan does nothing (converged);
* what the stage had to do and nothing else (e.g. a weight move creates no revision; a promotion creates none).

The stages are docs/cloud-run.md's runbook (first apply with a canary, weight moves, promotion, rollback, a new
canary) and the issue's day-2 changes with a canary present (collector digest bump, hub-token secret rotation,
stable's min/max instances, a program-only change that changes the programs' bytes, one that changes nothing a
revision renders).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.cloud_run import programs
from components.cloud_run import provider as pv
from components.cloud_run import service as svc

from .cloud_run_sim import CloudRunSim, Engine, SimRevision
from .conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_STACK
from .test_cloud_run import plan_values, values

REVISION = "pulumi-python:dynamic/cloudrun:Revision"
TRAFFIC = "pulumi-python:dynamic/cloudrun:Traffic"
SERVICE = "pulumi-python:dynamic/cloudrun:Service"
PROD_SERVICE = "projects/acme-llm-prod/locations/us-central1/services/llm-prod"
DEV_SERVICE = "projects/acme-llm-dev/locations/us-central1/services/llm-dev"
COLLECTOR = "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar@sha256:"


def plan(v: dict[str, Any], stack: str = CLOUD_RUN_FIXTURE) -> dict[str, Any]:
    return plan_values(v, stack)[1]


def only(inventory: dict[str, Any], typ: str) -> list[dict[str, Any]]:
    return [r for r in inventory["resources"] if r["type"] == typ]


def planned_templates(inventory: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Revision name -> the template the plan renders for it."""
    return {r["inputs"]["revision"]: r["inputs"]["template"] for r in only(inventory, REVISION)}


class Stack:
    """One stack's life: every apply against one simulator."""

    def __init__(self, stack: str = CLOUD_RUN_FIXTURE, service: str = PROD_SERVICE):
        self.stack, self.service = stack, service
        self.sim = CloudRunSim()
        self.engine = Engine(self.sim)

    def up(self, v: dict[str, Any]) -> list[tuple[str, str]]:
        """One ``pulumi up`` of these values; asserts it converged (module docstring) and returns its steps."""
        inventory = plan(v, self.stack)
        created_before = self.sim.revision_count(self.service) if self.service in self.sim.services else 0
        steps = self.engine.apply(inventory)
        assert self.sim.errors == [], self.sim.errors
        assert self.sim.moves_by_creation == [], self.sim.moves_by_creation
        (split,) = only(inventory, TRAFFIC)
        want = [{k: e[k] for k in ("type", "revision", "percent", "tag")} for e in split["inputs"]["traffic"]]
        assert self.sim.routed(self.service) == want
        templates = planned_templates(inventory)
        for entry in want:
            rev = self.sim.revisions[f"{self.service}/revisions/{entry['revision']}"]
            assert rev.ready, rev
            assert rev.template == {k: v for k, v in templates[entry["revision"]].items() if k != "revision"}
        (service,) = only(inventory, SERVICE)
        assert self.sim.services[self.service].fields == service["inputs"]["service"]
        self.created = self.sim.revision_count(self.service) - created_before
        assert self.engine.apply(inventory) == [], "a second apply of the same plan must change nothing"
        return steps


def dynamic(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (op, name)
        for op, name in steps
        if name.startswith(("cloud-run-service", "cloud-run-revision", "cloud-run-traffic"))
    ]


def weights(v: dict[str, Any], stable: int, canary: int) -> dict[str, Any]:
    v = copy.deepcopy(v)
    v["llm-serving:serving"]["stable"]["weight"], v["llm-serving:serving"]["canary"]["weight"] = stable, canary
    return v


def promoted(v: dict[str, Any]) -> dict[str, Any]:
    """docs/cloud-run.md step 4: stable takes the canary's release and settings, the canary pool is removed."""
    v = copy.deepcopy(v)
    serving = v["llm-serving:serving"]
    serving["stable"] = {**serving.pop("canary"), "weight": 100}
    return v


@pytest.fixture
def prod() -> Iterator[Stack]:
    yield Stack()


# ---- the runbook -----------------------------------------------------------------------------------------------------


def test_first_apply_of_a_stack_that_already_has_a_canary(prod: Stack) -> None:
    """A stack rebuilt from git (new project, region, disaster recovery) with a canary: one apply."""
    steps = prod.up(values(CLOUD_RUN_FIXTURE))
    assert dynamic(steps) == [
        ("create", "cloud-run-service"),
        ("create", "cloud-run-revision-stable"),
        ("create", "cloud-run-revision-canary"),
        ("create", "cloud-run-traffic"),
    ]
    assert prod.created == 2  # the service's creation made stable's revision, the canary's resource the canary's
    methods = [m.rsplit(".", 1)[-1] for m, _, _ in prod.sim.calls if m.endswith(("create", "patch"))]
    assert methods == ["create", "patch", "patch"]  # service (with stable's template), canary revision, traffic


def test_weight_moves_touch_only_the_split(prod: Stack) -> None:
    v = values(CLOUD_RUN_FIXTURE)
    prod.up(v)
    for stable, canary in ((95, 5), (75, 25), (50, 50), (0, 100)):
        steps = prod.up(weights(v, stable, canary))
        assert dynamic(steps) == [("update", "cloud-run-traffic")], (stable, canary)
        assert prod.created == 0


def test_promotion_reuses_the_canarys_revision(prod: Stack) -> None:
    v = values(CLOUD_RUN_FIXTURE)
    prod.up(weights(v, 50, 50))
    canary = planned_templates(plan(weights(v, 50, 50)))
    steps = prod.up(promoted(v))
    assert prod.created == 0  # stable's new name is the canary's revision: found, not created
    assert sorted(dynamic(steps)) == [
        ("delete", "cloud-run-revision-canary"),  # removed: deleting a revision resource calls nothing
        ("delete", "cloud-run-revision-stable"),  # the replaced one
        ("replace", "cloud-run-revision-stable"),
        ("update", "cloud-run-traffic"),
    ]
    (entry,) = prod.sim.routed(PROD_SERVICE)
    assert entry["tag"] == "stable" and entry["revision"] in canary and "2026-11-20-1" in entry["revision"]


def test_rollback_during_and_after_a_canary(prod: Stack) -> None:
    v = values(CLOUD_RUN_FIXTURE)
    prod.up(weights(v, 75, 25))
    # During: the canary back to 0 %, then removed; only the split changes.
    assert dynamic(prod.up(weights(v, 100, 0))) == [("update", "cloud-run-traffic")]
    alone = copy.deepcopy(v)
    del alone["llm-serving:serving"]["canary"]
    assert sorted(dynamic(prod.up(alone))) == [("delete", "cloud-run-revision-canary"), ("update", "cloud-run-traffic")]
    # After a promotion: stable back to the previous release finds its old revision again (never deleted).
    prod.up(weights(v, 0, 100))
    prod.up(promoted(v))
    steps = prod.up(alone)
    assert prod.created == 0 and ("replace", "cloud-run-revision-stable") in dynamic(steps)
    (entry,) = prod.sim.routed(PROD_SERVICE)
    assert "2026-11-02-1" in entry["revision"]


def test_a_new_canary_after_a_promotion(prod: Stack) -> None:
    v = values(CLOUD_RUN_FIXTURE)
    prod.up(promoted(v))
    again = promoted(v)
    serving = again["llm-serving:serving"]
    serving["canary"] = {**serving["stable"], "weight": 0, "max_instances": 3}  # another revision than stable's
    steps = prod.up(again)
    assert prod.created == 1
    assert dynamic(steps) == [("create", "cloud-run-revision-canary"), ("update", "cloud-run-traffic")]


def test_dev_stable_alone_then_a_canary(tmp_path: Path) -> None:
    dev = Stack(CLOUD_RUN_STACK, DEV_SERVICE)
    v = values()
    assert dynamic(dev.up(v)) == [
        ("create", "cloud-run-service"),
        ("create", "cloud-run-revision-stable"),
        ("create", "cloud-run-traffic"),
    ]
    assert dev.created == 1
    with_canary = copy.deepcopy(v)
    with_canary["llm-serving:serving"]["canary"] = {
        **v["llm-serving:serving"]["stable"],
        "weight": 0,
        "startup_margin": 1.5,
    }
    steps = dev.up(with_canary)
    assert dev.created == 1
    assert dynamic(steps) == [("create", "cloud-run-revision-canary"), ("update", "cloud-run-traffic")]


# ---- day 2, with a canary present --------------------------------------------------------------------------------


def collector_bump(v: dict[str, Any]) -> dict[str, Any]:
    v = copy.deepcopy(v)
    v["llm-serving:cloud_run"]["collector_image"] = COLLECTOR + "5" * 64
    return v


def secret_rotation(v: dict[str, Any]) -> dict[str, Any]:
    v = copy.deepcopy(v)
    v["llm-serving:cloud_run"]["hub_token"]["version"] = "4"
    return v


def stable_bounds(v: dict[str, Any]) -> dict[str, Any]:
    v = copy.deepcopy(v)
    v["llm-serving:serving"]["stable"].update(min_instances=2, max_instances=5)
    return v


@pytest.mark.parametrize(
    ("change", "renamed"),
    [(collector_bump, {"stable", "canary"}), (secret_rotation, {"stable", "canary"}), (stable_bounds, {"stable"})],
    ids=["collector-digest", "secret-version", "stable-min-max"],
)
def test_day_two_changes_with_a_canary_converge_in_one_apply(
    prod: Stack, change: Callable[[dict[str, Any]], dict[str, Any]], renamed: set[str]
) -> None:
    v = weights(values(CLOUD_RUN_FIXTURE), 90, 10)
    prod.up(v)
    before = {e["tag"]: e for e in prod.sim.routed(PROD_SERVICE)}
    steps = prod.up(change(v))
    after = {e["tag"]: e for e in prod.sim.routed(PROD_SERVICE)}
    assert {tag for tag in after if after[tag]["revision"] != before[tag]["revision"]} == renamed
    assert {tag: e["percent"] for tag, e in after.items()} == {"stable": 90, "canary": 10}  # nothing else moved
    assert prod.created == len(renamed)
    assert sorted(n for op, n in dynamic(steps) if op == "replace") == sorted(
        f"cloud-run-revision-{r}" for r in renamed
    )


def test_a_program_change_of_the_programs_bytes_converges_in_one_apply(
    prod: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = weights(values(CLOUD_RUN_FIXTURE), 90, 10)
    prod.up(v)
    first = {e["tag"]: e["revision"] for e in prod.sim.routed(PROD_SERVICE)}
    upgraded = tmp_path / "verify_release.py"
    upgraded.write_text(programs.VERIFY_SCRIPT.read_text(encoding="utf-8") + "\n# a later version of this program\n")
    monkeypatch.setattr(
        programs, "FILES", (("verify_release.py", upgraded), ("stage_weights.py", programs.STAGE_SCRIPT))
    )
    steps = prod.up(v)
    second = {e["tag"]: e["revision"] for e in prod.sim.routed(PROD_SERVICE)}
    assert all(first[t] != second[t] for t in first) and prod.created == 2
    # The new objects came first (the revisions mount them); the old ones stay for the old revisions.
    assert ("replace", "cloud-run-program-verify-release") in steps
    bucket = prod.sim.buckets["acme-llm-prod-llm-prod-run"]
    assert len([o for o in bucket if o.endswith("/verify_release.py")]) == 2


def test_a_program_change_that_renders_no_revision_change_renames_nothing(
    prod: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.cloud_run import component

    v = weights(values(CLOUD_RUN_FIXTURE), 90, 10)
    prod.up(v)
    monkeypatch.setattr(component, "PROGRAM_CONTENT_TYPE", "text/plain; charset=utf-8")
    steps = prod.up(v)
    assert dynamic(steps) == [] and prod.created == 0
    assert {op for op, _ in steps} == {"update"}  # the objects' metadata only


# ---- the simulator bites ------------------------------------------------------------------------------------------


def test_the_old_single_template_service_fails_against_the_simulator(prod: Stack) -> None:
    """The rendering before issue 23: one Service whose template is the canary's and whose traffic names stable's
    revision by name. Its first apply fails with Cloud Run's 404, as Google's own sample did."""
    inventory = plan(values(CLOUD_RUN_FIXTURE))
    (rev_stable,) = [r for r in only(inventory, REVISION) if r["name"].endswith("stable")]
    (rev_canary,) = [r for r in only(inventory, REVISION) if r["name"].endswith("canary")]
    (split,) = only(inventory, TRAFFIC)
    (service,) = only(inventory, SERVICE)
    sim = prod.sim
    sim.buckets["acme-llm-prod-llm-prod-run"] = {f"{programs.programs_volume('b').folder}/verify_release.py"}
    body = {
        **service["inputs"]["service"],
        "template": rev_canary["inputs"]["template"],
        "traffic": split["inputs"]["traffic"],
    }
    with pytest.raises(Exception, match="does not exist or is deleted"):
        sim.call(
            "projects.locations.services.create",
            {"parent": "projects/acme-llm-prod/locations/us-central1", "serviceId": "llm-prod"},
            body,
        )
    assert rev_stable["inputs"]["revision"] in sim.errors[0][1]


def test_a_revision_created_without_pinning_would_move_traffic(prod: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the 'no traffic moved' check: with the pin removed (an empty split = the latest revision), the
    canary's creation takes all traffic, and the simulator records it."""
    monkeypatch.setattr(pv, "pinned_traffic", lambda live: [])
    with pytest.raises(AssertionError):
        prod.up(values(CLOUD_RUN_FIXTURE))
    ((created, before, after),) = prod.sim.moves_by_creation
    assert created.startswith("llm-prod-qwen3-8b-fp8-2026-11-20-1-")
    assert [e["revision"] for e in before] != [e["revision"] for e in after] == [created]


@pytest.mark.parametrize("forged", [False, True], ids=["other-digest", "same-digest-other-bounds"])
def test_a_hand_made_revision_with_the_planned_name_is_refused(prod: Stack, forged: bool) -> None:
    v = values(CLOUD_RUN_FIXTURE)
    prod.up(v)
    bumped = collector_bump(v)
    templates = planned_templates(plan(bumped))
    stable_name = next(n for n in templates if "2026-11-02-1" in n)
    # Someone created a revision under that name with other settings (and, forged, the planned digest).
    other = {k: val for k, val in templates[stable_name].items() if k != "revision"}
    other["scaling"] = {"minInstanceCount": 0, "maxInstanceCount": 1}
    if not forged:
        other["annotations"] = {**other["annotations"], "llm-serving.io/template-sha256": "0" * 64}
    prod.sim.revisions[f"{PROD_SERVICE}/revisions/{stable_name}"] = SimRevision(PROD_SERVICE, stable_name, other, True)
    with pytest.raises(pv.OperationError, match=f"revision {stable_name} already exists with another spec") as err:
        prod.engine.apply(plan(bumped))
    assert ("scaling: live [0, 1], this template's [1, 4]" in str(err.value)) is True
    assert ("template-sha256 '0000" in str(err.value)) is not forged


def test_the_plans_revisions_are_deterministic() -> None:
    a, b = plan(values(CLOUD_RUN_FIXTURE)), plan(values(CLOUD_RUN_FIXTURE))
    assert json.dumps(planned_templates(a), sort_keys=True) == json.dumps(planned_templates(b), sort_keys=True)
    for name, template in planned_templates(a).items():
        assert svc.template_digest(template) == template["annotations"]["llm-serving.io/template-sha256"]
        assert name.endswith(template["annotations"]["llm-serving.io/template-sha256"][:8])
