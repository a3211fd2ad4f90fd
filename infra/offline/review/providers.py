"""Each provider's decision, replace or update, for one resource: the way that provider makes it.

* :class:`BridgedModel` - pulumi-gcp (Terraform bridge): a change replaces when Terraform's plan requires a new
  resource: a ``ForceNew`` attribute changed as its shape counts changes (:data:`.rules.SHAPES`), a value unknown
  until apply reaches a ``ForceNew`` attribute, or a ``CustomizeDiff`` rule fires. Delete-before-replace as the
  bridge decides it (pulumi-terraform-bridge ``pkg/tfbridge/provider.go`` ``Diff``: ``ResourceInfo.DeleteBeforeReplace``
  or ``nameRequiresDeleteBeforeReplace``: an auto-named field the program sets itself).
* :class:`KubernetesModel` - pulumi-kubernetes: a change at or below a ``forceNew`` path (or a change of a whole
  subtree holding one) replaces; ConfigMap / Secret payloads unless the provider enables mutation;
  delete-before-replace when the program names the object and keeps its name and namespace (``provider.go``
  ``Diff``).
* :class:`DynamicModel` - the program's own dynamic providers (``components/vertex/provider.py``): their real
  ``diff()`` is called, on the state their own ``create()`` records for the old inputs (run against a transport
  that answers every call at once, so nothing leaves the machine).
* :class:`KubernetesProviderModel` - a ``pulumi:providers:kubernetes`` resource: pulumi-kubernetes ``DiffConfig``
  replaces the provider (and with it every object it manages) when the kubeconfig's active cluster changes.
"""

from __future__ import annotations

import base64
import importlib
import json
import pickletools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from .paths import ABSENT, ANY_INDEX, Segment, format_path, instances, matches_prefix, parse_path, resolve
from .rules import BridgedType, ForceNew, KubernetesType, RuleSet, kubernetes_metadata_rules
from .structure import changes, same

#: A value known only after apply (the review's marker; ``<computed>`` in inventories means the same).
UNKNOWN: Final = "<unknown until apply>"
UNKNOWN_MARKERS: Final = frozenset({UNKNOWN, "<computed>"})


def is_unknown(v: Any) -> bool:
    return isinstance(v, str) and v in UNKNOWN_MARKERS


def contains_unknown(v: Any) -> bool:
    if is_unknown(v):
        return True
    if isinstance(v, Mapping):
        return any(contains_unknown(x) for x in v.values())
    if isinstance(v, list):
        return any(contains_unknown(x) for x in v)
    return False


@dataclass(frozen=True)
class FieldChange:
    """One changed input (or option) of a resource, as displayed: ``path`` in Pulumi property syntax, with keyed
    list elements as ``[name=...]``."""

    path: str
    old: Any
    new: Any
    forces_replacement: bool = False
    reasons: tuple[str, ...] = ()
    #: Listed but not acted on (``ignoreChanges``, a value the provider keeps, a provider that reports no change).
    ignored: bool = False
    note: str | None = None

    @property
    def kind(self) -> str:
        if self.old is ABSENT:
            return "added"
        if self.new is ABSENT:
            return "removed"
        return "changed"


@dataclass(frozen=True)
class Verdict:
    fields: tuple[FieldChange, ...]
    replace: bool
    delete_before_replace: bool = False
    dbr_reason: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return any(not f.ignored for f in self.fields)


@dataclass(frozen=True)
class Subject:
    """What a provider model sees of one resource: type, old and new inputs, the new options, and for
    Kubernetes the inputs of the provider resource that manages it."""

    type: str
    old_inputs: Mapping[str, Any]
    new_inputs: Mapping[str, Any]
    options: Mapping[str, Any]
    provider_inputs: Mapping[str, Any] = field(default_factory=dict)


# ---- shared helpers -----------------------------------------------------------------------------------------------


def _ignored_by(options: Mapping[str, Any], segs: Sequence[Segment]) -> bool:
    for p in options.get("ignore_changes") or []:
        pat = parse_path(p)
        if len(segs) >= len(pat) and matches_prefix(pat, segs):
            return True
    return False


def _replace_on_changes(options: Mapping[str, Any], segs: Sequence[Segment], old: Any, new: Any) -> list[str]:
    out = []
    for p in options.get("replace_on_changes") or []:
        pat = parse_path(p)
        if _hits(pat, segs, old, new):
            out.append(f"replaceOnChanges: {p}")
    return out


def _hits(pattern: Sequence[Segment], segs: Sequence[Segment], old: Any, new: Any) -> bool:
    """``segs`` is at or below ``pattern``, or an ancestor whose old or new value holds ``pattern``."""
    if not matches_prefix(pattern, segs):
        return False
    if len(segs) >= len(pattern):
        return True
    rest = pattern[len(segs) :]
    return any(True for _ in instances(old, rest)) or any(True for _ in instances(new, rest))


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _set_same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return sorted(map(_canon, a)) == sorted(map(_canon, b))
    return same(a, b)


def _length(v: Any) -> int:
    return len(v) if isinstance(v, list) else 0 if v is ABSENT or v is None else 1


# ---- pulumi-gcp (Terraform bridge) --------------------------------------------------------------------------------


class BridgedModel:
    def __init__(self, rules: RuleSet):
        self.rules = rules

    def _rule_forces(
        self, rule: ForceNew, prefix: tuple[Segment, ...], old_tree: Mapping[str, Any], new_tree: Mapping[str, Any]
    ) -> str | None:
        """Why the attribute instance at ``prefix`` forces a new resource, or None."""
        ov, nv = resolve(old_tree, prefix), resolve(new_tree, prefix)
        if rule.computed and (nv is ABSENT or nv is None):
            return None  # Optional + Computed: left out, the provider keeps the value it has
        if contains_unknown(nv):
            return f"{rule.text} (ForceNew) is unknown until apply"
        s = rule.shape
        if s in ("scalar", "map", "list"):
            changed = not same(ov if ov is not ABSENT else None, nv if nv is not ABSENT else None)
        elif s == "set":
            changed = not _set_same(ov if ov is not ABSENT else [], nv if nv is not ABSENT else [])
        elif s == "object":
            changed = (ov is ABSENT or ov is None) != (nv is ABSENT or nv is None)
        elif s == "list-of-blocks":
            changed = _length(ov) != _length(nv)
        else:  # set-of-blocks: a changed element is removed and re-added; count or content
            changed = not _set_same(ov if ov is not ABSENT else [], nv if nv is not ABSENT else [])
        return f"{rule.text} forces replacement ({rule.source})" if changed else None

    def diff(self, s: Subject) -> Verdict:
        t: BridgedType | None = self.rules.gcp.get(s.type)
        raw = changes(dict(s.old_inputs), dict(s.new_inputs))
        out: list[FieldChange] = []
        for segs, old, new in raw:
            path = format_path(segs)
            if _ignored_by(s.options, segs):
                out.append(FieldChange(path, old, new, ignored=True, note="ignoreChanges"))
                continue
            reasons: list[str] = []
            kept = False
            if t is not None:
                for rule in t.force_new:
                    if not matches_prefix(rule.path, segs):
                        continue
                    if len(segs) >= len(rule.path):
                        prefixes = [segs[: len(rule.path)]]
                    else:
                        rest = rule.path[len(segs) :]
                        found = {p for side in (old, new) for p in instances(side, rest)}
                        prefixes = [(*segs, *p) for p in sorted(found, key=str)]
                    for pre in prefixes:
                        why = self._rule_forces(rule, tuple(pre), s.old_inputs, s.new_inputs)
                        if why:
                            reasons.append(why)
                        elif rule.computed and len(segs) == len(rule.path) and new is ABSENT:
                            kept = True
                for c in t.conditional:
                    if tuple(c.path) == tuple(segs) and old is not ABSENT and new is not ABSENT and c.forces(old, new):
                        reasons.append(
                            f"{c.text}: CustomizeDiff {c.kind}({c.predicate}) forces replacement ({c.source})"
                            if c.kind != "ForceNew"
                            else f"{c.text}: CustomizeDiff {c.predicate} calls ForceNew ({c.source}; its condition "
                            "is not modelled: assumed to replace)"
                        )
            reasons += _replace_on_changes(s.options, segs, old, new)
            if kept and not reasons:
                out.append(
                    FieldChange(path, old, new, ignored=True, note="Optional + Computed: the provider keeps its value")
                )
                continue
            out.append(FieldChange(path, old, new, bool(reasons), tuple(dict.fromkeys(reasons))))
        replace = any(f.forces_replacement for f in out)
        dbr, why = False, None
        if replace and t is not None:
            if t.delete_before_replace:
                dbr, why = True, f"pulumi-gcp sets DeleteBeforeReplace for {t.terraform} ({t.delete_before_replace})"
            else:
                named = [a for a in t.autonamed if resolve(s.new_inputs, parse_path(a)) not in (ABSENT, None)]
                if named and (
                    not t.unique_name_fields
                    or all(same(s.old_inputs.get(u), s.new_inputs.get(u)) for u in t.unique_name_fields)
                ):
                    dbr = True
                    why = (
                        f"the program names it ({', '.join(named)}): the replacement cannot exist beside the old one "
                        "(pulumi-terraform-bridge nameRequiresDeleteBeforeReplace)"
                    )
        return Verdict(tuple(out), replace, dbr, why)


# ---- pulumi-kubernetes -----------------------------------------------------------------------------------------------


class KubernetesModel:
    def __init__(self, rules: RuleSet):
        self.rules = rules
        self.metadata_rules = kubernetes_metadata_rules(rules)

    def _rules_for(self, s: Subject) -> list[ForceNew]:
        t: KubernetesType | None = self.rules.kubernetes.get(s.type)
        found = list(t.force_new) if t is not None else list(self.metadata_rules)
        if t is not None and t.payload:
            mutable = bool(s.provider_inputs.get(t.payload_mutable_flag or "")) if t.payload_mutable_flag else False
            if not mutable or s.new_inputs.get("immutable") is True:
                found += t.payload
        return found

    def diff(self, s: Subject) -> Verdict:
        rules = self._rules_for(s)
        out: list[FieldChange] = []
        for segs, old, new in changes(dict(s.old_inputs), dict(s.new_inputs)):
            path = format_path(segs)
            if _ignored_by(s.options, segs):
                out.append(FieldChange(path, old, new, ignored=True, note="ignoreChanges"))
                continue
            reasons = [f"{r.text} forces replacement ({r.source})" for r in rules if _hits(r.path, segs, old, new)]
            reasons += _replace_on_changes(s.options, segs, old, new)
            out.append(FieldChange(path, old, new, bool(reasons), tuple(dict.fromkeys(reasons))))
        replace = any(f.forces_replacement for f in out)
        old_meta = s.old_inputs.get("metadata") or {}
        new_meta = s.new_inputs.get("metadata") or {}
        annotations = new_meta.get("annotations") or {}
        named = bool(new_meta.get("name")) and annotations.get("pulumi.com/autonamed") != "true"
        dbr = (
            replace
            and named
            and new_meta.get("name") == old_meta.get("name")
            and (new_meta.get("namespace") or "default") == (old_meta.get("namespace") or "default")
        )
        why = (
            f"the object keeps its name {new_meta.get('name')!r}: the old one is deleted before the new one is created "
            f"({self.rules.kubernetes_dbr_source})"
            if dbr
            else None
        )
        return Verdict(tuple(out), replace, dbr, why)


class KubernetesProviderModel:
    """pulumi-kubernetes ``DiffConfig`` (provider.go): the provider is replaced when the kubeconfig's active cluster
    changes (or ``clusterIdentifier`` / ``renderYamlToDirectory`` change); other config changes update it."""

    REPLACING: Final = ("clusterIdentifier", "renderYamlToDirectory")

    @staticmethod
    def _active_cluster(inputs: Mapping[str, Any]) -> Any:
        raw = inputs.get("kubeconfig")
        if not isinstance(raw, str):
            return raw
        try:
            doc = yaml.safe_load(raw)
        except yaml.YAMLError:
            return raw
        if not isinstance(doc, Mapping):
            return raw
        ctx_name = inputs.get("context") or doc.get("current-context")
        ctx = next((c.get("context") for c in doc.get("contexts") or [] if c.get("name") == ctx_name), None) or {}
        cluster_name = inputs.get("cluster") or ctx.get("cluster")
        return next((c.get("cluster") for c in doc.get("clusters") or [] if c.get("name") == cluster_name), None)

    def diff(self, s: Subject) -> Verdict:
        out: list[FieldChange] = []
        active_changed = not same(self._active_cluster(s.old_inputs), self._active_cluster(s.new_inputs))
        for segs, old, new in changes(dict(s.old_inputs), dict(s.new_inputs)):
            top = str(segs[0]) if segs else ""
            reasons = []
            if top in self.REPLACING:
                reasons.append(f"provider config {top} changed (pulumi-kubernetes DiffConfig)")
            elif top in ("kubeconfig", "context", "cluster") and (active_changed or contains_unknown(new)):
                reasons.append("the kubeconfig's active cluster changes (pulumi-kubernetes DiffConfig)")
            out.append(FieldChange(format_path(segs), old, new, bool(reasons), tuple(reasons)))
        return Verdict(tuple(out), any(f.forces_replacement for f in out))


# ---- the program's dynamic providers ---------------------------------------------------------------------------------


class DynamicProviderError(RuntimeError):
    pass


#: Modules a dynamic provider class may come from: the program's own components (never anything a pickle names).
DYNAMIC_MODULES: Final = ("components.",)


def provider_class_of(pickled: str) -> tuple[str, str]:
    """(module, class) the ``__provider`` pickle refers to, read from its opcodes without unpickling it."""
    try:
        data = base64.b64decode(pickled, validate=True)
        strings: list[str] = []
        for op, arg, _pos in pickletools.genops(data):
            if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                strings.append(str(arg))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                return strings[-2], strings[-1]
            elif op.name == "GLOBAL" and isinstance(arg, str):
                module, _, name = arg.partition(" ")
                return module, name
    except (ValueError, TypeError) as exc:
        raise DynamicProviderError(f"__provider is not a pickle: {exc}") from None
    raise DynamicProviderError("__provider names no class")


class _Answering:
    """A transport that answers every call at once: operations done, resources named after their role."""

    def __init__(self, region: str = "review"):
        # Vertex's factory passes the region (a regional API host); Cloud Run's passes nothing (one global host).
        self.region = region

    def call(self, method: str, params: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        op = f"projects/state/locations/{self.region}/operations/review"
        return {
            "name": op,
            "done": True,
            "response": {
                "model": f"projects/state/locations/{self.region}/models/recorded-at-create",
                "deployedModel": {"id": "recorded-at-create"},
            },
            "deployedModels": [],
            "trafficSplit": {},
        }


def _to_provider_value(v: Any) -> Any:
    """Inventory values -> what a dynamic provider receives (the engine's unknown sentinel for unknowns)."""
    from pulumi.runtime import rpc

    if is_unknown(v):
        return rpc.UNKNOWN
    if isinstance(v, Mapping):
        return {k: _to_provider_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_provider_value(x) for x in v]
    return v


class DynamicModel:
    PROVIDER_KEY: Final = "__provider"

    def _provider(self, inputs: Mapping[str, Any]) -> Any:
        pickled = inputs.get(self.PROVIDER_KEY)
        if not isinstance(pickled, str):
            raise DynamicProviderError("no __provider input")
        module, name = provider_class_of(pickled)
        if not module.startswith(DYNAMIC_MODULES):
            raise DynamicProviderError(f"__provider names {module}.{name}, outside {', '.join(DYNAMIC_MODULES)}")
        from pulumi.dynamic import ResourceProvider

        cls = getattr(importlib.import_module(module), name, None)
        if not (isinstance(cls, type) and issubclass(cls, ResourceProvider)):
            raise DynamicProviderError(f"__provider names {module}.{name}, which is not a dynamic provider class")
        factory: Any = cls  # the class's own constructor (components/*/provider.py), not ResourceProvider's
        return factory(transport_factory=_Answering, sleep=lambda _s: None, clock=lambda: 0.0)

    def diff(self, s: Subject) -> Verdict:
        provider = self._provider(s.new_inputs)
        olds = {k: v for k, v in _to_provider_value(s.old_inputs).items() if k != self.PROVIDER_KEY}
        news = {k: v for k, v in _to_provider_value(s.new_inputs).items() if k != self.PROVIDER_KEY}
        note: str | None = None
        try:
            if getattr(provider, "DIFF_READS_INPUTS_ONLY", False):
                state = dict(olds)  # its diff() compares recorded inputs only: they are the state it needs
            else:
                state = dict(provider.create(olds).outs)  # what the provider records for the old inputs
        except Exception as exc:
            state = dict(olds)
            note = f"old state approximated by its inputs ({type(exc).__name__}: {exc})"
        state[self.PROVIDER_KEY] = s.old_inputs.get(self.PROVIDER_KEY)
        news[self.PROVIDER_KEY] = s.new_inputs.get(self.PROVIDER_KEY)
        result = provider.diff("review", state, news)
        replaces = set(result.replaces or [])
        out: list[FieldChange] = []
        for segs, old, new in changes(dict(s.old_inputs), dict(s.new_inputs)):
            top = str(segs[0]) if segs else ""
            if _ignored_by(s.options, segs):
                out.append(FieldChange(format_path(segs), old, new, ignored=True, note="ignoreChanges"))
                continue
            if top == self.PROVIDER_KEY:
                out.append(FieldChange(format_path(segs), "<pickled provider>", "<pickled provider>", note="provider"))
                continue
            forced = top in replaces
            reasons = (f"{type(provider).__name__}.diff() replaces {top}",) if forced else ()
            out.append(
                FieldChange(
                    format_path(segs),
                    old,
                    new,
                    forced,
                    reasons,
                    ignored=not result.changes,
                    note=None if result.changes else f"{type(provider).__name__}.diff() reports no change",
                )
            )
        return Verdict(
            tuple(out),
            bool(replaces) and bool(result.changes),
            bool(result.delete_before_replace),
            "the provider's diff() asks for delete-before-replace" if result.delete_before_replace else None,
            (note,) if note else (),
        )


class GenericModel:
    """A type no rule covers (another provider's own resource): every change is an in-place update."""

    def diff(self, s: Subject) -> Verdict:
        out = [
            FieldChange(format_path(segs), old, new, note="no replacement rules for this type")
            for segs, old, new in changes(dict(s.old_inputs), dict(s.new_inputs))
        ]
        return Verdict(tuple(out), False)


def model_for(resource_type: str, rules: RuleSet) -> BridgedModel | KubernetesModel | DynamicModel | Any:
    if resource_type.startswith("gcp:"):
        return BridgedModel(rules)
    if resource_type == "pulumi:providers:kubernetes":
        return KubernetesProviderModel()
    if resource_type.startswith("kubernetes:"):
        return KubernetesModel(rules)
    if resource_type.startswith("pulumi-python:dynamic"):
        return DynamicModel()
    return GenericModel()


__all__ = [
    "ANY_INDEX",
    "UNKNOWN",
    "BridgedModel",
    "DynamicModel",
    "DynamicProviderError",
    "FieldChange",
    "GenericModel",
    "KubernetesModel",
    "KubernetesProviderModel",
    "Subject",
    "Verdict",
    "contains_unknown",
    "model_for",
    "provider_class_of",
]
