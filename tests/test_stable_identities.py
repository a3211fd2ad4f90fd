"""Resources of a configured list (IAM members, notification channels) are keyed by their member, not their position.

* Moving from names by position to names by member changes their URNs; each new resource carries an alias to its
  old name, so the diff between the program before the change and now has no delete and create of an unchanged
  member (planned at that git revision in a throw-away worktree: the real old program, not a reconstruction).
* Removing the first member deletes exactly that member: no other member's resource is rewritten onto it (an IAM
  member's ``member`` forces replacement, and the delete of a shifted binding would revoke access that stays).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline.planrun import run_plan, write_plan
from infra.offline.review import plan_dir_at_git_revision, review, review_plan_dirs
from infra.offline.stackfile import STACKS_DIR

from .conftest import REPO, member_resource, plan_run

#: The last commit whose program named list members by position (`git log`: the review commit before the
#: member-keyed names).
BEFORE_KEYED_NAMES = "4ca4cff"
MEMBER_TYPES = {
    "gcp:iap/webIamMember:WebIamMember",
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember",
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
    "gcp:monitoring/notificationChannel:NotificationChannel",
}


def _have_revision() -> bool:
    if shutil.which("git") is None:
        return False
    proc = subprocess.run(
        ["git", "cat-file", "-e", f"{BEFORE_KEYED_NAMES}^{{commit}}"], cwd=REPO, capture_output=True, check=False
    )
    return proc.returncode == 0


@pytest.mark.skipif(not _have_revision(), reason=f"git history without {BEFORE_KEYED_NAMES} (a shallow checkout)")
@pytest.mark.parametrize("stack", ["prod", "staging", "staging-vertex", "dev-cloudrun"])
def test_the_old_program_to_the_new_keeps_every_member(stack: str, tmp_path: Path) -> None:
    old = plan_dir_at_git_revision(BEFORE_KEYED_NAMES, stack, REPO, out_dir=tmp_path / "old")
    write_plan(plan_run(stack), tmp_path / "new")
    r = review_plan_dirs(old, tmp_path / "new")
    # A member the stack itself changed since that commit is replaced, as it must be (prod's IAP member became the
    # API front's service account: rule only_the_api_front_reaches_the_tenant_pools); every other one is untouched.
    changed = {c.urn for c in r.changes if any(f.path == "member" and f.old != f.new for f in c.fields)}
    touched = [(c.type, c.name, c.action) for c in r.changes if c.type in MEMBER_TYPES and c.urn not in changed]
    # Matched by alias: no step at all on an existing member, not even an update. The one grant created is new
    # since that commit (Cloud Run's programs bucket: the verifier and the stager are mounted from it).
    assert [t for t in touched if t[2] != "create"] == []
    assert {t[1] for t in touched} <= {"cloud-run-programs-reader"}
    members = [x for x in plan_run(stack).inventory.resources if x.type in MEMBER_TYPES and x.aliases]
    assert members  # every stack here has at least one keyed member, each aliased to its old name


def _staging_with(edit: Any, tmp: Path) -> dict[str, Any]:
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.staging.yaml").read_text())
    edit(doc["config"])
    tmp.mkdir()
    (tmp / "Pulumi.staging.yaml").write_text(yaml.safe_dump(doc))
    return run_plan("staging", tmp).inventory.to_dict()


def test_removing_the_first_member_deletes_only_that_member(tmp_path: Path) -> None:
    base = plan_run("staging").inventory.to_dict()

    def drop_first_accessor(cfg: dict[str, Any]) -> None:
        iap = cfg["llm-serving:gateway"]["iap"]
        iap["members"] = iap["members"][1:]

    r = review(base, _staging_with(drop_first_accessor, tmp_path / "a"))
    gone = member_resource("inference-gateway-iap-accessor", "group:llm-serving-team@acme.example")
    assert [(c.type, c.name, c.action, c.delete_before_replace) for c in r.changes] == [
        ("gcp:iap/webIamMember:WebIamMember", gone, "delete", False)
    ]

    def swap_channel(cfg: dict[str, Any]) -> None:
        channels = cfg["llm-serving:observability"]["alerts"]["notification_channels"]
        channels.insert(
            0, {"type": "email", "display_name": "LLM on-call (staging)", "email_address": "oncall@acme.example"}
        )

    r = review(base, _staging_with(swap_channel, tmp_path / "b"))
    created = [(c.type, c.action) for c in r.changes if c.action != "update"]
    assert created == [("gcp:monitoring/notificationChannel:NotificationChannel", "create")]
    # The existing channel keeps its resource; every alert policy adds the new one to its channels, in place.
    assert {c.type for c in r.changes if c.action == "update"} == {"gcp:monitoring/alertPolicy:AlertPolicy"}


def test_member_names_are_stable_and_distinct() -> None:
    a = member_resource("x", "group:a.b@acme.example")
    assert a == member_resource("x", "group:a.b@acme.example")
    assert a != member_resource("x", "group:a-b@acme.example")  # same slug, different member
    assert a.startswith("x-group-a-b-acme-example-") and len(a.rsplit("-", 1)[1]) == 8
