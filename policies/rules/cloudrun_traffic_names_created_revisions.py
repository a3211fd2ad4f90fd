"""cloudrun-traffic-names-created-revisions: a Cloud Run service's traffic split names only revisions the stack's own
revision resources create, each once, with unique tags and percents summing to 100.

Cloud Run routes only to revisions that exist and creates a revision only from the service's template ("Revision
'...' does not exist or is deleted. Update all traffic to route to currently available revisions": Google's own
gradual-rollout sample, terraform-google-modules/terraform-docs-samples#269). The program creates each pool's
revision with its own resource (``components/cloud_run/provider.py``) before the split names it; a split naming
any other revision fails the first ``pulumi up`` of a fresh project (or a rebuild after disaster) with a 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import CLOUD_RUN_REVISION, CLOUD_RUN_TRAFFIC, UNKNOWN, Res, as_int, of_type, stack_validator

NAME = "cloudrun-traffic-names-created-revisions"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Route only to revisions a revision resource of this stack creates (one per pool, each by its caller-chosen "
    "name), give each entry its own tag, and make the percents sum to 100."
)


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    created: dict[Any, set[Any]] = {}
    for rev in of_type(resources, CLOUD_RUN_REVISION):
        created.setdefault(rev.props.get("service"), set()).add(rev.props.get("revision"))
    for split in of_type(resources, CLOUD_RUN_TRAFFIC):
        service, traffic = split.props.get("service"), split.props.get("traffic")
        if service is UNKNOWN or traffic is UNKNOWN or not isinstance(traffic, list):
            continue
        mine = created.get(service, set())
        percents: list[int] = []
        seen: dict[str, list[Any]] = {"revision": [], "tag": []}
        for i, entry in enumerate(traffic):
            if not isinstance(entry, dict) or UNKNOWN in entry.values():
                percents = []
                continue
            revision = entry.get("revision")
            if entry.get("type") != "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION" or not revision:
                yield (
                    split.urn,
                    (
                        f"traffic[{i}] is {entry.get('type')!r}, not a revision by name: only a split by name stays where "
                        "it is when a new revision is created"
                    ),
                )
            elif revision not in mine and UNKNOWN not in mine:
                yield (
                    split.urn,
                    (
                        f"traffic[{i}] names revision {revision!r}, which no revision resource of this stack creates: "
                        f"the first `pulumi up` (or any rebuild) fails with a 404 (created: {sorted(map(str, mine))})"
                    ),
                )
            for key in seen:
                if entry.get(key):
                    seen[key].append(entry[key])
            n = as_int(entry.get("percent", 0))
            if n is not None:
                percents.append(n)
        for key, values in seen.items():
            twice = sorted({str(v) for v in values if values.count(v) > 1})
            if twice:
                yield split.urn, f"traffic names the {key} {', '.join(twice)} more than once: Cloud Run refuses it"
        if percents and sum(percents) != 100:
            yield split.urn, f"traffic percents sum to {sum(percents)}, not 100"


POLICY = StackValidationPolicy(
    name=NAME,
    description="A Cloud Run split names only revisions the stack creates, each once, tags unique, 100 % in all.",
    validate=stack_validator(check, (CLOUD_RUN_REVISION, CLOUD_RUN_TRAFFIC)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "rollout", "cloud-run"],
)
