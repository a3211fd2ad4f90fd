"""What ``pulumi up`` would do with two plans: the Pulumi engine's step generation over the providers' decisions.

The engine's rules this follows (github.com/pulumi/pulumi ``pkg/resource/deploy/step_generator.go``, v3.259):

* a new resource is matched to an old one by URN, else by one of its ``aliases``; unmatched new resources are
  created, unmatched old ones deleted;
* resources are stepped in dependency order; a value the program passes from a resource being created or replaced
  is unknown until apply (a placeholder of the offline plan becomes that unknown), so a dependent's provider decides
  on an unknown;
* a resource whose provider reference changes, or whose provider is replaced, is replaced;
* ``replaceOnChanges`` / ``ignoreChanges`` as the engine applies them (here: :mod:`.providers`);
* delete-before-replace: the provider's answer, overridden by the ``deleteBeforeReplace`` option when set; then the
  engine first deletes every dependent that a new copy of the resource would force to be replaced
  (``calculateDependentReplacements``: the dependent's provider diff with the inputs that come from the condemned
  resource unknown);
* ``protect``: replacing a resource that is protected before and after refuses the update (``unable to replace
  resource ... as it is currently marked for protection``); deleting a protected resource fails
  (``deleteProtectedError``), as does a delete-before-replace chain that reaches a protected dependent.

Component resources (no cloud object) are not listed, except remote components (a Helm chart) that are created,
deleted or whose inputs changed: the objects they render are created, deleted or changed, and this plan cannot see
them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from .paths import ABSENT, format_path
from .providers import UNKNOWN, FieldChange, Subject, Verdict, model_for
from .rules import RuleSet, load_rules
from .structure import changes

ACTIONS: Final = ("create", "update", "replace", "delete")
DYNAMIC_PREFIX: Final = "pulumi-python:dynamic"
PLACEHOLDER_PREFIX: Final = "<known-after-apply:"
PROTECTED_REFUSES: Final = "protected: `pulumi up` will refuse"
#: Remote components: the provider renders their objects, which the offline plan cannot list.
REMOTE_COMPONENTS: Final = frozenset({"kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigGroup"})


@dataclass(frozen=True)
class Change:
    urn: str
    type: str
    name: str
    action: str
    delete_before_replace: bool = False
    #: ``pulumi up`` refuses this step because the resource is protected.
    protected: bool = False
    restarts_pods: int = 0
    fields: tuple[FieldChange, ...] = ()
    #: The old URN the resource was matched by (an alias), when it differs.
    old_urn: str | None = None
    #: Why it is replaced (the forcing fields' reasons, or the cascade that replaces it).
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: A create's inputs.
    inputs: Mapping[str, Any] | None = None
    custom: bool = True


@dataclass(frozen=True)
class Review:
    changes: tuple[Change, ...]
    outputs: tuple[FieldChange, ...] = ()
    warnings: tuple[str, ...] = ()
    #: Changes that cannot apply as planned (an edited release, a claim Kubernetes will not resize): exit 2.
    errors: tuple[str, ...] = ()
    unchanged: int = 0

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ACTIONS, 0)
        for c in self.changes:
            out[c.action] += 1
        return out


def _index(inventory: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(r["urn"]): r for r in inventory.get("resources") or []}


def _provider_urn(ref: Any) -> str:
    text = str(ref or "")
    return text.rsplit("::", 1)[0] if text.count("::") > 3 else text


def _deps(r: Mapping[str, Any]) -> set[str]:
    out = set(r.get("dependencies") or [])
    for urns in (r.get("property_dependencies") or {}).values():
        out.update(urns)
    if r.get("parent"):
        out.add(str(r["parent"]))
    if r.get("provider"):
        out.add(_provider_urn(r["provider"]))
    return out


def dependency_order(index: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """URNs with every resource after what it depends on (ties by URN, so the order is deterministic)."""
    import heapq

    deps = {u: {d for d in _deps(r) if d in index and d != u} for u, r in index.items()}
    users: dict[str, set[str]] = {u: set() for u in index}
    for u, ds in deps.items():
        for d in ds:
            users[d].add(u)
    ready = [u for u, ds in deps.items() if not ds]
    heapq.heapify(ready)
    out: list[str] = []
    remaining = {u: len(ds) for u, ds in deps.items()}
    while ready:
        u = heapq.heappop(ready)
        out.append(u)
        for v in users[u]:
            remaining[v] -= 1
            if remaining[v] == 0:
                heapq.heappush(ready, v)
    out += sorted(set(index) - set(out))  # a cycle cannot come from a program; keep every resource anyway
    return out


def _unknown_leaves(value: Any, path: str) -> Any:
    """A value passed from a resource being created or replaced: its plan placeholders are unknown until apply."""
    if isinstance(value, Mapping):
        return {k: _unknown_leaves(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_unknown_leaves(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value is None or (isinstance(value, str) and value.startswith(PLACEHOLDER_PREFIX)):
        return UNKNOWN
    return value


def _state_leaves(value: Any, path: str) -> Any:
    """A value a dynamic provider receives from a resource that stays: what the state holds. The mock monitor
    answers a dynamic resource's outputs with null; a dynamic provider gets a stable stand-in instead, the same on
    both sides, of the one form the program's providers consume (a Vertex deployed model id: 10 digits)."""
    if isinstance(value, Mapping):
        return {k: _state_leaves(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_state_leaves(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if value is None:
        return str(int(hashlib.sha256(path.encode()).hexdigest(), 16) % 10**10).rjust(10, "1")
    return value


class Engine:
    def __init__(self, old: Mapping[str, Any], new: Mapping[str, Any], rules: RuleSet | None = None):
        self.rules = rules or load_rules()
        self.old, self.new = _index(old), _index(new)
        self.match: dict[str, str] = {}
        for urn in self.new:
            if urn in self.old:
                self.match[urn] = urn
        taken = set(self.match.values())
        for urn in sorted(self.new):
            if urn in self.match:
                continue
            for alias in self.new[urn].get("aliases") or []:
                if alias in self.old and alias not in taken:
                    self.match[urn] = alias
                    taken.add(alias)
                    break
        self.old_to_new = {o: n for n, o in self.match.items()}
        self.actions: dict[str, Change] = {}

    # -- inputs as the provider sees them
    def _inputs(self, r: Mapping[str, Any], side: str) -> dict[str, Any]:
        inputs = dict(r.get("inputs") or {})
        for key, urns in (r.get("property_dependencies") or {}).items():
            if key not in inputs:
                continue
            changing = side == "new" and any(
                (c := self.actions.get(u)) is not None and c.action in ("create", "replace") for u in urns
            )
            if changing:
                inputs[key] = _unknown_leaves(inputs[key], key)
            elif str(r.get("type", "")).startswith(DYNAMIC_PREFIX):
                inputs[key] = _state_leaves(inputs[key], key)
        return inputs

    def _provider_inputs(self, r: Mapping[str, Any]) -> Mapping[str, Any]:
        p = self.new.get(_provider_urn(r.get("provider")))
        return (p or {}).get("inputs") or {}

    def verdict(
        self, o: Mapping[str, Any], n: Mapping[str, Any], new_inputs: Mapping[str, Any] | None = None
    ) -> Verdict:
        subject = Subject(
            type=str(n["type"]),
            old_inputs=self._inputs(o, "old"),
            new_inputs=new_inputs if new_inputs is not None else self._inputs(n, "new"),
            options=n.get("options") or {},
            provider_inputs=self._provider_inputs(n),
        )
        return model_for(subject.type, self.rules).diff(subject)

    # -- one matched resource
    def _step(self, urn: str) -> Change | None:
        n = self.new[urn]
        o = self.old.get(self.match.get(urn, ""))
        rtype, name = str(n["type"]), str(n.get("name") or urn.rsplit("::", 1)[-1])
        if not n.get("custom", True):
            if rtype not in REMOTE_COMPONENTS:
                return None
            if o is None:
                note = "a remote component: creates the objects it renders, which the offline plan cannot list"
                return Change(urn, rtype, name, "create", notes=(note,), inputs=n.get("inputs") or {}, custom=False)
            component_fields = tuple(
                FieldChange(format_path(s), a, b) for s, a, b in changes(o.get("inputs") or {}, n.get("inputs") or {})
            )
            if not component_fields:
                return None
            note = "a remote component: the objects it renders change, and the offline plan cannot list them"
            return Change(urn, rtype, name, "update", fields=component_fields, notes=(note,), custom=False)
        if o is None:
            return Change(urn, rtype, name, "create", inputs=n.get("inputs") or {})
        v = self.verdict(o, n)
        fields = list(v.fields)
        reasons = [r for f in fields if f.forces_replacement for r in f.reasons]
        replace_ = v.replace
        old_prov, new_prov = _provider_urn(o.get("provider")), _provider_urn(n.get("provider"))
        prov_change = self.actions.get(self.old_to_new.get(old_prov, old_prov))
        if old_prov != new_prov and self.match.get(new_prov) != old_prov:
            fields.append(FieldChange("provider", old_prov, new_prov, True, ("provider reference changed",)))
            reasons.append("its provider reference changed")
            replace_ = True
        elif prov_change is not None and prov_change.action == "replace":
            reasons.append(f"its provider {prov_change.name} is replaced")
            replace_ = True
        opt = [
            FieldChange(format_path(s), a, b, note="option: recorded in the state, no provider call")
            for s, a, b in changes(o.get("options") or {}, n.get("options") or {}, ("options",))
        ]
        fields += opt
        old_urn = self.match[urn] if self.match[urn] != urn else None
        if not replace_ and not any(not f.ignored for f in fields):
            return None  # unchanged (a resource matched by an alias takes its new URN without a step)
        options = n.get("options") or {}
        dbr = v.delete_before_replace
        notes = list(v.notes)
        if replace_ and options.get("delete_before_replace") is True:
            dbr = True
            notes.append("deleteBeforeReplace option set by the program")
        elif replace_ and dbr and v.dbr_reason:
            notes.append(f"delete-before-replace: {v.dbr_reason}")
        protected = bool(replace_ and (o.get("options") or {}).get("protect") and options.get("protect"))
        if protected:
            notes.append(f"{PROTECTED_REFUSES} (unable to replace a protected resource)")
        return Change(
            urn,
            rtype,
            name,
            "replace" if replace_ else "update",
            delete_before_replace=bool(replace_ and dbr),
            protected=protected,
            fields=tuple(fields),
            old_urn=old_urn,
            reasons=tuple(dict.fromkeys(reasons)),
            notes=tuple(notes),
        )

    # -- delete-before-replace dependents
    def _cascade(self, root_new_urn: str) -> None:
        root_old = self.match[root_new_urn]
        replace_set = {root_old}
        old_order = dependency_order(self.old)
        for ou in old_order:
            if ou in replace_set:
                continue
            r = self.old[ou]
            if not r.get("custom", True) or not (_deps(r) & replace_set):
                continue
            prov = _provider_urn(r.get("provider"))
            why: str | None = None
            if prov in replace_set:
                why = "its provider is replaced"
            else:
                inputs = dict(r.get("inputs") or {})
                hit = [k for k, urns in (r.get("property_dependencies") or {}).items() if set(urns) & replace_set]
                if not hit:
                    continue
                for k in hit:
                    inputs[k] = UNKNOWN
                v = self.verdict(r, r, new_inputs=inputs)
                if v.replace:
                    why = f"its {', '.join(sorted(hit))} come{'s' if len(hit) == 1 else ''} from a replaced resource"
            if why is None:
                continue
            replace_set.add(ou)
            nu = self.old_to_new.get(ou)
            root = self.actions[root_new_urn]
            note = (
                f"replaced with {root.name}: deleting {root.name} first (delete-before-replace) deletes this "
                f"dependent first too ({why})"
            )
            if nu is None:
                continue  # not in the new plan: deleted anyway
            cur = self.actions.get(nu)
            n = self.new[nu]
            protected = bool((r.get("options") or {}).get("protect"))
            base = cur or Change(nu, str(n["type"]), str(n.get("name") or nu.rsplit("::", 1)[-1]), "replace")
            notes = [*base.notes, note]
            if protected:
                notes.append(f"{PROTECTED_REFUSES} (a protected dependent of a delete-before-replace)")
            self.actions[nu] = replace(
                base,
                action="replace",
                delete_before_replace=True,
                protected=base.protected or protected,
                reasons=tuple(dict.fromkeys([*base.reasons, note])),
                notes=tuple(dict.fromkeys(notes)),
            )

    def run(self) -> tuple[list[Change], int]:
        unchanged = 0
        for urn in dependency_order(self.new):
            c = self._step(urn)
            if c is None:
                if self.new[urn].get("custom", True):
                    unchanged += 1
                continue
            self.actions[urn] = c
        for urn in [u for u, c in sorted(self.actions.items()) if c.action == "replace" and c.delete_before_replace]:
            self._cascade(urn)
        out = list(self.actions.values())
        for ou in sorted(set(self.old) - set(self.match.values())):
            r = self.old[ou]
            remote = r.get("type") in REMOTE_COMPONENTS
            if not r.get("custom", True) and not remote:
                continue
            opts = r.get("options") or {}
            notes = []
            protected = bool(opts.get("protect"))
            if protected:
                notes.append(f"{PROTECTED_REFUSES} (a protected resource cannot be deleted)")
            if opts.get("retain_on_delete"):
                notes.append("retainOnDelete: removed from the stack, the cloud object stays")
            if remote:
                notes.append("a remote component: deletes every object it rendered, after all creates and updates")
            out.append(
                Change(
                    ou,
                    str(r["type"]),
                    str(r.get("name") or ou.rsplit("::", 1)[-1]),
                    "delete",
                    protected=protected,
                    notes=tuple(notes),
                    custom=not remote,
                )
            )
        return sorted(out, key=lambda c: c.urn), unchanged


def output_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    return tuple(
        FieldChange(format_path(s), a, b) for s, a, b in changes(old.get("outputs") or {}, new.get("outputs") or {})
    )


def steps(old: Mapping[str, Any], new: Mapping[str, Any], rules: RuleSet | None = None) -> tuple[list[Change], int]:
    return Engine(old, new, rules).run()


def resources_of(changes_: Iterable[Change], action: str) -> list[Change]:
    return [c for c in changes_ if c.action == action]


__all__ = ["ABSENT", "ACTIONS", "Change", "Engine", "Review", "dependency_order", "output_changes", "steps"]
