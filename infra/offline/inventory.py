"""The one owner of the plan inventory format (``inventory.json``): what the offline runner writes, and what the
Analyzer harness, the plan diff and the tests read.

An inventory is the list of every resource the program registered under the mock monitor: URN, type, name,
custom or component, parent, provider reference, inputs (decoded from Pulumi's wire format, see
``runner.plain``), dependencies, property dependencies and the options the engine acts on (``protect``,
``ignore_changes`` ...), plus the stack outputs. Sorted by URN and serialised with sorted keys, so two plans of a
stack are byte-identical.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.naming import member_provider_region

from ..config.documents import DocumentError, quote, read_regular_file, render_key_path

#: Largest inventory.json read: 50x the largest plan written here (prod, ~0.6 MB), so a real plan always fits and
#: a wrong or hostile file is refused before it is parsed.
MAX_INVENTORY_BYTES = 32 << 20

#: How a value unknown at preview, and a secret, appear in an inventory.
COMPUTED_MARKER = "<computed>"
SECRET_MARKER = "[secret]"
#: The options recorded for every resource, with their types.
OPTION_KEYS: dict[str, type] = {
    "protect": bool,
    "delete_before_replace": bool,
    "ignore_changes": list,
    "replace_on_changes": list,
    "retain_on_delete": bool,
    "additional_secret_outputs": list,
    "custom_timeouts": dict,
}
#: Options that hold property paths or output names: lists of strings (the plan diff parses them as paths).
_STRING_LIST_OPTIONS = ("ignore_changes", "replace_on_changes", "additional_secret_outputs")
#: Deepest nesting ``Inventory.load`` accepts: 4x the deepest inventory the program writes (15 levels), so the
#: recursive walkers after it (plan diff, the Analyzer's protobuf Struct encoding) stay far from Python's
#: recursion limit.
MAX_INVENTORY_DEPTH = 64


class InventoryError(ValueError):
    """A document that is not an inventory of this format; the message names the offending entry."""


@dataclass(frozen=True)
class Resource:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str | None
    #: ``<provider urn>`` (the runner strips the mock's ``::<id>`` suffix) or ``""`` for a default provider.
    provider: str
    inputs: dict[str, Any]
    dependencies: tuple[str, ...]
    property_dependencies: dict[str, tuple[str, ...]]
    options: dict[str, Any]
    #: The URNs the resource's ``aliases`` option names (resolved as the engine does): an old resource at one of
    #: them is this resource, not a delete plus a create.
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "aliases": list(self.aliases),
            "type": self.type,
            "name": self.name,
            "custom": self.custom,
            "parent": self.parent,
            "provider": self.provider,
            "inputs": self.inputs,
            "dependencies": list(self.dependencies),
            "property_dependencies": {k: list(v) for k, v in sorted(self.property_dependencies.items())},
            "options": self.options,
        }

    @property
    def kubernetes_object(self) -> dict[str, Any] | None:
        """The object a Kubernetes custom resource applies (``apiVersion``/``kind`` inputs), else None. A patch
        (pulumi-kubernetes ``<Kind>Patch`` types: a server-side apply of some fields of an object another resource
        creates) is not an object of its own and stays in the inventory only."""
        i = self.inputs
        if self.custom and self.type.startswith("kubernetes:") and "kind" in i and "apiVersion" in i:
            if self.type.endswith(f":{i['kind']}Patch"):
                return None
            return i
        return None


@dataclass(frozen=True)
class Inventory:
    project: str
    stack: str
    resources: tuple[Resource, ...]
    outputs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for r in self.resources:
            if r.urn in seen:
                raise InventoryError(f"duplicate urn in inventory: {quote(r.urn)}")
            seen.add(r.urn)

    # ---- serialisation ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "stack": self.stack,
            "resources": [r.to_dict() for r in sorted(self.resources, key=lambda r: r.urn)],
            "outputs": self.outputs,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, doc: Any, source: str = "inventory") -> Inventory:
        """Parse and check a decoded ``inventory.json``; every problem names its entry."""
        if not isinstance(doc, Mapping):
            raise InventoryError(f"{source} must be a JSON object, got {type(doc).__name__}")
        missing = [k for k in ("project", "stack", "resources") if k not in doc]
        if missing:
            raise InventoryError(f"{source} is missing key(s): {', '.join(missing)}")
        if not isinstance(doc["resources"], list):
            raise InventoryError(f"{source}: 'resources' must be a list")
        outputs = doc.get("outputs") or {}
        if not isinstance(outputs, Mapping):
            raise InventoryError(f"{source}: 'outputs' must be an object")
        return cls(
            project=str(doc["project"]),
            stack=str(doc["stack"]),
            resources=tuple(_resource(r, f"{source} resources[{i}]") for i, r in enumerate(doc["resources"])),
            outputs=dict(outputs),
        )

    @classmethod
    def load(cls, path: Path) -> Inventory:
        """Read ``inventory.json``; a missing or malformed file is an :class:`InventoryError` naming it."""
        if not Path(path).exists():
            raise InventoryError(f"no inventory file {path} (run `llm-serving plan --out DIR` first)")
        try:
            data = read_regular_file(
                Path(path), source=str(path), max_bytes=MAX_INVENTORY_BYTES, limit_name="MAX_INVENTORY_BYTES"
            )
            text = data.decode("utf-8")
        except DocumentError as exc:
            raise InventoryError(str(exc)) from None
        except UnicodeDecodeError as exc:
            raise InventoryError(f"cannot read inventory {path}: {exc}") from None
        try:
            doc = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_double_int)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, the checks above, int digit limit
            raise InventoryError(f"{path} is not valid JSON: {exc}") from None
        _check_values(doc, str(path))
        return cls.from_dict(doc, str(path))

    # ---- look-ups --------------------------------------------------------------------------------------
    def by_urn(self) -> dict[str, Resource]:
        return {r.urn: r for r in self.resources}

    def of_type(self, *types: str) -> list[Resource]:
        return sorted((r for r in self.resources if r.type in types), key=lambda r: r.urn)

    def manifests(self) -> dict[str, dict[str, Any]]:
        """Kubernetes objects the program registers, keyed by a stable file name ``<kind>--<ns>--<name>.yaml``."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.resources:
            obj = r.kubernetes_object
            if obj is None:
                continue
            meta = obj.get("metadata") or {}
            ns = meta.get("namespace") or "_cluster"
            fname = f"{_slug(obj['kind'])}--{_slug(ns)}--{_slug(meta.get('name') or r.name)}.yaml"
            # A fleet's other clusters hold objects of the same names: each region's files carry its name first.
            region = member_provider_region(r.provider.rsplit("::", 1)[-1])
            if region is not None:
                fname = f"{_slug(region)}--{fname}"
            if fname in out:
                raise InventoryError(f"two Kubernetes objects map to {fname}: names must be unique per kind/namespace")
            out[fname] = obj
        return dict(sorted(out.items()))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (RFC 8259 §6)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {quote(text)} is out of range")
    return value


def _double_int(text: str) -> int:
    value = int(text)  # ValueError beyond Python's int/str digit limit
    try:
        float(value)  # every number travels as a protobuf double (Analyzer protocol)
    except OverflowError:
        raise ValueError(f"integer {quote(text)} is out of range") from None
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_values(doc: Any, source: str) -> None:
    """Bounded nesting, and text a protobuf string can carry (a lone surrogate escape cannot be UTF-8)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_INVENTORY_DEPTH:
            raise InventoryError(f"{source} is nested deeper than {MAX_INVENTORY_DEPTH} levels")
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise InventoryError(f"{source} holds a lone surrogate escape (\\ud800-\\udfff), which is not text")
        elif isinstance(value, dict):
            stack.extend((k, depth) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", str(text).lower()).strip("-")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InventoryError(f"{where} must be a list of strings")
    return tuple(value)


def _resource(r: Any, where: str) -> Resource:
    if not isinstance(r, Mapping) or not r.get("urn") or not r.get("type"):
        raise InventoryError(f"{where} needs non-empty 'urn' and 'type'")
    urn = str(r["urn"])
    shown = quote(urn)
    inputs = r.get("inputs") or {}
    if not isinstance(inputs, Mapping):
        raise InventoryError(f"{where} ({shown}): 'inputs' must be an object")
    props = r.get("property_dependencies") or {}
    if not isinstance(props, Mapping):
        raise InventoryError(f"{where} ({shown}): 'property_dependencies' must be an object")
    options = r.get("options") or {}
    if not isinstance(options, Mapping):
        raise InventoryError(f"{where} ({shown}): 'options' must be an object")
    for key, typ in OPTION_KEYS.items():
        if key in options and not isinstance(options[key], typ):
            raise InventoryError(f"{where} ({shown}): option {key!r} must be a {typ.__name__}")
    for key in _STRING_LIST_OPTIONS:
        if key in options:
            _strings(options[key], f"{where} ({shown}) option {key!r}")
    return Resource(
        urn=urn,
        type=str(r["type"]),
        name=str(r.get("name") or urn.rsplit("::", 1)[-1]),
        custom=bool(r.get("custom", True)),
        parent=(str(r["parent"]) if r.get("parent") else None),
        provider=str(r.get("provider") or ""),
        inputs=dict(inputs),
        dependencies=_strings(r.get("dependencies") or [], f"{where} ({shown}) dependencies"),
        property_dependencies={
            str(k): _strings(v, f"{where} ({shown}) {render_key_path(('property_dependencies', str(k)))}")
            for k, v in props.items()
        },
        options=dict(options),
        aliases=_strings(r.get("aliases") or [], f"{where} ({shown}) aliases"),
    )
