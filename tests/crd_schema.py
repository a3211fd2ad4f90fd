"""Validate Kubernetes custom resources against the upstream schemas in ``../shared/reference``.

Reusable by every test module that renders CustomResources::

    from tests.crd_schema import validate_custom_resource, schema_known
    assert validate_custom_resource(obj) == []

What is checked, per schema file registered for the object's ``apiVersion`` + ``kind`` (``SCHEMA_FILES``):

1. The version's ``openAPIV3Schema`` (CRD YAML) or the datree JSON schema, with ``jsonschema`` (Draft 2020-12).
   The OpenAPI dialect is translated first: ``nullable`` -> null allowed; objects with ``properties`` and
   neither ``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields`` reject unknown fields (the API
   server prunes or, with strict field validation, rejects them — either way a typo never takes effect);
   ``x-kubernetes-int-or-string`` -> integer or string.
2. ``x-kubernetes-list-type: map | set`` uniqueness (map keys / whole items).
3. ``x-kubernetes-validations`` (CEL): the rules that apply to objects this program renders are implemented
   in Python in ``CEL_RULES`` (keyed by the exact rule text). Defaults from the schema are applied first,
   because the API server evaluates CEL on the defaulted object. A rule with no implementation is reported
   by :func:`unimplemented_rules` (callers decide whether that fails: gateway tests require none);
   transition rules (``oldSelf``) only apply to updates and are skipped.
4. ``metadata``: name is a DNS-1123 subdomain, label keys/values are valid.

Each file registered for a kind is checked (e.g. InferencePool against every GA bundle GKE may have installed:
GAIE v1.1.0, v1.5.0 and v1.6.0), so an object that only one bundle accepts is rejected.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference"

#: (apiVersion, kind) -> schema files under ../shared/reference (each one must accept the object).
SCHEMA_FILES: dict[tuple[str, str], tuple[str, ...]] = {
    # Gateway API v1.6.1 standard channel (GAIE releases and the llm-d GKE guide).
    ("gateway.networking.k8s.io/v1", "GatewayClass"): ("gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml",),
    ("gateway.networking.k8s.io/v1", "Gateway"): ("gateway-api/gateway.networking.k8s.io_gateways.yaml",),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): ("gateway-api/gateway.networking.k8s.io_httproutes.yaml",),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"): ("gateway-api/gateway.networking.k8s.io_grpcroutes.yaml",),
    ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"): (
        "gateway-api/gateway.networking.k8s.io_referencegrants.yaml",
    ),
    # InferencePool v1: every GA bundle GKE may have auto-installed (v1.1.0 lacks appProtocol; v1.6.0 makes
    # endpointPickerRef optional) — the object must be valid under all of them.
    ("inference.networking.k8s.io/v1", "InferencePool"): (
        "gateway-api-inference-extension/v1.1.0/inference.networking.k8s.io_inferencepools.yaml",
        "gateway-api-inference-extension/v1.5.0/inference.networking.k8s.io_inferencepools.yaml",
        "gateway-api-inference-extension/v1.6.0/inference.networking.k8s.io_inferencepools.yaml",
    ),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"): (
        "gateway-api-inference-extension/v1.1.0/inference.networking.x-k8s.io_inferenceobjectives.yaml",
        "gateway-api-inference-extension/v1.5.0/inference.networking.x-k8s.io_inferenceobjectives.yaml",
    ),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"): (
        "gateway-api-inference-extension/v1.5.0/inference.networking.x-k8s.io_inferencemodelrewrites.yaml",
    ),
    ("llm-d.ai/v1alpha2", "InferenceObjective"): ("llm-d-router/v0.10.0/llm-d.ai_inferenceobjectives.yaml",),
    ("llm-d.ai/v1alpha2", "InferenceModelRewrite"): ("llm-d-router/v0.10.0/llm-d.ai_inferencemodelrewrites.yaml",),
    # GKE networking policies: the current field lists (datree catalogue); the 2022-23 CRDs are too old.
    ("networking.gke.io/v1", "GCPBackendPolicy"): ("gke-networking-policies-jsonschema/gcpbackendpolicy_v1.json",),
    ("networking.gke.io/v1", "HealthCheckPolicy"): ("gke-networking-policies-jsonschema/healthcheckpolicy_v1.json",),
    ("networking.gke.io/v1", "GCPGatewayPolicy"): ("gke-networking-policies-jsonschema/gcpgatewaypolicy_v1.json",),
    ("networking.gke.io/v1", "GCPTrafficExtension"): (
        "gke-networking-policies-jsonschema/gcptrafficextension_v1.json",
    ),
    ("networking.gke.io/v1", "GCPRoutingExtension"): (
        "gke-networking-policies-jsonschema/gcproutingextension_v1.json",
    ),
    # Google Managed Prometheus v0.17.2 (GKE inference autoscaling guide and samples).
    **{
        ("monitoring.googleapis.com/v1", kind): (f"gmp-prometheus-engine/monitoring.googleapis.com_{plural}.yaml",)
        for kind, plural in (
            ("PodMonitoring", "podmonitorings"),
            ("ClusterPodMonitoring", "clusterpodmonitorings"),
            ("ClusterNodeMonitoring", "clusternodemonitorings"),
            ("Rules", "rules"),
            ("ClusterRules", "clusterrules"),
            ("GlobalRules", "globalrules"),
            ("OperatorConfig", "operatorconfigs"),
        )
    },
}

#: API groups whose objects are custom resources (anything else is built into Kubernetes).
BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "discovery.k8s.io",
        "node.k8s.io",
        "certificates.k8s.io",
    }
)


def api_group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def is_custom_resource(obj: dict[str, Any]) -> bool:
    return api_group(str(obj.get("apiVersion", ""))) not in BUILTIN_GROUPS


def schema_known(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in SCHEMA_FILES


# ---- loading ---------------------------------------------------------------------------------------------------


@functools.cache
def load_schema(relpath: str, api_version: str, kind: str) -> dict[str, Any]:
    """The schema of ``kind`` at ``api_version`` from one reference file (CRD YAML or datree JSON)."""
    path = REFERENCE / relpath
    if not path.exists():
        import pytest  # only reached under pytest: the reference tree is a test-time input

        pytest.skip(f"reference file {path} is absent (CI places ../shared/reference beside the checkout)")
    if path.suffix == ".json":
        return json.loads(path.read_text())
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # C loader: ~10x faster
    group, version = api_version.rsplit("/", 1)
    names = crd["spec"]["names"]
    if crd["spec"]["group"] != group or names["kind"] != kind:
        raise LookupError(f"{relpath} defines {crd['spec']['group']}/{names['kind']}, not {group}/{kind}")
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise LookupError(f"{relpath} has no version {version} (has {[v['name'] for v in crd['spec']['versions']]})")


def to_json_schema(node: Any) -> Any:
    """OpenAPI v3 (Kubernetes structural schema) -> JSON Schema, as described in the module docstring."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: to_json_schema(v)
        for k, v in node.items()
        if not k.startswith("x-kubernetes-") and k not in ("nullable", "default", "description", "format")
    }
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        node.get("type") == "object"
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if "properties" in node:  # property names are data, not schema keywords
        out["properties"] = {k: to_json_schema(v) for k, v in node["properties"].items()}
    return out


# ---- defaults, list types, CEL ----------------------------------------------------------------------------------


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Return ``value`` with the schema's ``default``s filled in (as the API server does before CEL)."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for key, sub in schema["properties"].items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = apply_defaults(sub, out[key])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def walk(schema: dict[str, Any], value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Every (path, schema node, value) pair present in the object."""
    yield path, schema, value
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                yield from walk(sub, value[key], f"{path}.{key}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, v in value.items():
                if key not in (schema.get("properties") or {}):
                    yield from walk(extra, v, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            yield from walk(schema["items"], v, f"{path}[{i}]")


def _unique_by(items: list[Any], key: Callable[[Any], Any]) -> bool:
    keys = [json.dumps(key(i), sort_keys=True) for i in items]
    return len(keys) == len(set(keys))


def _has(d: Any, key: str) -> bool:
    return isinstance(d, dict) and key in d


def _duration_ms(text: str) -> float:
    units = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    return sum(float(n) * units[u] for n, u in parts)


GATEWAY_GROUP = "gateway.networking.k8s.io"

#: CEL rule text -> Python predicate over ``self`` (the value at the rule's node, defaults applied).
CEL_RULES: dict[str, Callable[[Any], bool]] = {
    # InferencePool v1 (GAIE v1.1.0-v1.6.0)
    "self.kind != 'Service' || has(self.port)": lambda s: s.get("kind") != "Service" or "port" in s,
    "self.all(p1, self.exists_one(p2, p1.number==p2.number))": lambda s: all(
        sum(1 for p2 in s if p2.get("number") == p1.get("number")) == 1 for p1 in s
    ),
    # HTTPRoute backendRefs (GWAPI v1.6.1): port required only for core Service
    "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true": lambda s: (
        not (s.get("group", "") == "" and s.get("kind") == "Service") or "port" in s
    ),
    "self.type in ['Exact','PathPrefix'] || self.type == 'RegularExpression'": lambda s: (
        s.get("type") in ("Exact", "PathPrefix", "RegularExpression")
    ),
    '(self.type in [\'Exact\',\'PathPrefix\']) ? self.value.matches(r"""^(?:[-A-Za-z0-9/._~!$&\'()*+,;=:@]|[%][0-9a-fA-F]{2})+$""") : true': lambda s: (
        s.get("type") not in ("Exact", "PathPrefix")
        or bool(re.fullmatch(r"(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+", s.get("value", "")))
    ),
    "self.all(p1, self.exists_one(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__ )) && (((!has(p1.sectionName) || p1.sectionName == '') && (!has(p2.sectionName) || p2.sectionName == '')) || (has(p1.sectionName) && has(p2.sectionName) && p1.sectionName == p2.sectionName))))": lambda s: (
        _unique_by(
            s, lambda r: (r.get("group"), r.get("kind"), r["name"], r.get("namespace", ""), r.get("sectionName", ""))
        )
    ),
    "self.all(p1, self.all(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__ )) ? ((!has(p1.sectionName) || p1.sectionName == '') == (!has(p2.sectionName) || p2.sectionName == '')) : true))": lambda s: (
        all(
            not (
                a.get("group") == b.get("group")
                and a.get("kind") == b.get("kind")
                and a["name"] == b["name"]
                and a.get("namespace", "") == b.get("namespace", "")
            )
            or (not a.get("sectionName")) == (not b.get("sectionName"))
            for a in s
            for b in s
        )
    ),
    "(self.size() > 0 ? self[0].matches.size() : 0) + (self.size() > 1 ? self[1].matches.size() : 0) + (self.size() > 2 ? self[2].matches.size() : 0) + (self.size() > 3 ? self[3].matches.size() : 0) + (self.size() > 4 ? self[4].matches.size() : 0) + (self.size() > 5 ? self[5].matches.size() : 0) + (self.size() > 6 ? self[6].matches.size() : 0) + (self.size() > 7 ? self[7].matches.size() : 0) + (self.size() > 8 ? self[8].matches.size() : 0) + (self.size() > 9 ? self[9].matches.size() : 0) + (self.size() > 10 ? self[10].matches.size() : 0) + (self.size() > 11 ? self[11].matches.size() : 0) + (self.size() > 12 ? self[12].matches.size() : 0) + (self.size() > 13 ? self[13].matches.size() : 0) + (self.size() > 14 ? self[14].matches.size() : 0) + (self.size() > 15 ? self[15].matches.size() : 0) <= 128": lambda s: (
        sum(len(r.get("matches", [])) for r in s[:16]) <= 128
    ),
    "(has(self.backendRefs) && size(self.backendRefs) > 0) ? (!has(self.filters) || self.filters.all(f, !has(f.requestRedirect))): true": lambda s: (
        not s.get("backendRefs") or all("requestRedirect" not in f for f in s.get("filters", []))
    ),
    "!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == 'URLRewrite'))": lambda s: (
        not (any(f.get("type") == "RequestRedirect" for f in s) and any(f.get("type") == "URLRewrite" for f in s))
    ),
    # Gateway listeners (GWAPI v1.6.1)
    "self.all(l1, self.exists_one(l2, l1.name == l2.name))": lambda s: _unique_by(s, lambda x: x.get("name")),
    "self.all(l1, self.exists_one(l2, l1.port == l2.port && l1.protocol == l2.protocol && (has(l1.hostname) && has(l2.hostname) ? l1.hostname == l2.hostname : !has(l1.hostname) && !has(l2.hostname))))": lambda s: (
        _unique_by(s, lambda x: (x.get("port"), x.get("protocol"), x.get("hostname")))
    ),
    "self.all(l, l.protocol in ['HTTP', 'TCP', 'UDP'] ? !has(l.tls) : true)": lambda s: all(
        l.get("protocol") not in ("HTTP", "TCP", "UDP") or "tls" not in l for l in s
    ),
    "self.all(l, l.protocol in ['TCP', 'UDP']  ? (!has(l.hostname) || l.hostname == '') : true)": lambda s: all(
        l.get("protocol") not in ("TCP", "UDP") or not l.get("hostname") for l in s
    ),
    "self.all(l, l.protocol == 'HTTPS' ? has(l.tls) : true)": lambda s: all(
        l.get("protocol") != "HTTPS" or "tls" in l for l in s
    ),
    "self.all(a1, a1.type == 'Hostname'  && has(a1.value) ? self.exists_one(a2, a2.type == a1.type && has(a2.value) && a2.value == a1.value) : true )": lambda s: (
        _unique_by([a for a in s if a.get("type") == "Hostname" and "value" in a], lambda a: a["value"])
    ),
    "self.all(a1, a1.type == 'IPAddress' && has(a1.value) ? self.exists_one(a2, a2.type == a1.type && has(a2.value) && a2.value == a1.value) : true )": lambda s: (
        _unique_by([a for a in s if a.get("type") == "IPAddress" and "value" in a], lambda a: a["value"])
    ),
    'self.type == \'Hostname\' ? (!has(self.value) || self.value.matches(r"""^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$""")): true': lambda s: (
        s.get("type") != "Hostname"
        or "value" not in s
        or bool(re.fullmatch(r"(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", s["value"]))
    ),
    "self.all(l, (l.protocol == 'HTTPS' && has(l.tls)) ? (l.tls.mode == '' || l.tls.mode == 'Terminate') : true)": lambda s: (
        all(
            not (l.get("protocol") == "HTTPS" and "tls" in l) or l["tls"].get("mode", "") in ("", "Terminate")
            for l in s
        )
    ),
    "self.all(l, (l.protocol == 'TLS' ? has(l.tls) && has(l.tls.mode) && l.tls.mode != '' : true))": lambda s: all(
        l.get("protocol") != "TLS" or bool(l.get("tls", {}).get("mode")) for l in s
    ),
    "self.mode == 'Terminate' ? size(self.certificateRefs) > 0 || size(self.options) > 0 : true": lambda s: (
        s.get("mode") != "Terminate" or bool(s.get("certificateRefs")) or bool(s.get("options"))
    ),
    "!has(self.checkIntervalSec) && has(self.timeoutSec) ? 5 >= self.timeoutSec : true": lambda s: (
        not ("checkIntervalSec" not in s and "timeoutSec" in s) or s["timeoutSec"] <= 5
    ),
    "has(self.checkIntervalSec) && !has(self.timeoutSec) ? self.checkIntervalSec >= 5 : true": lambda s: (
        not ("checkIntervalSec" in s and "timeoutSec" not in s) or s["checkIntervalSec"] >= 5
    ),
    "has(self.checkIntervalSec) && has(self.timeoutSec) ? self.checkIntervalSec >= self.timeoutSec : true": lambda s: (
        not ("checkIntervalSec" in s and "timeoutSec" in s) or s["checkIntervalSec"] >= s["timeoutSec"]
    ),
    # GKE policies (datree schemas)
    "(self.targetRef.kind == 'InferencePoolImport' || self.targetRef.kind == 'ServiceImport') || !(has(self.default) && has(self.default.scopes))": lambda s: (
        s["targetRef"]["kind"] in ("InferencePoolImport", "ServiceImport")
        or not (_has(s, "default") and _has(s["default"], "scopes"))
    ),
    "(self.targetRef.kind != 'InferencePool' && self.targetRef.kind != 'InferencePoolImport') || !(has(self.default) && has(self.default.sessionAffinity))": lambda s: (
        s["targetRef"]["kind"] not in ("InferencePool", "InferencePoolImport")
        or not (_has(s, "default") and _has(s["default"], "sessionAffinity"))
    ),
    "has(self.timeout) ? duration(self.timeout) >= duration('10ms') && duration(self.timeout) <= duration('10000ms') : true": lambda s: (
        "timeout" not in s or 10 <= _duration_ms(s["timeout"]) <= 10000
    ),
    "has(self.backendRef) && self.backendRef.kind == 'GCPWasmPlugin' ? !has(self.timeout) : true": lambda s: (
        not (_has(s, "backendRef") and s["backendRef"].get("kind") == "GCPWasmPlugin") or "timeout" not in s
    ),
    "has(self.backendRef) && self.backendRef.kind == 'Service' ? has(self.authority) && size(self.authority) != 0 : true": lambda s: (
        not (_has(s, "backendRef") and s["backendRef"].get("kind") == "Service") or bool(s.get("authority"))
    ),
    "has(self.googleAPIServiceName) ? !has(self.authority) : true": lambda s: (
        "googleAPIServiceName" not in s or "authority" not in s
    ),
    "has(self.backendRef) && self.backendRef.kind == 'GCPWasmPlugin' ? !has(self.authority) : true": lambda s: (
        not (_has(s, "backendRef") and s["backendRef"].get("kind") == "GCPWasmPlugin") or "authority" not in s
    ),
    "!(has(self.backendRef) && has(self.googleAPIServiceName)) && (has(self.backendRef) || has(self.googleAPIServiceName))": lambda s: (
        ("backendRef" in s) != ("googleAPIServiceName" in s)
    ),
    "has(self.backendRef) && self.backendRef.kind == 'GCPWasmPlugin' ? self.supportedEvents.all(e, e in ['RequestHeaders', 'RequestBody', 'ResponseHeaders', 'ResponseBody']) : true": lambda s: (
        not (_has(s, "backendRef") and s["backendRef"].get("kind") == "GCPWasmPlugin")
        or all(
            e in ("RequestHeaders", "RequestBody", "ResponseHeaders", "ResponseBody")
            for e in s.get("supportedEvents", [])
        )
    ),
    "has(self.backendRef) && self.backendRef.kind == 'GCPWasmPlugin' ? !has(self.metadata) : true": lambda s: (
        not (_has(s, "backendRef") and s["backendRef"].get("kind") == "GCPWasmPlugin") or "metadata" not in s
    ),
    'self.all(key, key.matches(r"""^([A-Za-z0-9\\/\\-._~%!$&\'()*+,;=:\\s\\{\\}\\[\\]]{1,63})$"""))': lambda s: all(
        re.fullmatch(r"([A-Za-z0-9/\-._~%!$&'()*+,;=:\s{}\[\]]{1,63})", k) for k in s
    ),
}


def _prefix_rule_ok(rule_owner: Any, where: str) -> bool:
    """``ReplacePrefixMatch`` in a redirect/rewrite needs exactly one PathPrefix match (HTTPRoute rule CEL)."""
    matches = rule_owner.get("matches", [])
    return len(matches) == 1 and matches[0].get("path", {}).get("type") == "PathPrefix"


def _uses_replace_prefix(filters: list[dict[str, Any]], field: str) -> bool:
    return (
        sum(
            1
            for f in filters
            if f.get(field, {}).get("path", {}).get("type") == "ReplacePrefixMatch"
            and "replacePrefixMatch" in f[field]["path"]
        )
        == 1
    )


_EXACT_OR_PREFIX = ("Exact", "PathPrefix")

#: Families of CEL rules that differ only in a name or literal: (regex over the rule text, factory taking the
#: regex groups and returning the predicate).
CEL_PATTERNS: list[tuple[re.Pattern[str], Callable[..., Callable[[Any], bool]]]] = [
    # HTTPRoute path value rules
    (
        re.compile(r"^\(self\.type in \['Exact','PathPrefix'\]\) \? !self\.value\.contains\('(.+)'\) : true$"),
        lambda lit: lambda s: s.get("type") not in _EXACT_OR_PREFIX or lit not in s.get("value", ""),
    ),
    (
        re.compile(r"^\(self\.type in \['Exact','PathPrefix'\]\) \? !self\.value\.endsWith\('(.+)'\) : true$"),
        lambda lit: lambda s: s.get("type") not in _EXACT_OR_PREFIX or not s.get("value", "").endswith(lit),
    ),
    (
        re.compile(r"^\(self\.type in \['Exact','PathPrefix'\]\) \? self\.value\.startsWith\('(.+)'\) : true$"),
        lambda lit: lambda s: s.get("type") not in _EXACT_OR_PREFIX or s.get("value", "").startswith(lit),
    ),
    # HTTPRoute filter <-> type consistency and at-most-one-of-a-type
    (
        re.compile(r"^!\(!has\(self\.(\w+)\) && self\.type == '(\w+)'\)$"),
        lambda field, typ: lambda s: not (field not in s and s.get("type") == typ),
    ),
    (
        re.compile(r"^!\(has\(self\.(\w+)\) && self\.type != '(\w+)'\)$"),
        lambda field, typ: lambda s: not (field in s and s.get("type") != typ),
    ),
    (
        re.compile(r"^self\.filter\(f, f\.type == '(\w+)'\)\.size\(\) <= 1$"),
        lambda typ: lambda s: sum(1 for f in s if f.get("type") == typ) <= 1,
    ),
    # HTTPRoute rule: ReplacePrefixMatch needs a single PathPrefix match (rule filters, backendRef filters)
    (
        re.compile(
            r"^\(has\(self\.filters\) && self\.filters\.exists_one\(f, has\(f\.(\w+)\) && .*\? \(\(size\(self\.matches\) != 1 .*$"
        ),
        lambda field: lambda s: not _uses_replace_prefix(s.get("filters", []), field) or _prefix_rule_ok(s, field),
    ),
    (
        re.compile(
            r"^\(has\(self\.backendRefs\) && self\.backendRefs\.exists_one\(b, \(has\(b\.filters\) && b\.filters\.exists_one\(f, has\(f\.(\w+)\) .*$"
        ),
        lambda field: (
            lambda s: (
                sum(1 for b in s.get("backendRefs", []) if _uses_replace_prefix(b.get("filters", []), field)) != 1
                or _prefix_rule_ok(s, field)
            )
        ),
    ),
    # GCPTrafficExtension body send modes
    (
        re.compile(
            r"^has\(self\.(request|response)BodySendMode\) && self\.\1BodySendMode == 'FullDuplexStreamed' \? .*$"
        ),
        lambda d: (
            lambda s: (
                s.get(f"{d}BodySendMode") != "FullDuplexStreamed"
                or {f"{d.capitalize()}Body", f"{d.capitalize()}Trailers"} <= set(s.get("supportedEvents", []))
            )
        ),
    ),
    (
        re.compile(r"^has\(self\.(request|response)BodySendMode\) && self\.\1BodySendMode == 'Streamed' \? .*$"),
        lambda d: (
            lambda s: s.get(f"{d}BodySendMode") != "Streamed" or f"{d.capitalize()}Body" in s.get("supportedEvents", [])
        ),
    ),
    (
        re.compile(
            r"^has\(self\.(request|response)BodySendMode\) \? has\(self\.backendRef\) && self\.backendRef\.kind == 'Service' : true$"
        ),
        lambda d: lambda s: f"{d}BodySendMode" not in s or s.get("backendRef", {}).get("kind") == "Service",
    ),
    # GCPBackendPolicy: a field set per scope must not also be set at the top level
    (
        re.compile(r"^!\(has\(self\.scopes\) && self\.scopes\.exists\(s, has\(s\.(\w+)\)\) && has\(self\.(\w+)\)\)$"),
        lambda a, b: lambda s: not ("scopes" in s and any(a in x for x in s["scopes"]) and b in s),
    ),
    # HealthCheckPolicy portSpecification
    (
        re.compile(r"^has\(self\.portSpecification\) && self\.portSpecification == 'USE_FIXED_PORT' \? .*$"),
        lambda: lambda s: s.get("portSpecification") != "USE_FIXED_PORT" or ("port" in s and "portName" not in s),
    ),
    (
        re.compile(r"^has\(self\.portSpecification\) && self\.portSpecification == 'USE_NAMED_PORT' \? .*$"),
        lambda: lambda s: s.get("portSpecification") != "USE_NAMED_PORT" or ("port" not in s and "portName" in s),
    ),
    (
        re.compile(r"^has\(self\.portSpecification\) && self\.portSpecification == 'USE_SERVING_PORT' \? .*$"),
        lambda: lambda s: s.get("portSpecification") != "USE_SERVING_PORT" or ("port" not in s and "portName" not in s),
    ),
]


def cel_predicate(rule: str) -> Callable[[Any], bool] | None:
    """The Python implementation of one CEL rule, or None when the rule is not implemented."""
    if rule in CEL_RULES:
        return CEL_RULES[rule]
    for pattern, factory in CEL_PATTERNS:
        m = pattern.match(rule)
        if m:
            return factory(*m.groups())
    return None


def _cel_rules(node: dict[str, Any]) -> list[dict[str, str]]:
    return [r for r in node.get("x-kubernetes-validations", []) if "oldSelf" not in r["rule"]]


def _list_type_errors(path: str, node: dict[str, Any], value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    lt = node.get("x-kubernetes-list-type")
    if lt == "set" and not _unique_by(value, lambda x: x):
        return [f"{path}: items of a list-type=set must be unique"]
    if lt == "map":
        keys = node.get("x-kubernetes-list-map-keys", [])
        if not _unique_by(value, lambda x: [x.get(k) for k in keys]):
            return [f"{path}: duplicate entries for list-map keys {keys}"]
    return []


DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def metadata_errors(meta: dict[str, Any]) -> list[str]:
    out = []
    name = meta.get("name")
    if not name:
        out.append("metadata.name: required")
    elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        out.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        if len(label) > 63 or not LABEL_NAME.match(label) or (prefix and not DNS1123_SUBDOMAIN.match(prefix)):
            out.append(f"metadata.labels: invalid key {key!r}")
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            out.append(f"metadata.labels.{key}: invalid value {value!r}")
    return out


# ---- API -------------------------------------------------------------------------------------------------------


@functools.cache
def _validator(relpath: str, api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(to_json_schema(load_schema(relpath, api_version, kind)))


def _errors_against(relpath: str, obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    schema = load_schema(relpath, obj["apiVersion"], obj["kind"])
    errors = [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in sorted(
            _validator(relpath, obj["apiVersion"], obj["kind"]).iter_errors(obj),
            key=lambda e: [str(p) for p in e.absolute_path],
        )
    ]
    unimplemented: list[str] = []
    defaulted = apply_defaults(schema, obj)
    for path, node, value in walk(schema, defaulted):
        errors += _list_type_errors(path or "<root>", node, value)
        for rule in _cel_rules(node):
            fn = cel_predicate(rule["rule"])
            if fn is None:
                unimplemented.append(f"{path or '<root>'}: {rule['rule']}")
                continue
            try:
                ok = fn(value)
            except (KeyError, TypeError, AttributeError):
                ok = False
            if not ok:
                errors.append(f"{path or '<root>'}: {rule.get('message', rule['rule'])}")
    return errors, unimplemented


def validate_custom_resource(obj: dict[str, Any]) -> list[str]:
    """All problems of ``obj`` against every schema registered for its apiVersion/kind (empty list = valid).
    An object with no registered schema is itself a problem."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    files = SCHEMA_FILES.get(key)  # type: ignore[arg-type]
    if not files:
        return [f"no known schema for {key[0]} {key[1]} (register it in tests/crd_schema.py SCHEMA_FILES)"]
    out = [f"metadata: {e}" for e in metadata_errors(obj.get("metadata") or {})]
    for relpath in files:
        errors, _ = _errors_against(relpath, obj)
        out += [f"[{relpath}] {e}" for e in errors]
    return out


def unimplemented_rules(obj: dict[str, Any]) -> list[str]:
    """CEL rules that apply to nodes present in ``obj`` but have no Python implementation in ``CEL_RULES``."""
    files = SCHEMA_FILES.get((obj.get("apiVersion"), obj.get("kind")), ())  # type: ignore[arg-type]
    out: list[str] = []
    for relpath in files:
        out += [f"[{relpath}] {u}" for u in _errors_against(relpath, obj)[1]]
    return sorted(set(out))
