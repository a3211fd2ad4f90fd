"""The hardened document loader (infra/config/documents.py) and the stack-file reader on top of it
(infra/offline/stackfile.py): one test per class of bad input, each asserting the exact one-line message.

Stack files and release files are written by people and pipelines; every bad input must end in one
DocumentError naming the file, line/column when known and the key path, in bounded time, without echoing a
``secure:`` value.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from infra.config import documents
from infra.config.documents import (
    LIMITS,
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_EXPANDED_CHARS,
    MAX_JSON_BYTES,
    MAX_NODES,
    MAX_RELEASE_PATH_CHARS,
    MAX_YAML_BYTES,
    DocumentError,
    load_json_document,
    load_json_file,
    load_yaml_document,
)
from infra.offline import stackfile
from infra.offline.stackfile import ROOT, SECRET_PLACEHOLDER, StackFileError, available_stacks, read_stack_file

#: A made-up ciphertext: no message, value or config string may ever contain it.
CIPHERTEXT = "v1:Q0lQSEVSVEVYVC1ET05PVFBSSU5U"

FAST_SECONDS = 1.0  # "fails fast": generous for a loaded CI core; measured 2-50 ms


def yaml_error(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    with pytest.raises(DocumentError) as info:
        load_yaml_document(data, "s.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def json_error(data: bytes) -> str:
    with pytest.raises(DocumentError) as info:
        load_json_document(data, "r.json")
    message = str(info.value)
    assert "\n" not in message
    return message


def write_stack(directory: Path, text: str | bytes, stack: str = "dev") -> Path:
    path = directory / f"Pulumi.{stack}.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def stack_error(directory: Path, text: str | bytes, stack: str = "dev") -> str:
    write_stack(directory, text, stack)
    with pytest.raises(StackFileError) as info:
        read_stack_file(stack, directory)
    message = str(info.value)
    assert "\n" not in message and CIPHERTEXT not in message
    return message


# ---- YAML: values JSON has no form for ------------------------------------------------------------------------


def test_yaml_loads_json_values():
    doc = "a: 1\nb: [-2, 2.5, true, False, null, ~, x, '3:00', \"yes\"]\nc: {d: ''}\ne:\n"
    assert load_yaml_document(doc.encode(), "s.yaml") == {
        "a": 1,
        "b": [-2, 2.5, True, False, None, None, "x", "3:00", "yes"],
        "c": {"d": ""},
        "e": None,
    }
    assert load_yaml_document(b"", "s.yaml") is None


def test_unquoted_date_is_refused():
    assert yaml_error("d: 2026-01-01") == (
        "s.yaml:1:4: d: '2026-01-01' is an unquoted date/time, which YAML reads as a timestamp and JSON has no "
        "type for: quote it"
    )


def test_binary_tag_is_refused():
    assert yaml_error("b: !!binary aGVsbG8=") == (
        "s.yaml:1:4: b: tag !!binary is not allowed: only JSON-compatible values (strings, numbers, true/false, "
        "null, lists, mappings with string keys)"
    )


@pytest.mark.parametrize(
    "doc, tag",
    [
        ("s: !!set {a, b}", "!!set"),
        ("v: !vault x", "!vault"),
        ("o: !!python/object:os.system ls", "!!python/object:os.system"),
        ("p: !!omap [a: 1]", "!!omap"),
    ],
)
def test_sets_and_custom_tags_are_refused(doc: str, tag: str):
    key = doc.split(":")[0]
    assert yaml_error(doc) == (
        f"s.yaml:1:4: {key}: tag {tag} is not allowed: only JSON-compatible values (strings, numbers, true/false, "
        "null, lists, mappings with string keys)"
    )


@pytest.mark.parametrize(
    "doc, kind",
    [
        ("yes: 1", "a boolean"),
        ("1: x", "an integer"),
        ("null: x", "null"),
        ("~: x", "null"),
        ("2.5: x", "a number"),
        ("2026-01-01: x", "a timestamp"),
    ],
)
def test_non_string_keys_are_refused(doc: str, kind: str):
    written = doc.split(":")[0]
    assert yaml_error(f"top:\n  {doc}") == (
        f"s.yaml:2:3: top: mapping key '{written}' is not a string: YAML reads it as {kind}; quote it"
    )


def test_list_as_key_is_refused():
    assert yaml_error("? [a]\n: b") == "s.yaml:1:3: a mapping key is a list: keys must be strings"


@pytest.mark.parametrize("value", [".inf", "-.Inf", ".NaN"])
def test_non_finite_floats_are_refused(value: str):
    assert yaml_error(f"x: {value}") == (
        f"s.yaml:1:4: x: '{value}' is not a finite number: JSON has no infinity or NaN"
    )


def test_out_of_range_numbers_are_refused():
    assert yaml_error("x: 1.0e+400") == (
        "s.yaml:1:4: x: '1.0e+400' is out of range: it does not fit a finite 64-bit float"
    )
    assert yaml_error("x: 9007199254740992") == (
        "s.yaml:1:4: x: '9007199254740992' is outside +/-9007199254740991 (MAX_SAFE_INTEGER), the integers a JSON "
        "number carries exactly"
    )
    # Python refuses int() of a string over 4300 digits with ValueError: never reached.
    assert yaml_error("x: " + "9" * 5000).startswith("s.yaml:1:4: x: '999999")


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "on",
            "'on' is a boolean in YAML 1.1 (PyYAML) but a string in YAML 1.2 (the Pulumi CLI): write true or false, "
            "or quote it",
        ),
        (
            "3:00",
            "'3:00' is a base-60 number in YAML 1.1 (3:00 reads as 180) but a string in YAML 1.2 (the Pulumi CLI): "
            "quote it",
        ),
        (
            "010",
            "'010' is a YAML 1.1 integer form (octal, hex, binary or '_' separators) that YAML 1.2 reads "
            "differently: write it in plain decimal, or quote it",
        ),
        (
            "0x1F",
            "'0x1F' is a YAML 1.1 integer form (octal, hex, binary or '_' separators) that YAML 1.2 reads "
            "differently: write it in plain decimal, or quote it",
        ),
        (
            "1_000.5",
            "'1_000.5' is a YAML 1.1 number form ('_' separators or base 60) that YAML 1.2 reads differently: "
            "write it in plain decimal, or quote it",
        ),
        (
            "1e3",
            "'1e3' is a string in YAML 1.1 (PyYAML) but a number in YAML 1.2 (the Pulumi CLI): quote it, or write "
            "a plain decimal number",
        ),
    ],
)
def test_yaml_11_spellings_yaml_12_reads_differently_are_refused(value: str, message: str):
    """The Pulumi CLI reads the stack file as YAML 1.2 (Go yaml.v3), PyYAML as YAML 1.1: a value both do not
    read alike would make the offline plan differ from the deployment."""
    assert yaml_error(f"x: {value}") == f"s.yaml:1:4: x: {message}"
    assert load_yaml_document(f"x: '{value}'".encode(), "s.yaml") == {"x": value}


def test_merge_keys_are_refused():
    assert yaml_error("base: &b {a: 1}\nderived:\n  <<: *b\n  c: 2") == (
        "s.yaml:3:3: derived: merge keys ('<<') are a YAML 1.1 extension this loader refuses: write the merged keys out"
    )


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029"])
def test_yaml_11_line_breaks_are_refused(char: str):
    """YAML 1.1 folds NEL/LS/PS as line breaks inside a string; YAML 1.2 keeps them as characters."""
    assert yaml_error(f"x: 'a{char}b'") == (
        f"s.yaml:1:6: contains U+{ord(char):04X}, a line break in YAML 1.1 (PyYAML) but an ordinary character in "
        "YAML 1.2 (the Pulumi CLI): remove it or write it as an escape in a double-quoted string"
    )
    assert load_yaml_document(f'x: "a\\u{ord(char):04x}b"'.encode(), "s.yaml") == {"x": f"a{char}b"}


def test_lone_surrogate_escape_is_refused():
    assert yaml_error('x: "\\ud800"') == (
        "s.yaml:1:4: x: '\\ud800' contains a lone UTF-16 surrogate escape, which is not a Unicode character"
    )


# ---- YAML: duplicate keys -----------------------------------------------------------------------------------


def test_duplicate_keys_are_refused():
    assert yaml_error("a: 1\nb: 2\na: 3\n") == (
        "s.yaml:3:1: a: duplicate key 'a': first at line 1, column 1, again at line 3, column 1; YAML loaders keep "
        "only the last one, silently"
    )


def test_duplicate_section_in_a_stack_file_is_refused(tmp_path: Path):
    """The shipped dev stack once had llm-serving:gke twice; yaml.safe_load silently dropped the first block."""
    text = (
        "config:\n  llm-serving:gke:\n    cluster_name: a\n  llm-serving:zones: [z]\n"
        "  llm-serving:gke:\n    cluster_name: b\n"
    )
    assert stack_error(tmp_path, text) == (
        f"{tmp_path}/Pulumi.dev.yaml:5:3: config.llm-serving:gke: duplicate key 'llm-serving:gke': first at line 2, "
        "column 3, again at line 5, column 3; YAML loaders keep only the last one, silently"
    )


def test_duplicate_anchor_is_refused():
    assert yaml_error("a: &x 1\nb: &x 2") == (
        "s.yaml:2:4: not valid YAML: found duplicate anchor 'x'; first occurrence (line 1, column 4): second occurrence"
    )


# ---- YAML: aliases, nesting, size ---------------------------------------------------------------------------


def billion_laughs(levels: int, fan_out: int) -> bytes:
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan_out)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan_out)}]" for i in range(1, levels)]
    return "\n".join(lines).encode()


def test_billion_laughs_fails_fast_on_the_alias_limit():
    start = time.perf_counter()
    message = yaml_error(billion_laughs(levels=9, fan_out=10))  # 10^9 strings once expanded
    assert time.perf_counter() - start < FAST_SECONDS
    assert message == (
        f"s.yaml:7:10: more than {MAX_ALIASES} aliases (MAX_ALIASES): a few aliases share a block, many make a small "
        "file expand into a huge one ('billion laughs')"
    )


def test_few_aliases_expanding_past_the_node_budget_fail_fast():
    """40 aliases (under MAX_ALIASES) that expand to 10^5 nodes are stopped by the node budget."""
    start = time.perf_counter()
    message = yaml_error(billion_laughs(levels=5, fan_out=10))
    assert time.perf_counter() - start < FAST_SECONDS
    assert message == (
        f"s.yaml:1:35: l3[7][8][8][5]: expands to more than {MAX_NODES} nodes (MAX_NODES) through aliases"
    )


def test_aliases_cannot_multiply_text_past_the_character_budget():
    big = "x" * (100 * 1024)
    doc = f"a: &a {big}\nb: [{', '.join(['*a'] * 5)}]"
    assert len(doc) < MAX_YAML_BYTES
    assert yaml_error(doc) == (
        f"s.yaml:1:4: b[4]: holds more than {MAX_EXPANDED_CHARS} characters of scalar text (MAX_EXPANDED_CHARS) "
        "once aliases are expanded"
    )


def test_recursive_alias_is_refused():
    assert yaml_error("a: &a [1, *a]") == (
        "s.yaml:1:4: a[1]: recursive alias *a: the anchored node contains an alias to itself"
    )
    assert yaml_error("m: &m {self: *m}") == (
        "s.yaml:1:4: m.self: recursive alias *m: the anchored node contains an alias to itself"
    )


def test_aliases_build_independent_copies():
    value = load_yaml_document(b"a: &a {k: [1]}\nb: *a", "s.yaml")
    assert value == {"a": {"k": [1]}, "b": {"k": [1]}}
    assert value["a"] is not value["b"]


def test_deep_nesting_fails_fast():
    """PyYAML's composer recurses once per level: without the bound, ``[[[[...`` ends in RecursionError."""
    start = time.perf_counter()
    message = yaml_error("[" * 100_000)  # within MAX_YAML_BYTES, so the depth bound is what stops it
    assert time.perf_counter() - start < FAST_SECONDS
    assert message == f"s.yaml:1:{MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)"
    assert yaml_error("[" * 200_000) == (
        f"s.yaml: is 200000 bytes, over the limit of {MAX_YAML_BYTES} bytes (MAX_YAML_BYTES)"
    )


def test_deep_flow_nesting_stops_in_the_scanner():
    """PyYAML's scanner looks ahead over every open '[' (each may start a simple key): the bound is checked as
    each '[' is scanned, so the error comes before the scanner reaches the bad character further on."""
    assert yaml_error("[" * (MAX_DEPTH + 8) + "@") == (
        f"s.yaml:1:{MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)"
    )


def test_deep_block_nesting_is_bounded():
    doc = "".join(" " * i + "a:\n" for i in range(MAX_DEPTH + 5))
    assert yaml_error(doc) == f"s.yaml:{MAX_DEPTH}:{MAX_DEPTH}: nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)"


def test_nesting_through_aliases_is_bounded():
    half = MAX_DEPTH // 2 + 1
    doc = f"a: &a {'[' * half}1{']' * half}\nb: {'[' * half}*a{']' * half}"
    assert yaml_error(doc).endswith(f"nested deeper than {MAX_DEPTH} levels (MAX_DEPTH) once aliases are expanded")


def test_too_many_nodes_are_refused():
    assert yaml_error("[" + "1, " * MAX_NODES + "]") == (
        f"s.yaml:1:{3 * MAX_NODES - 1}: more than {MAX_NODES} nodes (MAX_NODES)"
    )


def test_oversized_document_is_refused_before_parsing():
    assert yaml_error(b"#" * (MAX_YAML_BYTES + 1)) == (
        f"s.yaml: is {MAX_YAML_BYTES + 1} bytes, over the limit of {MAX_YAML_BYTES} bytes (MAX_YAML_BYTES)"
    )


# ---- YAML: encoding and syntax ------------------------------------------------------------------------------


def test_non_utf8_file_is_refused_with_the_byte_offset(tmp_path: Path):
    assert stack_error(tmp_path, b"config:\n  gcp:project: caf\xe9\n") == (
        f"{tmp_path}/Pulumi.dev.yaml:2: is not UTF-8 text: byte 0xe9 at byte offset 26 (invalid continuation byte)"
    )


def test_nul_byte_and_utf16_are_refused():
    assert yaml_error("a: 1\n\x00") == (
        "s.yaml:2: contains a NUL byte at byte offset 5: a binary (or UTF-16) file, not YAML text"
    )
    assert yaml_error("a: 1".encode("utf-16")) == (
        "s.yaml:1: contains a NUL byte at byte offset 3: a binary (or UTF-16) file, not YAML text"
    )


def test_control_character_is_refused():
    assert yaml_error("a: 1\nb: \x01") == (
        "s.yaml:2:4: contains the character U+0001, which YAML does not allow in a document (special characters "
        "are not allowed)"
    )


def test_several_documents_are_refused():
    assert yaml_error("a: 1\n---\nb: 2") == (
        "s.yaml:2:1: not valid YAML: expected a single document in the stream (line 1, column 1): but found another "
        "document"
    )


def test_syntax_errors_never_echo_the_source_line(tmp_path: Path):
    """PyYAML's str(error) prints the offending source line; a secure: ciphertext must not reach stderr."""
    unclosed = f"config:\n  llm-serving:token: {{secure: {CIPHERTEXT}\n"
    assert stack_error(tmp_path, unclosed) == (
        f"{tmp_path}/Pulumi.dev.yaml:3:1: not valid YAML: while parsing a flow mapping (line 2, column 22): expected "
        "',' or '}', but got '<stream end>'"
    )
    colon = f"config:\n  llm-serving:token:\n    secure: {CIPHERTEXT}: extra\n"
    assert stack_error(tmp_path, colon) == (
        f"{tmp_path}/Pulumi.dev.yaml:3:44: not valid YAML: mapping values are not allowed here"
    )
    tab = f"config:\n  llm-serving:token:\n\tsecure: {CIPHERTEXT}\n"
    assert stack_error(tmp_path, tab) == (
        f"{tmp_path}/Pulumi.dev.yaml:3:1: not valid YAML: while scanning for the next token: found character '\\t' "
        "that cannot start any token"
    )


def test_long_values_are_truncated_in_messages():
    message = yaml_error("x: !!int '" + "7" * (16 * 1024) + "'")
    assert message == (
        "s.yaml:1:4: x: '" + "7" * 60 + "... (16384 characters)' is outside +/-9007199254740991 (MAX_SAFE_INTEGER), "
        "the integers a JSON number carries exactly"
    )
    key = "k" * 100_000
    assert len(yaml_error(f"{key}: 1\n{key}: 2")) < 400


def test_messages_escape_control_characters():
    """A key or value with a newline or a terminal escape sequence stays one line and inert in a message."""
    assert yaml_error('"a\\nb\\e[31m": 1\n"a\\nb\\e[31m": 2') == (
        "s.yaml:2:1: a\\nb\\x1b[31m: duplicate key 'a\\nb\\x1b[31m': first at line 1, column 1, again at line 2, "
        "column 1; YAML loaders keep only the last one, silently"
    )


def test_key_paths_name_the_nested_key():
    doc = "config:\n  llm-serving:contract:\n    ttft_p95_ms: .inf\n    classes: [{name: a, when: 2026-01-01}]\n"
    assert yaml_error(doc).startswith("s.yaml:3:18: config.llm-serving:contract.ttft_p95_ms: '.inf' is not")
    doc = "config:\n  llm-serving:contract:\n    classes: [{name: a, when: 2026-01-01}]\n"
    assert yaml_error(doc).startswith("s.yaml:3:31: config.llm-serving:contract.classes[0].when: '2026-01-01' is")


def test_values_under_secure_are_never_shown():
    assert yaml_error("k:\n  secure: 2026-01-01") == (
        "s.yaml:2:11: k.secure: the value (not shown: it sits under a secret key) is an unquoted date/time, which "
        "YAML reads as a timestamp and JSON has no type for: quote it"
    )
    assert yaml_error("k:\n  secure: {v1:xyz: 1, v1:xyz: 2}") == (
        "s.yaml:2:23: k.secure.<not shown>: duplicate key (not shown): first at line 2, column 12, again at line 2, "
        "column 23; YAML loaders keep only the last one, silently"
    )


# ---- stack files ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_shipped_stacks_load(stack: str):
    """Fails for dev until the duplicate llm-serving:gke block in stacks/Pulumi.dev.yaml is removed."""
    sf = read_stack_file(stack)
    assert sf.values["llm-serving:environment"] == stack
    assert sf.secret_keys == []
    assert all(isinstance(v, str) for v in sf.config.values())
    assert available_stacks() == [
        "dev",
        "dev-cloudrun",
        "dev-cohost",
        "dev-cohost-gke",
        "dev-multiregion",
        "prod",
        "staging",
        "staging-vertex",
    ]


def test_shipped_release_files_load():
    paths = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "stacks" / "releases").rglob("*.json"))
    assert len(paths) == 8  # + the two example releases the co-hosting stack (dev-cohost) serves
    for path in paths:
        assert load_json_file(path, ROOT)["image"].split("@")[1].startswith("sha256:")


@pytest.mark.parametrize(
    "text, what", [("config: [gcp:project]", "a list"), ("config: text", "a string"), ("config:", "nothing (null)")]
)
def test_config_must_be_a_mapping(tmp_path: Path, text: str, what: str):
    assert stack_error(tmp_path, text) == (
        f"{tmp_path}/Pulumi.dev.yaml: config: must be a mapping of '<namespace>:<name>' keys, not {what}"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is empty: a stack file is a mapping with a 'config:' mapping"),
        ("- config", "is a list: a stack file is a mapping with a 'config:' mapping"),
        ("encryptionsalt: abc", "has no 'config:' mapping"),
        (
            "config: {}\nenvironment: [x]",
            "environment: unknown top-level key 'environment': a stack file has only "
            "config, encryptedkey, encryptionsalt, secretsprovider",
        ),
        ("config: {}\nencryptionsalt: 5", "encryptionsalt: must be a string, not a number"),
    ],
)
def test_stack_document_shape(tmp_path: Path, text: str, message: str):
    assert stack_error(tmp_path, text) == f"{tmp_path}/Pulumi.dev.yaml: {message}"


@pytest.mark.parametrize("key", ["project", "a:b:c", ":x"])
def test_config_keys_have_the_pulumi_form(tmp_path: Path, key: str):
    assert stack_error(tmp_path, f"config:\n  '{key}': 1") == (
        f"{tmp_path}/Pulumi.dev.yaml: config.{key}: is not a config key of the form '<namespace>:<name>' (Pulumi's "
        "config key rule)"
    )


def test_old_config_key_form_is_normalised_and_collisions_refused(tmp_path: Path):
    write_stack(tmp_path, "config:\n  gcp:config:project: p\n")
    assert read_stack_file("dev", tmp_path).config == {"gcp:project": "p"}
    assert stack_error(tmp_path, "config:\n  gcp:project: p\n  gcp:config:project: q\n") == (
        f"{tmp_path}/Pulumi.dev.yaml: config.gcp:config:project: is the same config key as 'gcp:project': Pulumi "
        "reads '<namespace>:config:<name>' as '<namespace>:<name>'"
    )


def test_null_config_value_is_refused(tmp_path: Path):
    assert stack_error(tmp_path, "config:\n  llm-serving:gke:\n") == (
        f"{tmp_path}/Pulumi.dev.yaml: config.llm-serving:gke: has no value (null): give it one or remove the key"
    )


@pytest.mark.parametrize("stack", ["../dev", "dev/x", ".dev", "..", "", "1dev", "d ev", "a" * 101])
def test_stack_must_be_a_name_not_a_path(stack: str):
    with file_system_refused() as touched, pytest.raises(StackFileError) as err:
        read_stack_file(stack)
    assert touched == []
    assert str(err.value) == (
        f"stack {documents.quote(stack)}: is not a stack name: 1-100 letters, digits, '_', '.' or '-', starting with "
        "a letter or '_' (Pulumi's stack-name rule); a stack name is never a path"
    )
    assert stackfile.is_stack_name("a" * 100) and stackfile.is_stack_name("_x.y-z")


def test_unknown_stack_lists_the_available_ones(tmp_path: Path):
    write_stack(tmp_path, "config: {}", "prod")
    with pytest.raises(StackFileError) as info:
        read_stack_file("qa", tmp_path)
    assert str(info.value) == f"{tmp_path}/Pulumi.qa.yaml: no stack file for stack 'qa' (available: prod)"


def test_stack_file_that_is_a_directory_or_fifo(tmp_path: Path):
    (tmp_path / "Pulumi.dev.yaml").mkdir()
    with pytest.raises(StackFileError) as info:
        read_stack_file("dev", tmp_path)
    assert str(info.value) == f"{tmp_path}/Pulumi.dev.yaml: is a directory, not a regular file"
    os.mkfifo(tmp_path / "Pulumi.qa.yaml")
    with pytest.raises(StackFileError) as info:
        read_stack_file("qa", tmp_path)  # O_NONBLOCK: returns at once instead of waiting for a writer
    assert str(info.value) == f"{tmp_path}/Pulumi.qa.yaml: is a FIFO (named pipe), not a regular file"


def test_oversized_stack_file_is_refused(tmp_path: Path):
    assert stack_error(tmp_path, b"#" * (MAX_YAML_BYTES + 1)) == (
        f"{tmp_path}/Pulumi.dev.yaml: is {MAX_YAML_BYTES + 1} bytes, over the limit of {MAX_YAML_BYTES} bytes "
        "(MAX_YAML_BYTES)"
    )


def test_secret_keys_are_exact_and_ciphertexts_never_leave(tmp_path: Path):
    write_stack(
        tmp_path,
        f"""config:
  llm-serving:token:
    secure: {CIPHERTEXT}
  llm-serving:gke:
    cluster_name: c
    hub_token: {{value: {{secure: {CIPHERTEXT}}}}}
    tags: [a, {{secure: {CIPHERTEXT}}}]
  llm-serving:environment: dev
  gcp:project: p
""",
    )
    sf = read_stack_file("dev", tmp_path)
    assert sf.secret_keys == ["llm-serving:gke", "llm-serving:token"]
    assert sf.values["llm-serving:token"] == SECRET_PLACEHOLDER.format("llm-serving:token")
    assert sf.values["llm-serving:gke"] == {
        "cluster_name": "c",
        "hub_token": {"value": "<secret:llm-serving:gke>"},
        "tags": ["a", "<secret:llm-serving:gke>"],
    }
    assert sf.config["llm-serving:gke"] == (
        '{"cluster_name":"c","hub_token":{"value":"<secret:llm-serving:gke>"},"tags":["a","<secret:llm-serving:gke>"]}'
    )
    assert sf.config["llm-serving:environment"] == "dev"
    assert CIPHERTEXT not in json.dumps([sf.values, sf.config])


def test_engine_strings_for_scalars(tmp_path: Path):
    write_stack(tmp_path, "config:\n  a:b: true\n  a:c: 1.50\n  a:d: 7\n  a:e: [x, {z: 1, y: null}]\n")
    assert read_stack_file("dev", tmp_path).config == {
        "a:b": "true",
        "a:c": "1.5",
        "a:d": "7",
        "a:e": '["x",{"y":null,"z":1}]',
    }


@pytest.mark.parametrize(
    "value, path, message",
    [
        (
            f"{{secure: {CIPHERTEXT}, note: x}}",
            "config.llm-serving:token",
            "a mapping with a 'secure' key must hold only that key (Pulumi's encrypted form is {secure: <ciphertext>}); "
            "otherwise the ciphertext would be handed to the program as plain config",
        ),
        (
            "{secure: [1, 2]}",
            "config.llm-serving:token.secure",
            "'secure' must hold the ciphertext string `pulumi config set --secret` writes, not a list",
        ),
    ],
)
def test_secure_look_alikes_are_refused(tmp_path: Path, value: str, path: str, message: str):
    assert stack_error(tmp_path, f"config:\n  llm-serving:token: {value}\n") == (
        f"{tmp_path}/Pulumi.dev.yaml: {path}: {message}"
    )


def test_bad_value_next_to_a_secure_value_names_the_key_not_the_secret(tmp_path: Path):
    text = f"config:\n  llm-serving:token: {{secure: {CIPHERTEXT}}}\n  llm-serving:when: 2026-01-01\n"
    assert stack_error(tmp_path, text) == (
        f"{tmp_path}/Pulumi.dev.yaml:3:21: config.llm-serving:when: '2026-01-01' is an unquoted date/time, which YAML "
        "reads as a timestamp and JSON has no type for: quote it"
    )
    text = f"config:\n  llm-serving:token: {{secure: {CIPHERTEXT}, bad: .nan}}\n"
    assert stack_error(tmp_path, text) == (
        f"{tmp_path}/Pulumi.dev.yaml:2:69: config.llm-serving:token.bad: '.nan' is not a finite number: JSON has no "
        "infinity or NaN"
    )


def test_cli_reports_a_bad_stack_file_in_one_line_without_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from infra.offline import cli

    write_stack(tmp_path, f"config:\n  llm-serving:token:\n    secure: {CIPHERTEXT}: x\n")
    assert cli.main(["plan", "--stack", "dev", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path}/Pulumi.dev.yaml:3:44: not valid YAML: mapping values are not allowed here\n"


# ---- release files: the path --------------------------------------------------------------------------------


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A project root with one good release file, and a sentinel file outside the root that must never be read."""
    root = tmp_path / "root"
    (root / "stacks" / "releases" / "dev").mkdir(parents=True)
    (root / "stacks" / "releases" / "dev" / "good.json").write_text('{"release": "r1"}')
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "passwd.json").write_text('{"sentinel": true}')
    return root


def release_error(relpath: str, root: Path) -> str:
    with pytest.raises(DocumentError) as info:
        load_json_file(relpath, root)
    message = str(info.value)
    assert "\n" not in message and "sentinel" not in message
    return message


class RefusingOS:
    """Stands in for the ``os`` module inside the code under test: any use of it is a file-system access."""

    def __init__(self, touched: list[str]) -> None:
        self._touched = touched

    def __getattr__(self, name: str) -> Any:
        self._touched.append(name)
        raise AssertionError(f"os.{name} used")


@contextlib.contextmanager
def file_system_refused() -> Iterator[list[str]]:
    """Within the block, the loader's every way to the file system (``os`` in documents.py and stackfile.py,
    ``open``) is refused and recorded. Patched only around the call, so pytest's own reporting is unaffected."""
    touched: list[str] = []

    def refuse_open(*args: Any, **kwargs: Any) -> None:
        touched.append(f"open{args!r}")
        raise AssertionError("open used")

    refusing = RefusingOS(touched)
    with (
        mock.patch.object(documents, "os", refusing),
        mock.patch.object(stackfile, "os", refusing),
        mock.patch.object(builtins, "open", refuse_open),
        mock.patch.object(io, "open", refuse_open),
    ):
        yield touched


def refused_release_error(relpath: str, root: Path) -> str:
    """The message for ``relpath``, asserting nothing touched the file system to produce it."""
    with file_system_refused() as touched:
        try:
            load_json_file(relpath, root)
        except DocumentError as err:
            message = str(err)
        else:
            message = "loaded"
    assert touched == []
    assert "\n" not in message and "sentinel" not in message
    return message


def test_good_release_file_loads(project: Path):
    assert load_json_file("stacks/releases/dev/good.json", project) == {"release": "r1"}
    assert load_json_file("./stacks/releases/./dev/good.json", project) == {"release": "r1"}


def test_dotdot_escape_is_refused_before_anything_is_opened(project: Path):
    assert refused_release_error("../../etc/passwd", project) == (
        "release path '../../etc/passwd': contains a '..' segment: release files must stay inside stacks/releases/ "
        "of the project"
    )
    assert refused_release_error("stacks/releases/../../../outside/passwd.json", project) == (
        "release path 'stacks/releases/../../../outside/passwd.json': contains a '..' segment: release files must "
        "stay inside stacks/releases/ of the project"
    )


def test_absolute_path_is_refused(project: Path):
    relpath = str(project / "stacks/releases/dev/good.json")
    assert refused_release_error(relpath, project) == (
        f"release path {documents.quote(relpath)}: is absolute: write it relative to the project root, under "
        "stacks/releases/"
    )
    assert refused_release_error("/etc/passwd", project) == (
        "release path '/etc/passwd': is absolute: write it relative to the project root, under stacks/releases/"
    )


def test_nul_byte_in_path_is_refused(project: Path):
    assert refused_release_error("stacks/releases/dev/good.json\x00.png", project) == (
        "release path 'stacks/releases/dev/good.json\\x00.png': contains a NUL character (at character 29), which "
        "no file name can hold"
    )


def test_overlong_path_is_refused(project: Path):
    relpath = "stacks/releases/" + "a" * 300 + ".json"
    assert refused_release_error(relpath, project) == (
        f"release path '{relpath[:60]}... ({len(relpath)} characters)': is {len(relpath)} characters long, over the "
        f"limit of {MAX_RELEASE_PATH_CHARS} (MAX_RELEASE_PATH_CHARS: NAME_MAX of common Linux file systems; a "
        "release path is ~50)"
    )


@pytest.mark.parametrize(
    "relpath, message",
    [
        ("", "is empty"),
        (
            "stacks\\releases\\dev\\good.json",
            "contains '\\\\' at character 6: release paths use only letters, digits, "
            "'.', '_', '-' and '/' (POSIX portable file names)",
        ),
        (
            "C:stacks/releases/x.json",
            "contains ':' at character 1: release paths use only letters, digits, '.', '_', "
            "'-' and '/' (POSIX portable file names)",
        ),
        ("stacks//releases/dev/good.json", "has an empty segment ('//' or a trailing '/')"),
        ("stacks/Pulumi.prod.yaml", "is not under stacks/releases/, where release files live"),
        ("stacks/releases/dev/good.yaml", "does not name a .json file"),
    ],
)
def test_other_path_shapes_are_refused(project: Path, relpath: str, message: str):
    assert refused_release_error(relpath, project) == f"release path {documents.quote(relpath)}: {message}"


class RecordingOS:
    """Stands in for ``os`` inside documents.py: everything works, every ``os.open`` path is recorded."""

    def __init__(self, opened: list[str]) -> None:
        self._opened = opened

    def open(self, path: Any, *args: Any, **kwargs: Any) -> int:
        self._opened.append(str(path))
        return os.open(path, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def test_symlink_escaping_the_root_is_refused(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    releases = project / "stacks" / "releases" / "dev"
    (releases / "escape.json").symlink_to(tmp_path / "outside" / "passwd.json")
    (releases / "stackfile.json").symlink_to(project / "stacks")  # inside the root, outside stacks/releases
    (releases / "alias.json").symlink_to(releases / "good.json")  # inside: fine
    opened: list[str] = []
    monkeypatch.setattr(documents, "os", RecordingOS(opened))
    assert release_error("stacks/releases/dev/escape.json", project) == (
        "release path 'stacks/releases/dev/escape.json': resolves outside stacks/releases/ (through a symbolic link): "
        "refused"
    )
    assert release_error("stacks/releases/dev/stackfile.json", project) == (
        "release path 'stacks/releases/dev/stackfile.json': resolves outside stacks/releases/ (through a symbolic "
        "link): refused"
    )
    assert opened == []
    assert load_json_file("stacks/releases/dev/alias.json", project) == {"release": "r1"}
    assert opened == [str(releases / "good.json")]


# ---- release files: the file ----------------------------------------------------------------------------------


def test_release_path_that_is_a_directory(project: Path):
    (project / "stacks/releases/dev/dir.json").mkdir()
    assert release_error("stacks/releases/dev/dir.json", project) == (
        "stacks/releases/dev/dir.json: is a directory, not a regular file"
    )


def test_release_path_that_is_a_fifo_does_not_block(project: Path):
    os.mkfifo(project / "stacks/releases/dev/pipe.json")
    start = time.perf_counter()
    assert release_error("stacks/releases/dev/pipe.json", project) == (
        "stacks/releases/dev/pipe.json: is a FIFO (named pipe), not a regular file"
    )
    assert time.perf_counter() - start < FAST_SECONDS


def test_missing_release_file(project: Path):
    assert release_error("stacks/releases/dev/none.json", project) == "stacks/releases/dev/none.json: file not found"


@pytest.mark.parametrize("content", [b"", b" \n\t"])
def test_empty_release_file(project: Path, content: bytes):
    (project / "stacks/releases/dev/empty.json").write_bytes(content)
    assert release_error("stacks/releases/dev/empty.json", project) == (
        "stacks/releases/dev/empty.json: is empty: a release file holds one JSON object"
    )


def test_binary_release_file(project: Path):
    (project / "stacks/releases/dev/image.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert release_error("stacks/releases/dev/image.json", project) == (
        "stacks/releases/dev/image.json:3: contains a NUL byte at byte offset 8: a binary (or UTF-16) file, not JSON "
        "text"
    )
    (project / "stacks/releases/dev/latin1.json").write_bytes(b'{"release": "caf\xe9"}')
    assert release_error("stacks/releases/dev/latin1.json", project) == (
        "stacks/releases/dev/latin1.json:1: is not UTF-8 text: byte 0xe9 at byte offset 16 (invalid continuation byte)"
    )


def test_oversized_release_file(project: Path):
    (project / "stacks/releases/dev/big.json").write_bytes(b" " * MAX_JSON_BYTES + b"{}")
    assert release_error("stacks/releases/dev/big.json", project) == (
        f"stacks/releases/dev/big.json: is {MAX_JSON_BYTES + 2} bytes, over the limit of {MAX_JSON_BYTES} bytes "
        "(MAX_JSON_BYTES)"
    )


def test_deep_json_fails_fast_without_recursion_error():
    """json.loads recurses once per level (RecursionError near 1000): nesting is measured before parsing."""
    start = time.perf_counter()
    message = json_error(b"[" * 30_000 + b"]" * 30_000)  # within MAX_JSON_BYTES, so the depth bound stops it
    assert time.perf_counter() - start < FAST_SECONDS
    assert message == f"r.json:1:{MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)"
    assert json_error(b"[" * 200_000) == (
        f"r.json: is 200000 bytes, over the limit of {MAX_JSON_BYTES} bytes (MAX_JSON_BYTES)"
    )
    # Brackets inside strings are not nesting.
    assert load_json_document(json.dumps({"a": "[" * 1000}).encode(), "r.json") == {"a": "[" * 1000}


def test_duplicate_json_keys_are_refused():
    assert json_error(b'{"release": "a", "model": {"catalogue": "x", "catalogue": "y"}}') == (
        "r.json: model.catalogue: duplicate key 'catalogue': JSON parsers keep only the last one, silently"
    )


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_json_numbers_are_refused(token: bytes):
    assert json_error(b'{"max_model_len": ' + token + b"}") == (
        f"r.json: {token.decode()} is not a JSON number (RFC 8259 §6); Python's json module accepts it, other parsers "
        "do not"
    )


def test_out_of_range_json_numbers_are_refused():
    assert json_error(b'{"a": 1e999}') == "r.json: '1e999' is out of range: it does not fit a finite 64-bit float"
    assert json_error(b'{"a": ' + b"9" * 5000 + b"}").startswith("r.json: '9999")


def test_invalid_json_names_line_and_column():
    assert json_error(b'{\n  "release": "a",\n}') == (
        "r.json:3:1: not valid JSON: Expecting property name enclosed in double quotes"
    )
    assert json_error("\ufeff{}".encode()) == (
        "r.json:1:1: starts with a byte-order mark, which JSON text must not have (RFC 8259 §8.1)"
    )
    assert json_error(b'{"a": "\\ud800"}') == (
        "r.json: a: contains a lone UTF-16 surrogate escape, which is not a Unicode character"
    )


# ---- limits -------------------------------------------------------------------------------------------------


def test_every_limit_is_a_named_constant_with_a_reason():
    names = [limit.name for limit in LIMITS]
    assert len(names) == len(set(names))
    for limit in LIMITS:
        assert getattr(documents, limit.name) == limit.value
        assert limit.name in documents.__all__
        assert len(limit.reason) > 20
    assert [limit.name for limit in stackfile.LIMITS] == [*names, "MAX_STACK_NAME_CHARS"]


def test_each_bound_keeps_its_stated_headroom_over_the_shipped_files():
    """The reasons in ``documents.LIMITS`` state a factor above the shipped files; this keeps them true as stacks
    grow (a stack file that outgrows the headroom needs the bound and its reason revisited together)."""
    from infra.offline.docs import shipped_document_sizes

    m = shipped_document_sizes()
    assert documents.MAX_YAML_BYTES >= 16 * m.stack_bytes
    assert documents.MAX_JSON_BYTES >= 50 * m.release_bytes
    assert documents.MAX_DEPTH >= 4 * m.depth
    assert documents.MAX_NODES >= 20 * m.stack_nodes
    assert m.aliases == 0  # "shipped stacks use none"
