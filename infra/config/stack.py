"""The root of the typed stack configuration and its schema validation.

Pulumi stack config (``stacks/Pulumi.<env>.yaml``) is read as a whole: every ``llm-serving:*`` key is a field of
the root model (unknown keys are errors), ``gcp:project`` / ``gcp:region`` are shared with the Google provider.
This module is the schema only: types, ranges, required keys and per-section rules, each problem with its full key
path. Rules that span sections, and the capacity planner, run afterwards on what validated (``infra/resolve.py``);
nothing is registered with Pulumi until all of it passes.

:class:`StackConfig` holds the target-neutral sections. The serving targets add theirs: :func:`stack_model` builds
the root model from every registered target's pool type, co-hosted group type and root sections
(``infra/registry.py`` calls it once); the program reads pools as :class:`PoolCommon` and a target's own section
through :func:`section_of`, so nothing outside a target's package names its types.
"""

from __future__ import annotations

import copy
import functools
import json
import operator
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError, create_model

from .accelerator import AcceleratorTopology
from .base import NAMESPACE, PROJECT_ID_PATTERN, ConfigIssue, FieldErrors, Strict
from .cohosting import GROUP_KEY_PATTERN, CoHostedGroupCommon
from .contract import WorkloadContract
from .documents import DocumentError, load_json_file
from .environment import Environment
from .observability import Observability
from .pool import PoolCommon
from .release import ReleaseIdentity
from .secrets import PLACEHOLDER_PREFIX, secret_fields, secret_issues
from .serving import ServingPools

__all__ = [
    "FOREIGN_KEYS",
    "Environment",
    "SchemaResult",
    "Section",
    "StackConfig",
    "build_document",
    "key_path",
    "section_of",
    "stack_model",
    "validate_schema",
]

#: Root fields that come from another package's namespace, and the key they are read from.
FOREIGN_KEYS = {"project": "gcp:project", "region": "gcp:region"}

SectionT = TypeVar("SectionT", bound=BaseModel)


class StackConfig(Strict):
    """The target-neutral root of a stack's config. The validated object is an instance of the model
    :func:`stack_model` derives from this one (pools and groups of the registered targets, their sections)."""

    environment: Environment = Field(description="dev | staging | prod; must match the stack name.")
    project: Annotated[str, Field(pattern=PROJECT_ID_PATTERN)] = Field(
        description=("GCP project id (shared with the Google provider).")
    )
    region: Annotated[str, Field(pattern=r"^[a-z]+-[a-z]+[0-9]+$")] = Field(
        description=("GCP region (shared with the Google provider).")
    )
    zones: Annotated[list[str], Field(min_length=1)] = Field(description="Zones of the region the stack uses.")
    contract: WorkloadContract = Field(description="The workload contract (target-neutral).")
    releases: Annotated[list[ReleaseIdentity], Field(min_length=1)] = Field(
        description=("Immutable releases, inline or as JSON file paths relative to the project root.")
    )
    accelerators: dict[str, AcceleratorTopology] = Field(
        {},
        description=(
            "Accelerator topologies by key; required by pools that run on GPU machines (``gke``, ``vertex``)."
        ),
    )
    serving: ServingPools[PoolCommon] = Field(description="Stable and canary serving pools.")
    observability: Observability = Field(
        Observability(), description=("Autoscaling targets, scraping, alert thresholds and notification channels.")
    )
    cohosting: dict[Annotated[str, Field(pattern=GROUP_KEY_PATTERN)], CoHostedGroupCommon] = Field(
        {},
        description=(
            "Co-hosted groups by key: several releases (different models allowed) sharing one accelerator set, each "
            "with its GPU-memory partition, instance count and public model name."
        ),
    )

    # ---- look-ups -------------------------------------------------------------------------------
    def release(self, release_id: str) -> ReleaseIdentity:
        return next(r for r in self.releases if r.release == release_id)

    def release_index(self, release_id: str) -> int:
        return next(i for i, r in enumerate(self.releases) if r.release == release_id)

    def pools(self) -> list[tuple[str, PoolCommon]]:
        return self.serving.items()

    def groups(self) -> list[tuple[str, CoHostedGroupCommon]]:
        """(key, group) for every co-hosted group, in key order."""
        return sorted((self.cohosting or {}).items())

    def targets(self) -> frozenset[str]:
        """The serving targets the stack's pools and co-hosted groups name."""
        return frozenset(pool.target for _, pool in self.pools()) | frozenset(g.target for _, g in self.groups())


def section_of(cfg: object, name: str, kind: type[SectionT]) -> SectionT | None:
    """A target's root section of a stack config (``gke``, ``cloud_run``, ...): None when absent (or when it failed
    validation); a section of another type is a programming error. Each target wraps it in a typed accessor."""
    value = getattr(cfg, name, None)
    if value is None:
        return None
    if not isinstance(value, kind):
        raise TypeError(f"config section {name!r} is a {type(value).__name__}, not {kind.__name__}")
    return value


@dataclass(frozen=True)
class Section:
    """A root key a serving target owns (``gke``, ``gateway``, ``cloud_run``, ``vertex``): optional, validated by
    ``model``; required by the target's rules when one of its pools needs it."""

    name: str
    model: type[BaseModel]
    description: str


def _tagged_union(types: Sequence[type[BaseModel]]) -> Any:
    """One type, or the discriminated union on ``target`` of several."""
    if len(types) == 1:
        return types[0]
    return Annotated[functools.reduce(operator.or_, types), Field(discriminator="target")]


def stack_model(
    pool_types: Sequence[type[PoolCommon]],
    group_types: Sequence[type[CoHostedGroupCommon]],
    sections: Sequence[Section],
) -> type[StackConfig]:
    """The root model of a set of serving targets: :class:`StackConfig` with ``serving``'s pools the union of
    ``pool_types``, ``cohosting``'s groups the union of ``group_types``, and one optional field per section."""
    if not pool_types or not group_types:
        raise ValueError("stack_model: at least one pool type and one co-hosted group type are needed")
    names = [s.name for s in sections]
    clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(StackConfig.model_fields)))
    if clash:
        raise ValueError(f"stack_model: sections {clash} are defined twice or shadow a neutral section")

    def like(name: str) -> Any:
        return copy.copy(StackConfig.model_fields[name])  # keep default and description, change the type

    pool = _tagged_union(pool_types)
    group = _tagged_union(group_types)
    fields: dict[str, Any] = {
        "serving": (ServingPools[pool], like("serving")),  # type: ignore[valid-type]
        "cohosting": (dict[Annotated[str, Field(pattern=GROUP_KEY_PATTERN)], group], like("cohosting")),  # type: ignore[valid-type]
    }
    for s in sections:
        fields[s.name] = (s.model | None, Field(None, description=s.description))
    model: type[StackConfig] = create_model("StackConfig", __base__=StackConfig, __module__=__name__, **fields)
    return model


# ---- key paths ------------------------------------------------------------------------------------


def key_path(loc: tuple[str | int, ...]) -> str:
    """('contract', 'max_output_tokens') -> 'llm-serving:contract.max_output_tokens';
    ('releases', 0, 'image') -> 'llm-serving:releases[0].image'; ('project',) -> 'gcp:project'."""
    if not loc:
        return f"{NAMESPACE}:<root>"
    head, rest = loc[0], loc[1:]
    out = FOREIGN_KEYS.get(str(head), f"{NAMESPACE}:{head}")
    for part in rest:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _union_tags(annotation: Any) -> dict[str, type[BaseModel]] | None:
    """The tag -> model map of a discriminated union of config models (tag = the ``target`` literal), else None."""
    members = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    if len(members) < 2 or "target" not in members[0].model_fields:
        return None
    tags: dict[str, type[BaseModel]] = {}
    for m in members:
        for tag in typing.get_args(m.model_fields["target"].annotation):
            tags[str(tag)] = m
    return tags


def _strip_union_tags(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """pydantic puts the chosen member's tag into the error location of a discriminated union
    (``serving.stable.gke.accelerator``); the key the user wrote is ``serving.stable.accelerator``."""
    out: list[Any] = []
    current: Any = model
    i = 0
    while i < len(loc):
        part = loc[i]
        out.append(part)
        i += 1
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            current = None if not isinstance(part, int) else current
            continue
        annotation = current.model_fields[str(part)].annotation
        while True:  # unwrap Optional / Annotated / list / dict to the model the next location step belongs to
            if typing.get_origin(annotation) is Annotated:
                annotation = typing.get_args(annotation)[0]
                continue
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            tags = _union_tags(annotation)
            if tags is not None:
                if i < len(loc) and loc[i] in tags:
                    current = tags[loc[i]]
                    i += 1  # the tag pydantic inserted
                else:
                    current = None
                break
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                current = annotation
                break
            origin = typing.get_origin(annotation)
            if origin in (list, dict) and args:
                if i < len(loc):
                    out.append(loc[i])  # the index / key
                    i += 1
                annotation = args[-1]
                continue
            if len(args) == 1:
                annotation = args[0]
                continue
            current = None
            break
    return tuple(out)


#: Longest input value quoted in an error message: enough to recognise it, never a wall of text.
MAX_QUOTED_CHARS = 80


def quote(value: Any) -> str:
    """``repr`` of a value for an error message, cut to MAX_QUOTED_CHARS."""
    text = repr(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 1] + "…"


def _issues_from_validation(
    err: ValidationError, model: type[StackConfig], prefix: tuple[str | int, ...] = (), redact: bool = False
) -> list[ConfigIssue]:
    """``redact``: the section is secret, so no input value is quoted (it may be a decrypted secret)."""
    issues: list[ConfigIssue] = []
    for e in err.errors():
        loc = _strip_union_tags(model, prefix + tuple(e["loc"]))
        ctx_err = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_err, FieldErrors):
            for field, msg in ctx_err.problems:
                # A numeric segment is a list index (``invoker_members.0`` -> ``invoker_members[0]``).
                sub: tuple[str | int, ...] = (
                    tuple(int(x) if x.isdigit() else x for x in field.split(".")) if field else ()
                )
                issues.append(ConfigIssue(key_path(loc + sub), msg))
            continue
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not part of the schema)"
        elif e["type"] == "missing":
            msg = "required key is missing"
        elif e["type"] == "union_tag_not_found":
            loc = (*loc, "target")
            msg = f"required key is missing (one of: {', '.join(sorted(e['ctx']['expected_tags'].replace(chr(39), '').split(', ')))})"
        elif e["type"] == "union_tag_invalid":
            loc = (*loc, "target")
            msg = f"unknown serving target {quote(e['ctx']['tag'])}; known: {e['ctx']['expected_tags'].replace(chr(39), '')}"
        elif "input" in e and not redact:
            shown = e["input"]
            if isinstance(shown, str) and PLACEHOLDER_PREFIX in shown:
                pass  # a secure value: never quoted
            elif isinstance(shown, (str, int, float, bool)) or shown is None:
                msg = f"{msg} (got {quote(shown)})"
        issues.append(ConfigIssue(key_path(loc), msg))
    return issues


# ---- raw config -> typed config ----------------------------------------------------------------------


def decode_pulumi_config(env: Mapping[str, str]) -> dict[str, Any]:
    """Pulumi hands config to programs as strings; structured values are JSON text."""
    out: dict[str, Any] = {}
    for key, value in env.items():
        if isinstance(value, str) and value[:1] in ("{", "["):
            try:
                out[key] = json.loads(value)
                continue
            except json.JSONDecodeError:
                pass
        out[key] = value
    return out


def _resolve_release_files(raw_releases: Any, base_dir: Path, issues: list[ConfigIssue]) -> Any:
    """A release may be given inline or as the path of its JSON file under ``stacks/releases/`` of the project
    (``base_dir``); files go through the hardened loader (``documents.load_json_file``: path checked before any
    file-system call, regular files only, bounded size and depth, strict JSON)."""
    if not isinstance(raw_releases, list):
        return raw_releases
    resolved = []
    for i, item in enumerate(raw_releases):
        if isinstance(item, str):
            try:
                resolved.append(load_json_file(item, base_dir))
            except DocumentError as exc:
                issues.append(ConfigIssue(key_path(("releases", i)), str(exc)))
                resolved.append(None)
        else:
            resolved.append(item)
    return resolved


def build_document(raw: Mapping[str, Any], base_dir: Path, issues: list[ConfigIssue]) -> dict[str, Any]:
    """Map flat Pulumi keys to the model's document; unknown keys in our namespace become errors."""
    doc: dict[str, Any] = {}
    foreign = {v: k for k, v in FOREIGN_KEYS.items()}
    for key, value in raw.items():
        if key in foreign:
            doc[foreign[key]] = value
        elif key.startswith(f"{NAMESPACE}:"):
            doc[key.split(":", 1)[1]] = value
        # Other namespaces (gcp:zone, kubernetes:*) belong to their providers and are not ours to judge.
    if "releases" in doc:
        doc["releases"] = _resolve_release_files(doc["releases"], base_dir, issues)
    return doc


@dataclass(frozen=True)
class SchemaResult:
    """A stack's sections after schema validation.

    ``config`` holds every section that validated (a section that failed is ``None`` in it, whatever its
    annotation says); ``valid`` names those sections, so cross-section rules run exactly on what validated.
    """

    config: StackConfig
    valid: frozenset[str]
    issues: tuple[ConfigIssue, ...]


def _adapter(model: type[StackConfig], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    annotated: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    try:
        return TypeAdapter(annotated, config=ConfigDict(strict=True))
    except PydanticUserError:  # models carry their own (strict) config
        return TypeAdapter(annotated)


def validate_schema(
    raw: Mapping[str, Any], base_dir: Path, model: type[StackConfig], secret_keys: frozenset[str] = frozenset()
) -> SchemaResult:
    """Validate each root section of ``model`` (the registry's root model) on its own, so one broken section never
    hides the problems of another. ``secret_keys``: the top-level keys the engine marks secret (see
    ``infra/config/secrets.py``)."""
    issues: list[ConfigIssue] = []
    doc = build_document(raw, base_dir, issues)
    issues += secret_issues(doc, secret_keys, secret_fields(model), key_path)
    failed_files = {i.path for i in issues}
    values: dict[str, Any] = {}
    valid: set[str] = set()
    for key in sorted(set(doc) - set(model.model_fields)):
        issues.append(ConfigIssue(key_path((key,)), "unknown key (not part of the schema)"))
    for name, info in model.model_fields.items():
        if name not in doc:
            if info.is_required():
                issues.append(ConfigIssue(key_path((name,)), "required key is missing"))
                values[name] = None
            else:
                values[name] = info.get_default(call_default_factory=True)
                valid.add(name)
            continue
        try:
            values[name] = _adapter(model, name).validate_python(doc[name])
        except ValidationError as err:
            values[name] = None
            issues += _issues_from_validation(err, model, (name,), redact=key_path((name,)) in secret_keys)
            continue
        if not any(p.startswith(key_path((name,))) for p in failed_files):
            valid.add(name)
    return SchemaResult(model.model_construct(**values), frozenset(valid), tuple(issues))
