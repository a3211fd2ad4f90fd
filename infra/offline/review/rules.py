"""The replacement rules the review applies: :file:`replacement_rules.json`, derived from the providers' sources by
``scripts/derive_replacement_rules.py`` (every rule names its repository, file and line), plus the predicates of
the conditional ones.

* **Bridged Google Cloud resources** (pulumi-gcp over terraform-provider-google-beta): ``ForceNew`` attributes with
  their *shape* (how the Terraform SDK decides that a change of the attribute requires a new resource),
  ``CustomizeDiff`` rules, the fields the bridge auto-names, and the resources pulumi-gcp always replaces
  delete-before-create.
* **Kubernetes** (pulumi-kubernetes): ``forceNew`` property paths per kind, the ConfigMap / Secret payload rule and
  the delete-before-replace condition.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from .paths import Segment, parse_path

DATA: Final = Path(__file__).with_name("replacement_rules.json")

#: How a ForceNew attribute's change is judged (terraform-plugin-sdk/v2 helper/schema ``schemaMap.diff``):
#: ``scalar`` / ``map`` / ``list`` / ``set`` (a list or set of values: the SDK copies the collection's ForceNew
#: onto its primitive elements, so any element change counts; a set compares as a set); ``object`` (a block
#: flattened by ``maxItemsOne``: only adding or removing it counts, its fields carry their own ForceNew);
#: ``list-of-blocks`` / ``set-of-blocks`` (only the element count counts, ``#`` in the SDK's flatmap).
SHAPES: Final = frozenset({"scalar", "map", "list", "set", "object", "list-of-blocks", "set-of-blocks"})


def _is_disk_shrinkage(old: Any, new: Any) -> bool:
    """google-beta compute ``IsDiskShrinkage``: removing the size is fine, a smaller size replaces."""
    if old is None or new is None or isinstance(old, bool) or isinstance(new, bool):
        return False
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return new < old
    return False


def _is_shrinkage_ip_cidr(old: Any, new: Any) -> bool:
    """google-beta compute ``IsShrinkageIpCidr``: replace unless the new range contains the whole old range."""
    try:
        o = ipaddress.ip_network(str(old), strict=False)
        n = ipaddress.ip_network(str(new), strict=False)
    except ValueError:
        return False  # the Go predicate also answers false on an unparsable range
    if o.version != n.version:
        return True
    return not (o.network_address in n and o.broadcast_address in n)


def _turned_off(old: Any, new: Any) -> bool:
    """google-beta ``isBeenEnabled`` (container) and ``isPolicyLocked`` (storage): true -> false replaces."""
    return old is True and new is False


#: Go predicate name -> the same decision. A conditional rule whose predicate is missing here fails
#: tests/test_replacement_rules.py, so a provider upgrade cannot silently add one this review ignores.
PREDICATES: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "IsDiskShrinkage": _is_disk_shrinkage,
    "IsShrinkageIpCidr": _is_shrinkage_ip_cidr,
    "isBeenEnabled": _turned_off,
    "isPolicyLocked": _turned_off,
}


@dataclass(frozen=True)
class ForceNew:
    path: tuple[Segment, ...]
    text: str
    shape: str
    #: Optional + Computed: removing it from the inputs keeps the provider's value (no diff).
    computed: bool
    source: str


@dataclass(frozen=True)
class Conditional:
    path: tuple[Segment, ...]
    text: str
    #: ``ForceNewIfChange`` / ``ForceNewIf`` (with a predicate), or ``ForceNew`` (called inside a CustomizeDiff
    #: function whose condition is not modelled: a change is assumed to replace).
    kind: str
    predicate: str
    source: str

    def forces(self, old: Any, new: Any) -> bool:
        if self.kind == "ForceNew":
            return True
        return PREDICATES[self.predicate](old, new)


@dataclass(frozen=True)
class BridgedType:
    token: str
    terraform: str
    source: str
    force_new: tuple[ForceNew, ...]
    conditional: tuple[Conditional, ...]
    #: Pulumi fields the bridge auto-names; one the program sets itself makes a replacement delete-before-create
    #: (pulumi-terraform-bridge ``nameRequiresDeleteBeforeReplace``).
    autonamed: tuple[str, ...]
    #: ``ResourceInfo.DeleteBeforeReplace`` in pulumi-gcp, where set.
    delete_before_replace: str | None
    unique_name_fields: tuple[str, ...]


@dataclass(frozen=True)
class KubernetesType:
    token: str
    force_new: tuple[ForceNew, ...]
    payload: tuple[ForceNew, ...]
    payload_mutable_flag: str | None


@dataclass(frozen=True)
class RuleSet:
    sources: Mapping[str, Any]
    gcp: Mapping[str, BridgedType]
    kubernetes: Mapping[str, KubernetesType]
    kubernetes_dbr_source: str

    @staticmethod
    def from_document(doc: Mapping[str, Any]) -> RuleSet:
        def src(e: Mapping[str, Any]) -> str:
            return f"{e['repo']} {e['file']}:{e['line']}"

        gcp = {}
        for token, e in doc["gcp"].items():
            gcp[token] = BridgedType(
                token=token,
                terraform=e["terraform"],
                source=src(e),
                force_new=tuple(
                    ForceNew(tuple(parse_path(f["path"])), f["path"], f["shape"], bool(f["computed"]), src(f))
                    for f in e["force_new"]
                ),
                conditional=tuple(
                    Conditional(tuple(parse_path(c["path"])), c["path"], c["kind"], c["predicate"], src(c))
                    for c in e["conditional"]
                ),
                autonamed=tuple(a["path"] for a in e["autonamed"]),
                delete_before_replace=src(e["delete_before_replace"]) if "delete_before_replace" in e else None,
                unique_name_fields=tuple(e.get("unique_name_fields") or ()),
            )
        k8s = {}
        for token, e in doc["kubernetes"]["types"].items():
            payload = e.get("payload") or {}
            k8s[token] = KubernetesType(
                token=token,
                force_new=tuple(
                    ForceNew(tuple(parse_path(f["path"])), f["path"], "scalar", False, src(f)) for f in e["force_new"]
                ),
                payload=tuple(
                    ForceNew(tuple(parse_path(f["path"])), f["path"], "scalar", False, src(f))
                    for f in payload.get("paths") or ()
                ),
                payload_mutable_flag=payload.get("unless_provider_sets"),
            )
        return RuleSet(doc["sources"], gcp, k8s, src(doc["kubernetes"]["delete_before_replace"]))


@cache
def load_rules(path: Path = DATA) -> RuleSet:
    return RuleSet.from_document(json.loads(path.read_text(encoding="utf-8")))


def kubernetes_metadata_rules(rules: RuleSet) -> tuple[ForceNew, ...]:
    """``metadata.name`` / ``metadata.namespace``: every kind has them (custom resources too)."""
    for t in rules.kubernetes.values():
        return tuple(f for f in t.force_new if f.text in ("metadata.name", "metadata.namespace"))
    return ()
