"""The Cloud Run dynamic providers (components/cloud_run/provider.py) on their own: every body the plan hands them
validates against run.v2's discovery document (googleapiclient/discovery_cache/documents/run.v2.json, the document
their client is built from with ``static_discovery=True``), the client builds the calls they name, their checks refuse
what run.v2 refuses, and their failure paths (etag conflicts, a revision that never becomes ready, a stuck operation,
a name taken by a revision with another spec, a service someone else owns, hand-made drift) each end in a clear
error or a converging retry. The rollout as a whole: tests/test_cloud_run_rollout.py, against the same simulator.
"""

from __future__ import annotations

import base64
import copy
import pickletools
import typing
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from components.cloud_run import provider as pv
from components.cloud_run import service as svc
from infra.targets.cloud_run.config import CloudRunPool, DirectVpcEgress

from .cloud_run_sim import CloudRunSim, Engine
from .conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_STACK, plan_run, resources
from .discovery import document
from .test_cloud_run import values

SERVICE = "pulumi-python:dynamic/cloudrun:Service"
REVISION = "pulumi-python:dynamic/cloudrun:Revision"
TRAFFIC = "pulumi-python:dynamic/cloudrun:Traffic"
PROD_SERVICE = "projects/acme-llm-prod/locations/us-central1/services/llm-prod"


def inv(stack: str) -> dict[str, Any]:
    return plan_run(stack).inventory.to_dict()


def inputs(stack: str, typ: str, name: str | None = None) -> dict[str, Any]:
    (r,) = [r for r in resources(inv(stack), typ) if name is None or r["name"] == name]
    return {k: v for k, v in r["inputs"].items() if k != "__provider"}


def provider(cls: type[pv._RunProvider], sim: CloudRunSim) -> Any:
    ticks = iter(range(1_000_000))
    return cls(transport_factory=lambda: sim, sleep=lambda s: None, clock=lambda: float(next(ticks)))


# ---- the bodies against run.v2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", [CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE])
def test_every_body_validates_against_run_v2(stack: str) -> None:
    doc = document("run", "v2")
    s = inputs(stack, SERVICE)
    create = {
        **s["service"],
        "template": s["initial_template"],
        "traffic": [{"type": svc.TRAFFIC_TO_LATEST, "percent": 100}],
    }
    assert doc.validate("GoogleCloudRunV2Service", create, required=("template", "template.containers[].image")) == []
    for r in resources(inv(stack), REVISION):
        t = r["inputs"]["template"]
        assert doc.validate("GoogleCloudRunV2RevisionTemplate", t, required=("revision", "containers[].image")) == []
        patch = {**r["inputs"]["service_fields"], "template": t, "traffic": inputs(stack, TRAFFIC)["traffic"]}
        assert doc.validate("GoogleCloudRunV2Service", patch) == []
    for entry in inputs(stack, TRAFFIC)["traffic"]:
        assert doc.validate("GoogleCloudRunV2TrafficTarget", entry, required=("type", "revision", "percent")) == []


def test_a_broken_body_fails_validation() -> None:
    doc = document("run", "v2")
    s = inputs(CLOUD_RUN_STACK, SERVICE)
    body = {**s["service"], "template": copy.deepcopy(s["initial_template"]), "traffic": [{"type": "REVISION"}]}
    body["ingres"] = "INGRESS_TRAFFIC_ALL"
    body["template"]["maxInstanceRequestConcurrency"] = "96"
    assert doc.validate("GoogleCloudRunV2Service", body) == [
        "$.ingres: unknown field (GoogleCloudRunV2Service has no field 'ingres'); did you mean 'ingress'?",
        '$.template.maxInstanceRequestConcurrency: expected integer (int32), got string "96"',
        '$.traffic[0].type: "REVISION" is not a value of GoogleCloudRunV2TrafficTarget.type; allowed: '
        + ", ".join(doc.enum_values("GoogleCloudRunV2TrafficTarget", "type")),
    ]


def test_config_choices_are_values_the_api_lists() -> None:
    doc = document("run", "v2")
    assert set(typing.get_args(CloudRunPool.model_fields["ingress"].annotation)) <= set(
        doc.enum_values("GoogleCloudRunV2Service", "ingress")
    )
    assert set(typing.get_args(DirectVpcEgress.model_fields["egress"].annotation)) <= set(
        doc.enum_values("GoogleCloudRunV2VpcAccess", "egress")
    )


def test_the_client_builds_every_call_the_providers_make() -> None:
    """The dotted method names are the run.v2 client's, and land on the documented REST paths."""
    from google.auth.credentials import AnonymousCredentials

    t = pv.DiscoveryTransport(credentials=AnonymousCredentials())
    body = {"template": {"containers": [{"image": "x"}]}}
    calls = {
        "projects.locations.services.create": ({"parent": "projects/p/locations/r", "serviceId": "s"}, body),
        "projects.locations.services.get": ({"name": "projects/p/locations/r/services/s"}, None),
        "projects.locations.services.patch": ({"name": "projects/p/locations/r/services/s"}, body),
        "projects.locations.services.delete": ({"name": "projects/p/locations/r/services/s"}, None),
        "projects.locations.services.revisions.get": (
            {"name": "projects/p/locations/r/services/s/revisions/s-1"},
            None,
        ),
        "projects.locations.operations.get": ({"name": "projects/p/locations/r/operations/o"}, None),
    }
    seen = {}
    for method, (params, b) in calls.items():
        req = t.request(method, params, b)
        url = urlparse(req.uri)
        seen[method] = (req.method, url.netloc, url.path, parse_qs(url.query).get("serviceId"))
    assert seen == {
        "projects.locations.services.create": ("POST", "run.googleapis.com", "/v2/projects/p/locations/r/services", ["s"]),
        "projects.locations.services.get": ("GET", "run.googleapis.com", "/v2/projects/p/locations/r/services/s", None),
        "projects.locations.services.patch": ("PATCH", "run.googleapis.com", "/v2/projects/p/locations/r/services/s", None),
        "projects.locations.services.delete": ("DELETE", "run.googleapis.com", "/v2/projects/p/locations/r/services/s", None),
        "projects.locations.services.revisions.get": (
            "GET", "run.googleapis.com", "/v2/projects/p/locations/r/services/s/revisions/s-1", None,
        ),
        "projects.locations.operations.get": ("GET", "run.googleapis.com", "/v2/projects/p/locations/r/operations/o", None),
    }  # fmt: skip


# ---- checks -------------------------------------------------------------------------------------------------------


def test_revision_check_refuses_what_cannot_be_its_revision() -> None:
    rp = pv.RevisionProvider()
    good = inputs(CLOUD_RUN_FIXTURE, REVISION, "cloud-run-revision-stable")
    assert rp.check({}, good).failures == []
    bad = copy.deepcopy(good)
    bad["template"]["revision"] = "llm-prod-other"
    bad["revision"] = "other-name"
    bad["template"]["scaling"]["maxInstanceCount"] = 5  # the digest annotation no longer matches
    assert [(f.property, f.reason) for f in rp.check({}, bad).failures] == [
        ("template", "template.revision must be 'other-name'"),
        ("revision", "must start with the service's name and '-': 'other-name'"),
        ("template", "llm-serving.io/template-sha256 is not the digest of the template"),
    ]


def test_traffic_check_refuses_what_run_v2_refuses() -> None:
    tp = pv.TrafficProvider()
    good = inputs(CLOUD_RUN_FIXTURE, TRAFFIC)
    assert tp.check({}, good).failures == []
    bad = copy.deepcopy(good)
    bad["traffic"][1].update(percent=5, tag="stable", revision=bad["traffic"][0]["revision"])
    assert [f.reason for f in tp.check({}, bad).failures] == [
        "percents sum to 105, not 100",
        f"a revision is named twice: {[bad['traffic'][0]['revision']] * 2}",
        "a tag is named twice: ['stable', 'stable']",
    ]


# ---- failure paths ------------------------------------------------------------------------------------------------


def test_a_conflicting_write_is_retried_from_a_fresh_read() -> None:
    sim = CloudRunSim()
    eng = Engine(sim)
    eng.apply(inv(CLOUD_RUN_FIXTURE))
    v = values(CLOUD_RUN_FIXTURE)
    sim.stale_etags = 1  # someone else writes the service between our read and our patch, once
    tp = provider(pv.TrafficProvider, sim)
    news = copy.deepcopy(inputs(CLOUD_RUN_FIXTURE, TRAFFIC))
    news["traffic"][0]["percent"], news["traffic"][1]["percent"] = 90, 10
    tp.update("t", inputs(CLOUD_RUN_FIXTURE, TRAFFIC), news)
    assert [e["percent"] for e in sim.routed(PROD_SERVICE)] == [90, 10]
    assert [m for m, _ in sim.errors] == ["projects.locations.services.patch"]  # the one conflict, then success
    sim.stale_etags = pv.CONFLICT_RETRIES
    with pytest.raises(pv.OperationError, match="kept changing under this update"):
        tp.update("t", news, inputs(CLOUD_RUN_FIXTURE, TRAFFIC))
    assert v  # the fixture values are untouched


def test_a_revision_that_never_starts_fails_its_apply_and_is_named_on_the_retry() -> None:
    stable_image = inputs(CLOUD_RUN_FIXTURE, REVISION, "cloud-run-revision-canary")["template"]["containers"][0][
        "image"
    ]
    sim = CloudRunSim(failing_images=(stable_image,))  # the canary's image cannot start
    eng = Engine(sim)
    with pytest.raises(
        pv.OperationError, match=r"create revision llm-prod-qwen3-8b-fp8-2026-11-20-1-\w+ failed: .*not ready"
    ):
        eng.apply(inv(CLOUD_RUN_FIXTURE))
    # Nothing moved: stable still takes everything, by name.
    (entry,) = sim.routed(PROD_SERVICE)
    assert entry["percent"] == 100 and "2026-11-02-1" in entry["revision"]
    # The retry finds the failed revision by its name and says what to do, instead of a 409.
    with pytest.raises(
        pv.OperationError, match=r"exists but is not ready \(CONDITION_FAILED: .*gcloud run revisions delete"
    ):
        eng.apply(inv(CLOUD_RUN_FIXTURE))
    assert [m for m, _ in sim.errors] == []  # the failure was the revision's start, never a refused call


def test_a_stuck_operation_is_bounded() -> None:
    sim = CloudRunSim(polls_per_operation=10_000)
    sp = provider(pv.ServiceProvider, sim)
    props = inputs(CLOUD_RUN_STACK, SERVICE)
    with pytest.raises(pv.OperationError, match=rf"not done after {props['timeouts']['create_seconds']} s"):
        sp.create(props)


def test_a_service_of_the_same_name_is_adopted_only_when_it_is_this_stacks() -> None:
    sim = CloudRunSim()
    Engine(sim).apply(inv(CLOUD_RUN_STACK))
    sp = provider(pv.ServiceProvider, sim)
    props = inputs(CLOUD_RUN_STACK, SERVICE)
    # An earlier apply created it and failed before recording it: the retry adopts it.
    assert sp.create(props).id == "projects/acme-llm-dev/locations/us-central1/services/llm-dev"
    other = copy.deepcopy(props)
    other["service"]["labels"] = {"team": "someone-else"}
    sim.services["projects/acme-llm-dev/locations/us-central1/services/llm-dev"].fields["labels"] = {"team": "x"}
    with pytest.raises(pv.OperationError, match="already exists and is not this stack's"):
        sp.create(props)


def test_refresh_shows_a_hand_made_split_as_drift() -> None:
    sim = CloudRunSim()
    eng = Engine(sim)
    eng.apply(inv(CLOUD_RUN_FIXTURE))
    live = sim.services[PROD_SERVICE]
    live.traffic = [dict(e, percent=p) for e, p in zip(live.traffic, (50, 50), strict=True)]  # a console edit
    tp = provider(pv.TrafficProvider, sim)
    recorded = inputs(CLOUD_RUN_FIXTURE, TRAFFIC)
    refreshed = tp.read("t", recorded).outs
    assert [e["percent"] for e in refreshed["traffic"]] == [50, 50]
    assert tp.diff("t", refreshed, recorded).changes is True  # the next up restores 100 / 0
    assert pv.RevisionProvider().diff("r", recorded, recorded).changes is False


def test_deleting_a_revision_resource_calls_nothing() -> None:
    sim = CloudRunSim()
    Engine(sim).apply(inv(CLOUD_RUN_FIXTURE))
    before = len(sim.calls)
    rp = provider(pv.RevisionProvider, sim)
    rp.delete("r", inputs(CLOUD_RUN_FIXTURE, REVISION, "cloud-run-revision-canary"))
    provider(pv.TrafficProvider, sim).delete("t", inputs(CLOUD_RUN_FIXTURE, TRAFFIC))
    assert len(sim.calls) == before and sim.revision_count(PROD_SERVICE) == 2


# ---- the pickled providers -------------------------------------------------------------------------------------


def test_provider_pickles_are_by_reference_small_and_not_secret() -> None:
    import dill

    expected = {SERVICE: pv.ServiceProvider, REVISION: pv.RevisionProvider, TRAFFIC: pv.TrafficProvider}
    for stack in (CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE):
        for r in inv(stack)["resources"]:
            if r["type"] not in expected:
                continue
            value = r["inputs"]["__provider"]
            assert value != "[secret]"
            strings = {arg for _, arg, _ in pickletools.genops(base64.b64decode(value)) if isinstance(arg, str)}
            assert "components.cloud_run.provider" in strings  # the class by module + name, not by value
            assert not strings & {"_create_code", "_create_function", "CodeType", "marshal"}
            assert len(value) < 400
            loaded = dill.loads(base64.b64decode(value))
            assert type(loaded) is expected[r["type"]]
            assert loaded.__getstate__() == {
                "_transport_factory": None,
                "_poll": pv.PollPolicy(),
                "_sleep": None,
                "_clock": None,
            }  # production: the real transport (ADC at call time), the real clock
