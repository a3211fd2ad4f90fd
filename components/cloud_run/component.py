"""The Cloud Run target's :class:`CloudRunServing` component: service account, grants, the programs bucket and its
content-addressed programs, the service, one revision resource per pool, the traffic split, invoker IAM.

Thin: every body comes from the pure builders in :mod:`.service`, every API step from the dynamic providers in
:mod:`.provider`. Order, by dependencies: identity and grants, programs -> service -> stable's revision -> the
canary's revision -> traffic; so every ``services.patch`` of one ``pulumi up`` runs after the previous one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from .. import naming
from ..base import Component
from ..traffic import split_problem
from . import provider as pv
from . import service as svc
from .spec import HubToken, ProgramsVolume, RevisionSpec

_ROLE_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}\Z")
_ACCOUNT_ID_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]\Z")
_SERVICE_RE = re.compile(r"^[a-z][-a-z0-9]{0,24}[a-z0-9]\Z")
INGRESS_SETTINGS = ("INGRESS_TRAFFIC_ALL", "INGRESS_TRAFFIC_INTERNAL_ONLY", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER")
#: Programs are text: uploaded as such so a browser or ``gcloud storage cat`` shows them.
PROGRAM_CONTENT_TYPE = "text/x-python; charset=utf-8"


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
    #: Stable first (the service is created with stable's template), then the canary.
    pools: tuple[ServingPool, ...]
    ingress: str
    invoker_members: tuple[str, ...]
    collector_image: str
    hub_token: HubToken | None
    #: ``GA``, or ``BETA`` when a Preview feature (the RTX PRO 6000 GPU) is used.
    launch_stage: str
    #: The verifier and stager at their content-addressed folder of the stack's programs bucket.
    programs: ProgramsVolume
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
            programs=self.programs,
        )

    def templates(self) -> dict[str, svc.Body]:
        """Each pool's named revision template (deterministic: a function of what it renders)."""
        return {p.role: svc.revision_template(p.revision, self.context, self.service_name) for p in self.pools}

    def revision_names(self) -> dict[str, str]:
        return {role: t["revision"] for role, t in self.templates().items()}

    def service_fields(self) -> svc.Body:
        return svc.service_fields(
            environment=self.environment,
            ingress=self.ingress,
            launch_stage=self.launch_stage,
            description=f"vLLM serving ({self.environment}): each pool is a tagged revision",
        )

    @property
    def full_service_name(self) -> str:
        return pv.service_name(self.project, self.region, self.service_name)


def creation_timeout(spec: RevisionSpec) -> int:
    """How long creating a pool's revision may take: its whole startup window plus image pull and GPU provisioning."""
    return spec.probes.startup_window_seconds + pv.PROVISIONING_MARGIN_S


class CloudRunServing(Component):
    """vLLM on Cloud Run GPUs: the serving identity and its grants, the programs, the service, one revision per pool,
    the split, invoker IAM for the configured members only."""

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

        # ---- programs: the verifier and the stager at their content-addressed folder --------------------------------
        progs = args.programs
        self.programs_bucket = gcp.storage.Bucket(
            f"{name}-programs",
            name=progs.bucket,
            project=p,
            location=r.upper(),
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            # A prototype tears down to nothing; a protected stack keeps every program a revision may still run.
            force_destroy=not args.protect,
            labels=svc.resource_labels(args.environment),
            opts=self.child_opts(protect=args.protect),
        )
        self.programs_reader = gcp.storage.BucketIAMMember(
            f"{name}-programs-reader",
            bucket=self.programs_bucket.name,
            role=svc.WEIGHTS_READER_ROLE,
            member=member,
            opts=self.child_opts(),
        )
        grants.append(self.programs_reader)
        self.program_objects = [
            gcp.storage.BucketObject(
                f"{name}-program-{file_name.removesuffix('.py').replace('_', '-')}",
                bucket=self.programs_bucket.name,
                name=f"{progs.folder}/{file_name}",
                # An asset, not ``content``: the SDK marks ``content`` secret, and program text is no secret.
                source=pulumi.StringAsset(text),
                content_type=PROGRAM_CONTENT_TYPE,
                # Never deleted: a revision created with these bytes keeps starting with them (a rollback by hand
                # to an old revision included); a new folder replaces the resource, the old objects stay.
                opts=self.child_opts(retain_on_delete=True),
            )
            for file_name, text in progs.files
        ]
        before_revisions: list[pulumi.Resource] = [self.service_account, *grants, *self.program_objects]

        # ---- the service, created with stable's template; then each pool's revision; then the split -------------
        templates = args.templates()
        fields = args.service_fields()
        stable = args.pools[0]
        self.service = pv.CloudRunService(
            f"{name}-service",
            pv.ServiceInputs(
                project=p,
                region=r,
                service_id=args.service_name,
                service=fields,
                initial_template=templates[stable.role],
                timeouts=pv.ServiceTimeouts(create_seconds=creation_timeout(stable.revision)),
            ),
            # A revision that starts before its grants and programs cannot mount the buckets or read the secret.
            opts=self.child_opts(depends_on=before_revisions, protect=args.protect),
        )
        self.revisions: dict[str, pv.CloudRunRevision] = {}
        previous: list[pulumi.Resource] = [self.service]
        for pool in args.pools:
            self.revisions[pool.role] = pv.CloudRunRevision(
                f"{name}-revision-{pool.role}",
                pv.RevisionInputs(
                    project=p,
                    region=r,
                    service=args.full_service_name,
                    revision=templates[pool.role]["revision"],
                    template=templates[pool.role],
                    service_fields=fields,
                    timeouts=pv.RevisionTimeouts(create_seconds=creation_timeout(pool.revision)),
                ),
                # One patch at a time: each revision after the service's and the previous pool's.
                opts=self.child_opts(depends_on=[*before_revisions, *previous]),
            )
            previous = [self.revisions[pool.role]]
        self.revision_names = args.revision_names()
        self.traffic = pv.CloudRunTraffic(
            f"{name}-traffic",
            pv.TrafficInputs(
                project=p,
                region=r,
                service=args.full_service_name,
                traffic=svc.traffic(self.revision_names, {pool.role: pool.weight for pool in args.pools}),
                service_fields=fields,
            ),
            opts=self.child_opts(depends_on=list(self.revisions.values())),
        )

        # ---- callers: configured members only, never public ------------------------------------------------------
        # Keyed by member (naming.member_key), aliased to the name by position earlier versions gave it.
        self.invokers = [
            gcp.cloudrunv2.ServiceIamMember(
                f"{name}-invoker-{naming.member_key(m)}",
                project=p,
                location=r,
                name=args.service_name,
                role=svc.INVOKER_ROLE,
                member=svc.checked_member(m),
                opts=self.child_opts(depends_on=[self.service], aliases=[pulumi.Alias(name=f"{name}-invoker-{i}")]),
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
                "programs": f"gs://{progs.bucket}/{progs.folder}/",
            }
        )
