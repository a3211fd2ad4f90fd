"""Tests for infra.offline.analyzer: a real pulumi-policy pack booted the way the engine boots it.

Each test starts a throwaway pack in a subprocess (about a second each), so the assertions exercise
pulumi_policy's own gRPC servicer, deserializer and unknown-value handling rather than a fake.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest

from infra.offline.analyzer import (
    COMPUTED_MARKER,
    ENGINE_UNKNOWN,
    PolicyConfigError,
    PolicyPackError,
    PolicyPackStartError,
    PolicyReport,
    Violation,
    run_policy_pack,
    to_analyzer_value,
)

from .synthetic import STACK, inventory, resource, urn

PACK_MAIN = textwrap.dedent(
    """
    import json
    from pulumi_policy.deserialize import serialize_properties
    from pulumi_policy import (
        EnforcementLevel, PolicyConfigSchema, PolicyPack, ResourceValidationPolicy, Severity,
        StackValidationPolicy,
    )

    def disk_size(args, report_violation):
        if args.resource_type != "gcp:compute/disk:Disk":
            return
        limit = args.get_config().get("maxGb", 100)
        size = args.props["size"]  # raises UnknownValueError when unknown at preview
        if size > limit:
            # Config and props arrive as protobuf doubles (40 -> 40.0), as from the engine.
            report_violation(f"disk {args.name} is {size:g} GB > {limit:g} GB")

    def bucket_protected(args, report_violation):
        for r in args.resources:
            if r.resource_type == "gcp:storage/bucket:Bucket" and not r.opts.protect:
                report_violation(f"bucket {r.name} is not protected", r.urn)

    def echo(args, report_violation):
        # Reports exactly what the pack received, so the wire encoding can be asserted.
        if args.resource_type == "test:index:Echo":
            raw = serialize_properties(args.props)  # unwraps pulumi_policy's unknown-checking proxies
            report_violation(json.dumps({
                "props": raw,
                "provider": None if args.provider is None else [args.provider.resource_type, args.provider.name,
                                                                serialize_properties(args.provider.props)],
                "parent": args.opts.parent,
                "protect": args.opts.protect,
                "ignore": list(args.opts.ignore_changes),
                "stack": __import__("pulumi").get_stack(),
            }, sort_keys=True))

    def graph(args, report_violation):
        for r in args.resources:
            if r.resource_type == "test:index:Echo":
                report_violation(json.dumps({
                    "parent": r.parent.urn if r.parent else None,
                    "deps": [d.urn for d in r.dependencies],
                    "propdeps": {k: [d.urn for d in v] for k, v in r.property_dependencies.items()},
                }, sort_keys=True), r.urn)

    PolicyPack(
        name="throwaway",
        policies=[
            ResourceValidationPolicy(
                name="disk-size-limit",
                description="Persistent disks must stay under the size limit.",
                validate=disk_size,
                enforcement_level=EnforcementLevel.ADVISORY,
                severity=Severity.HIGH,
                config_schema=PolicyConfigSchema(properties={"maxGb": {"type": "integer", "minimum": 1}}),
            ),
            StackValidationPolicy(
                name="buckets-protected",
                description="Buckets must be protected.",
                validate=bucket_protected,
                enforcement_level=EnforcementLevel.MANDATORY,
                severity=Severity.MEDIUM,
            ),
            ResourceValidationPolicy(name="echo", description="echo", validate=echo,
                                     enforcement_level=EnforcementLevel.DISABLED),
            StackValidationPolicy(name="graph", description="graph", validate=graph,
                                  enforcement_level=EnforcementLevel.DISABLED),
        ],
    )
    """
)


BIG_DISK = resource("gcp:compute/disk:Disk", "big", {"size": 500, "zone": "us-central1-a"})
SMALL_DISK = resource("gcp:compute/disk:Disk", "small", {"size": 50, "zone": "us-central1-a"})
UNPROTECTED_BUCKET = resource("gcp:storage/bucket:Bucket", "models", {"location": "US"})
PROTECTED_BUCKET = resource("gcp:storage/bucket:Bucket", "logs", {"location": "US"}, options={"protect": True})


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pack")
    (d / "PulumiPolicy.yaml").write_text("runtime: python\ndescription: throwaway test pack\nversion: 0.3.0\n")
    (d / "__main__.py").write_text(PACK_MAIN)
    return d


def _assert_process_gone(report: PolicyReport) -> None:
    assert report.pack_pid > 0
    with pytest.raises(ProcessLookupError):
        os.kill(report.pack_pid, 0)


def test_default_enforcement_reports_exact_violations(pack_dir: Path) -> None:
    inv = inventory(BIG_DISK, SMALL_DISK, UNPROTECTED_BUCKET, PROTECTED_BUCKET)
    report = run_policy_pack(pack_dir, inv, {})

    assert report.violations == [
        Violation(
            policy="buckets-protected",
            urn=urn("gcp:storage/bucket:Bucket", "models"),
            enforcement="mandatory",
            severity="medium",
            message="Buckets must be protected.\nbucket models is not protected",
            pack="throwaway",
            pack_version="0.3.0",
            description="Buckets must be protected.",
            phase="stack",
        ),
        Violation(
            policy="disk-size-limit",
            urn=urn("gcp:compute/disk:Disk", "big"),
            enforcement="advisory",
            severity="high",
            message="Persistent disks must stay under the size limit.\ndisk big is 500 GB > 100 GB",
            pack="throwaway",
            pack_version="0.3.0",
            description="Persistent disks must stay under the size limit.",
            phase="resource",
        ),
    ]
    assert report.mandatory_count == 1
    assert report.policies == {
        "buckets-protected": "mandatory",
        "disk-size-limit": "advisory",
        "echo": "disabled",
        "graph": "disabled",
    }
    assert report.resources_analyzed == 4
    assert report.pack_exit_code == 0  # SIGINT -> KeyboardInterrupt -> server.stop -> clean exit
    assert report.handshake_supported is False  # pulumi-policy 1.21.0 predates Handshake
    _assert_process_gone(report)

    table = report.render_table()
    assert table.splitlines()[0].split() == ["POLICY", "SEVERITY", "ENFORCEMENT", "RESOURCE", "MESSAGE"]
    assert "gcp:storage/bucket:Bucket::models  bucket models is not protected" in table
    assert "gcp:compute/disk:Disk::big" in table and "disk big is 500 GB > 100 GB" in table
    assert table.rstrip().endswith("2 violation(s), 1 mandatory, 1 advisory, 4 resource(s) analysed")
    assert json.loads(report.to_json())["mandatory_count"] == 1


def test_config_overrides_default_enforcement_and_properties(pack_dir: Path) -> None:
    inv = inventory(BIG_DISK, SMALL_DISK, UNPROTECTED_BUCKET)
    report = run_policy_pack(
        pack_dir,
        inv,
        {
            "disk-size-limit": {"enforcementLevel": "mandatory", "maxGb": 40},
            "buckets-protected": {"enforcementLevel": "disabled"},
        },
    )
    assert [(v.policy, v.resource, v.enforcement, v.detail) for v in report.violations] == [
        ("disk-size-limit", "gcp:compute/disk:Disk::big", "mandatory", "disk big is 500 GB > 40 GB"),
        ("disk-size-limit", "gcp:compute/disk:Disk::small", "mandatory", "disk small is 50 GB > 40 GB"),
    ]
    assert report.mandatory_count == 2
    assert report.policies["buckets-protected"] == "disabled"
    _assert_process_gone(report)


def test_all_key_and_string_shorthand(pack_dir: Path) -> None:
    report = run_policy_pack(
        pack_dir, inventory(BIG_DISK, UNPROTECTED_BUCKET), {"all": "advisory", "echo": "disabled", "graph": "disabled"}
    )
    assert {(v.policy, v.enforcement) for v in report.violations} == {
        ("buckets-protected", "advisory"),
        ("disk-size-limit", "advisory"),
    }
    assert report.mandatory_count == 0 and report.passed


def test_unknown_value_does_not_crash_the_pack(pack_dir: Path) -> None:
    unknown_disk = resource("gcp:compute/disk:Disk", "pending", {"size": COMPUTED_MARKER, "zone": "us-central1-a"})
    report = run_policy_pack(pack_dir, inventory(unknown_disk, BIG_DISK), {})

    by_resource = {v.resource: v for v in report.violations if v.policy == "disk-size-limit"}
    pending = by_resource["gcp:compute/disk:Disk::pending"]
    # pulumi_policy's own preview handling: an advisory "can't run policy" diagnostic, not a crash.
    assert pending.enforcement == "advisory"
    assert "can't run policy 'disk-size-limit'" in pending.message
    assert "value at .size can't be known during preview" in pending.message
    # ... and the pack kept serving: the next resource was still analysed.
    assert by_resource["gcp:compute/disk:Disk::big"].detail == "disk big is 500 GB > 100 GB"
    _assert_process_gone(report)


def test_wire_encoding_of_inputs_options_provider_and_graph(pack_dir: Path) -> None:
    provider = resource("pulumi:providers:gcp", "gcp-prod", {"project": "p1", "region": "us-central1"})
    parent = resource("llm:serving:Platform", "platform", {})
    echo = resource(
        "test:index:Echo",
        "e1",
        {"n": 3, "unknown": COMPUTED_MARKER, "secret": "[secret]", "nested": [{"x": COMPUTED_MARKER}], "none": None},
        parent=parent["urn"],
        provider=f"{provider['urn']}::0f6c2d4e",
        dependencies=[parent["urn"]],
        property_dependencies={"n": [provider["urn"]]},
        options={"protect": True, "ignore_changes": ["labels"]},
    )
    report = run_policy_pack(pack_dir, inventory(provider, parent, echo), {"echo": "advisory", "graph": "advisory"})

    echo_v = next(v for v in report.violations if v.policy == "echo")
    seen = json.loads(echo_v.detail)
    assert seen == {
        "props": {
            "n": 3.0,  # protobuf Struct numbers are doubles, as with the engine
            "unknown": ENGINE_UNKNOWN,
            "secret": "[secret]",  # secret envelope unwrapped by pulumi_policy's deserializer
            "nested": [{"x": ENGINE_UNKNOWN}],
            "none": None,
        },
        "provider": ["pulumi:providers:gcp", "gcp-prod", {"project": "p1", "region": "us-central1"}],
        "parent": parent["urn"],
        "protect": True,
        "ignore": ["labels"],
        "stack": STACK,
    }
    graph_v = next(v for v in report.violations if v.policy == "graph")
    assert graph_v.urn == echo["urn"]
    assert json.loads(graph_v.detail) == {
        "parent": parent["urn"],
        "deps": [parent["urn"]],
        "propdeps": {"n": [provider["urn"]]},
    }


def test_pack_that_fails_at_import_is_reported_and_reaped(tmp_path: Path) -> None:
    (tmp_path / "PulumiPolicy.yaml").write_text("runtime: python\n")
    (tmp_path / "__main__.py").write_text("raise RuntimeError('boom from the pack')\n")
    with pytest.raises(PolicyPackStartError, match="exited with code 1 before serving") as excinfo:
        run_policy_pack(tmp_path, inventory(BIG_DISK), {})
    assert "boom from the pack" in excinfo.value.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(excinfo.value.pack_pid, 0)


def test_policy_exception_surfaces_as_error_and_process_is_reaped(tmp_path: Path) -> None:
    (tmp_path / "PulumiPolicy.yaml").write_text("runtime:\n  name: python\n")
    (tmp_path / "__main__.py").write_text(
        textwrap.dedent(
            """
            from pulumi_policy import PolicyPack, ResourceValidationPolicy

            def explode(args, report_violation):
                raise ValueError("policy bug")

            PolicyPack("exploding", [ResourceValidationPolicy("explode", "d", explode)])
            """
        )
    )
    with pytest.raises(PolicyPackError, match=r"Analyze\(.*::big\) failed: UNKNOWN: .*policy bug") as excinfo:
        run_policy_pack(tmp_path, inventory(BIG_DISK), {})
    assert excinfo.value.pack_pid > 0
    with pytest.raises(ProcessLookupError):
        os.kill(excinfo.value.pack_pid, 0)


def test_invalid_config_is_rejected(pack_dir: Path) -> None:
    with pytest.raises(PolicyConfigError, match="not a valid enforcement level"):
        run_policy_pack(pack_dir, inventory(BIG_DISK), {"disk-size-limit": "fatal"})
    with pytest.raises(PolicyConfigError, match=r"not in pack 'throwaway': 'disk-size-limt'"):
        run_policy_pack(pack_dir, inventory(BIG_DISK), {"disk-size-limt": "mandatory"})
    with pytest.raises(PolicyConfigError, match=r"disk-size-limit\.maxGb: 0 is not valid \(minimum 1\.0\)"):
        run_policy_pack(pack_dir, inventory(BIG_DISK), {"disk-size-limit": {"maxGb": 0}})


def test_not_a_pack_directory(tmp_path: Path) -> None:
    with pytest.raises(PolicyPackError, match=re.escape("PulumiPolicy.yaml is missing")):
        run_policy_pack(tmp_path, inventory(BIG_DISK), {})


def test_to_analyzer_value_is_recursive_and_leaves_other_strings() -> None:
    assert to_analyzer_value({"a": [COMPUTED_MARKER, "x<computed>"], "b": {"c": "[secret]"}}) == {
        "a": [ENGINE_UNKNOWN, "x<computed>"],
        "b": {"c": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "[secret]"}},
    }


def test_report_table_is_sorted_and_stable() -> None:
    def v(policy: str, urn: str, msg: str) -> Violation:
        return Violation(policy, urn, "advisory", "low", f"d\n{msg}", "p", "1", "d", "resource")

    vs = [v("b", urn("t:m:R", "z"), "two"), v("a", "", "one"), v("b", urn("t:m:R", "a"), "three")]
    r1 = PolicyReport("p", "1", "1.21.0", {}, 3, sorted(vs), [])
    r2 = PolicyReport("p", "1", "1.21.0", {}, 3, sorted(reversed(vs)), [])
    assert r1.render_table() == r2.render_table()
    assert r1.to_json() == r2.to_json()
    rows = r1.render_table().splitlines()[2:5]
    assert [row.split()[0] for row in rows] == ["a", "b", "b"]
    assert "(stack)" in rows[0] and "t:m:R::a" in rows[1]


def test_python_interpreter_is_configurable(pack_dir: Path) -> None:
    with pytest.raises(PolicyPackStartError, match="cannot start policy pack"):
        run_policy_pack(pack_dir, inventory(BIG_DISK), {}, python=str(Path(sys.executable).parent / "no-such-python"))
