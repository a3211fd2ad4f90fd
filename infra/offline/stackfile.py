"""Read ``stacks/Pulumi.<env>.yaml`` the way the Pulumi CLI hands config to a program.

Pulumi passes every config value to the program as a string; structured values as JSON text. ``secure:``
values cannot be decrypted offline: they become an opaque marked placeholder and their top-level key is
listed as secret (as the engine does), so nothing prints them and the program wraps them as secrets.

Parsing is :mod:`infra.config.documents` (bounded, duplicate keys refused, JSON values only, one-line errors
that never echo a ``secure:`` value); this module adds what makes a document a *stack file*: the stack name
rule, the top-level keys, ``<namespace>:<name>`` config keys and the exact shape of a secret.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..config.documents import LIMITS as DOCUMENT_LIMITS
from ..config.documents import (
    MAX_YAML_BYTES,
    DocumentError,
    Limit,
    load_yaml_document,
    quote,
    read_regular_file,
    render_key_path,
)

ROOT = Path(__file__).resolve().parents[2]
STACKS_DIR = ROOT / "stacks"
#: What a ``secure:`` value becomes offline; formatted with the top-level config key it belongs to.
SECRET_PLACEHOLDER = "<secret:{}>"

#: Keys a stack file may have at the top (Pulumi docs, "Project and stack settings: Pulumi.<stack>.yaml").
TOP_LEVEL_KEYS: Final[frozenset[str]] = frozenset({"config", "secretsprovider", "encryptedkey", "encryptionsalt"})

#: Pulumi's own bound on stack names: ``tokens.IsName(name) && len(name) <= 100`` in pkg/backend/diy/store.go
#: (``ParseReference``), with ``tokens.NameRegexpPattern`` = ``[A-Za-z_.][A-Za-z0-9_.-]*`` from
#: sdk/go/common/tokens/names.go (github.com/pulumi/pulumi).
MAX_STACK_NAME_CHARS: Final[int] = 100
#: That pattern without a leading '.': the stack name becomes a file name (``Pulumi.<stack>.yaml``) and must
#: never be hidden, be ``..``, or carry a '/'.
_STACK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
#: Pulumi's config key rule (``ParseKey`` in sdk/go/common/resource/config/key.go): ``<namespace>:<name>``, or
#: the old ``<namespace>:config:<name>``, which Pulumi reads as ``<namespace>:<name>``; neither part holds ':'.
_CONFIG_KEY = re.compile(r"([^:]+):(?:config:)?([^:]+)")

#: Every bound a stack file is read under: the document loader's, plus the stack name's.
LIMITS: Final[tuple[Limit, ...]] = (
    *DOCUMENT_LIMITS,
    Limit(
        "MAX_STACK_NAME_CHARS",
        MAX_STACK_NAME_CHARS,
        "characters",
        "Pulumi's own limit on stack names (pkg/backend/diy/store.go), so every name Pulumi accepts works here",
    ),
)


@dataclass(frozen=True)
class StackFile:
    """One stack file as the engine would hand it to the program."""

    stack: str
    path: Path
    values: dict[str, Any]  # decoded values (what the loader validates), secrets as placeholders
    config: dict[str, str]  # what the engine hands the program: strings, structured values as canonical JSON
    secret_keys: list[str]  # exactly the top-level keys holding at least one ``secure:`` value, sorted


class StackFileError(DocumentError):
    """A stack file (or stack name) that cannot be used; ``str()`` is one line and never holds a secret."""

    @classmethod
    def of(cls, err: DocumentError) -> StackFileError:
        return cls(err.source, err.message, line=err.line, column=err.column, key_path=err.key_path)


def is_stack_name(stack: object) -> bool:
    """Pulumi's stack-name rule (see ``MAX_STACK_NAME_CHARS``), minus a leading '.'."""
    return isinstance(stack, str) and len(stack) <= MAX_STACK_NAME_CHARS and bool(_STACK_NAME.fullmatch(stack))


def available_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Stack names with a ``Pulumi.<stack>.yaml`` in ``stacks_dir`` (names Pulumi would refuse are left out)."""
    try:
        names = [p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml")]
    except OSError:
        return []
    return sorted(name for name in names if is_stack_name(name))


def _kind(value: Any) -> str:
    """What a value is, for messages that must not show it."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string"


def _opaque_secrets(value: Any, path: tuple[str | int, ...], top_key: str, source: str, found: list[bool]) -> Any:
    """Replace every ``{secure: <ciphertext>}`` with the placeholder; refuse look-alikes.

    Pulumi treats a mapping as encrypted exactly when it has one key, ``secure``, holding a string
    (``isSecureValue`` in sdk/go/common/resource/config/value.go). Anything else holding a ``secure`` key would
    be plain config to Pulumi, and the ciphertext (or the secret someone pasted there) would reach the program
    as text: refused, without showing it. Depth is bounded by the document loader (MAX_DEPTH).
    """
    if isinstance(value, dict):
        if "secure" in value:
            if len(value) != 1:
                raise StackFileError(
                    source,
                    "a mapping with a 'secure' key must hold only that key (Pulumi's "
                    "encrypted form is {secure: <ciphertext>}); otherwise the ciphertext "
                    "would be handed to the program as plain config",
                    key_path=render_key_path(path),
                )
            if not isinstance(value["secure"], str):
                raise StackFileError(
                    source,
                    f"'secure' must hold the ciphertext string `pulumi config set --secret` "
                    f"writes, not {_kind(value['secure'])}",
                    key_path=render_key_path((*path, "secure")),
                )
            found.append(True)
            return SECRET_PLACEHOLDER.format(top_key)
        return {k: _opaque_secrets(v, (*path, k), top_key, source, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_opaque_secrets(v, (*path, i), top_key, source, found) for i, v in enumerate(value)]
    return value


def _as_engine_string(value: Any) -> str:
    """A config value as the engine hands it to a program: scalars as text, structured values as JSON (sorted
    keys, compact separators: one canonical text per value, so equal config gives byte-equal strings)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_section(doc: Any, source: str) -> dict[str, Any]:
    if doc is None:
        raise StackFileError(source, "is empty: a stack file is a mapping with a 'config:' mapping")
    if not isinstance(doc, dict):
        raise StackFileError(source, f"is {_kind(doc)}: a stack file is a mapping with a 'config:' mapping")
    for key in sorted(doc):
        if key not in TOP_LEVEL_KEYS:
            raise StackFileError(
                source,
                f"unknown top-level key {quote(key)}: a stack file has only {', '.join(sorted(TOP_LEVEL_KEYS))}",
                key_path=render_key_path((key,)),
            )
        if key != "config" and not isinstance(doc[key], str):
            raise StackFileError(source, f"must be a string, not {_kind(doc[key])}", key_path=render_key_path((key,)))
    if "config" not in doc:
        raise StackFileError(source, "has no 'config:' mapping")
    config = doc["config"]
    if not isinstance(config, dict):
        raise StackFileError(
            source, f"must be a mapping of '<namespace>:<name>' keys, not {_kind(config)}", key_path="config"
        )
    return config


def read_stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> StackFile:
    """Read ``<stacks_dir>/Pulumi.<stack>.yaml``; raise one :class:`StackFileError` for anything wrong with it.

    ``stack`` is a stack name, never a path (see :func:`is_stack_name`). The file is read as a regular file of at
    most MAX_YAML_BYTES and parsed by :func:`infra.config.documents.load_yaml_document`.
    """
    if not is_stack_name(stack):
        shown = quote(stack) if isinstance(stack, str) else type(stack).__name__
        raise StackFileError(
            f"stack {shown}",
            f"is not a stack name: 1-{MAX_STACK_NAME_CHARS} letters, digits, "
            "'_', '.' or '-', starting with a letter or '_' (Pulumi's stack-name "
            "rule); a stack name is never a path",
        )
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    source = str(path)
    if not os.path.exists(path):
        available = ", ".join(available_stacks(stacks_dir)) or "none"
        raise StackFileError(source, f"no stack file for stack {quote(stack)} (available: {available})")
    try:
        data = read_regular_file(path, source=source, max_bytes=MAX_YAML_BYTES, limit_name="MAX_YAML_BYTES")
        doc = load_yaml_document(data, source)
    except DocumentError as err:
        raise StackFileError.of(err) from None
    raw = _config_section(doc, source)

    normalised: dict[str, tuple[str, Any]] = {}
    for key, value in raw.items():
        where = render_key_path(("config", key))
        match = _CONFIG_KEY.fullmatch(key)
        if match is None:
            raise StackFileError(
                source,
                "is not a config key of the form '<namespace>:<name>' (Pulumi's config key rule)",
                key_path=where,
            )
        name = f"{match.group(1)}:{match.group(2)}"
        if name in normalised:
            raise StackFileError(
                source,
                f"is the same config key as {quote(normalised[name][0])}: Pulumi reads "
                "'<namespace>:config:<name>' as '<namespace>:<name>'",
                key_path=where,
            )
        if value is None:
            raise StackFileError(source, "has no value (null): give it one or remove the key", key_path=where)
        normalised[name] = (key, value)

    values: dict[str, Any] = {}
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for name in sorted(normalised):
        key, value = normalised[name]
        found: list[bool] = []
        decoded = _opaque_secrets(value, ("config", key), name, source, found)
        values[name] = decoded
        config[name] = _as_engine_string(decoded)
        if found:
            secret_keys.append(name)
    return StackFile(stack=stack, path=path, values=values, config=config, secret_keys=secret_keys)
