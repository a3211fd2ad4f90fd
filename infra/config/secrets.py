"""Where a ``secure:`` config value may go, and the check that it goes nowhere else.

Pulumi decrypts a ``secure:`` value for the program and marks its whole top-level config key secret. The program
keeps such a value secret only where a component wraps it (``pulumi.Output.secret``) before it reaches a resource:
today the credentials of notification channels the stack creates. Anywhere else the value would land in plain text
in a label, an annotation, a resource name or the state. So:

* a field may hold a secret only if its model declares it (``Field(json_schema_extra={"secret": True})``);
* offline, a secure value is the placeholder ``<secret:KEY>`` (``infra.offline.stackfile``): a placeholder in any
  other field is a config error at that field's key path;
* under a real engine only key-level secretness is known: a secret top-level key that declares no secret field is
  a config error naming the key.

No message ever contains a secret value: they name key paths only.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from types import UnionType
from typing import Any

from pydantic import BaseModel

from .base import NAMESPACE, ConfigIssue

#: What the offline stack-file reader puts where a ``secure:`` value was (``infra.offline.stackfile``).
PLACEHOLDER_PREFIX = "<secret:"
#: A path segment that stands for every list index or mapping key.
ANY = "*"

Path = tuple[str, ...]


def _models_in(annotation: Any) -> Iterator[tuple[str | None, type[BaseModel]]]:
    """Config models inside an annotation, with the container step that leads to them (``*`` for list/dict)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _models_in(typing.get_args(annotation)[0])
    elif origin in (typing.Union, UnionType):
        for arg in typing.get_args(annotation):
            yield from _models_in(arg)
    elif origin in (list, tuple, dict):
        args = typing.get_args(annotation)
        for arg in args[-1:]:
            for step, model in _models_in(arg):
                yield (ANY if step is None else step), model
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield None, annotation


def secret_fields(model: type[BaseModel], prefix: Path = ()) -> list[Path]:
    """Key paths (``*`` for any index) of every field declared secret in ``model`` and the models under it."""
    out: list[Path] = []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("secret") is True:
            out.append((*prefix, name))
        for step, sub in _models_in(field.annotation):
            out += secret_fields(sub, (*prefix, name) if step is None else (*prefix, name, step))
    return out


def _matches(path: tuple[str | int, ...], pattern: Path) -> bool:
    return len(path) == len(pattern) and all(p == ANY or p == str(s) for s, p in zip(path, pattern, strict=True))


def _placeholders(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, str):
        if PLACEHOLDER_PREFIX in value:
            yield path
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _placeholders(v, (*path, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _placeholders(v, (*path, i))


def _allowed_list(allowed: list[Path]) -> str:
    return ", ".join(".".join(p) for p in allowed) or "none"


def secret_issues(
    doc: Mapping[str, Any],
    secret_keys: frozenset[str],
    allowed: list[Path],
    key_path: typing.Callable[[tuple[str | int, ...]], str],
) -> list[ConfigIssue]:
    """Problems with where secrets sit in the (flat-key-stripped) config document ``doc``.

    ``secret_keys``: the engine's secret top-level keys (``llm-serving:<section>``); ``allowed``: the secret-capable
    field paths of the stack model; ``key_path`` renders a document path as the user-facing key path."""
    issues: list[ConfigIssue] = []
    for section, value in doc.items():
        for path in _placeholders(value, (section,)):
            if not any(_matches(path, a) for a in allowed):
                issues.append(
                    ConfigIssue(
                        key_path(path),
                        (
                            "holds a secure value, but this field reaches labels, annotations or resource names in plain "
                            f"text; only these fields may be secure: {_allowed_list(allowed)}"
                        ),
                    )
                )
    sections_with_secrets = {a[0] for a in allowed}
    for key in sorted(secret_keys):
        if not key.startswith(f"{NAMESPACE}:"):
            continue
        section = key.split(":", 1)[1]
        if section not in sections_with_secrets:
            issues.append(
                ConfigIssue(
                    key,
                    (
                        "is a secret, but nothing in this section may be secret: its values reach labels, annotations or "
                        f"resource names in plain text; only these fields may be secure: {_allowed_list(allowed)}"
                    ),
                )
            )
    return issues
