"""The Cloud Run target's :class:`CloudRunServing` component: service account, grants, the service with one tagged
revision per pool, invoker IAM.

Thin: every argument of every child comes from the pure builders in :mod:`.service`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from .. import naming
from ..base import Component
from ..traffic import split_problem
from . import service as svc
from .spec import HubToken, RevisionSpec

_ROLE_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}\Z")
_ACCOUNT_ID_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]\Z")
_SERVICE_RE = re.compile(r"^[a-z][-a-z0-9]{0,24}[a-z0-9]\Z")
INGRESS_SETTINGS = ("INGRESS_TRAFFIC_ALL", "INGRESS_TRAFFIC_INTERNAL_ONLY", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER")


def service_account_email(project: str, account_id: str) -> str:
    """A user-managed service account's e-mail is fixed by its id and project (IAM naming), so the revision template
    (whose hash names the revision) can hold it before the account exists."""
    return f"{account_id}@{project}.iam.gserviceaccount.com"


@dataclass(frozen=True)
class ServingPool:
    """One pool of the service: its role (the traffic tag), its share of traffic and its revision."""

    role: str
    weight: int
    revision: RevisionSpec


@dataclass(frozen=True)
class CloudRunServingArgs:
    project: str
    region: str
    environment: str
    service_name: str
    service_account_id: str
    #: Stable first; the last pool's revision is the service's template (the newest: the canary when present).
    pools: tuple[ServingPool, ...]
    ingress: str
    invoker_members: tuple[str, ...]
    collector_image: str
    hub_token: HubToken | None
    #: ``GA``, or ``BETA`` when a Preview feature (the RTX PRO 6000 GPU) is used.
    launch_stage: str
    protect: bool

    def __post_init__(self) -> None:
        problems = []
        roles = [p.role for p in self.pools]
        if not roles or len(set(roles)) != len(roles) or roles[0] != "stable":
            problems.append(f"pools: stable first, one entry per role, got {roles}")
        split = split_problem({p.role: p.weight for p in self.pools})
        if split is not None:
            problems.append(f"pools: {split}")
        problems += [
            f"pools[{r}].role: lowercase letter first, up to 20 of [a-z0-9-]" for r in roles if not _ROLE_RE.match(r)
        ]
        if not _SERVICE_RE.match(self.service_name):
            problems.append(f"service_name {self.service_name!r}: 2-26 of [a-z0-9-], letter first")
        if not _ACCOUNT_ID_RE.match(self.service_account_id):
            problems.append(f"service_account_id {self.service_account_id!r}: 6-30 of [a-z0-9-], letter first")
        if self.ingress not in INGRESS_SETTINGS:
            problems.append(f"ingress {self.ingress!r}: one of {', '.join(INGRESS_SETTINGS)}")
        for m in self.invoker_members:
            try:
                svc.checked_member(m)
            except ValueError as e:
                problems.append(f"invoker_members: {e}")
        if not self.invoker_members:
            problems.append("invoker_members: at least one (the invoker IAM check stays on)")
        if problems:
            raise ValueError("invalid CloudRunServingArgs:\n  " + "\n  ".join(problems))

    @property
    def context(self) -> svc.TemplateContext:
        return svc.TemplateContext(
            service_account_email=service_account_email(self.project, self.service_account_id),
            collector_image=self.collector_image,
            hub_token=self.hub_token,
            environment=self.environment,
        )

    def revision_names(self) -> dict[str, str]:
        """Each pool's revision name (deterministic: a function of its rendered template)."""
        return {p.role: svc.revision_name(self.service_name, p.revision, self.context) for p in self.pools}


class CloudRunServing(Component):
    """vLLM on Cloud Run GPUs: the serving identity and its grants, the service (one tagged revision per pool),
    invoker IAM for the configured members only."""

    TYPE = "llm-serving:cloudrun:CloudRunServing"

    def __init__(self, name: str, args: CloudRunServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        p, r = args.project, args.region

        # ---- identity: a dedicated account, each grant on one resource ------------------------------------------
        self.service_account = gcp.serviceaccount.Account(
            f"{name}-sa",
            project=p,
            account_id=args.service_account_id,
            display_name=f"Cloud Run serving: {args.service_name}",
            description="Runs the vLLM revisions of the Cloud Run service; reads the weights bucket only",
            opts=self.child_opts(),
        )
        member = self.service_account.email.apply(lambda e: f"serviceAccount:{e}")
        buckets = sorted({pool.revision.release.weights_bucket for pool in args.pools})
        self.weights_readers = {
            b: gcp.storage.BucketIAMMember(
                f"{name}-weights-reader-{b}",
                bucket=b,
                role=svc.WEIGHTS_READER_ROLE,
                member=member,
                opts=self.child_opts(),
            )
            for b in buckets
        }
        grants: list[pulumi.Resource] = list(self.weights_readers.values())
        self.hub_token_accessor: gcp.secretmanager.SecretIamMember | None = None
        if args.hub_token is not None:
            self.hub_token_accessor = gcp.secretmanager.SecretIamMember(
                f"{name}-hub-token-accessor",
                project=p,
                secret_id=args.hub_token.secret_id,
                role=svc.SECRET_ACCESSOR_ROLE,
                member=member,
                opts=self.child_opts(),
            )
            grants.append(self.hub_token_accessor)
        self.metric_writer = gcp.projects.IAMMember(
            f"{name}-metric-writer", project=p, role=svc.METRIC_WRITER_ROLE, member=member, opts=self.child_opts()
        )
        grants.append(self.metric_writer)

        # ---- the service: the newest pool's revision as template, traffic by revision name and tag --------------
        ctx = args.context
        self.revision_names = args.revision_names()
        newest = args.pools[-1]
        self.service = gcp.cloudrunv2.Service(
            f"{name}-service",
            name=args.service_name,
            project=p,
            location=r,
            ingress=args.ingress,
            launch_stage=args.launch_stage,
            deletion_protection=args.protect,
            invoker_iam_disabled=False,
            description=f"vLLM serving ({args.environment}): each pool is a tagged revision",
            labels=svc.resource_labels(args.environment),
            template=svc.revision_template(newest.revision, ctx, self.revision_names[newest.role]),
            traffics=svc.traffic(self.revision_names, {pool.role: pool.weight for pool in args.pools}),
            # A revision that starts before its grants cannot mount the bucket or read the secret.
            opts=self.child_opts(depends_on=[self.service_account, *grants], protect=args.protect),
        )

        # ---- callers: configured members only, never public ------------------------------------------------------
        # Keyed by member (naming.member_key), aliased to the name by position earlier versions gave it.
        self.invokers = [
            gcp.cloudrunv2.ServiceIamMember(
                f"{name}-invoker-{naming.member_key(m)}",
                project=p,
                location=r,
                name=self.service.name,
                role=svc.INVOKER_ROLE,
                member=svc.checked_member(m),
                opts=self.child_opts(aliases=[pulumi.Alias(name=f"{name}-invoker-{i}")]),
            )
            for i, m in enumerate(args.invoker_members)
        ]

        self.uri: pulumi.Output[str] = self.service.uri
        self.service_account_email = self.service_account.email
        self.register_outputs(
            {
                "uri": self.uri,
                "service_account": self.service_account_email,
                "revisions": self.revision_names,
                "traffic": {pool.role: pool.weight for pool in args.pools},
            }
        )
