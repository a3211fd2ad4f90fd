"""How the Pulumi inputs of the program's Google Cloud resources land in Google's REST APIs, and what the APIs do
with them — the knowledge behind ``tests/test_api_schemas.py``.

pulumi-gcp is bridged from terraform-provider-google: a Pulumi input path is the camelCase form of the Terraform
attribute path, and lists get plural names (Terraform's ``node_config.taint`` block is Pulumi's ``taints``). The
provider's expanders then build the API body, and there the names do not always match: Terraform flattens nested
API messages (``datapath_provider`` is ``Cluster.networkConfig.datapathProvider``), renames (``node_config`` is
``NodePool.config``, ``guest_accelerator`` is ``NodeConfig.accelerators``), turns maps into keyed sets
(Artifact Registry cleanup policies) or invents provider-only fields (``networking_mode``). So nothing here is
derived by name; every row of :data:`ENUM_FIELDS` is one mapping checked by reading the discovery document and
the provider's expander (hashicorp/terraform-provider-google ``google/services/...``; the reasons are in ``note``).

The allowed values are never written here: they are read from the discovery documents google-api-python-client
ships (``tests/discovery.py``).

:func:`normalise` models what the API gives back for a body it stored: Google's REST surface speaks the proto3
JSON mapping (https://protobuf.dev/programming-guides/json/), which omits fields holding their default and writes
durations canonically. Only resources whose body is compared as opaque JSON (``Dashboard.dashboardJson``) need
the whole model; typed Terraform attributes compare a missing scalar equal to its zero value, but not a duration
string written another way.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.discovery import DiscoveryDocument, document

#: Values only the cloud knows appear in the offline plan as these placeholders (README, "Quick start").
UNKNOWN_PREFIXES = ("<known-after-apply:", "<secret:")


@dataclass(frozen=True)
class ApiResource:
    """The API resource a Pulumi resource type creates."""

    api: str
    version: str
    #: Discovery method the provider calls to create it (``routers.patch``: a NAT is an element of its router).
    create_method: str
    #: Schema id of the resource itself (the paths of :class:`EnumField` start here).
    schema: str
    #: Where the resource sits in the create request body ("" = the body is the resource).
    body_path: str = ""

    def doc(self) -> DiscoveryDocument:
        return document(self.api, self.version)


RESOURCES: Mapping[str, ApiResource] = {
    "gcp:container/cluster:Cluster": ApiResource(
        "container", "v1", "projects.locations.clusters.create", "Cluster", "cluster"
    ),
    "gcp:container/nodePool:NodePool": ApiResource(
        "container", "v1", "projects.locations.clusters.nodePools.create", "NodePool", "nodePool"
    ),
    "gcp:compute/reservation:Reservation": ApiResource("compute", "v1", "reservations.insert", "Reservation"),
    "gcp:compute/disk:Disk": ApiResource("compute", "v1", "disks.insert", "Disk"),
    "gcp:compute/subnetwork:Subnetwork": ApiResource("compute", "v1", "subnetworks.insert", "Subnetwork"),
    "gcp:compute/routerNat:RouterNat": ApiResource("compute", "v1", "routers.patch", "RouterNat", "nats"),
    "gcp:compute/address:Address": ApiResource("compute", "v1", "addresses.insert", "Address"),
    "gcp:compute/regionSslPolicy:RegionSslPolicy": ApiResource(
        "compute", "v1", "regionSslPolicies.insert", "SslPolicy"
    ),
    "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy": ApiResource(
        "compute", "v1", "regionSecurityPolicies.insert", "SecurityPolicy"
    ),
    "gcp:compute/firewall:Firewall": ApiResource("compute", "v1", "firewalls.insert", "Firewall"),
    "gcp:compute/network:Network": ApiResource("compute", "v1", "networks.insert", "Network"),
    "gcp:monitoring/alertPolicy:AlertPolicy": ApiResource(
        "monitoring", "v3", "projects.alertPolicies.create", "AlertPolicy"
    ),
    "gcp:monitoring/dashboard:Dashboard": ApiResource("monitoring", "v1", "projects.dashboards.create", "Dashboard"),
    "gcp:artifactregistry/repository:Repository": ApiResource(
        "artifactregistry", "v1", "projects.locations.repositories.create", "Repository"
    ),
    "gcp:dns/managedZone:ManagedZone": ApiResource("dns", "v1", "managedZones.create", "ManagedZone"),
    "gcp:dns/recordSet:RecordSet": ApiResource("dns", "v1", "resourceRecordSets.create", "ResourceRecordSet"),
    "gcp:storage/bucket:Bucket": ApiResource("storage", "v1", "buckets.insert", "Bucket"),
}

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
RESERVATION = "gcp:compute/reservation:Reservation"
DISK = "gcp:compute/disk:Disk"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"
ADDRESS = "gcp:compute/address:Address"
SSL_POLICY = "gcp:compute/regionSslPolicy:RegionSslPolicy"
SECURITY_POLICY = "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy"
FIREWALL = "gcp:compute/firewall:Firewall"
NETWORK = "gcp:compute/network:Network"
ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
MANAGED_ZONE = "gcp:dns/managedZone:ManagedZone"
RECORD_SET = "gcp:dns/recordSet:RecordSet"
BUCKET = "gcp:storage/bucket:Bucket"


@dataclass(frozen=True)
class EnumField:
    """One enum-valued Pulumi input and the API field it becomes."""

    resource_type: str
    #: Pulumi input path; ``[]`` steps into every element of a list.
    input_path: str
    #: Field path in ``RESOURCES[resource_type].schema``, as :meth:`DiscoveryDocument.field` reads it (arrays are
    #: stepped through implicitly, ``*`` selects a map's values).
    api_path: str
    #: Why the path differs from the Pulumi one (empty: the same names).
    note: str = ""
    #: The API enum has one value only (compute v1 ``SecurityPolicyRuleMatcher.versionedExpr``: ``SRC_IPS_V1``).
    single_value: bool = False

    @property
    def resource(self) -> ApiResource:
        return RESOURCES[self.resource_type]

    def allowed(self) -> tuple[str, ...]:
        return self.resource.doc().enum_values(self.resource.schema, self.api_path)

    def describe(self) -> str:
        r = self.resource
        return f"{r.api}.{r.version} {r.schema}.{self.api_path}"


ENUM_FIELDS: tuple[EnumField, ...] = (
    # ---- GKE cluster (container.v1 Cluster, inside CreateClusterRequest.cluster) ----
    EnumField(CLUSTER, "releaseChannel.channel", "releaseChannel.channel"),
    EnumField(
        CLUSTER,
        "datapathProvider",
        "networkConfig.datapathProvider",
        "Terraform flattens Cluster.networkConfig: top-level datapath_provider",
    ),
    EnumField(
        CLUSTER,
        "gatewayApiConfig.channel",
        "networkConfig.gatewayApiConfig.channel",
        "Terraform flattens Cluster.networkConfig: top-level gateway_api_config",
    ),
    EnumField(
        CLUSTER,
        "monitoringConfig.enableComponents[]",
        "monitoringConfig.componentConfig.enableComponents",
        "Terraform flattens MonitoringConfig.componentConfig (expandMonitoringConfig)",
    ),
    EnumField(
        CLUSTER,
        "loggingConfig.enableComponents[]",
        "loggingConfig.componentConfig.enableComponents",
        "Terraform flattens LoggingConfig.componentConfig (expandContainerClusterLoggingConfig)",
    ),
    EnumField(CLUSTER, "nodeConfig.workloadMetadataConfig.mode", "nodeConfig.workloadMetadataConfig.mode"),
    # ---- GKE node pool (container.v1 NodePool, inside CreateNodePoolRequest.nodePool) ----
    EnumField(
        NODE_POOL,
        "nodeConfig.workloadMetadataConfig.mode",
        "config.workloadMetadataConfig.mode",
        "Terraform node_config is NodePool.config",
    ),
    EnumField(
        NODE_POOL,
        "nodeConfig.reservationAffinity.consumeReservationType",
        "config.reservationAffinity.consumeReservationType",
        "Terraform node_config is NodePool.config",
    ),
    EnumField(
        NODE_POOL,
        "nodeConfig.taints[].effect",
        "config.taints.effect",
        "Terraform block node_config.taint (Pulumi plural taints) is NodeConfig.taints",
    ),
    EnumField(
        NODE_POOL,
        "nodeConfig.guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion",
        "config.accelerators.gpuDriverInstallationConfig.gpuDriverVersion",
        "Terraform node_config.guest_accelerator is NodeConfig.accelerators (AcceleratorConfig)",
    ),
    EnumField(
        NODE_POOL,
        "nodeConfig.guestAccelerators[].gpuSharingConfig.gpuSharingStrategy",
        "config.accelerators.gpuSharingConfig.gpuSharingStrategy",
        "Terraform node_config.guest_accelerator is NodeConfig.accelerators (AcceleratorConfig)",
    ),
    EnumField(NODE_POOL, "autoscaling.locationPolicy", "autoscaling.locationPolicy"),
    # ---- Compute Engine ----
    EnumField(RESERVATION, "shareSettings.shareType", "shareSettings.shareType"),
    EnumField(DISK, "accessMode", "accessMode"),
    EnumField(SUBNETWORK, "purpose", "purpose"),
    EnumField(SUBNETWORK, "role", "role"),
    EnumField(SUBNETWORK, "logConfig.aggregationInterval", "logConfig.aggregationInterval"),
    EnumField(SUBNETWORK, "logConfig.metadata", "logConfig.metadata"),
    EnumField(
        ROUTER_NAT,
        "natIpAllocateOption",
        "natIpAllocateOption",
        "a RouterNat is an element of Router.nats, written with routers.patch",
    ),
    EnumField(
        ROUTER_NAT,
        "sourceSubnetworkIpRangesToNat",
        "sourceSubnetworkIpRangesToNat",
        "a RouterNat is an element of Router.nats, written with routers.patch",
    ),
    EnumField(
        ROUTER_NAT,
        "subnetworks[].sourceIpRangesToNats[]",
        "subnetworks.sourceIpRangesToNat",
        "Pulumi pluralises Terraform's source_ip_ranges_to_nat; the API field is singular",
    ),
    EnumField(ROUTER_NAT, "logConfig.filter", "logConfig.filter"),
    EnumField(ADDRESS, "addressType", "addressType"),
    EnumField(ADDRESS, "networkTier", "networkTier"),
    EnumField(ADDRESS, "purpose", "purpose"),
    EnumField(SSL_POLICY, "minTlsVersion", "minTlsVersion", "regionSslPolicies take the SslPolicy schema"),
    EnumField(SSL_POLICY, "profile", "profile", "regionSslPolicies take the SslPolicy schema"),
    EnumField(SECURITY_POLICY, "type", "type", "regionSecurityPolicies take the SecurityPolicy schema"),
    EnumField(SECURITY_POLICY, "rules[].match.versionedExpr", "rules.match.versionedExpr", single_value=True),
    EnumField(SECURITY_POLICY, "rules[].rateLimitOptions.enforceOnKey", "rules.rateLimitOptions.enforceOnKey"),
    EnumField(FIREWALL, "direction", "direction"),
    EnumField(FIREWALL, "logConfig.metadata", "logConfig.metadata"),
    EnumField(
        NETWORK,
        "routingMode",
        "routingConfig.routingMode",
        "Terraform flattens Network.routingConfig: top-level routing_mode",
    ),
    # ---- Cloud Monitoring alert policies (monitoring.v3 AlertPolicy) ----
    EnumField(ALERT_POLICY, "combiner", "combiner"),
    EnumField(ALERT_POLICY, "severity", "severity"),
    # ---- Artifact Registry, Cloud DNS ----
    EnumField(REPOSITORY, "format", "format"),
    EnumField(
        REPOSITORY,
        "cleanupPolicies[].action",
        "cleanupPolicies.*.action",
        "Terraform keeps the API's map of cleanup policies as a set keyed by id",
    ),
    EnumField(
        REPOSITORY,
        "cleanupPolicies[].condition.tagState",
        "cleanupPolicies.*.condition.tagState",
        "Terraform keeps the API's map of cleanup policies as a set keyed by id",
    ),
    EnumField(
        REPOSITORY, "vulnerabilityScanningConfig.enablementConfig", "vulnerabilityScanningConfig.enablementConfig"
    ),
    EnumField(MANAGED_ZONE, "visibility", "visibility", "a lower-case API enum (public, private)"),
    # Cloud Run is not here: its resources are the program's own dynamic providers, whose inputs are the run.v2 bodies
    # themselves, validated whole (enums included) against run.v2's discovery document by
    # tests/test_cloud_run_provider.py and, call by call, by the simulator (tests/cloud_run_sim.py).
)


@dataclass(frozen=True)
class NotAnApiEnum:
    """An input holding an UPPER_CASE word that is deliberately not checked against an API enum."""

    resource_type: str
    input_path: str
    #: The API field it becomes, which must exist and not be an enum; None: the field is provider-only and the
    #: API schema has no field of the Pulumi name.
    api_path: str | None
    reason: str


NOT_API_ENUMS: tuple[NotAnApiEnum, ...] = (
    NotAnApiEnum(
        NODE_POOL,
        "nodeConfig.imageType",
        "config.imageType",
        "NodeConfig.imageType is a free string (the provider compares it case-insensitively)",
    ),
    NotAnApiEnum(
        CLUSTER,
        "networkingMode",
        None,
        "provider-only: VPC_NATIVE/ROUTES expand to the booleans ipAllocationPolicy.useIpAliases / "
        "useRoutes (expandIPAllocationPolicy)",
    ),
    NotAnApiEnum(RECORD_SET, "type", "type", "ResourceRecordSet.type is a free string (the record type)"),
    NotAnApiEnum(BUCKET, "storageClass", "storageClass", "Bucket.storageClass is a free string"),
)


def values_at(inputs: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every (concrete path, value) at a Pulumi input path; ``name[]`` steps into each element of a list."""
    nodes: list[tuple[str, Any]] = [("", inputs)]
    for segment in path.split("."):
        each = segment.endswith("[]")
        name = segment[:-2] if each else segment
        step: list[tuple[str, Any]] = []
        for where, node in nodes:
            if not isinstance(node, Mapping) or name not in node:
                continue
            here, value = f"{where}.{name}" if where else name, node[name]
            if each and isinstance(value, list):
                step.extend((f"{here}[{i}]", item) for i, item in enumerate(value))
            else:
                step.append((here, value))
        nodes = step
    yield from nodes


def is_unknown(value: Any) -> bool:
    """A placeholder for a value only the cloud knows (never an enum value to check)."""
    return isinstance(value, str) and value.startswith(UNKNOWN_PREFIXES)


def enum_problems(stack: str, inventory: Mapping[str, Any], fields: tuple[EnumField, ...] = ENUM_FIELDS) -> list[str]:
    """Every value at a mapped path of the inventory that the API's enum does not list."""
    problems = []
    for f in fields:
        allowed = f.allowed()
        for resource in inventory["resources"]:
            if resource["type"] != f.resource_type:
                continue
            for where, value in values_at(resource["inputs"], f.input_path):
                if is_unknown(value):
                    continue
                if not isinstance(value, str) or value not in allowed:
                    problems.append(
                        f"{stack} {resource['name']} {where}: {value!r} is not a value of "
                        f"{f.describe()}; allowed: {', '.join(allowed)}"
                    )
    return problems


def enum_values_found(inventories: Mapping[str, Mapping[str, Any]]) -> dict[EnumField, set[str]]:
    """The distinct values the inventories hold at each mapped path (for coverage and reporting)."""
    found: dict[EnumField, set[str]] = {f: set() for f in ENUM_FIELDS}
    for inventory in inventories.values():
        for f in ENUM_FIELDS:
            for resource in inventory["resources"]:
                if resource["type"] == f.resource_type:
                    found[f].update(str(v) for _, v in values_at(resource["inputs"], f.input_path) if not is_unknown(v))
    return found


_UPPER_WORD = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")


def _string_leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(Pulumi input path with ``[]`` for list steps, value) of every string leaf; map keys are kept as path
    segments, which never match a table row, so labels do not count."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _string_leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item, f"{path}[]")
    elif isinstance(value, str):
        yield path, value


def unmapped_enum_like_inputs(inventory: Mapping[str, Any]) -> set[tuple[str, str, str]]:
    """(type, input path, value) of every ``gcp:*`` input the tables do not account for that looks like an API
    enum: an UPPER_CASE word (two characters or more), or a value whose path, read with the same names in the
    resource's API schema, is an enum field (so a lower-case enum with matching names is caught too)."""
    mapped = {(f.resource_type, f.input_path) for f in ENUM_FIELDS}
    mapped |= {(n.resource_type, n.input_path) for n in NOT_API_ENUMS}
    found = set()
    for resource in inventory["resources"]:
        typ = resource["type"]
        if not typ.startswith("gcp:"):
            continue
        for path, value in _string_leaves(resource["inputs"]):
            if (typ, path) in mapped or is_unknown(value):
                continue
            if (len(value) > 1 and _UPPER_WORD.match(value)) or _identity_path_is_enum(typ, path):
                found.add((typ, path, value))
    return found


def _identity_path_is_enum(resource_type: str, input_path: str) -> bool:
    api = RESOURCES.get(resource_type)
    if api is None:
        return False
    try:
        api.doc().enum_values(api.schema, input_path.replace("[]", ""))
    except KeyError:
        return False
    return True


# ---- what the API gives back: proto3 JSON ------------------------------------------------------------------

#: Discovery string formats of well-known *message* types (Duration, Timestamp, FieldMask). Message fields
#: track presence, so an explicit zero duration ("0s") is kept, unlike a zero scalar.
_MESSAGE_STRING_FORMATS = ("google-duration", "google-datetime", "google-fieldmask")
_DURATION = re.compile(r"^(-)?(\d+)(?:\.(\d{1,9}))?s$")


def canonical_duration(text: str) -> str:
    """A google.protobuf.Duration as proto3 JSON writes it: whole seconds without leading zeros, then 0, 3, 6 or 9
    fractional digits (as many as the nanoseconds need), then ``s``: ``"60s"``, ``"1.500s"``, ``"0s"``.
    Raises ValueError for text that is not a duration."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a google-duration: {text!r}")
    seconds, nanos = int(m.group(2)), int((m.group(3) or "").ljust(9, "0"))
    sign = "-" if m.group(1) and (seconds or nanos) else ""
    if nanos == 0:
        return f"{sign}{seconds}s"
    digits = 3 if nanos % 1_000_000 == 0 else 6 if nanos % 1_000 == 0 else 9
    return f"{sign}{seconds}.{nanos // 10 ** (9 - digits):0{digits}d}s"


def duration_seconds(text: str) -> float:
    """The length of a canonical or non-canonical google-duration in seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a google-duration: {text!r}")
    value = int(m.group(2)) + int((m.group(3) or "0").ljust(9, "0")) / 1e9
    return -value if m.group(1) else value


def _resolved(doc: DiscoveryDocument, node: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        node = doc.schema(node["$ref"])
    return node


def _is_message(node: Mapping[str, Any]) -> bool:
    return "properties" in node


def _is_map(node: Mapping[str, Any]) -> bool:
    return "additionalProperties" in node and "properties" not in node


def _is_default(node: Mapping[str, Any], value: Any) -> bool:
    """Whether proto3 JSON would omit ``value`` of a field whose (resolved) schema is ``node``.

    Fields without presence are omitted at their default: 0, false, "", "0" (64-bit integers are strings), the
    enum's first value (proto3 requires it to be the zero value: ``*_UNSPECIFIED``), an empty list or map.
    Messages — including Duration/Timestamp/FieldMask, which discovery shows as formatted strings — track presence
    and are kept even when empty. Discovery does not mark proto3 ``optional`` fields, wrapper types or oneof
    members, which also track presence: for those this answers "omitted" where the API would keep the value, so
    the model errs towards reporting a possible diff, never towards hiding one."""
    typ = node.get("type")
    if _is_message(node) or typ == "any":
        return False
    if typ == "array":
        return value == []
    if _is_map(node):
        return value == {}
    if typ == "boolean":
        return value is False
    if typ in ("integer", "number"):
        return not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0
    if typ == "string":
        fmt = node.get("format")
        if fmt in _MESSAGE_STRING_FORMATS:
            return False
        if fmt in ("int64", "uint64"):
            return value == "0"
        if "enum" in node:
            return value == node["enum"][0]
        return value == ""
    return False


def normalise(doc: DiscoveryDocument, schema_id: str, body: Any) -> tuple[Any, list[str]]:
    """(``body`` as the API gives it back, one line per change), per the proto3 JSON mapping: default-valued fields
    dropped (see :func:`_is_default`) and durations written canonically. Fields the schema does not know are left
    alone (``DiscoveryDocument.validate`` reports them)."""
    changes: list[str] = []
    out = _normalise(doc, doc.schema(schema_id), copy.deepcopy(body), "$", changes)
    return out, changes


def _normalise(doc: DiscoveryDocument, node: Mapping[str, Any], value: Any, path: str, changes: list[str]) -> Any:
    node = _resolved(doc, node)
    typ = node.get("type")
    if typ == "array" and isinstance(value, list):
        return [_normalise(doc, node["items"], item, f"{path}[{i}]", changes) for i, item in enumerate(value)]
    if _is_map(node) and isinstance(value, dict):
        # Map entries are always written, defaults included; only message values change inside.
        return {
            k: _normalise(doc, node["additionalProperties"], v, f"{path}[{k!r}]", changes) for k, v in value.items()
        }
    if _is_message(node) and isinstance(value, dict):
        props: Mapping[str, Any] = node["properties"]
        out = {}
        for key, item in value.items():
            if key not in props:
                out[key] = item
                continue
            field_node = _resolved(doc, props[key])
            here = f"{path}.{key}"
            if _is_default(field_node, item):
                changes.append(f"{here}: {item!r} is the field's default, which the API omits")
                continue
            out[key] = _normalise(doc, field_node, item, here, changes)
        return out
    if typ == "string" and node.get("format") == "google-duration" and isinstance(value, str):
        try:
            canonical = canonical_duration(value)
        except ValueError:
            return value  # not a duration at all: validate() reports it
        if canonical != value:
            changes.append(f"{path}: {value!r} comes back as {canonical!r}")
        return canonical
    return value


def format_paths(doc: DiscoveryDocument, schema_id: str, body: Any, fmt: str) -> Iterator[tuple[str, Any]]:
    """(JSON path, value) of every field of ``body`` whose schema has the discovery ``format`` ``fmt``."""
    yield from _format_paths(doc, doc.schema(schema_id), body, "$", fmt)


def _format_paths(
    doc: DiscoveryDocument, node: Mapping[str, Any], value: Any, path: str, fmt: str
) -> Iterator[tuple[str, Any]]:
    node = _resolved(doc, node)
    if node.get("format") == fmt:
        yield path, value
    elif node.get("type") == "array" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _format_paths(doc, node["items"], item, f"{path}[{i}]", fmt)
    elif _is_map(node) and isinstance(value, dict):
        for k, v in value.items():
            yield from _format_paths(doc, node["additionalProperties"], v, f"{path}[{k!r}]", fmt)
    elif _is_message(node) and isinstance(value, dict):
        for k, v in value.items():
            if k in node["properties"]:
                yield from _format_paths(doc, node["properties"][k], v, f"{path}.{k}", fmt)


#: Pulumi inputs of an alert policy that are not body fields (``project`` is the URL's ``projects/{project}``).
ALERT_POLICY_URL_INPUTS = ("project",)
#: Pulumi names that differ from the API's in the AlertPolicy body (Pulumi pluralises Terraform list blocks).
ALERT_POLICY_RENAMES = {"notificationChannelStrategies": "notificationChannelStrategy"}


def alert_policy_body(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The monitoring.v3 AlertPolicy body the provider sends for the Pulumi inputs of an alert policy."""

    def rename(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {ALERT_POLICY_RENAMES.get(k, k): rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    return rename({k: v for k, v in inputs.items() if k not in ALERT_POLICY_URL_INPUTS})
