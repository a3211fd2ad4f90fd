"""The one hardened loader for the project's input documents: stack files (YAML) and release files (JSON).

Stack files (``stacks/Pulumi.<stack>.yaml``) and the release files they name (``stacks/releases/...json``) are
written by people and pipelines, so this module treats them as untrusted input. Whatever arrives, a caller
gets either a JSON-compatible value (``str``, ``int``, ``float``, ``bool``, ``None``, ``list``, ``dict`` with
``str`` keys) or exactly one :class:`DocumentError` whose ``str()`` is one line naming the file, the line and
column when known, the key path and the problem. Never another exception, never unbounded time or memory,
and never the text of a value that sits under a key Pulumi uses for encrypted material (``secure``,
``encryptedkey``, ``encryptionsalt``, ``secretsprovider``).

Why not ``yaml.safe_load`` / ``json.loads`` as they are:

* ``yaml.safe_load`` keeps the *last* of two equal mapping keys without a word (the shipped dev stack once had
  ``llm-serving:gke`` twice and the first block was silently ignored); it builds timestamps, ``bytes``
  (``!!binary``), sets and non-string keys that JSON has no form for; it expands aliases without bound (a
  "billion laughs" document) and recursive aliases into cyclic objects; its composer recurses once per nesting
  level, so ``[[[[...`` ends in ``RecursionError``; and its syntax errors print the source line, which may hold
  a ``secure:`` ciphertext.
* PyYAML implements YAML 1.1, the Pulumi CLI (Go, ``gopkg.in/yaml.v3``) reads the same file as YAML 1.2 core
  schema. Where the two disagree — ``yes``/``no``/``on``/``off``, base-60 numbers like ``3:00`` (= 180 in
  1.1), octal ``010``, ``1e3`` — the offline plan and the real deployment would see different values, so
  those spellings are refused and must be quoted or written plainly.
* ``json.loads`` accepts ``NaN`` and ``Infinity`` (not JSON, RFC 8259 §6), keeps the last duplicate key,
  raises ``RecursionError`` on deep nesting and ``ValueError`` on integers over 4300 digits.

The YAML side uses PyYAML's own pure-Python reader, scanner, parser and resolver
(https://pyyaml.org/wiki/PyYAMLDocumentation, "Loader" classes), with a composer that counts nodes, nesting
and aliases as it goes, and its own constructor that only builds JSON values. The pure-Python parser (not
libyaml) is used on purpose: it is the same everywhere the program runs, its errors are the ones tested
here, and the bounds below keep its speed (a few tens of thousands of nodes per second) irrelevant.

This module imports only the standard library and PyYAML: the deployable program uses it too.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import yaml
from yaml.composer import Composer
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader, ReaderError
from yaml.resolver import Resolver
from yaml.scanner import Scanner

__all__ = [
    "LIMITS",
    "MAX_ALIASES",
    "MAX_DEPTH",
    "MAX_EXPANDED_CHARS",
    "MAX_JSON_BYTES",
    "MAX_NODES",
    "MAX_RELEASE_PATH_CHARS",
    "MAX_SAFE_INTEGER",
    "MAX_SHOWN_CHARS",
    "MAX_YAML_BYTES",
    "NEVER_ECHOED_KEYS",
    "RELEASE_DIR",
    "DocumentError",
    "Limit",
    "load_json_document",
    "load_json_file",
    "load_yaml_document",
    "quote",
    "read_regular_file",
    "render_key_path",
]


# ---- limits -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    """One bound this loader enforces: its constant's name, value, unit and why that number."""

    name: str
    value: int
    unit: str
    reason: str


#: Every bound, with the reason for its value (docs/bad-input.md's limits table is generated from this tuple, with
#: what the shipped files measure today beside it; tests/test_documents.py keeps each bound that far above them).
LIMITS: Final[tuple[Limit, ...]] = (
    Limit(
        "MAX_YAML_BYTES",
        128 * 1024,
        "bytes",
        "at least 16x the largest shipped stack file; the slowest 128 KiB document measured is read or refused "
        "in under 0.4 s by PyYAML's pure-Python parser",
    ),
    Limit(
        "MAX_JSON_BYTES",
        64 * 1024,
        "bytes",
        "at least 50x the largest shipped release file: a release identity is a few dozen fields",
    ),
    Limit(
        "MAX_DEPTH",
        40,
        "levels",
        "at least 4x the deepest shipped document; keeps every recursive walker after us (pydantic, json.dumps) "
        "far from Python's recursion limit of 1000",
    ),
    Limit(
        "MAX_NODES",
        10_000,
        "nodes",
        "at least 20x the largest shipped stack's node count, counted while parsing and again after alias "
        "expansion; the slowest 10,000-node document measured (an explicit tag on every node) is refused in ~0.4 s",
    ),
    Limit(
        "MAX_ALIASES",
        50,
        "aliases",
        "shipped stacks use none and sharing a few blocks needs a handful; the classic 'billion laughs' document "
        "uses 80 to reach 10^9 nodes and is stopped at the 51st, before anything expands",
    ),
    Limit(
        "MAX_EXPANDED_CHARS",
        512 * 1024,
        "characters",
        "scalar text after alias expansion, 4x MAX_YAML_BYTES: aliases may repeat a block, not multiply a "
        "string into gigabytes",
    ),
    Limit(
        "MAX_RELEASE_PATH_CHARS",
        255,
        "characters",
        "NAME_MAX of ext4/xfs, so the OS never answers ENAMETOOLONG; a real release path is ~50 characters "
        "and messages stay short",
    ),
    Limit(
        "MAX_SAFE_INTEGER",
        2**53 - 1,
        "",
        "largest integer an IEEE double holds exactly (RFC 8259 §6); Pulumi carries resource inputs as "
        "protobuf Struct doubles, so a larger integer would be silently rounded",
    ),
    Limit(
        "MAX_SHOWN_CHARS",
        60,
        "characters",
        "longest piece of input echoed in a message: enough to recognise a value, too short for a hostile "
        "16 MiB value to flood stderr",
    ),
)
_LIMIT_VALUES: Final[dict[str, int]] = {limit.name: limit.value for limit in LIMITS}

MAX_YAML_BYTES: Final[int] = _LIMIT_VALUES["MAX_YAML_BYTES"]
MAX_JSON_BYTES: Final[int] = _LIMIT_VALUES["MAX_JSON_BYTES"]
MAX_DEPTH: Final[int] = _LIMIT_VALUES["MAX_DEPTH"]
MAX_NODES: Final[int] = _LIMIT_VALUES["MAX_NODES"]
MAX_ALIASES: Final[int] = _LIMIT_VALUES["MAX_ALIASES"]
MAX_EXPANDED_CHARS: Final[int] = _LIMIT_VALUES["MAX_EXPANDED_CHARS"]
MAX_RELEASE_PATH_CHARS: Final[int] = _LIMIT_VALUES["MAX_RELEASE_PATH_CHARS"]
MAX_SAFE_INTEGER: Final[int] = _LIMIT_VALUES["MAX_SAFE_INTEGER"]
MAX_SHOWN_CHARS: Final[int] = _LIMIT_VALUES["MAX_SHOWN_CHARS"]

#: The directory (relative to the project root, ``/``-separated) release files must live under.
RELEASE_DIR: Final[str] = "stacks/releases"

#: Keys whose values are never echoed in a message, nor anything nested under them: Pulumi's encrypted config
#: form is ``{secure: <ciphertext>}``, and a stack file's ``encryptedkey`` / ``encryptionsalt`` /
#: ``secretsprovider`` describe how secrets are protected (Pulumi docs, "Secrets" and "Stack settings file").
NEVER_ECHOED_KEYS: Final[frozenset[str]] = frozenset({"secure", "encryptedkey", "encryptionsalt", "secretsprovider"})


# ---- the error --------------------------------------------------------------------------------------------


class DocumentError(Exception):
    """The one error this module raises for bad input.

    ``source`` names the document (a file path, or ``release path '<text>'`` for a path that was refused before
    any file was touched); ``line`` / ``column`` are 1-based and ``None`` when unknown; ``key_path`` is where in
    the document (``config.llm-serving:contract.ttft_p95_ms``, ``releases[0]``), empty for the whole document.
    ``str()`` is always one line: ``<source>:<line>:<column>: <key path>: <message>``, the ``file:line:column``
    prefix editors and CI logs link to.
    """

    def __init__(
        self, source: str, message: str, *, line: int | None = None, column: int | None = None, key_path: str = ""
    ) -> None:
        self.source = source
        self.message = message
        self.line = line
        self.column = column
        self.key_path = key_path
        super().__init__(self.__str__())

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields: rebuild from (source, message) plus the instance dict, so the error survives
        # pickling (multiprocessing, pytest-xdist) like a plain exception.
        return (type(self), (self.source, self.message), dict(self.__dict__))

    @property
    def location(self) -> str:
        """``line 3, column 5`` (or ``line 3``), empty when the position is unknown."""
        if self.line is None:
            return ""
        return f"line {self.line}" + (f", column {self.column}" if self.column is not None else "")

    def __str__(self) -> str:
        where = _one_line(self.source)
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        parts = [where] + ([_one_line(self.key_path)] if self.key_path else []) + [_one_line(self.message)]
        return ": ".join(parts)


# ---- showing user text safely -------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """Escape every non-printable character (newlines, tabs, controls, lone surrogates) so a message stays one
    line and a terminal never interprets input as control sequences."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _display(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """User text cut to ``limit`` characters (with the full length said) and escaped to one line."""
    if len(text) <= limit:
        return _one_line(text)
    return f"{_one_line(text[:limit])}... ({len(text)} characters)"


def quote(text: str) -> str:
    """User text as it may appear in a message: quoted, cut to MAX_SHOWN_CHARS, escaped to one line."""
    return f"'{_display(text)}'"


def render_key_path(parts: tuple[str | int, ...]) -> str:
    """``('config', 'llm-serving:contract', 'ttft_p95_ms')`` -> ``config.llm-serving:contract.ttft_p95_ms``;
    list indices as ``[i]``. Keys are shortened like values; nothing after a :data:`NEVER_ECHOED_KEYS` key is
    shown (a key nested under ``secure`` could itself be ciphertext)."""
    out = ""
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        out += ("." if out else "") + _display(part)
        if part in NEVER_ECHOED_KEYS:
            return out + (".<not shown>" if i < len(parts) - 1 else "")
    return out


def _redacted(path: tuple[str | int, ...]) -> bool:
    return any(isinstance(p, str) and p in NEVER_ECHOED_KEYS for p in path)


def _line_column(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of character ``index`` (line breaks counted as ``\\n``)."""
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


# ---- bytes -> text ------------------------------------------------------------------------------------------


def _text_of(data: bytes, source: str, *, max_bytes: int, limit_name: str, kind: str) -> str:
    """Size, NUL and UTF-8 checks shared by both formats; returns the decoded text."""
    if len(data) > max_bytes:
        raise DocumentError(source, f"is {len(data)} bytes, over the limit of {max_bytes} bytes ({limit_name})")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DocumentError(
            source,
            f"contains a NUL byte at byte offset {nul}: a binary (or UTF-16) file, not {kind} text",
            line=data.count(b"\n", 0, nul) + 1,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            source,
            f"is not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} ({exc.reason})",
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from None


# ---- YAML ---------------------------------------------------------------------------------------------------

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
_SEQ, _MAP, _TIMESTAMP, _MERGE, _VALUE = (_TAG + t for t in ("seq", "map", "timestamp", "merge", "value"))
#: What a non-string key "is", for the message that asks to quote it.
_KIND = {
    _INT: "an integer",
    _FLOAT: "a number",
    _BOOL: "a boolean",
    _NULL: "null",
    _TIMESTAMP: "a timestamp",
    _MERGE: "a merge key",
}

#: Number spellings YAML 1.1 (PyYAML) and YAML 1.2 (the Pulumi CLI) read as the same number.
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_PLAIN_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?")
_NON_FINITE = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
#: Plain scalars the YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution) reads as a number;
#: PyYAML reads some of them (``09``, ``1e3``, ``+.5``, ``0o17``) as strings.
_YAML12_NUMBER = re.compile(
    r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"
    r"|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_TRUE, _FALSE = frozenset({"true", "True", "TRUE"}), frozenset({"false", "False", "FALSE"})
_SURROGATE = re.compile("[\ud800-\udfff]")
#: NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR: line breaks in YAML 1.1 (PyYAML folds them inside scalars), plain
#: characters in YAML 1.2 (https://yaml.org/spec/1.2.2/#54-line-break-characters).
_YAML11_BREAK = re.compile("[\x85\u2028\u2029]")
#: An integer is at most this many digits before it is compared with MAX_SAFE_INTEGER: int() of a
#: 5000-digit string raises ValueError (Python's int/str conversion limit), so never call it on more.
_MAX_INT_DIGITS = len(str(MAX_SAFE_INTEGER))


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


def _base60(text: str) -> int | None:
    """What YAML 1.1 makes of a base-60 integer such as ``3:00`` (180), for the message; None when long."""
    if len(text) > 20:
        return None
    sign = -1 if text.startswith("-") else 1
    value = 0
    for part in text.lstrip("+-").replace("_", "").split(":"):
        value = value * 60 + int(part)
    return sign * value


class _Loader(Reader, Scanner, Parser, Composer, Resolver):
    """PyYAML's pure-Python reader, scanner, parser and YAML 1.1 resolver, with a composer that bounds nesting,
    node count and aliases while it runs (so a hostile document stops early), and a constructor of our own
    that builds only JSON values. One instance reads one document; nothing is shared between calls."""

    def __init__(self, text: str, source: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        Resolver.__init__(self)
        self._source = source
        self._compose_depth = 0
        self._composed = 0
        self._aliases = 0
        self._anchor_of: dict[Node, str] = {}
        self._explicit_tag: set[Node] = set()
        self._built = 0
        self._chars = 0

    # ---- scanning: bound flow nesting where it starts ----

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        """Every ``[`` / ``{`` may start a simple key (``[a]: b``), so PyYAML's scanner keeps one pending key per
        open flow level and re-checks them all for each token: 100,000 ``[`` on one line cost it 0.2-1 s before the
        composer sees a node. Refusing the level past MAX_DEPTH here keeps that work to a few dozen characters."""
        if self.flow_level >= MAX_DEPTH:
            raise self._fail(self.get_mark(), f"nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)")
        super().fetch_flow_collection_start(TokenClass)

    # ---- composing (events -> node graph) ----

    def _fail(self, node_or_mark: Any, message: str, path: tuple[str | int, ...] = ()) -> DocumentError:
        mark = getattr(node_or_mark, "start_mark", node_or_mark)
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        return DocumentError(self._source, message, line=line, column=column, key_path=render_key_path(path))

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        # The casts: PyYAML's stub types Composer.compose_node as Node | None, but it returns a node for every event
        # the parser produces (an alias's anchored node, or a new scalar, sequence or mapping node) or raises.
        if self.check_event(AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._fail(
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
                    f"more than {MAX_ALIASES} aliases (MAX_ALIASES): a few aliases share a block, "
                    "many make a small file expand into a huge one ('billion laughs')",
                )
            return cast(Node, super().compose_node(parent, index))
        event = self.peek_event()  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
        self._composed += 1
        if self._composed > MAX_NODES:
            raise self._fail(event.start_mark, f"more than {MAX_NODES} nodes (MAX_NODES)")
        if self._compose_depth >= MAX_DEPTH:
            raise self._fail(event.start_mark, f"nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)")
        explicit = getattr(event, "tag", None) is not None
        self._compose_depth += 1
        try:
            node = cast(Node, super().compose_node(parent, index))
        finally:
            self._compose_depth -= 1
        if event.anchor is not None:
            self._anchor_of[node] = event.anchor
        if explicit:
            self._explicit_tag.add(node)
        return node

    # ---- constructing (node graph -> JSON value) ----

    def build(self, node: Node | None) -> Any:
        return None if node is None else self._build(node, (), 1, set())

    def _build(self, node: Node, path: tuple[str | int, ...], depth: int, ancestors: set[Node]) -> Any:
        if node in ancestors:
            name = self._anchor_of.get(node)
            raise self._fail(
                node,
                f"recursive alias{' *' + _display(name) if name else ''}: the anchored node "
                "contains an alias to itself",
                path,
            )
        if depth > MAX_DEPTH:
            raise self._fail(node, f"nested deeper than {MAX_DEPTH} levels (MAX_DEPTH) once aliases are expanded", path)
        self._count(node, path)
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        ancestors.add(node)
        try:
            if isinstance(node, SequenceNode):
                if node.tag != _SEQ:
                    raise self._tag_error(node, path)
                return [self._build(item, (*path, i), depth + 1, ancestors) for i, item in enumerate(node.value)]
            if isinstance(node, MappingNode):
                return self._mapping(node, path, depth, ancestors)
            raise self._fail(node, f"unsupported YAML node {type(node).__name__}", path)
        finally:
            ancestors.discard(node)

    def _count(self, node: Node, path: tuple[str | int, ...]) -> None:
        self._built += 1
        if self._built > MAX_NODES:
            raise self._fail(node, f"expands to more than {MAX_NODES} nodes (MAX_NODES) through aliases", path)

    def _tag_error(self, node: Node, path: tuple[str | int, ...]) -> DocumentError:
        return self._fail(
            node,
            f"tag {_display(_short_tag(node.tag))} is not allowed: only JSON-compatible values "
            "(strings, numbers, true/false, null, lists, mappings with string keys)",
            path,
        )

    def _mapping(self, node: MappingNode, path: tuple[str | int, ...], depth: int, ancestors: set[Node]) -> Any:
        if node.tag != _MAP:
            raise self._tag_error(node, path)
        out: dict[str, Any] = {}
        first_seen: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            if key in first_seen:
                a, b = first_seen[key].start_mark, key_node.start_mark
                shown = "(not shown)" if _redacted(path) else quote(key)
                raise self._fail(
                    key_node,
                    f"duplicate key {shown}: first at line {a.line + 1}, column "
                    f"{a.column + 1}, again at line {b.line + 1}, column {b.column + 1}; "
                    "YAML loaders keep only the last one, silently",
                    (*path, key),
                )
            first_seen[key] = key_node
            out[key] = self._build(value_node, (*path, key), depth + 1, ancestors)
        return out

    def _key(self, node: Node, path: tuple[str | int, ...]) -> str:
        if isinstance(node, ScalarNode):
            if node.tag == _MERGE:
                raise self._fail(
                    node,
                    "merge keys ('<<') are a YAML 1.1 extension this loader refuses: write the merged keys out",
                    path,
                )
            if node.tag not in (_STR, _VALUE):
                shown = "(not shown)" if _redacted(path) else quote(node.value)
                kind = _KIND.get(node.tag, _display(_short_tag(node.tag)))
                raise self._fail(node, f"mapping key {shown} is not a string: YAML reads it as {kind}; quote it", path)
            self._count(node, path)
            return cast(str, self._scalar(node, path))  # a str-tagged scalar is a str or an error
        kind = "a list" if isinstance(node, SequenceNode) else "a mapping"
        raise self._fail(node, f"a mapping key is {kind}: keys must be strings", path)

    def _scalar(self, node: ScalarNode, path: tuple[str | int, ...]) -> Any:
        text, tag = node.value, node.tag
        self._chars += len(text)
        if self._chars > MAX_EXPANDED_CHARS:
            raise self._fail(
                node,
                f"holds more than {MAX_EXPANDED_CHARS} characters of scalar text "
                "(MAX_EXPANDED_CHARS) once aliases are expanded",
                path,
            )
        shown = "the value (not shown: it sits under a secret key)" if _redacted(path) else quote(text)
        if _SURROGATE.search(text):
            raise self._fail(
                node, f"{shown} contains a lone UTF-16 surrogate escape, which is not a Unicode character", path
            )
        plain = node.style is None and node not in self._explicit_tag
        if tag in (_STR, _VALUE):
            if plain and _YAML12_NUMBER.fullmatch(text):
                raise self._fail(
                    node,
                    f"{shown} is a string in YAML 1.1 (PyYAML) but a number in YAML 1.2 (the "
                    "Pulumi CLI): quote it, or write a plain decimal number",
                    path,
                )
            return text
        if tag == _NULL:
            return None
        if tag == _BOOL:
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise self._fail(
                node,
                f"{shown} is a boolean in YAML 1.1 (PyYAML) but a string in YAML 1.2 (the "
                "Pulumi CLI): write true or false, or quote it",
                path,
            )
        if tag == _INT:
            if not _PLAIN_INT.fullmatch(text):
                if ":" in text and plain:
                    value = _base60(text)
                    reads = f" ({_display(text)} reads as {value})" if value is not None else ""
                    raise self._fail(
                        node,
                        f"{shown} is a base-60 number in YAML 1.1{reads} but a string in YAML "
                        "1.2 (the Pulumi CLI): quote it",
                        path,
                    )
                raise self._fail(
                    node,
                    f"{shown} is a YAML 1.1 integer form (octal, hex, binary or '_' "
                    "separators) that YAML 1.2 reads differently: write it in plain decimal, "
                    "or quote it",
                    path,
                )
            if len(text.lstrip("+-")) > _MAX_INT_DIGITS or abs(int(text)) > MAX_SAFE_INTEGER:
                raise self._fail(
                    node,
                    f"{shown} is outside +/-{MAX_SAFE_INTEGER} (MAX_SAFE_INTEGER), the "
                    "integers a JSON number carries exactly",
                    path,
                )
            return int(text)
        if tag == _FLOAT:
            if _NON_FINITE.fullmatch(text):
                raise self._fail(node, f"{shown} is not a finite number: JSON has no infinity or NaN", path)
            if not _PLAIN_FLOAT.fullmatch(text):
                raise self._fail(
                    node,
                    f"{shown} is a YAML 1.1 number form ('_' separators or base 60) that YAML "
                    "1.2 reads differently: write it in plain decimal, or quote it",
                    path,
                )
            number = float(text)
            if not math.isfinite(number):
                raise self._fail(node, f"{shown} is out of range: it does not fit a finite 64-bit float", path)
            return number
        if tag == _TIMESTAMP:
            raise self._fail(
                node,
                f"{shown} is an unquoted date/time, which YAML reads as a timestamp and JSON has no type for: quote it",
                path,
            )
        if tag == _MERGE:
            raise self._fail(node, "'<<' is a YAML 1.1 merge key, not a value: quote it", path)
        raise self._tag_error(node, path)


def _yaml_error(exc: yaml.YAMLError, source: str, text: str) -> DocumentError:
    """A PyYAML error as one line: the parser's problem text and position, never ``str(exc)`` (which quotes the
    source line, possibly a ``secure:`` ciphertext)."""
    if isinstance(exc, ReaderError):
        line, column = _line_column(text, exc.position)
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        return DocumentError(
            source,
            f"contains the character U+{code:04X}, which YAML does not allow in a document ({exc.reason})",
            line=line,
            column=column,
        )
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = _display(exc.problem or "syntax error", 2 * MAX_SHOWN_CHARS)
        message = f"not valid YAML: {problem}"
        if exc.context:
            # PyYAML's context is "while scanning a quoted scalar" & co., with where that construct began.
            context = _display(exc.context, 2 * MAX_SHOWN_CHARS)
            at = exc.context_mark
            since = f" (line {at.line + 1}, column {at.column + 1})" if at else ""
            message = f"not valid YAML: {context}{since}: {problem}"
        return DocumentError(
            source, message, line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None
        )
    return DocumentError(source, f"not valid YAML ({type(exc).__name__})")


def load_yaml_document(data: bytes, source: str) -> Any:
    """Parse one YAML document (a stack file) into a JSON-compatible value, or raise one :class:`DocumentError`.

    ``source`` names the document in messages (the file path). An empty document is ``None``. Refused: more than
    MAX_YAML_BYTES, NUL bytes, non-UTF-8 bytes, several documents, duplicate keys, non-string keys, tags other than
    the JSON ones, timestamps, non-finite floats, YAML 1.1 spellings YAML 1.2 reads differently, merge keys,
    recursive aliases, more than MAX_ALIASES aliases, nesting beyond MAX_DEPTH, more than MAX_NODES nodes or
    MAX_EXPANDED_CHARS characters after alias expansion.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"load_yaml_document takes bytes, not {type(data).__name__}")
    text = _text_of(bytes(data), source, max_bytes=MAX_YAML_BYTES, limit_name="MAX_YAML_BYTES", kind="YAML")
    odd_break = _YAML11_BREAK.search(text)
    if odd_break is not None:
        line, column = _line_column(text, odd_break.start())
        raise DocumentError(
            source,
            f"contains U+{ord(odd_break.group()):04X}, a line break in YAML 1.1 (PyYAML) but "
            "an ordinary character in YAML 1.2 (the Pulumi CLI): remove it or write it as an "
            "escape in a double-quoted string",
            line=line,
            column=column,
        )
    loader: _Loader | None = None
    try:
        loader = _Loader(text, source)
        return loader.build(loader.get_single_node())
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, text) from None
    finally:
        if loader is not None:
            loader.dispose()


# ---- JSON ---------------------------------------------------------------------------------------------------

#: JSON strings and brackets, for measuring nesting before ``json.loads`` (whose C scanner recurses per level).
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class _Rejected(Exception):
    """Raised from inside ``json.loads`` hooks; turned into a DocumentError by :func:`load_json_document`."""


class _DuplicateKeys(dict[str, Any]):
    """An object ``json.loads`` built from pairs with a repeated key; found (with its key path) after parsing."""

    duplicate: str = ""


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            marked = _DuplicateKeys(pairs)
            marked.duplicate = key
            return marked
        out[key] = value
    return out


def _json_constant(name: str) -> Any:
    raise _Rejected(f"{name} is not a JSON number (RFC 8259 §6); Python's json module accepts it, other parsers do not")


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS or abs(int(text)) > MAX_SAFE_INTEGER:
        raise _Rejected(
            f"{quote(text)} is outside +/-{MAX_SAFE_INTEGER} (MAX_SAFE_INTEGER), the integers a JSON "
            "number carries exactly"
        )
    return int(text)


def _json_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _Rejected(f"{quote(text)} is out of range: it does not fit a finite 64-bit float")
    return number


def _check_json_value(value: Any, path: tuple[str | int, ...], source: str) -> None:
    """Walk the parsed value (depth already bounded) for duplicate keys and lone surrogates, with key paths."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise DocumentError(
                source,
                "contains a lone UTF-16 surrogate escape, which is not a Unicode character",
                key_path=render_key_path(path),
            )
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_value(item, (*path, i), source)
    elif isinstance(value, dict):
        if isinstance(value, _DuplicateKeys):
            raise DocumentError(
                source,
                f"duplicate key {quote(value.duplicate)}: JSON parsers keep only the last one, silently",
                key_path=render_key_path((*path, value.duplicate)),
            )
        for key, item in value.items():
            _check_json_value(key, (*path, key), source)
            _check_json_value(item, (*path, key), source)


def load_json_document(data: bytes, source: str) -> Any:
    """Parse one JSON document (a release file) into a value, or raise one :class:`DocumentError`.

    Refused beyond what ``json.loads`` refuses: more than MAX_JSON_BYTES, empty or whitespace-only text, NUL
    bytes (binary files), non-UTF-8 bytes, a byte-order mark, nesting beyond MAX_DEPTH (measured before parsing),
    duplicate keys, ``NaN`` / ``Infinity`` / out-of-range numbers, integers beyond MAX_SAFE_INTEGER, lone
    surrogate escapes.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"load_json_document takes bytes, not {type(data).__name__}")
    text = _text_of(bytes(data), source, max_bytes=MAX_JSON_BYTES, limit_name="MAX_JSON_BYTES", kind="JSON")
    if not text.strip():
        raise DocumentError(source, "is empty: a release file holds one JSON object")
    if text.startswith("\ufeff"):
        raise DocumentError(
            source, "starts with a byte-order mark, which JSON text must not have (RFC 8259 §8.1)", line=1, column=1
        )
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        kind = token.group()
        if kind in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line, column = _line_column(text, token.start())
                raise DocumentError(
                    source, f"nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)", line=line, column=column
                )
        elif kind in "]}":
            depth -= 1
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object_pairs,
            parse_constant=_json_constant,
            parse_int=_json_int,
            parse_float=_json_float,
        )
    except json.JSONDecodeError as exc:
        raise DocumentError(source, f"not valid JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    except _Rejected as exc:
        raise DocumentError(source, str(exc)) from None
    _check_json_value(value, (), source)
    return value


# ---- files --------------------------------------------------------------------------------------------------


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_regular_file(
    path: Path, *, source: str, max_bytes: int, limit_name: str, follow_symlinks: bool = True
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, or one :class:`DocumentError`.

    Opened with ``O_NONBLOCK`` so a FIFO cannot block the read, then checked with ``fstat`` on the open
    descriptor (not the name, which could change in between): a directory, FIFO, socket or device is refused
    before a byte is read, and never more than ``max_bytes + 1`` bytes are read. ``follow_symlinks=False`` adds
    ``O_NOFOLLOW`` for callers that resolved the path themselves.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise DocumentError(source, "file not found") from None
    except OSError as exc:
        raise DocumentError(source, f"cannot be opened: {exc.strerror or type(exc).__name__}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentError(source, f"is {_file_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise DocumentError(source, f"is {info.st_size} bytes, over the limit of {max_bytes} bytes ({limit_name})")
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise DocumentError(source, f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise DocumentError(source, f"grew past the limit of {max_bytes} bytes ({limit_name}) while being read")
    return data


#: Characters a release path may use: the POSIX portable filename character set (POSIX.1-2017, 3.282:
#: A-Z a-z 0-9 . _ -) plus '/' between segments. No spaces, backslashes, ':' , '~', quotes or non-ASCII.
_PATH_CHARS = re.compile(r"[A-Za-z0-9._/-]")


def _release_path_segments(relpath: str, directory: str) -> list[str]:
    """Lexical checks of a release path, before anything touches the file system (so ``../../etc/passwd`` is
    refused without ever being opened, stat'ed or resolved). Returns the segments without ``.`` segments."""
    shown = f"release path {quote(relpath)}"
    if not relpath:
        raise DocumentError(shown, "is empty")
    nul = relpath.find("\x00")
    if nul >= 0:
        raise DocumentError(shown, f"contains a NUL character (at character {nul}), which no file name can hold")
    if len(relpath) > MAX_RELEASE_PATH_CHARS:
        raise DocumentError(
            shown,
            f"is {len(relpath)} characters long, over the limit of {MAX_RELEASE_PATH_CHARS} "
            "(MAX_RELEASE_PATH_CHARS: NAME_MAX of common Linux file systems; a release path "
            "is ~50)",
        )
    if relpath.startswith("/"):
        raise DocumentError(shown, f"is absolute: write it relative to the project root, under {directory}/")
    for i, ch in enumerate(relpath):
        if not _PATH_CHARS.fullmatch(ch):
            raise DocumentError(
                shown,
                f"contains {_display(ascii(ch))} at character {i}: release paths use only "
                "letters, digits, '.', '_', '-' and '/' (POSIX portable file names)",
            )
    segments = relpath.split("/")
    if "" in segments:
        raise DocumentError(shown, "has an empty segment ('//' or a trailing '/')")
    if ".." in segments:
        raise DocumentError(
            shown, f"contains a '..' segment: release files must stay inside {directory}/ of the project"
        )
    segments = [s for s in segments if s != "."]
    prefix = [s for s in directory.split("/") if s]
    if segments[: len(prefix)] != prefix or len(segments) <= len(prefix):
        raise DocumentError(shown, f"is not under {directory}/, where release files live")
    if not segments[-1].endswith(".json") or segments[-1] == ".json":
        raise DocumentError(shown, "does not name a .json file")
    return segments


def load_json_file(relpath: str, root: Path, *, directory: str = RELEASE_DIR) -> Any:
    """Load the release file ``relpath`` (as written in config) from under ``root / directory``.

    ``relpath`` must be relative to the project root ``root``, ``/``-separated, made of POSIX portable filename
    characters, at most MAX_RELEASE_PATH_CHARS long, free of ``..``, under ``directory`` (default
    :data:`RELEASE_DIR`) and end in ``.json``; all of this is checked before any file-system call. Then the path
    is resolved (symbolic links followed) and must still be inside ``root / directory``; the file must be a
    regular file of at most MAX_JSON_BYTES; its content goes through :func:`load_json_document`.
    """
    if not isinstance(relpath, str):
        raise DocumentError("release path", f"must be a string, not {type(relpath).__name__}")
    segments = _release_path_segments(relpath, directory)
    shown = f"release path {quote(relpath)}"
    try:
        real_root = Path(os.path.realpath(root))
        real_dir = Path(os.path.realpath(real_root.joinpath(*[s for s in directory.split("/") if s])))
        target = Path(os.path.realpath(real_root.joinpath(*segments)))
    except (OSError, ValueError) as exc:
        raise DocumentError(shown, f"cannot be resolved: {type(exc).__name__}") from None
    if not (target.is_relative_to(real_dir) and real_dir.is_relative_to(real_root)) or target == real_dir:
        raise DocumentError(shown, f"resolves outside {directory}/ (through a symbolic link): refused")
    source = _display("/".join(segments), MAX_RELEASE_PATH_CHARS)
    data = read_regular_file(
        target, source=source, max_bytes=MAX_JSON_BYTES, limit_name="MAX_JSON_BYTES", follow_symlinks=False
    )
    return load_json_document(data, source)
