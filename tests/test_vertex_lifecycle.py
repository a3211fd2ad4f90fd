"""Vertex AI deployments that are interrupted, retried, refreshed or imported never leave an orphan or a duplicate
(issue 25): the real providers, with the staging-vertex stack's planned inputs, driven through the real
``googleapiclient`` transport against the fake Vertex region of tests/vertex_fake.py (a local HTTP server speaking
aiplatform.v1's shapes and its long-running-operation model), in the order the Pulumi engine calls them.

A "``pulumi up``" here is what the engine does for a resource with no state: ``check``, then ``create``; a failed
create records nothing (the Python dynamic provider has no partial state), so the next ``up`` creates again. The
simulator's clock is the providers' clock: a deployment "takes" 2,500 s while the provider waits 1,790 s (the staging
pools' bound: deploymentTimeout 890 s + the 900 s provisioning margin), as in the issue's measurement.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from components.vertex import provider as pv
from components.vertex import requests as rq
from tests.discovery import DiscoveryDocument, document
from tests.test_vertex_requests import floats
from tests.vertex_fake import Clock, FakeVertexServer, VertexSim, fake_vertex

from .conftest import plan_run, resources

STACK = "staging-vertex"
DEPLOYED = "pulumi-python:dynamic/vertex:DeployedModel"
TRAFFIC = "pulumi-python:dynamic/vertex:EndpointTraffic"
PROJECT, REGION = "acme-llm-staging", "us-central1"
ENDPOINT = f"projects/{PROJECT}/locations/{REGION}/endpoints/llm-staging"
RESERVATION = "projects/acme-capacity/zones/us-central1-a/reservations/shared-h100-staging-vertex"
UPLOAD, DEPLOY = "projects.locations.models.upload", "projects.locations.endpoints.deployModel"


@pytest.fixture(scope="module")
def ai() -> DiscoveryDocument:
    return document("aiplatform", "v1")


def planned(role: str) -> dict[str, Any]:
    """The DeployedModel inputs of the staging-vertex plan, as the engine hands them (numbers as floats)."""
    (r,) = [r for r in resources(plan_run(STACK).inventory.to_dict(), DEPLOYED) if r["name"] == f"vertex-{role}"]
    return floats({k: v for k, v in r["inputs"].items() if k != "__provider"})


def planned_traffic() -> dict[str, Any]:
    (r,) = resources(plan_run(STACK).inventory.to_dict(), TRAFFIC)
    return floats({k: v for k, v in r["inputs"].items() if k != "__provider"})


@pytest.fixture
def vertex(ai: DiscoveryDocument) -> Iterator[tuple[FakeVertexServer, Clock]]:
    # staging-vertex's reservation holds 5 machines (stable max 2 + canary max 1 + replacements 1 + 1).
    with fake_vertex(ai, reservations={RESERVATION: 5}, deploy_seconds=2500) as (server, clock):
        server.sim.add_endpoint(ENDPOINT)
        yield server, clock


def transport(server: FakeVertexServer, clock: Clock) -> Callable[[str], pv.DiscoveryTransport]:
    from google.auth.credentials import AnonymousCredentials

    def make(region: str) -> pv.DiscoveryTransport:
        with warnings.catch_warnings():  # google.api_core's notice that it will drop Python 3.11 in 2027
            warnings.simplefilter("ignore", FutureWarning)
            return pv.DiscoveryTransport(
                region, credentials=AnonymousCredentials(), api_endpoint=server.url, retry_sleep=clock.sleep
            )

    return make


def provider(cls: type, server: FakeVertexServer, clock: Clock, wrap: Callable[[Any], Any] | None = None) -> Any:
    factory = transport(server, clock)
    return cls(transport_factory=(lambda r: wrap(factory(r))) if wrap else factory, sleep=clock.sleep, clock=clock)


def pulumi_up(p: pv.DeployedModelProvider, props: dict[str, Any]) -> Any:
    """One ``pulumi up`` of a resource without state: check, then create."""
    checked = p.check({}, props)
    assert checked.failures == []
    return p.create(checked.inputs)


def one_of_each(sim: VertexSim, props: Mapping[str, Any]) -> None:
    """Exactly this pool's model and deployment exist, under its caller-chosen ids, and nothing else."""
    assert list(sim.models) == [rq.model_name(PROJECT, REGION, props["model_id"])]
    assert [d["id"] for d in sim.deployed(ENDPOINT)] == [props["deployed_model_id"]]
    assert not sim.deploying.get(ENDPOINT)


# ---- a deployment that outlives the wait, then a second `pulumi up` -------------------------------------------


def test_a_deploy_outliving_the_wait_is_resumed_by_the_next_up(vertex: tuple[FakeVertexServer, Clock]) -> None:
    server, clock = vertex
    sim = server.sim
    props = planned("stable")
    assert props["timeouts"]["deploy_seconds"] == 890 + 900  # the wait the issue measured: 1,790 s
    p = provider(pv.DeployedModelProvider, server, clock)
    with pytest.raises(pv.OperationTimeout, match=r"not done after 1790 s; it keeps running server-side") as err:
        pulumi_up(p, props)
    assert f"finds model {props['model_id']} and deployed model {props['deployed_model_id']}" in str(err.value)
    # Nothing was cancelled or deleted: the model is there, its deployment still running (2,500 s > 1,790 s).
    assert sim.count("projects.locations.models.delete") == 0 and not any("cancel" in m for m in sim.methods())
    assert list(sim.deploying[ENDPOINT]) == [props["deployed_model_id"]]
    started = clock()
    # The next `pulumi up`: the same create again. It finds the model and the running deployment and waits.
    created = pulumi_up(p, props)
    assert (sim.count(UPLOAD), sim.count(DEPLOY)) == (1, 1)  # no second upload, no second deploy
    one_of_each(sim, props)
    assert clock() - started <= 2500 - 1790 + 60  # it waited for the rest of the same operation, not a new one
    assert created.id == f"{ENDPOINT}/deployedModels/{props['deployed_model_id']}"
    # Converged: the recorded state diffs clean against the program, and a third `up` changes nothing.
    assert p.diff(created.id, floats(created.outs), props).changes is False
    assert p.read(created.id, floats(created.outs)).outs["deployed_model_id"] == props["deployed_model_id"]


# ---- a POST whose response is lost after the server applied it ------------------------------------------------


@pytest.mark.parametrize("method", [UPLOAD, DEPLOY])
@pytest.mark.parametrize("kind", ["lost", "503"])
def test_a_lost_post_response_makes_no_duplicate(
    vertex: tuple[FakeVertexServer, Clock], method: str, kind: str
) -> None:
    server, clock = vertex
    server.sim.deploy_seconds = 600
    server.fault(method, kind)
    props = planned("stable")
    pulumi_up(provider(pv.DeployedModelProvider, server, clock), props)
    # The client library sent the POST twice (its own retry); the server applied the first and refused the second
    # (409 ALREADY_EXISTS: the caller-chosen id is taken), and the provider found its own resource.
    posts = [(f, m) for verb, m, f in server.requests if m == method]
    assert posts == [(kind, method), ("", method)]
    assert server.sim.count(method) == 2
    one_of_each(server.sim, props)


def test_without_a_caller_chosen_id_the_same_lost_response_duplicates(vertex: tuple[FakeVertexServer, Clock]) -> None:
    """The control: the simulator and the client's retry are real, so an upload without ``modelId`` whose response
    is lost leaves two models (what the provider did before caller-chosen ids)."""
    server, clock = vertex
    server.fault(UPLOAD, "lost")
    body = planned("stable")["upload_model_request"]
    transport(server, clock)(REGION).call(
        UPLOAD, {"parent": f"projects/{PROJECT}/locations/{REGION}"}, pv.normalized(body)
    )
    clock.sleep(200)
    server.sim.handle("projects.locations.models.operations.list", {"name": "projects/x/locations/y/models/z"}, None)
    assert len(server.sim.models) == 2


def test_429_and_503_on_reads_are_retried_by_the_client_library(vertex: tuple[FakeVertexServer, Clock]) -> None:
    server, clock = vertex
    server.sim.deploy_seconds = 600
    server.fault("projects.locations.endpoints.get", "429", times=2)
    server.fault("projects.locations.models.operations.get", "503")
    props = planned("canary")
    pulumi_up(provider(pv.DeployedModelProvider, server, clock), props)
    faults = [f for _, _, f in server.requests if f]
    assert faults == ["503", "429", "429"]  # the upload's first poll, then the endpoint reads
    one_of_each(server.sim, props)


# ---- Ctrl-C between the upload and the deployment -------------------------------------------------------------


class Interrupt:
    """A transport that raises KeyboardInterrupt on the first call of ``method`` (the provider process is stopped
    there: Ctrl-C, a killed CI runner), before the request leaves."""

    def __init__(self, inner: Any, method: str, hits: list[int]):
        self.inner, self.method, self.hits = inner, method, hits

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Any:
        if method == self.method and not self.hits:
            self.hits.append(1)
            raise KeyboardInterrupt
        return self.inner.call(method, params, body)


def test_ctrl_c_between_upload_and_deploy_resumes(vertex: tuple[FakeVertexServer, Clock]) -> None:
    server, clock = vertex
    server.sim.deploy_seconds = 600
    props = planned("stable")
    hits: list[int] = []
    interrupted = provider(pv.DeployedModelProvider, server, clock, wrap=lambda t: Interrupt(t, DEPLOY, hits))
    with pytest.raises(KeyboardInterrupt):
        pulumi_up(interrupted, props)
    # The model is uploaded; no deployment: Pulumi recorded only a pending create (its inputs: the ids).
    assert list(server.sim.models) == [rq.model_name(PROJECT, REGION, props["model_id"])]
    assert server.sim.deployed(ENDPOINT) == [] and server.sim.count(DEPLOY) == 0
    # The next `pulumi up` resumes: no second upload.
    created = pulumi_up(provider(pv.DeployedModelProvider, server, clock), props)
    assert (server.sim.count(UPLOAD), server.sim.count(DEPLOY)) == (1, 1)
    one_of_each(server.sim, props)
    assert created.outs["model_name"] == rq.model_name(PROJECT, REGION, props["model_id"])


def test_a_pending_create_is_recovered_by_reading_its_id(vertex: tuple[FakeVertexServer, Clock]) -> None:
    """Ctrl-C after the deploy was sent: Pulumi keeps a pending create. ``pulumi refresh --import-pending-creates
    <urn> <id>`` reads the resource by its id (known from the plan), which finds the deployment once Vertex finishes
    it: nothing is created twice, nothing is left outside the state."""
    server, clock = vertex
    server.sim.deploy_seconds = 600
    props = planned("stable")
    hits: list[int] = []

    class StopAfterDeploy(Interrupt):
        def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Any:
            out = self.inner.call(method, params, body)
            if method == DEPLOY:
                raise KeyboardInterrupt
            return out

    with pytest.raises(KeyboardInterrupt):
        pulumi_up(
            provider(pv.DeployedModelProvider, server, clock, wrap=lambda t: StopAfterDeploy(t, DEPLOY, hits)), props
        )
    resource_id = rq.deployed_model_resource_id(ENDPOINT, props["deployed_model_id"])
    p = provider(pv.DeployedModelProvider, server, clock)
    assert p.read(resource_id, {}).id == ""  # still deploying: not there yet (refresh would clear, not import)
    clock.sleep(600)
    read = p.read(resource_id, {})
    assert read.id == resource_id and read.inputs is not None
    assert (server.sim.count(UPLOAD), server.sim.count(DEPLOY)) == (1, 1)
    # The imported inputs are the program's but for what Vertex never returns: the uploading account (recorded,
    # changed in place without a call).
    diff = p.diff(resource_id, floats(read.outs), props)
    assert pv.changed_paths(floats(read.outs), props, p.INPUTS) == ["upload_model_request.serviceAccount"]
    assert diff.replaces == []


# ---- read(id, {}) for each resource type -------------------------------------------------------------------


def test_read_by_id_alone_for_each_resource_type(vertex: tuple[FakeVertexServer, Clock], ai: DiscoveryDocument) -> None:
    server, clock = vertex
    server.sim.deploy_seconds = 600
    deployer = provider(pv.DeployedModelProvider, server, clock)
    outs = {role: deployer.create(planned(role)).outs for role in ("stable", "canary")}
    traffic = provider(pv.EndpointTrafficProvider, server, clock)
    tprops = planned_traffic()
    tcreated = traffic.create(tprops)

    # DeployedModel: projects/<p>/locations/<r>/endpoints/<e>/deployedModels/<id>
    for role in ("stable", "canary"):
        rid = f"{ENDPOINT}/deployedModels/{outs[role]['deployed_model_id']}"
        read = deployer.read(rid, {})
        assert read.id == rid and read.inputs is not None
        want = planned(role)
        assert {k: read.inputs[k] for k in ("project", "region", "endpoint", "model_id", "deployed_model_id")} == {
            k: want[k] for k in ("project", "region", "endpoint", "model_id", "deployed_model_id")
        }
        assert floats(read.inputs["deployed_model"]) == want["deployed_model"]
        assert floats(read.inputs["upload_model_request"]["model"]) == want["upload_model_request"]["model"]
        assert read.inputs["timeouts"] == {"upload_seconds": 1800, "deploy_seconds": 1790, "teardown_seconds": 1800}
    # EndpointTraffic: <endpoint>/trafficSplit; the pools come from the models' pool labels.
    tread = traffic.read(tcreated.id, {})
    assert tread.id == f"{ENDPOINT}/trafficSplit" and tread.inputs is not None
    assert tread.inputs["weights"] == {"canary": 10, "stable": 90}
    assert tread.inputs["deployed_model_ids"] == tprops["deployed_model_ids"]
    assert tread.inputs["inference_timeout_seconds"] == 207
    assert traffic.diff(tcreated.id, floats(tread.outs), tprops).changes is False
    # Gone is gone: an id of nothing reads as absent, a malformed one is refused with the expected shape.
    assert deployer.read(f"{ENDPOINT}/deployedModels/1000000001", {}).id == ""
    with pytest.raises(pv.OperationError, match="not a deployed model id"):
        deployer.read("1000000001", {})


# ---- replacing a deployment on a full reservation -----------------------------------------------------------


def _new_release(props: dict[str, Any]) -> dict[str, Any]:
    """The same pool with another release: new content, so new ids (a replacement)."""
    news = copy.deepcopy(props)
    news["upload_model_request"]["model"]["artifactUri"] = news["upload_model_request"]["model"]["artifactUri"].replace(
        "a77a90ec", "b88b01fd"
    )
    news["model_id"], news["deployed_model_id"] = "llm-staging-stable-0000000000aa", "1999999999"
    return news


def test_create_first_on_a_full_reservation_fails_and_leaves_nothing(vertex: tuple[FakeVertexServer, Clock]) -> None:
    """3 reserved machines, stable at min 1 and canary at min 1 deployed (2 in use), and a replacement that needs
    2 more: the rule refuses such a stack before anything is sent (test_vertex_target); here the provider meets the
    full reservation anyway (the count was changed by hand): the new deployment fails RESOURCE_EXHAUSTED, its model
    is removed, the old deployment keeps serving."""
    server, clock = vertex
    sim = server.sim
    sim.deploy_seconds, sim.reservations[RESERVATION] = 600, 3
    p = provider(pv.DeployedModelProvider, server, clock)
    old = p.create(planned("stable"))
    p.create(planned("canary"))
    news = _new_release(planned("stable"))
    news["deployed_model"]["dedicatedResources"]["minReplicaCount"] = 2.0
    assert p.diff(old.id, floats(old.outs), news).replaces == ["deployed_model_id", "model_id", "upload_model_request"]
    with pytest.raises(
        pv.OperationError,
        match=r"no free machine in reservation .*; removed what this create made: model llm-staging-stable-0000000000aa",
    ):
        p.create(news)
    assert sorted(m.rsplit("/", 1)[-1] for m in sim.models) == sorted(
        [planned("stable")["model_id"], planned("canary")["model_id"]]
    )
    assert sorted(d["id"] for d in sim.deployed(ENDPOINT)) == sorted(
        [planned("stable")["deployed_model_id"], planned("canary")["deployed_model_id"]]
    )
    assert sim.machines_in_use(RESERVATION) == 2


def test_delete_first_replaces_on_a_full_reservation(vertex: tuple[FakeVertexServer, Clock]) -> None:
    """The same full reservation with ``replacement: delete_first``: the diff asks Pulumi to delete before replace,
    the old deployment goes first (its 90 % moves to the canary meanwhile), then the new one fits."""
    server, clock = vertex
    sim = server.sim
    sim.deploy_seconds, sim.reservations[RESERVATION] = 600, 2
    p = provider(pv.DeployedModelProvider, server, clock)
    olds = {role: p.create({**planned(role), "replacement": "delete_first"}) for role in ("stable", "canary")}
    traffic = provider(pv.EndpointTrafficProvider, server, clock)
    split = traffic.create(planned_traffic())
    stable_old = olds["stable"]
    news = {**_new_release(planned("stable")), "replacement": "delete_first"}
    diff = p.diff(stable_old.id, floats(stable_old.outs), news)
    assert diff.delete_before_replace is True and "model_id" in (diff.replaces or [])
    # The engine's order for deleteBeforeReplace: delete the old, then create the new.
    p.delete(stable_old.id, floats(stable_old.outs))
    canary_id = planned("canary")["deployed_model_id"]
    assert sim.endpoints[ENDPOINT]["trafficSplit"] == {canary_id: 100}  # 10 of the remaining 10 -> 100
    created = p.create(news)
    assert sorted(d["id"] for d in sim.deployed(ENDPOINT)) == sorted([canary_id, "1999999999"])
    assert sim.machines_in_use(RESERVATION) == 2
    # EndpointTraffic then sets the split with the successor's id.
    tnews = {**planned_traffic(), "deployed_model_ids": {"stable": "1999999999", "canary": canary_id}}
    traffic.update(split.id, split.outs, tnews)
    assert sim.endpoints[ENDPOINT]["trafficSplit"] == {"1999999999": 90, canary_id: 10}
    assert created.outs["model_name"].endswith("/llm-staging-stable-0000000000aa")


# ---- the documented ids are the ones read() takes ---------------------------------------------------------------


def _doc_ids() -> dict[str, str]:
    """type -> id template from docs/vertex.md's refresh/import table."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "vertex.md").read_text()
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`") and ":" in cells[1] and cells[2].startswith("`projects/"):
            out[cells[1].strip("`")] = cells[2].strip("`")
    return out


def test_every_documented_id_is_read_by_its_provider(vertex: tuple[FakeVertexServer, Clock]) -> None:
    server, clock = vertex
    server.sim.deploy_seconds = 600
    ids = _doc_ids()
    assert set(ids) == {
        "gcp:vertex/aiEndpoint:AiEndpoint",
        DEPLOYED,
        TRAFFIC,
    }
    props = planned("stable")
    fill = {
        "<p>": PROJECT,
        "<r>": REGION,
        "<endpoint_id>": "llm-staging",
        "<deployed_model_id>": props["deployed_model_id"],
    }

    def concrete(template: str) -> str:
        for k, v in fill.items():
            template = template.replace(k, v)
        return template

    assert concrete(ids["gcp:vertex/aiEndpoint:AiEndpoint"]) == ENDPOINT == props["endpoint"]
    deployer = provider(pv.DeployedModelProvider, server, clock)
    created = deployer.create(props)
    assert concrete(ids[DEPLOYED]) == created.id and deployer.read(concrete(ids[DEPLOYED]), {}).id == created.id
    traffic = provider(pv.EndpointTrafficProvider, server, clock)
    tprops = {
        **planned_traffic(),
        "weights": {"stable": 100.0},
        "deployed_model_ids": {"stable": props["deployed_model_id"]},
    }
    tcreated = traffic.create(tprops)
    assert concrete(ids[TRAFFIC]) == tcreated.id and traffic.read(concrete(ids[TRAFFIC]), {}).id == tcreated.id


def test_a_refresh_shows_hand_made_drift_but_not_vertexs_normalisation(vertex: tuple[FakeVertexServer, Clock]) -> None:
    server, clock = vertex
    server.sim.deploy_seconds = 600
    p = provider(pv.DeployedModelProvider, server, clock)
    props = planned("stable")
    created = p.create(props)
    (live,) = server.sim.deployed(ENDPOINT)
    model = server.sim.models[rq.model_name(PROJECT, REGION, props["model_id"])]
    # What Vertex may add on its own: a default in the container spec, an autoscaling default.
    model["containerSpec"]["grpcPorts"] = []
    live["dedicatedResources"]["autoscalingMetricSpecs"].append(
        {"metricName": "aiplatform.googleapis.com/prediction/online/cpu/utilization", "target": 60}
    )
    refreshed = p.read(created.id, floats(created.outs))
    assert p.diff(created.id, floats(refreshed.outs), props).changes is False
    # A hand-made change of the replica bounds is drift: an update (mutateDeployedModel), never a replacement.
    live["dedicatedResources"]["maxReplicaCount"] = 5
    drifted = p.diff(created.id, floats(p.read(created.id, floats(created.outs)).outs), props)
    assert (drifted.changes, drifted.replaces) == (True, [])
