"""The Google Cloud resources of every shipped stack against Google's own API schemas (the discovery documents
google-api-python-client ships, read through ``tests/discovery.py``; the Pulumi-to-API mapping and the proto3
JSON model are in ``tests/api_mapping.py``):

1. every dashboard's ``dashboardJson`` is a valid monitoring.v1 ``Dashboard``;
2. every enum-valued input holds a value the API lists (an explicit Pulumi-path -> API-path table), and no
   enum-looking input escapes the table;
3. nothing the program renders comes back from the API changed: dashboards hold no default-valued fields (the
   API drops them, and the provider compares the JSON verbatim), and alert-policy durations are canonical;
4. every chart line is named (``DataSet.legendTemplate``).

Each check is also run on a deliberately broken copy to show it fails, with the message a reader would get.
"""

from __future__ import annotations

import copy
import json
import re
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from infra.config.accelerator import GpuSharing
from infra.targets.gke.config import gke_section
from infra.targets.gke.config.platform import GkeConfig
from tests import api_mapping as am
from tests.discovery import DiscoveryDocument, document

from .conftest import CLOUD_RUN_FIXTURE, CLOUD_RUN_STACK, STACKS, planned, resources

Inventory = dict[str, Any]


def inventory(stack: str) -> Inventory:
    return planned(stack)[2]


@pytest.fixture(scope="module")
def inventories() -> dict[str, Inventory]:
    """Every shipped stack and the Cloud Run fixture: the enum tables cover both targets."""
    return {stack: inventory(stack) for stack in (*STACKS, CLOUD_RUN_STACK, CLOUD_RUN_FIXTURE)}


@pytest.fixture(scope="module")
def dashboards_v1() -> DiscoveryDocument:
    return document("monitoring", "v1")


@pytest.fixture(scope="module")
def monitoring_v3() -> DiscoveryDocument:
    return document("monitoring", "v3")


def dashboards(inv: Inventory) -> list[tuple[str, Any]]:
    """(resource name, parsed dashboardJson) of every dashboard of an inventory."""
    return [(r["name"], json.loads(r["inputs"]["dashboardJson"])) for r in resources(inv, am.DASHBOARD)]


def staging_dashboard() -> Any:
    ((_, body),) = dashboards(inventory("staging"))
    return body


# ---- the tables themselves ---------------------------------------------------------------------------------------


def test_every_resource_mapping_names_the_body_its_create_call_takes() -> None:
    """Each row's schema is what the provider's create call sends (directly or at ``body_path``): the mapping
    starts from the right message."""
    for typ, r in am.RESOURCES.items():
        doc = r.doc()
        body = doc.request_schema(r.create_method)
        assert body is not None, typ
        if r.body_path:
            node = doc.field(body, r.body_path)
            while node.get("type") == "array":
                node = doc.schema(node["items"]["$ref"])
            assert node.get("id") == r.schema, (typ, body, r.body_path, node.get("id"))
        else:
            assert body == r.schema, (typ, body)


def test_every_mapped_api_path_is_an_enum_of_the_api() -> None:
    """A row whose API path is wrong or no enum fails here, before any value is compared."""
    for f in am.ENUM_FIELDS:
        allowed = f.allowed()
        assert len(allowed) >= (1 if f.single_value else 2) and all(isinstance(v, str) for v in allowed), f
    assert len({(f.resource_type, f.input_path) for f in am.ENUM_FIELDS}) == len(am.ENUM_FIELDS), "duplicate rows"


def test_fields_deliberately_left_unchecked_are_really_no_api_enums() -> None:
    """The exemptions stay honest: if Google turns one of these into an enum, this fails and the field moves to
    ``ENUM_FIELDS``."""
    for n in am.NOT_API_ENUMS:
        r = am.RESOURCES[n.resource_type]
        doc = r.doc()
        if n.api_path is None:
            with pytest.raises(KeyError):
                doc.field(r.schema, n.input_path)
        else:
            node = doc.field(r.schema, n.api_path)
            assert node.get("type") == "string" and "enum" not in node, (n, node)


# ---- 1. dashboards validate as monitoring.v1 Dashboard ---------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_dashboard_json_validates_against_the_dashboards_api(stack: str, dashboards_v1: DiscoveryDocument) -> None:
    found = dashboards(inventory(stack))
    assert found, f"{stack} has no dashboard"
    for name, body in found:
        assert dashboards_v1.validate("Dashboard", body) == [], name


def test_a_broken_dashboard_fails_validation(dashboards_v1: DiscoveryDocument) -> None:
    body = staging_dashboard()
    data_set = body["mosaicLayout"]["tiles"][0]["widget"]["xyChart"]["dataSets"][0]
    data_set["legendTemplat"] = "p50"
    data_set["plotType"] = "LINES"
    body["mosaicLayout"]["tiles"][0]["width"] = "24"
    assert dashboards_v1.validate("Dashboard", body) == [
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].legendTemplat: unknown field (DataSet has no field "
        "'legendTemplat'); did you mean 'legendTemplate'?",
        '$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].plotType: "LINES" is not a value of DataSet.plotType; '
        "allowed: " + ", ".join(dashboards_v1.enum_values("DataSet", "plotType")),
        '$.mosaicLayout.tiles[0].width: expected integer (int32), got string "24"',
    ]


# ---- 2. enum-valued inputs hold values the API lists ------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_enum_inputs_hold_values_the_api_lists(stack: str) -> None:
    assert am.enum_problems(stack, inventory(stack)) == []


def test_a_value_the_api_does_not_list_fails() -> None:
    """The Pulumi docstring of ``Disk.access_mode`` lists ``READ_ONLY_SINGLE``, which compute.v1 does not have;
    Kubernetes' spelling of a taint effect is not GKE's."""
    broken = copy.deepcopy(inventory("staging"))
    (disk,) = resources(broken, am.DISK)
    disk["inputs"]["accessMode"] = "READ_ONLY_SINGLE"
    pool = next(r for r in resources(broken, am.NODE_POOL) if "taints" in r["inputs"]["nodeConfig"])
    pool["inputs"]["nodeConfig"]["taints"][0]["effect"] = "NoSchedule"
    compute, container = document("compute", "v1"), document("container", "v1")
    assert am.enum_problems("staging", broken) == [
        f"staging {pool['name']} nodeConfig.taints[0].effect: 'NoSchedule' is not a value of container.v1 "
        f"NodePool.config.taints.effect; allowed: {', '.join(container.enum_values('NodeTaint', 'effect'))}",
        f"staging {disk['name']} accessMode: 'READ_ONLY_SINGLE' is not a value of compute.v1 Disk.accessMode; "
        f"allowed: {', '.join(compute.enum_values('Disk', 'accessMode'))}",
    ]


def test_no_enum_like_input_escapes_the_table(inventories: dict[str, Inventory]) -> None:
    """Every UPPER_CASE input (and every input whose same-named API field is an enum) is either mapped and
    checked, or exempted with a reason: a new enum-valued input cannot slip past the check unmapped."""
    unmapped = set().union(*(am.unmapped_enum_like_inputs(inv) for inv in inventories.values()))
    assert sorted(unmapped) == [], "map each in api_mapping.ENUM_FIELDS, or exempt it in NOT_API_ENUMS with a reason"


def test_an_unmapped_enum_like_input_is_reported() -> None:
    broken = copy.deepcopy(inventory("prod"))
    (cluster,) = resources(broken, am.CLUSTER)
    cluster["inputs"]["privateIpv6GoogleAccess"] = "PRIVATE_IPV6_GOOGLE_ACCESS_BIDIRECTIONAL"
    cluster["inputs"]["binaryAuthorization"] = {"evaluationMode": "disabled"}
    assert sorted(am.unmapped_enum_like_inputs(broken)) == [
        (am.CLUSTER, "binaryAuthorization.evaluationMode", "disabled"),  # an API enum by the same path
        (am.CLUSTER, "privateIpv6GoogleAccess", "PRIVATE_IPV6_GOOGLE_ACCESS_BIDIRECTIONAL"),  # UPPER_CASE
    ]


def test_every_mapped_path_the_stacks_use_is_found(inventories: dict[str, Inventory]) -> None:
    """Guards the extraction: a row the shipped stacks exercise must find its values (a typo in a Pulumi path
    would otherwise check nothing). Rows no stack sets today are listed here by name."""
    unused = {
        (am.RESERVATION, "shareSettings.shareType"),
        (am.NODE_POOL, "nodeConfig.guestAccelerators[].gpuSharingConfig.gpuSharingStrategy"),
    }
    found = am.enum_values_found(inventories)
    assert {(f.resource_type, f.input_path) for f, values in found.items() if not values} == unused, (
        "a row finds no value in any stack (a wrong Pulumi path?), or a listed row is now used (drop it from unused)"
    )


#: Config choices the program passes verbatim into an enum-valued input: the config schema's Literal must only
#: offer values the API lists (this covers values no shipped stack uses, e.g. RAPID, DEFAULT, TIME_SHARING).
CONFIG_CHOICES: tuple[tuple[type[BaseModel], str, str, str], ...] = (
    (GkeConfig, "release_channel", am.CLUSTER, "releaseChannel.channel"),
    (
        GkeConfig,
        "gpu_driver_version",
        am.NODE_POOL,
        "nodeConfig.guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion",
    ),
    (GpuSharing, "strategy", am.NODE_POOL, "nodeConfig.guestAccelerators[].gpuSharingConfig.gpuSharingStrategy"),
)


def literal_choices(model: type[BaseModel], field: str) -> tuple[str, ...]:
    annotation = model.model_fields[field].annotation
    assert typing.get_origin(annotation) is typing.Literal, f"{model.__name__}.{field} is not a Literal"
    return typing.get_args(annotation)


def config_choice_problems(choices: tuple[tuple[type[BaseModel], str, str, str], ...]) -> list[str]:
    rows = {(f.resource_type, f.input_path): f for f in am.ENUM_FIELDS}
    problems = []
    for model, field, typ, path in choices:
        row = rows[(typ, path)]
        for value in literal_choices(model, field):
            if value not in row.allowed():
                problems.append(f"{model.__name__}.{field} offers {value!r}, not a value of {row.describe()}")
    return problems


def test_config_choices_are_values_the_api_lists() -> None:
    assert config_choice_problems(CONFIG_CHOICES) == []


@pytest.mark.parametrize("stack", STACKS)
def test_config_choices_reach_the_inputs_verbatim(stack: str) -> None:
    """The premise of the config check: the configured value is the input value, unchanged."""
    config, _, inv = planned(stack)
    gke = gke_section(config)
    assert gke is not None
    (cluster,) = resources(inv, am.CLUSTER)
    assert cluster["inputs"]["releaseChannel"]["channel"] == gke.release_channel
    for pool in resources(inv, am.NODE_POOL):
        for acc in pool["inputs"]["nodeConfig"].get("guestAccelerators", []):
            assert acc["gpuDriverInstallationConfig"]["gpuDriverVersion"] == gke.gpu_driver_version


def test_a_config_choice_the_api_does_not_list_fails() -> None:
    class Broken(BaseModel):
        strategy: typing.Literal["MPS", "EXCLUSIVE"]

    path = "nodeConfig.guestAccelerators[].gpuSharingConfig.gpuSharingStrategy"
    assert config_choice_problems(((Broken, "strategy", am.NODE_POOL, path),)) == [
        "Broken.strategy offers 'EXCLUSIVE', not a value of container.v1 "
        "NodePool.config.accelerators.gpuSharingConfig.gpuSharingStrategy"
    ]


# ---- 3. what the API gives back equals what was rendered --------------------------------------------------------

#: Tile positions: MosaicLayout.Tile.x_pos / y_pos are plain int32 fields (no presence), so 0 is never returned.
TILE_POSITION = re.compile(r"^\$\.mosaicLayout\.tiles\[\d+\]\.(xPos|yPos): 0 is the field's default")


def test_the_normaliser_models_proto3_json(dashboards_v1: DiscoveryDocument) -> None:
    """Default scalars, empty lists/maps and ``*_UNSPECIFIED`` enums go; messages (even empty), explicit zero
    durations and map entries stay; durations are rewritten canonically."""
    body = {
        "displayName": "d",
        "labels": {"team": ""},
        "dashboardFilters": [],
        "mosaicLayout": {
            "columns": 48,
            "tiles": [
                {
                    "xPos": 0,
                    "yPos": 16,
                    "width": 24,
                    "height": 16,
                    "widget": {
                        "title": "",
                        "xyChart": {
                            "timeshiftDuration": "0s",
                            "dataSets": [
                                {
                                    "plotType": "PLOT_TYPE_UNSPECIFIED",
                                    "minAlignmentPeriod": "60.5s",
                                    "breakdowns": [],
                                    "timeSeriesQuery": {"prometheusQuery": "up", "unitOverride": ""},
                                }
                            ],
                            "thresholds": [{"value": 0.0, "label": "zero"}],
                            "yAxis": {},
                        },
                    },
                }
            ],
        },
    }
    normalised, changes = am.normalise(dashboards_v1, "Dashboard", body)
    assert changes == [
        "$.dashboardFilters: [] is the field's default, which the API omits",
        "$.mosaicLayout.tiles[0].xPos: 0 is the field's default, which the API omits",
        "$.mosaicLayout.tiles[0].widget.title: '' is the field's default, which the API omits",
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].plotType: 'PLOT_TYPE_UNSPECIFIED' is the field's "
        "default, which the API omits",
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].minAlignmentPeriod: '60.5s' comes back as '60.500s'",
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].breakdowns: [] is the field's default, which the API omits",
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].timeSeriesQuery.unitOverride: '' is the field's "
        "default, which the API omits",
        "$.mosaicLayout.tiles[0].widget.xyChart.thresholds[0].value: 0.0 is the field's default, which the API omits",
    ]
    xy = normalised["mosaicLayout"]["tiles"][0]["widget"]["xyChart"]
    assert xy["timeshiftDuration"] == "0s" and xy["yAxis"] == {} and normalised["labels"] == {"team": ""}
    assert am.normalise(dashboards_v1, "Dashboard", normalised) == (normalised, [])


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0s", "0s"),
        ("60s", "60s"),
        ("060s", "60s"),
        ("1.5s", "1.500s"),
        ("0.000001s", "0.000001s"),
        ("1.0000000s", "1s"),
        ("2.123456789s", "2.123456789s"),
        ("1.1234s", "1.123400s"),
        ("-0s", "0s"),
        ("-0.5s", "-0.500s"),
    ],
)
def test_canonical_duration(text: str, canonical: str) -> None:
    assert am.canonical_duration(text) == canonical


@pytest.mark.parametrize("stack", STACKS)
def test_dashboards_hold_no_api_dropped_field_but_tile_positions(stack: str, dashboards_v1: DiscoveryDocument) -> None:
    """Everything except the known zero tile positions (next test) already comes back unchanged."""
    for name, body in dashboards(inventory(stack)):
        _, changes = am.normalise(dashboards_v1, "Dashboard", body)
        assert [c for c in changes if not TILE_POSITION.match(c)] == [], name


@pytest.mark.parametrize("stack", STACKS)
def test_dashboards_come_back_from_the_api_unchanged(stack: str, dashboards_v1: DiscoveryDocument) -> None:
    for name, body in dashboards(inventory(stack)):
        normalised, changes = am.normalise(dashboards_v1, "Dashboard", body)
        assert changes == [], name
        assert normalised == body


def test_a_dashboard_with_an_api_dropped_field_fails(dashboards_v1: DiscoveryDocument) -> None:
    body, _ = am.normalise(dashboards_v1, "Dashboard", staging_dashboard())  # clean, whatever is rendered today
    tile = body["mosaicLayout"]["tiles"][0]
    tile["xPos"] = 0
    tile["widget"]["xyChart"]["dataSets"][0]["minAlignmentPeriod"] = "1.5s"
    _, changes = am.normalise(dashboards_v1, "Dashboard", body)
    assert sorted(changes) == [
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].minAlignmentPeriod: '1.5s' comes back as '1.500s'",
        "$.mosaicLayout.tiles[0].xPos: 0 is the field's default, which the API omits",
    ]
    assert [c for c in changes if not TILE_POSITION.match(c)] == [
        "$.mosaicLayout.tiles[0].widget.xyChart.dataSets[0].minAlignmentPeriod: '1.5s' comes back as '1.500s'"
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_alert_policies_validate_against_the_alert_policies_api(stack: str, monitoring_v3: DiscoveryDocument) -> None:
    for policy in resources(inventory(stack), am.ALERT_POLICY):
        body = am.alert_policy_body(policy["inputs"])
        assert (
            monitoring_v3.validate(
                "AlertPolicy",
                body,
                required=(
                    "displayName",
                    "combiner",
                    "conditions[].displayName",
                    "conditions[].conditionPrometheusQueryLanguage.query",
                ),
            )
            == []
        ), policy["name"]


def promql_duration_problems(monitoring_v3: DiscoveryDocument, name: str, body: Any) -> list[str]:
    """Durations of an alert policy body that would not come back as sent, or break the API's documented rules
    for PromQL conditions: ``duration`` "must be a non-negative duration or missing", ``evaluationInterval`` "a
    positive multiple of 30 seconds or missing" (PrometheusQueryLanguageCondition field descriptions)."""
    problems = [
        f"{name} {path}: {value!r} comes back as {am.canonical_duration(value)!r}"
        for path, value in am.format_paths(monitoring_v3, "AlertPolicy", body, "google-duration")
        if am.canonical_duration(value) != value
    ]
    for i, condition in enumerate(body.get("conditions", [])):
        promql = condition.get("conditionPrometheusQueryLanguage")
        if promql is None:
            continue
        where = f"{name} $.conditions[{i}].conditionPrometheusQueryLanguage"
        if "duration" in promql and am.duration_seconds(promql["duration"]) < 0:
            problems.append(f"{where}.duration: {promql['duration']!r} is negative")
        if "evaluationInterval" in promql:
            seconds = am.duration_seconds(promql["evaluationInterval"])
            if seconds <= 0 or seconds % 30:
                problems.append(
                    f"{where}.evaluationInterval: {promql['evaluationInterval']!r} is not a positive "
                    "multiple of 30 seconds"
                )
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_alert_policy_durations_come_back_as_rendered(stack: str, monitoring_v3: DiscoveryDocument) -> None:
    """The provider stores the API's echo of each duration string and compares it with the input as text, so a
    non-canonical duration ("1.5s" comes back "1.500s") would diff forever. An explicit "0s" is canonical and a
    Duration is a message (it keeps presence), so "0s" is not dropped."""
    problems = []
    for policy in resources(inventory(stack), am.ALERT_POLICY):
        problems += promql_duration_problems(monitoring_v3, policy["name"], am.alert_policy_body(policy["inputs"]))
    assert problems == []


def test_broken_alert_policy_durations_fail(monitoring_v3: DiscoveryDocument) -> None:
    policy = copy.deepcopy(resources(inventory("prod"), am.ALERT_POLICY)[0])
    promql = policy["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]
    promql.update(duration="-60s", evaluationInterval="45.0s")
    where = "p $.conditions[0].conditionPrometheusQueryLanguage"
    assert promql_duration_problems(monitoring_v3, "p", am.alert_policy_body(policy["inputs"])) == [
        f"{where}.evaluationInterval: '45.0s' comes back as '45s'",
        f"{where}.duration: '-60s' is negative",
        f"{where}.evaluationInterval: '45.0s' is not a positive multiple of 30 seconds",
    ]
    body = am.alert_policy_body(policy["inputs"])
    body["conditions"][0]["conditionPrometheusQueryLanguage"]["for"] = "5m"
    assert monitoring_v3.validate("AlertPolicy", body) == [
        "$.conditions[0].conditionPrometheusQueryLanguage.for: unknown field (PrometheusQueryLanguageCondition has "
        "no field 'for')"
    ]


# ---- 4. every chart line is named ---------------------------------------------------------------------------------


def unnamed_lines(body: Any) -> list[str]:
    """Chart lines (``xyChart.dataSets[]``) without a legend template, or sharing one within their chart."""
    problems = []
    for i, tile in enumerate(body["mosaicLayout"]["tiles"]):
        data_sets = tile["widget"].get("xyChart", {}).get("dataSets", [])
        templates = [ds.get("legendTemplate", "") for ds in data_sets]
        title = tile["widget"].get("title", f"tile {i}")
        problems += [f"{title!r} line {j}: no legendTemplate" for j, t in enumerate(templates) if not t]
        repeated = sorted({t for t in templates if t and templates.count(t) > 1})
        problems += [f"{title!r}: lines share the legendTemplate {t!r}" for t in repeated]
    return problems


def test_legend_template_is_a_dataset_field(dashboards_v1: DiscoveryDocument) -> None:
    assert dashboards_v1.field("DataSet", "legendTemplate")["type"] == "string"


@pytest.mark.parametrize("stack", STACKS)
def test_every_chart_line_is_named(stack: str) -> None:
    for name, body in dashboards(inventory(stack)):
        assert unnamed_lines(body) == [], name


def test_unnamed_chart_lines_are_reported() -> None:
    body = staging_dashboard()
    tile = next(t for t in body["mosaicLayout"]["tiles"] if len(t["widget"].get("xyChart", {}).get("dataSets", [])) > 2)
    data_sets = tile["widget"]["xyChart"]["dataSets"]
    data_sets[0].pop("legendTemplate", None)
    data_sets[1]["legendTemplate"] = data_sets[2]["legendTemplate"] = "p9x"
    title = tile["widget"]["title"]
    assert [p for p in unnamed_lines(body) if p.startswith(repr(title))] == [
        f"{title!r} line 0: no legendTemplate",
        f"{title!r}: lines share the legendTemplate 'p9x'",
    ]
