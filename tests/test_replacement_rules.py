"""The replacement rules the review applies (infra/offline/review/replacement_rules.json) against their sources.

* CI (no network, no mirrors): every Pulumi path of the committed data exists in the installed SDKs' input types
  (pulumi_gcp 10.2.0, pulumi_kubernetes 4.34.2), the data covers exactly the resource types the shipped stacks
  register, and every conditional rule's predicate is implemented;
* with ``REPLACEMENT_RULES_SOURCES`` naming the provider repositories (``tf-provider=DIR<pathsep>pulumi-gcp=DIR
  <pathsep>pulumi-kubernetes=DIR``, git directories as ``fetch`` leaves them), the data is derived again by
  scripts/derive_replacement_rules.py and must be identical; without it the test skips and says why;
* the derivation itself, on a small synthetic provider written here as Go source in throw-away git repositories:
  each shape the reader understands, and the bridge's naming and delete-before-replace inputs.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from infra.offline.review.rules import DATA, PREDICATES, SHAPES, load_rules
from infra.offline.stackfile import available_stacks

from .conftest import REPO, plan_run

sys.path.insert(0, str(REPO / "scripts"))
import derive_replacement_rules as derive

#: Every shipped stack (stacks/Pulumi.*.yaml): a new stack's resource types are covered as soon as it ships.
SHIPPED = tuple(available_stacks())
DOC: dict[str, Any] = json.loads(DATA.read_text())
#: Registered by the program, rendered by their provider: no replacement rules of their own (remote components).
COMPONENT_TYPES = {"kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigGroup"}


# ---- the installed SDKs' input types ------------------------------------------------------------------------------


def _props(cls: type) -> dict[str, Any]:
    out = {}
    for _name, attr in inspect.getmembers(cls):
        name = getattr(attr.fget, "_pulumi_name", None) if isinstance(attr, property) else None
        if isinstance(name, str):
            out[name] = attr.fget
    return out


def _args_class(token: str) -> tuple[type | None, Any]:
    """The ``<Resource>Args`` class of a type token and its module's ``_inputs``; None for a custom resource kind."""
    pkg, mod_res, cls = token.split(":")
    if pkg == "gcp":
        module = importlib.import_module(f"pulumi_gcp.{mod_res.split('/')[0]}")
    else:
        group, version = mod_res.rsplit("/", 1)
        try:
            module = importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0]}.{version}")
        except ImportError:
            return None, None
    inputs = importlib.import_module(f"{module.__name__}._inputs")
    return getattr(module, f"{cls}Args", None), inputs


def sdk_path_problem(token: str, path: str, implicit_lists: bool) -> str | None:
    """Why ``path`` is not an input path of ``token`` in the installed SDK (None: it is). ``[*]`` must stand exactly
    where the SDK has a list, unless ``implicit_lists`` (pulumi-kubernetes' own paths step into lists silently)."""
    cls, inputs = _args_class(token)
    if cls is None:
        if token.startswith("kubernetes:") and path.startswith("metadata."):
            # A custom resource kind (no SDK class): its metadata is an ObjectMeta like every kind's.
            inputs = importlib.import_module("pulumi_kubernetes.meta.v1._inputs")
            cls = inputs.ObjectMetaArgs
            path = path.removeprefix("metadata.")
        else:
            return f"no {token} in the installed SDK"
    cur: type | None = cls
    seq = False
    for seg in re.findall(r"\[\*\]|[^.\[\]]+", path):
        if seg == "[*]":
            if not seq:
                return "[*] where the SDK has no list"
            seq = False
            continue
        if seq and not implicit_lists:
            return f"{seg}: the SDK has a list before it, the path needs [*]"
        if cur is None:
            return f"{seg}: its parent is not an object in the SDK"
        props = _props(cur)
        if seg not in props:
            return f"{seg} is not an input of {cur.__name__}"
        annotation = str(props[seg].__annotations__.get("return", ""))
        seq = "Sequence[" in annotation
        m = re.search(r"'([\w.]+Args)'", annotation)  # a quoted forward reference, maybe another module's
        cur = None
        if m:
            target: Any = inputs
            for part in m.group(1).split("."):
                target = getattr(target, part)
            cur = target
            inputs = sys.modules[target.__module__]  # its own references are to its module's classes
    return None


def test_every_gcp_path_exists_in_pulumi_gcp_input_types() -> None:
    problems = [
        f"{token} {rule['path']}: {why}"
        for token, e in DOC["gcp"].items()
        for rule in [*e["force_new"], *e["conditional"], *e["autonamed"]]
        if (why := sdk_path_problem(token, rule["path"], implicit_lists=False))
    ]
    assert problems == []
    assert sum(len(e["force_new"]) for e in DOC["gcp"].values()) > 400  # the whole schemas, not a hand list


def test_every_kubernetes_path_exists_in_pulumi_kubernetes_input_types() -> None:
    problems = [
        f"{token} {rule['path']}: {why}"
        for token, e in DOC["kubernetes"]["types"].items()
        for rule in [*e["force_new"], *(e.get("payload") or {}).get("paths", [])]
        if (why := sdk_path_problem(token, rule["path"], implicit_lists=True))
    ]
    assert problems == []


def test_the_path_check_refuses_what_the_sdk_does_not_have() -> None:
    """The check above can fail: a misspelt field, a list flattened the wrong way, a missing [*]."""
    node_pool = "gcp:container/nodePool:NodePool"
    assert sdk_path_problem(node_pool, "nodeConfig.guestAccelerators[*].count", False) is None
    assert "not an input" in str(sdk_path_problem(node_pool, "nodeConfig.guestAccelerator[*].count", False))
    assert "needs [*]" in str(sdk_path_problem(node_pool, "nodeConfig.guestAccelerators.count", False))
    assert "no list" in str(sdk_path_problem(node_pool, "nodeConfig[*].machineType", False))


def test_the_data_covers_exactly_the_types_the_shipped_stacks_register() -> None:
    registered: set[str] = set()
    for stack in SHIPPED:
        registered |= {r.type for r in plan_run(stack).inventory.resources if r.custom}
    rules = load_rules()
    assert {t for t in registered if t.startswith("gcp:")} == set(rules.gcp)
    k8s = {t for t in registered if t.startswith("kubernetes:")} - COMPONENT_TYPES
    assert k8s == set(rules.kubernetes)


def test_conditional_predicates_are_implemented_and_shapes_known() -> None:
    rules = load_rules()
    for t in rules.gcp.values():
        for c in t.conditional:
            assert c.kind == "ForceNew" or c.predicate in PREDICATES, f"{t.token} {c.text}: {c.predicate}"
        assert {f.shape for f in t.force_new} <= SHAPES
    assert set(DOC["sources"]) == {"pulumi-gcp", "terraform-provider-google-beta", "pulumi-kubernetes"}
    assert DOC["sources"]["terraform-provider-google-beta"]["tag"] == "v7.45.0"  # pulumi-gcp 10.2.0's upstream


# ---- derived again from the sources ----------------------------------------------------------------------------------


def _sources() -> dict[str, str] | None:
    raw = os.environ.get("REPLACEMENT_RULES_SOURCES")
    if not raw:
        return None
    pairs = dict(p.split("=", 1) for p in raw.split(os.pathsep) if "=" in p)
    return pairs if {"tf-provider", "pulumi-gcp", "pulumi-kubernetes"} <= set(pairs) else None


def test_the_committed_data_is_what_the_sources_derive(tmp_path: Path) -> None:
    sources = _sources()
    if sources is None:
        pytest.skip(
            "REPLACEMENT_RULES_SOURCES is not set (tf-provider=DIR:pulumi-gcp=DIR:pulumi-kubernetes=DIR, the git "
            "mirrors of the three providers): the committed data was checked against the installed SDKs only"
        )
    inventories = []
    for stack in SHIPPED:
        path = tmp_path / f"{stack}.json"
        path.write_text(plan_run(stack).inventory.to_json())
        inventories.append(str(path))
    argv = [
        "--tf-provider",
        sources["tf-provider"],
        "--pulumi-gcp",
        sources["pulumi-gcp"],
        "--pulumi-kubernetes",
        sources["pulumi-kubernetes"],
        "--types",
        *inventories,
        "--out",
        str(tmp_path / "derived.json"),
    ]
    assert derive.main(argv) == 0
    assert json.loads((tmp_path / "derived.json").read_text()) == DOC


# ---- the derivation on a synthetic provider -------------------------------------------------------------------------

TPGRESOURCE = """
package tpgresource

func MergeSchemas(a, b map[string]*schema.Schema) map[string]*schema.Schema {
	merged := make(map[string]*schema.Schema)
	return merged
}
"""

WIDGET = """
package widget

import (
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/customdiff"
	"github.com/hashicorp/terraform-provider-google-beta/google-beta/tpgresource"
)

func init() {
	registry.Schema{
		Name:        "google_widget",
		ProductName: "widget",
		Type:        registry.SchemaTypeResource,
		Schema:      ResourceWidget(),
	}.Register()
}

func isShrink(_ context.Context, old, new, _ interface{}) bool { return true }

func widgetCustomizeDiff(_ context.Context, d *schema.ResourceDiff, meta interface{}) error {
	if d.HasChange("spec.0.mode") {
		return d.ForceNew("spec.0.mode")
	}
	return nil
}

var base = map[string]*schema.Schema{
	"project": {
		Type:     schema.TypeString,
		Optional: true,
		Computed: true,
		ForceNew: true,
	},
}

func schemaSpec() *schema.Schema {
	return &schema.Schema{
		Type:     schema.TypeList,
		Optional: true,
		MaxItems: 1,
		ForceNew: true,
		Elem: &schema.Resource{
			Schema: map[string]*schema.Schema{
				"mode": {Type: schema.TypeString, Optional: true},
				"size": {Type: schema.TypeInt, Optional: true},
			},
		},
	}
}

func ResourceWidget() *schema.Resource {
	return &schema.Resource{
		Create: create,
		Update: update,
		CustomizeDiff: customdiff.All(
			customdiff.ForceNewIfChange("size", isShrink),
			widgetCustomizeDiff,
		),
		Schema: tpgresource.MergeSchemas(base, map[string]*schema.Schema{
			"name": {
				Type:     schema.TypeString,
				Required: true,
				ForceNew: true, // a comment } with a brace
			},
			"size": {Type: schema.TypeInt, Optional: true},
			"spec": schemaSpec(),
			"accelerator": {
				Type:     schema.TypeList,
				Optional: true,
				ForceNew: true,
				Elem: &schema.Resource{
					Schema: map[string]*schema.Schema{
						"count": {Type: schema.TypeInt, Required: true, ForceNew: true},
					},
				},
			},
			"scopes": {
				Type:     schema.TypeSet,
				Optional: true,
				ForceNew: true,
				Elem:     &schema.Schema{Type: schema.TypeString},
			},
			"description": {Type: schema.TypeString, Optional: true, Description: `raw "string" }`},
		}),
	}
}
"""

RESOURCES_GO = """
package gcp

func Provider() tfbridge.ProviderInfo {
	prov := tfbridge.ProviderInfo{
		Resources: map[string]*tfbridge.ResourceInfo{
			"google_widget": {Tok: gcpResource(gcpWidget, "Widget"), DeleteBeforeReplace: true},
		},
	}
	return prov
}
"""

DIFF_GO = """
package provider

func (k *kubeProvider) forceNewProperties(obj *unstructured.Unstructured) []string {
	props := metadataForceNewProperties(".metadata")
	if clients.IsSecret(obj) && !k.enableSecretMutable {
		props = append(props, properties{".type", ".stringData", ".data"}...)
	} else if clients.IsConfigMap(obj) && !k.enableConfigMapMutable {
		props = append(props, properties{".binaryData", ".data"}...)
	}
	return props
}

type properties []string

var forceNew = _groups{
	"apps": _versions{
		"v1": _kinds{"Deployment": deployment},
	},
}

var deployment = append(
	properties{
		".spec.selector",
	},
	labelSelectorForceNewProperties(".spec.selector")...,
)

func metadataForceNewProperties(prefix string) properties {
	return properties{
		prefix + ".name",
		prefix + ".namespace",
	}
}

func labelSelectorForceNewProperties(prefix string) properties {
	return properties{
		prefix + ".matchLabels",
	}
}
"""

PROVIDER_GO = """
package provider

func (k *kubeProvider) Diff() {
	deleteBeforeReplace := len(replaces) > 0
}
"""


def _git_repo(path: Path, files: dict[str, str], submodule: tuple[str, str] | None = None) -> Path:
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )

    path.mkdir(parents=True)
    git("init", "-q")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(textwrap.dedent(text))
    git("add", "-A")
    if submodule is not None:
        git("update-index", "--add", "--cacheinfo", f"160000,{submodule[1]},{submodule[0]}")
    git("commit", "-q", "-m", "x")
    return path


def test_the_derivation_reads_what_a_provider_schema_declares(tmp_path: Path) -> None:
    tf = _git_repo(
        tmp_path / "tf",
        {
            "google-beta/tpgresource/utils.go": TPGRESOURCE,
            "google-beta/services/widget/resource_widget.go": WIDGET,
        },
    )
    tf_commit = subprocess.run(
        ["git", "-C", str(tf), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    metadata = {
        "auto-aliasing": {
            "resources": {
                "google_widget": {
                    "current": "gcp:widget/widget:Widget",
                    "fields": {"accelerator": {"maxItemsOne": False}, "spec": {"maxItemsOne": True}},
                }
            }
        }
    }
    gcp = _git_repo(
        tmp_path / "gcp",
        {
            "provider/cmd/pulumi-resource-gcp/bridge-metadata.json": json.dumps(metadata),
            "provider/resources.go": RESOURCES_GO,
        },
        submodule=("upstream", tf_commit),
    )
    k8s = _git_repo(
        tmp_path / "k8s",
        {"provider/pkg/provider/diff.go": DIFF_GO, "provider/pkg/provider/provider.go": PROVIDER_GO},
    )
    inventory = tmp_path / "inventory.json"
    inventory.write_text(
        json.dumps(
            {
                "resources": [
                    {"type": "gcp:widget/widget:Widget", "custom": True},
                    {"type": "kubernetes:apps/v1:Deployment", "custom": True},
                    {"type": "kubernetes:core/v1:ConfigMap", "custom": True},
                ]
            }
        )
    )
    out = tmp_path / "rules.json"
    argv = ["--tf-provider", str(tf), "--pulumi-gcp", str(gcp), "--pulumi-kubernetes", str(k8s)]
    assert derive.main([*argv, "--types", str(inventory), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    w = doc["gcp"]["gcp:widget/widget:Widget"]
    got = {f["path"]: (f["shape"], f["computed"]) for f in w["force_new"]}
    assert got == {
        "project": ("scalar", True),  # Optional + Computed: leaving it out keeps the provider's value
        "name": ("scalar", False),
        "spec": ("object", False),  # MaxItems 1 / maxItemsOne: flattened, only presence counts
        "accelerators": ("list-of-blocks", False),  # pluralised: a list of blocks, only its count counts
        "accelerators[*].count": ("scalar", False),
        "scopes": ("set", False),  # a set of values: any element change counts
    }
    name_line = WIDGET.splitlines().index("\t\t\t\tForceNew: true, // a comment } with a brace") + 1
    assert next(f for f in w["force_new"] if f["path"] == "name")["line"] == name_line
    assert w["file"] == "google-beta/services/widget/resource_widget.go" and w["updatable"] is True
    assert {(c["path"], c["kind"], c["predicate"]) for c in w["conditional"]} == {
        ("size", "ForceNewIfChange", "isShrink"),
        ("spec.mode", "ForceNew", "widgetCustomizeDiff"),
    }
    assert w["autonamed"] == [{"path": "name", "rule": 'SetAutonaming(255, "-")'}]
    assert w["delete_before_replace"]["file"] == "provider/resources.go"
    assert doc["sources"]["terraform-provider-google-beta"]["commit"] == tf_commit
    k = doc["kubernetes"]["types"]
    assert [f["path"] for f in k["kubernetes:apps/v1:Deployment"]["force_new"]] == [
        "metadata.name",
        "metadata.namespace",
        "spec.selector",
        "spec.selector.matchLabels",
    ]
    assert [p["path"] for p in k["kubernetes:core/v1:ConfigMap"]["payload"]["paths"]] == ["binaryData", "data"]
    assert (
        doc["kubernetes"]["delete_before_replace"]["line"]
        == PROVIDER_GO.splitlines().index("\tdeleteBeforeReplace := len(replaces) > 0") + 1
    )
    # --check compares and says so.
    assert derive.main([*argv, "--types", str(inventory), "--check", str(out)]) == 0
    out.write_text(out.read_text().replace('"scopes"', '"scope"'))
    assert derive.main([*argv, "--types", str(inventory), "--check", str(out)]) == 1


def test_the_derivation_refuses_a_type_it_cannot_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tf = _git_repo(tmp_path / "tf", {"google-beta/tpgresource/utils.go": TPGRESOURCE})
    commit = subprocess.run(["git", "-C", str(tf), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    gcp = _git_repo(
        tmp_path / "gcp",
        {
            "provider/cmd/pulumi-resource-gcp/bridge-metadata.json": '{"auto-aliasing": {"resources": {}}}',
            "provider/resources.go": RESOURCES_GO,
        },
        submodule=("upstream", commit.strip()),
    )
    k8s = _git_repo(
        tmp_path / "k8s", {"provider/pkg/provider/diff.go": DIFF_GO, "provider/pkg/provider/provider.go": PROVIDER_GO}
    )
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"resources": [{"type": "gcp:widget/widget:Widget", "custom": True}]}))
    argv = [
        "--tf-provider",
        str(tf),
        "--pulumi-gcp",
        str(gcp),
        "--pulumi-kubernetes",
        str(k8s),
        "--types",
        str(inventory),
    ]
    assert derive.main([*argv, "--out", str(tmp_path / "x.json")]) == 2
    assert "no Terraform resource maps to gcp:widget/widget:Widget" in capsys.readouterr().err


def test_pluralize_and_camel_follow_the_bridge() -> None:
    assert derive.camel("guest_accelerator") == "guestAccelerator"
    assert [
        derive.pluralize(w) for w in ("guest_accelerator", "taint", "oauth_scopes", "policy", "address", "key")
    ] == [
        "guest_accelerators",
        "taints",
        "oauth_scopes",
        "policies",
        "addresses",
        "keys",
    ]
