"""A small, strict validator of JSON request bodies against Google's published API discovery documents.

The documents are the ones google-api-python-client ships (``googleapiclient/discovery_cache/documents/
<api>.<version>.json``): the same files ``googleapiclient.discovery.build(..., static_discovery=True)`` turns
into the client that sends the bodies, so a body that validates here has exactly the shape the library puts on
the wire. Discovery format reference: https://developers.google.com/discovery/v1/reference/apis and the proto3
JSON mapping (https://protobuf.dev/programming-guides/json/) that Google's REST surface uses.

What is checked, with a JSON-path-qualified message per problem:

* unknown fields (with a close-match suggestion), and output-only (``readOnly``) fields in request bodies;
* JSON types per discovery ``type``/``format``: ``int64``/``uint64`` are decimal strings, ``int32``/``uint32``
  JSON integers in range, ``double``/``float`` numbers, ``byte`` base64, ``google-datetime`` RFC 3339,
  ``google-duration`` ``<seconds>[.<fraction>]s``, ``google-fieldmask`` comma-separated paths, ``date``;
* ``enum`` values (the message lists the allowed ones);
* arrays (``items``), maps (``additionalProperties``) and ``$ref`` (resolved lazily, so recursive schemas work).

Discovery documents mark almost nothing as required (``required`` appears only on method parameters), so
nothing is invented here: callers that know a field is required pass its path in ``required=``.

Kept generic on purpose: the same class checks Vertex AI bodies (aiplatform.v1), Cloud Monitoring dashboards
(monitoring.v1 ``Dashboard``) and GKE / Compute Engine enum values (container.v1, compute.v1).
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import difflib
import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import googleapiclient

DOCUMENTS_DIR = Path(googleapiclient.__file__).resolve().parent / "discovery_cache" / "documents"

_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
#: google.protobuf.Duration bounds: +-10,000 years in seconds (duration.proto).
_MAX_DURATION_SECONDS = 315_576_000_000
_DURATION_RE = re.compile(r"^(-)?(\d+)(\.\d{1,9})?s$")
#: RFC 3339 as the proto3 JSON mapping writes Timestamps: 'Z' or a numeric offset, up to 9 fractional digits.
_DATETIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")
_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_FIELDMASK_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
#: Standard or URL-safe alphabet, padding optional (proto3 JSON parsers accept both forms).
_BASE64_RE = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")
_INT_STRING_RE = re.compile(r"^-?\d+$")
_UINT_STRING_RE = re.compile(r"^\d+$")
#: Non-finite doubles are JSON strings in the proto3 mapping.
_NON_FINITE = ("NaN", "Infinity", "-Infinity")
#: difflib similarity for "did you mean" hints: 0.6 is difflib's own default, enough for dropped/added letters
#: (dedicatedResource -> dedicatedResources) without suggesting unrelated names.
_CLOSE_MATCH_CUTOFF = 0.6


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _shown(value: Any) -> str:
    """A value as it appears in messages: JSON text, truncated so a large body does not flood the report."""
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{path}[{json.dumps(key)}]"


class DiscoveryDocument:
    """One discovery document: schema lookup, method lookup and validation."""

    def __init__(self, doc: Mapping[str, Any]):
        self.doc = doc
        self.name: str = doc["name"]
        self.version: str = doc["version"]
        self.revision: str = doc.get("revision", "")
        self.schemas: Mapping[str, Any] = doc.get("schemas", {})

    @classmethod
    def from_path(cls, path: Path) -> DiscoveryDocument:
        return cls(json.loads(path.read_text()))

    def __repr__(self) -> str:
        return f"DiscoveryDocument({self.name}.{self.version}, revision {self.revision})"

    # ---- lookup -----------------------------------------------------------------------------------------

    def schema(self, schema_id: str) -> Mapping[str, Any]:
        try:
            return self.schemas[schema_id]
        except KeyError:
            close = difflib.get_close_matches(schema_id, list(self.schemas), n=1, cutoff=_CLOSE_MATCH_CUTOFF)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise KeyError(f"{self.name}.{self.version} has no schema {schema_id!r}{hint}") from None

    def _resolve(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        """A property node with its ``$ref`` followed (the node's own keys, e.g. readOnly, are kept aside)."""
        seen: set[str] = set()
        while "$ref" in node:
            ref = node["$ref"]
            if ref in seen:  # a $ref cycle without structure would loop forever; none exists in Google's docs
                raise ValueError(f"$ref cycle at {ref!r}")
            seen.add(ref)
            node = self.schema(ref)
        return node

    def method(self, method_path: str) -> Mapping[str, Any]:
        """A method by its dotted path, e.g. ``projects.locations.models.upload``."""
        *resources, verb = method_path.split(".")
        node: Mapping[str, Any] = self.doc
        walked: list[str] = []
        for name in resources:
            children = node.get("resources", {})
            if name not in children:
                raise KeyError(
                    f"{self.name}.{self.version} has no resource {'.'.join([*walked, name])!r}; "
                    f"children: {', '.join(sorted(children)) or '(none)'}"
                )
            node = children[name]
            walked.append(name)
        methods = node.get("methods", {})
        if verb not in methods:
            raise KeyError(
                f"{self.name}.{self.version} resource {'.'.join(walked)!r} has no method {verb!r}; "
                f"methods: {', '.join(sorted(methods)) or '(none)'}"
            )
        return methods[verb]

    def has_method(self, method_path: str) -> bool:
        try:
            self.method(method_path)
        except KeyError:
            return False
        return True

    def request_schema(self, method_path: str) -> str | None:
        """The schema id of a method's request body (``None`` for methods that take no body)."""
        request = self.method(method_path).get("request")
        return request["$ref"] if request else None

    def response_schema(self, method_path: str) -> str | None:
        response = self.method(method_path).get("response")
        return response["$ref"] if response else None

    def field(self, schema_id: str, field_path: str) -> Mapping[str, Any]:
        """The (``$ref``-resolved) schema of a dotted field path. Arrays are stepped through implicitly; a map's
        value schema is selected with the segment ``*`` (``trafficSplit.*``)."""
        node: Mapping[str, Any] = self.schema(schema_id)
        where = schema_id
        for segment in field_path.split("."):
            node = self._resolve(node)
            while node.get("type") == "array":
                node = self._resolve(node["items"])
            if segment == "*":
                if "additionalProperties" not in node:
                    raise KeyError(f"{where} is not a map: '*' does not apply")
                node = node["additionalProperties"]
            else:
                props = node.get("properties", {})
                if segment not in props:
                    raise KeyError(f"{where} has no field {segment!r} (in {field_path!r})")
                node = props[segment]
            where = f"{where}.{segment}"
        resolved = self._resolve(node)
        return {**resolved, **{k: v for k, v in node.items() if k != "$ref"}} if "$ref" in node else node

    def enum_values(self, schema_id: str, field_path: str) -> tuple[str, ...]:
        """The ``enum`` listed for a field (of an array field: of its items)."""
        node = self.field(schema_id, field_path)
        while node.get("type") == "array":
            node = self._resolve(node["items"])
        if "enum" not in node:
            raise KeyError(f"{schema_id}.{field_path} is not an enum field")
        return tuple(node["enum"])

    # ---- validation ----------------------------------------------------------------------------------

    def validate(
        self, schema_id: str, body: Any, *, required: Iterable[str] = (), allow_read_only: bool = False
    ) -> list[str]:
        """Every problem of ``body`` against ``schema_id``, each prefixed with its JSON path (``$`` = body).

        ``required``: dotted paths the caller knows are required (``model.containerSpec.imageUri``); ``[]`` after
        a segment applies the rest to every element (``containerSpec.ports[].containerPort``).
        ``allow_read_only``: accept output-only fields (for checking responses; request bodies should not carry
        them, the server ignores them and their presence usually means a copied GET result)."""
        errors: list[str] = []
        self._check(self.schema(schema_id), body, "$", schema_id, errors, allow_read_only)
        for path in required:
            errors.extend(_missing(body, path))
        return errors

    def field_mask_errors(self, schema_id: str, mask: str) -> list[str]:
        """Paths of a ``google-fieldmask`` that do not name a field of ``schema_id`` (JSON camelCase names)."""
        errors = []
        for path in [p for p in mask.split(",") if p]:
            try:
                self.field(schema_id, path)
            except KeyError as err:
                errors.append(f"field mask {path!r}: {err.args[0]}")
        return errors

    def validate_parameters(self, method_path: str, params: Mapping[str, Any]) -> list[str]:
        """Path/query parameters of a call: required ones present, none unknown, ``pattern`` and ``format`` met.
        The document's global parameters (``fields``, ``alt``, ...) are accepted."""
        method = self.method(method_path)
        declared: Mapping[str, Any] = method.get("parameters", {})
        global_params: Mapping[str, Any] = self.doc.get("parameters", {})
        errors = []
        for name, spec in declared.items():
            if spec.get("required") and name not in params:
                errors.append(f"{method_path}: required parameter {name!r} is missing")
        for name, value in params.items():
            spec = declared.get(name) or global_params.get(name)
            if spec is None:
                errors.append(f"{method_path}: unknown parameter {name!r}; declared: {', '.join(sorted(declared))}")
                continue
            pattern = spec.get("pattern")
            if pattern and not (isinstance(value, str) and re.match(pattern, value)):
                errors.append(f"{method_path}: parameter {name}={_shown(value)} does not match {pattern}")
            values = value if spec.get("repeated") and isinstance(value, (list, tuple)) else [value]
            for item in values:
                self._check(spec, item, f"{method_path}({name})", f"parameter {name}", errors, True)
        return errors

    def _check(
        self, node: Mapping[str, Any], value: Any, path: str, where: str, errors: list[str], allow_read_only: bool
    ) -> None:
        schema = self._resolve(node)
        if "$ref" in node:
            where = node["$ref"]
        typ = schema.get("type")
        if typ == "any":
            return
        if value is None:
            errors.append(f"{path}: null is not a valid {typ or 'value'} (omit the field instead)")
            return
        if typ == "object" or (typ is None and ("properties" in schema or "additionalProperties" in schema)):
            self._check_object(schema, value, path, where, errors, allow_read_only)
        elif typ == "array":
            if not isinstance(value, (list, tuple)):
                errors.append(f"{path}: expected array, got {_json_type(value)} {_shown(value)}")
                return
            for i, item in enumerate(value):
                self._check(schema["items"], item, f"{path}[{i}]", where, errors, allow_read_only)
        elif typ == "string":
            self._check_string(schema, value, path, where, errors)
        elif typ == "integer":
            self._check_integer(schema, value, path, errors)
        elif typ == "number":
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or value in _NON_FINITE):
                errors.append(
                    f"{path}: expected number ({schema.get('format', 'double')}), got "
                    f"{_json_type(value)} {_shown(value)}"
                )
        elif typ == "boolean":
            if not isinstance(value, bool):
                errors.append(f"{path}: expected boolean, got {_json_type(value)} {_shown(value)}")
        else:
            errors.append(f"{path}: schema {where} has unsupported type {typ!r}")

    def _check_object(
        self, schema: Mapping[str, Any], value: Any, path: str, where: str, errors: list[str], allow_read_only: bool
    ) -> None:
        if not isinstance(value, Mapping):
            errors.append(f"{path}: expected object ({where}), got {_json_type(value)} {_shown(value)}")
            return
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        schema_name = schema.get("id", where)
        for key in sorted(value):
            sub = _key_path(path, str(key))
            if key in props:
                prop = props[key]
                if prop.get("readOnly") and not allow_read_only:
                    errors.append(f"{sub}: output-only field of {schema_name} must not be sent")
                    continue
                self._check(prop, value[key], sub, f"{schema_name}.{key}", errors, allow_read_only)
            elif extra is not None:
                self._check(extra, value[key], sub, f"{schema_name}[*]", errors, allow_read_only)
            else:
                close = difflib.get_close_matches(str(key), list(props), n=1, cutoff=_CLOSE_MATCH_CUTOFF)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                errors.append(f"{sub}: unknown field ({schema_name} has no field {key!r}){hint}")

    @staticmethod
    def _check_integer(schema: Mapping[str, Any], value: Any, path: str, errors: list[str]) -> None:
        fmt = schema.get("format", "int32")
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # JSON has one number type: 3.0 is the integer 3
            else:
                errors.append(f"{path}: expected integer ({fmt}), got {_json_type(value)} {_shown(value)}")
                return
        lo, hi = _UINT32 if fmt == "uint32" else _INT32
        if not lo <= value <= hi:
            errors.append(f"{path}: {value} is out of range for {fmt} [{lo}, {hi}]")

    def _check_string(self, schema: Mapping[str, Any], value: Any, path: str, where: str, errors: list[str]) -> None:
        fmt = schema.get("format")
        if fmt in ("int64", "uint64"):
            if not isinstance(value, str):
                errors.append(
                    f"{path}: expected string ({fmt}, a decimal integer in a JSON string), got "
                    f"{_json_type(value)} {_shown(value)}"
                )
                return
            regex, (lo, hi) = (_INT_STRING_RE, _INT64) if fmt == "int64" else (_UINT_STRING_RE, _UINT64)
            if not regex.match(value):
                errors.append(f"{path}: {_shown(value)} is not a decimal {fmt}")
            elif not lo <= int(value) <= hi:
                errors.append(f"{path}: {value} is out of range for {fmt} [{lo}, {hi}]")
            return
        if not isinstance(value, str):
            errors.append(
                f"{path}: expected string{f' ({fmt})' if fmt else ''}, got {_json_type(value)} {_shown(value)}"
            )
            return
        if "enum" in schema and value not in schema["enum"]:
            errors.append(f"{path}: {_shown(value)} is not a value of {where}; allowed: {', '.join(schema['enum'])}")
            return
        problem = _format_problem(fmt, value)
        if problem:
            errors.append(f"{path}: {_shown(value)} is not a {fmt} ({problem})")


def _format_problem(fmt: str | None, value: str) -> str | None:
    """Why ``value`` does not match a discovery string format, or None."""
    if fmt == "google-duration":
        m = _DURATION_RE.match(value)
        if not m:
            return "seconds with up to 9 fractional digits and a trailing 's', e.g. '3600s' or '0.5s'"
        if int(m.group(2)) > _MAX_DURATION_SECONDS:
            return f"more than {_MAX_DURATION_SECONDS} seconds"
        return None
    if fmt == "google-datetime":
        m = _DATETIME_RE.match(value)
        if not m:
            return "RFC 3339 with a 'Z' or numeric offset, e.g. '2026-08-23T10:00:00Z'"
        try:
            year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
            _dt.datetime(year, month, day, hour, minute, second)
        except ValueError as err:
            return str(err)
        return None
    if fmt == "date":
        m = _DATE_RE.match(value)
        if not m:
            return "YYYY-MM-DD"
        try:
            _dt.date(*(int(m.group(i)) for i in range(1, 4)))
        except ValueError as err:
            return str(err)
        return None
    if fmt == "google-fieldmask":
        bad = [p for p in value.split(",") if not _FIELDMASK_PATH_RE.match(p)] if value else []
        return f"bad path(s) {', '.join(map(repr, bad))}; comma-separated dotted field names" if bad else None
    if fmt == "byte":
        if not _BASE64_RE.match(value):
            return "base64 (standard or URL-safe alphabet)"
        try:
            base64.b64decode(
                value.replace("-", "+").replace("_", "/") + "=" * (-len(value.rstrip("=")) % 4), validate=False
            )
        except (binascii.Error, ValueError) as err:
            return f"base64: {err}"
        return None
    return None


def _missing(body: Any, path: str, prefix: str = "$") -> list[str]:
    head, _, rest = path.partition(".")
    each = head.endswith("[]")
    name = head[:-2] if each else head
    if not isinstance(body, Mapping) or name not in body:
        return [f"{_key_path(prefix, name)}: required field is missing"]
    here = _key_path(prefix, name)
    value = body[name]
    if each:
        if not isinstance(value, list):
            return [f"{here}: required array is not an array"]
        return [e for i, item in enumerate(value) for e in (_missing(item, rest, f"{here}[{i}]") if rest else [])]
    return _missing(value, rest, here) if rest else []


@cache
def document(api: str, version: str) -> DiscoveryDocument:
    """The discovery document google-api-python-client ships for ``api``/``version`` (parsed once)."""
    path = DOCUMENTS_DIR / f"{api}.{version}.json"
    if not path.exists():
        raise FileNotFoundError(f"no discovery document {path.name} in {DOCUMENTS_DIR}")
    return DiscoveryDocument.from_path(path)
