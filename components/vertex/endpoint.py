"""The Vertex AI serving target: one endpoint serving a release line (stable + canary) with a traffic split.

What it creates, and why each piece is shaped the way it is:

* ``gcp.vertex.AiEndpoint``: a dedicated endpoint (``dedicated_endpoint_enabled``: isolated DNS and capacity),
  or a Private Service Connect endpoint when configured (pulumi-gcp 10.2.0's
  ``private_service_connect_config{enable_private_service_connect, project_allowlists}``). The endpoint id is
  explicit (``AiEndpoint.name``): aiplatform.v1 ``endpoints.create`` takes a letter-first id of up to 63
  ``[a-z0-9-]`` characters, so it is known in the plan and stable across replacements.
* One :class:`~components.vertex.provider.DeployedModel` per pool (dynamic resource: upload from the release's
  ``gs://`` folder + deploy). Deployments are created one after the other (each depends on the previous):
  whether Vertex accepts concurrent deploy operations on one endpoint is not documented in aiplatform.v1.
* One :class:`~components.vertex.provider.EndpointTraffic`: the whole split from pool weights (sum 100). A
  weight-0 pool (dark canary) stays deployed and simply gets no entry.
* Co-hosted models are one deployed model like any other: its container runs the co-host server
  (``components/vertex/container.py``), never a deployment resource pool, which takes no custom container.
* A dedicated service account the containers run as, holding ``roles/storage.objectViewer`` on the weights
  bucket only, and with ``weights_prefixes`` only on those release folders (an IAM condition on the object name;
  listings, whose resource is the bucket, are matched by the ``storage.googleapis.com/objectListPrefix`` attribute,
  Cloud Storage "IAM Conditions" attributes), and, when configured, Artifact Registry read on the one image
  repository: no project-level role.
* Caller IAM on the endpoint itself (``gcp.vertex.AiEndpointIamMember``), configured members only.

Prerequisites outside this component (cannot be created from here without project-wide grants):

* the identity running ``pulumi up`` needs ``iam.serviceAccounts.actAs`` on the service account ("Users
  deploying the Model must have the iam.serviceAccounts.actAs permission", aiplatform.v1 DeployedModel);
* a SPECIFIC_RESERVATION is consumed only if the reservation's VM shape matches the deployment exactly and
  the Vertex AI service agent (``service-<number>@gcp-sa-aiplatform.iam.gserviceaccount.com``) holds Compute
  Viewer on the project owning the reservation (Vertex AI "Use reservations with batch inference" page; the
  online-inference page could not be checked here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pulumi
import pulumi_gcp as gcp

from .. import naming
from ..base import Component
from ..traffic import split_problem
from . import provider as pv
from . import requests as rq

TYPE = "llm-serving:vertex:VertexServing"
#: Object read on the weights bucket: the containers stream the release's safetensors from it.
WEIGHTS_READER_ROLE = "roles/storage.objectViewer"
#: Image pull for a model upload run as the serving account (only with ``image_repository``).
IMAGE_READER_ROLE = "roles/artifactregistry.reader"
#: Caller role, bound on the endpoint only. Vertex AI User is the narrowest predefined role with
#: ``aiplatform.endpoints.predict`` known here; bound on the endpoint its permissions reach this endpoint only.
#: It also carries other endpoint permissions: pass a custom role holding just ``aiplatform.endpoints.predict``
#: (``projects/<p>/roles/<id>``) where that matters.
CALLER_ROLE = "roles/aiplatform.user"
#: IAM member types a caller may have; public principals are refused outright.
_MEMBER_RE = re.compile(r"^(user|group|serviceAccount|domain|principal|principalSet):[!-~]+\Z")
_PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
_ROLE_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}\Z")
#: A release folder inside the weights bucket (``<model>/<revision>``), without leading or trailing '/'.
_PREFIX_RE = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*\Z")
#: The request attribute a Cloud Storage IAM condition reads the prefix of an ``objects.list`` call from (its
#: resource is the bucket, so ``resource.name`` cannot match a folder); the same attribute the benchmark Job's
#: grant uses (components/bench_job.py).
LIST_PREFIX_ATTRIBUTE = "storage.googleapis.com/objectListPrefix"
_ENDPOINT_ID_RE = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?\Z")
#: Service account ids: 6-30 characters, lowercase letter first (IAM naming rules).
_ACCOUNT_ID_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]\Z")
#: The Model label carrying the pool's role (requests.POOL_LABEL_KEY: Vertex label keys allow no '.' or '/').
POOL_LABEL = rq.POOL_LABEL_KEY


@dataclass(frozen=True)
class VertexDeployment:
    """One pool of the release line: its role, traffic weight, model and where it runs."""

    role: str
    weight: int
    model: rq.ModelSpec
    placement: rq.DedicatedResources
    #: How a replacement of this deployment makes way (provider CREATE_FIRST / DELETE_FIRST).
    replacement: str = pv.CREATE_FIRST


@dataclass(frozen=True)
class PrivateServiceConnect:
    """Expose the endpoint only through Private Service Connect, to these consumer projects."""

    project_allowlist: tuple[str, ...]


@dataclass(frozen=True)
class ImageRepository:
    """The Artifact Registry repository holding the serving image (for uploads run as the serving account)."""

    project: str
    location: str
    repository_id: str


@dataclass(frozen=True)
class VertexServingArgs:
    #: The Pulumi stack: part of every caller-chosen id (requests.creation_ids), so two stacks in one project and
    #: region never find each other's models.
    stack: str
    project: str
    region: str
    #: The endpoint's id (final component of its resource name).
    endpoint_id: str
    display_name: str
    #: Bucket holding ``gs://<bucket>/<model>/<revision>/``; the serving account reads it.
    weights_bucket: pulumi.Input[str]
    #: Account id of the dedicated serving service account.
    service_account_id: str
    deployments: tuple[VertexDeployment, ...]
    #: None: a dedicated public endpoint (IAM-authenticated).
    private_service_connect: PrivateServiceConnect | None = None
    caller_members: tuple[str, ...] = ()
    caller_role: str = CALLER_ROLE
    #: Set: uploads run as the serving account, which then also reads this repository. None: the Vertex AI
    #: Service Agent performs the upload (UploadModelRequest.serviceAccount unset).
    image_repository: ImageRepository | None = None
    #: Endpoint ``clientConnectionConfig.inferenceTimeout``: the longest allowed stream. None: service default.
    inference_timeout_seconds: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    protect: bool = False
    #: Request-response logging to BigQuery; None (the default): off, no prompt or completion is stored.
    request_logging: rq.RequestResponseLogging | None = None
    #: Release folders (``<model>/<revision>``) the serving account may read; empty: the whole bucket.
    weights_prefixes: tuple[str, ...] = ()
    #: Single objects of the bucket it may read besides (a co-host server's update_models document); only with
    #: ``weights_prefixes`` (without them the whole bucket is readable anyway).
    watched_objects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problems = serving_problems(self)
        if problems:
            raise VertexServingConfigError(problems)


class VertexServingConfigError(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("invalid VertexServingArgs:\n  " + "\n  ".join(problems))
        self.problems = problems


def serving_problems(args: VertexServingArgs) -> list[str]:
    """Every problem with ``args`` (empty when valid); nothing is registered unless this is empty."""
    problems: list[str] = []
    if not _ENDPOINT_ID_RE.match(args.endpoint_id):
        problems.append(
            f"endpoint_id {args.endpoint_id!r}: letter first, then up to 62 of [a-z0-9-], "
            "not ending in '-' (aiplatform.v1 endpoints.create endpointId)"
        )
    if not _ACCOUNT_ID_RE.match(args.service_account_id):
        problems.append(f"service_account_id {args.service_account_id!r}: 6-30 of [a-z0-9-], letter first")
    if not args.stack:
        problems.append("stack: the Pulumi stack name (part of every caller-chosen id)")
    if not args.deployments:
        problems.append("deployments: at least one")
    roles = [d.role for d in args.deployments]
    if len(roles) != len(set(roles)):
        problems.append(f"deployments: duplicate roles in {roles}")
    for d in args.deployments:
        if not _ROLE_NAME_RE.match(d.role):
            problems.append(f"deployments[{d.role}].role: lowercase letter first, up to 20 of [a-z0-9-]")
        if d.replacement not in pv.REPLACEMENT_ORDERS:
            problems.append(f"deployments[{d.role}].replacement: one of {', '.join(pv.REPLACEMENT_ORDERS)}")
    split = split_problem({d.role: d.weight for d in args.deployments}) if args.deployments else None
    if split is not None:
        problems.append(f"deployments: {split}")
    if args.private_service_connect is not None and not args.private_service_connect.project_allowlist:
        problems.append("private_service_connect.project_allowlist: at least one consumer project")
    for member in args.caller_members:
        if isinstance(member, str):
            if member in _PUBLIC_MEMBERS:
                problems.append(f"caller_members: {member} would make the endpoint public")
            elif not _MEMBER_RE.match(member):
                problems.append(
                    f"caller_members: {member!r} is not an IAM member (user:, group:, serviceAccount:, "
                    "domain:, principal:, principalSet:)"
                )
    for prefix in args.weights_prefixes:
        if not _PREFIX_RE.match(prefix):
            problems.append(f"weights_prefixes: {prefix!r} is not <model>/<revision> (no leading or trailing '/')")
    if args.watched_objects and not args.weights_prefixes:
        problems.append("watched_objects: only beside weights_prefixes (without them the whole bucket is read)")
    for obj in args.watched_objects:
        if not _PREFIX_RE.match(obj):
            problems.append(f"watched_objects: {obj!r} is not an object name (no leading or trailing '/')")
    if len(set(args.weights_prefixes)) != len(args.weights_prefixes):
        problems.append(f"weights_prefixes: duplicates in {list(args.weights_prefixes)}")
    if args.inference_timeout_seconds is not None and args.inference_timeout_seconds <= 0:
        problems.append("inference_timeout_seconds must be > 0")
    try:
        rq.check_labels(args.labels)
    except rq.VertexRequestError as err:
        problems.append(f"labels: {err}")
    return problems


def weights_condition(
    bucket: str, prefixes: tuple[str, ...], endpoint_id: str, objects: tuple[str, ...] = ()
) -> gcp.storage.BucketIAMMemberConditionArgs:
    """Objects of the release folders, and listings under them (the verifier and the streamer list each folder), and
    the single ``objects`` named (the co-host server reads its model-set document with ``objects.get``)."""
    folders = [f"{p}/" for p in prefixes]
    expression = " || ".join(
        [
            f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{f}") || '
            f'api.getAttribute("{LIST_PREFIX_ATTRIBUTE}", "").startsWith("{f}")'
            for f in folders
        ]
        + [f'resource.name == "projects/_/buckets/{bucket}/objects/{o}"' for o in objects]
    )
    return gcp.storage.BucketIAMMemberConditionArgs(
        title=f"{endpoint_id}-release-folders"[:100],
        description=(
            "Read "
            + ", ".join([f"gs://{bucket}/{f}" for f in folders] + [f"gs://{bucket}/{o}" for o in objects])
            + " only: the served releases"
            + (" and the model set" if objects else "")
        )[:256],
        expression=expression,
    )


def service_account_email(project: str, account_id: str) -> str:
    """A user-managed service account's e-mail is fixed by its id and project (IAM service account naming),
    so it can be part of ids computed before the account exists."""
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def _checked_member(member: str) -> str:
    """Members that are Outputs are checked when they resolve: a public principal fails the deployment."""
    if member in _PUBLIC_MEMBERS or not _MEMBER_RE.match(member):
        raise VertexServingConfigError([f"caller member {member!r} is public or not an IAM member"])
    return member


class VertexServing(Component):
    """vLLM on Vertex AI: endpoint, deployed models per pool, traffic split, identity and caller IAM.

    ``args`` is validated when built (:meth:`VertexServingArgs.__post_init__`), so an invalid configuration
    registers nothing."""

    TYPE = TYPE

    def __init__(self, name: str, args: VertexServingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        p, r = args.project, args.region

        # ---- identity: the containers' service account, bucket-scoped read only ----------------------------
        self.service_account = gcp.serviceaccount.Account(
            f"{name}-sa",
            project=p,
            account_id=args.service_account_id,
            display_name=f"Vertex AI serving: {args.display_name}",
            description="Runs the vLLM containers of the Vertex endpoint; reads the weights bucket only",
            opts=self._child(protect=args.protect),
        )
        self.service_account_email: pulumi.Output[str] = self.service_account.email
        member = self.service_account.email.apply(lambda e: f"serviceAccount:{e}")
        self.weights_reader = gcp.storage.BucketIAMMember(
            f"{name}-weights-reader",
            bucket=args.weights_bucket,
            role=WEIGHTS_READER_ROLE,
            member=member,
            condition=None
            if not args.weights_prefixes
            else pulumi.Output.from_input(args.weights_bucket).apply(
                lambda b: weights_condition(b, args.weights_prefixes, args.endpoint_id, args.watched_objects)
            ),
            opts=self._child(),
        )
        grants: list[pulumi.Resource] = [self.weights_reader]
        self.image_reader: gcp.artifactregistry.RepositoryIamMember | None = None
        if args.image_repository is not None:
            repo = args.image_repository
            self.image_reader = gcp.artifactregistry.RepositoryIamMember(
                f"{name}-image-reader",
                project=repo.project,
                location=repo.location,
                repository=repo.repository_id,
                role=IMAGE_READER_ROLE,
                member=member,
                opts=self._child(),
            )
            grants.append(self.image_reader)

        # ---- endpoint -----------------------------------------------------------------------------------
        psc = args.private_service_connect
        self.endpoint = gcp.vertex.AiEndpoint(
            f"{name}-endpoint",
            name=args.endpoint_id,
            project=p,
            location=r,
            region=r,
            display_name=args.display_name,
            description="vLLM (OpenAI protocol via rawPredict/streamRawPredict)",
            labels=dict(sorted(args.labels.items())),
            dedicated_endpoint_enabled=True if psc is None else None,
            predict_request_response_logging_config=None
            if args.request_logging is None
            else gcp.vertex.AiEndpointPredictRequestResponseLoggingConfigArgs(
                enabled=True,
                sampling_rate=args.request_logging.sampling_rate,
                bigquery_destination=gcp.vertex.AiEndpointPredictRequestResponseLoggingConfigBigqueryDestinationArgs(
                    output_uri=args.request_logging.bigquery_uri
                ),
            ),
            private_service_connect_config=None
            if psc is None
            else (
                gcp.vertex.AiEndpointPrivateServiceConnectConfigArgs(
                    enable_private_service_connect=True, project_allowlists=list(psc.project_allowlist)
                )
            ),
            # The split is owned by the EndpointTraffic resource; the endpoint resource must never reset it.
            # The id is fixed, so a replacement cannot create the new endpoint beside the old one: delete first
            # (Pulumi's deleteBeforeReplace, for "resources that cannot exist side-by-side"; it cascades to the
            # deployments, which must leave the old endpoint anyway).
            opts=self._child(protect=args.protect, ignore_changes=["trafficSplit"], delete_before_replace=True),
        )
        self.endpoint_name: pulumi.Output[str] = self.endpoint.name.apply(lambda n: rq.endpoint_name(p, r, n))

        # ---- deployments, one after the other ------------------------------------------------------------
        self.deployments: dict[str, pv.DeployedModel] = {}
        previous: list[pulumi.Resource] = []
        email = service_account_email(p, args.service_account_id)
        self.creation_ids: dict[str, rq.CreationIds] = {}
        for d in args.deployments:
            model = replace(d.model, labels={**args.labels, **d.model.labels, POOL_LABEL: d.role})
            as_sa = args.image_repository is not None
            # The ids from the same bodies the provider sends (the account e-mail is fixed by its id).
            ids = self.creation_ids[d.role] = rq.creation_ids(
                args.stack,
                args.endpoint_id,
                d.role,
                rq.upload_model_request(model, service_account=email if as_sa else None),
                self._deployed_body(d, email),
            )
            deployed = self.deployments[d.role] = pv.DeployedModel(
                f"{name}-{d.role}",
                pv.DeployedModelInputs(
                    project=p,
                    region=r,
                    endpoint=self.endpoint_name,
                    model_id=ids.model_id,
                    deployed_model_id=ids.deployed_model_id,
                    upload_model_request=self._upload_request(model, as_sa),
                    deployed_model=self._deployed_model(d),
                    timeouts=pv.DeployTimeouts.for_container(d.model.container),
                    replacement=d.replacement,
                ),
                opts=self._child(depends_on=[*grants, *previous]),
            )
            previous = [deployed]

        # ---- traffic ------------------------------------------------------------------------------------
        self.weights: dict[str, int] = {d.role: d.weight for d in args.deployments}
        self.traffic = pv.EndpointTraffic(
            f"{name}-traffic",
            pv.EndpointTrafficInputs(
                project=p,
                region=r,
                endpoint=self.endpoint_name,
                weights=self.weights,
                deployed_model_ids={role: dm.deployed_model_id for role, dm in self.deployments.items()},
                inference_timeout_seconds=args.inference_timeout_seconds,
            ),
            opts=self._child(),
        )

        # ---- callers ------------------------------------------------------------------------------------
        # Keyed by member (naming.member_key), aliased to the name by position earlier versions gave it.
        self.callers = [
            gcp.vertex.AiEndpointIamMember(
                f"{name}-caller-{naming.member_key(m)}",
                project=p,
                location=r,
                endpoint=self.endpoint.name,
                role=args.caller_role,
                member=pulumi.Output.from_input(m).apply(_checked_member),
                opts=self._child(aliases=[pulumi.Alias(name=f"{name}-caller-{i}")]),
            )
            for i, m in enumerate(args.caller_members)
        ]

        self.register_outputs(
            {
                "endpoint": self.endpoint_name,
                "dedicated_endpoint_dns": self.endpoint.dedicated_endpoint_dns,
                "service_account": self.service_account_email,
                "deployed_model_ids": {role: dm.deployed_model_id for role, dm in self.deployments.items()},
                "weights": self.weights,
            }
        )

    # ---- helpers ----------------------------------------------------------------------------------------

    def _child(self, *, depends_on: list[Any] | None = None, **kwargs: Any) -> pulumi.ResourceOptions:
        """Options of every child (the one helper): ``parent=self`` plus the component's own ``depends_on``."""
        return self.child_opts(depends_on=depends_on, **kwargs)

    def _upload_request(self, model: rq.ModelSpec, as_serving_account: bool) -> pulumi.Input[Mapping[str, Any]]:
        if not as_serving_account:
            return rq.upload_model_request(model)
        return self.service_account.email.apply(lambda e: rq.upload_model_request(model, service_account=e))

    def _deployed_body(self, d: VertexDeployment, email: str) -> Mapping[str, Any]:
        """The DeployedModel body as plain data (what :meth:`_deployed_model` resolves to)."""
        display = rq.deployed_model_display_name(d.role, d.model.display_name)
        return rq.deployed_model(
            rq.DeployedModelSpec(display_name=display, resources=d.placement, service_account=email)
        )

    def _deployed_model(self, d: VertexDeployment) -> pulumi.Output[Mapping[str, Any]]:
        display = rq.deployed_model_display_name(d.role, d.model.display_name)
        return self.service_account.email.apply(
            lambda e: rq.deployed_model(
                rq.DeployedModelSpec(display_name=display, resources=d.placement, service_account=e)
            )
        )
