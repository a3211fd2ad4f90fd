"""The ``vertex`` serving target: vLLM as a custom container on a Vertex AI endpoint (the design's managed path).

A Vertex pool is one *deployed model* on the stack's endpoint: the pool's immutable release (image by digest,
weights streamed from the release's own ``gs://<bucket>/<model>/<revision>/`` by vLLM's Run:ai streamer after the
release verifier checked the folder against its manifest), on the machine shape of one accelerator topology
(``accelerators.<key>``: machine type, GPU type and count, zone, the stack's specific reservation), with replica
bounds and an autoscaling signal. Stable and canary are two deployed models of one endpoint; the endpoint's
traffic split comes from the pools' weights. The endpoint itself (its id, dedicated or Private Service Connect
access, who may call it) is the root section ``vertex``.

Clients send OpenAI requests through ``endpoints.rawPredict`` / ``streamRawPredict`` (forwarded unchanged to the
container's predict route, vLLM's ``/v1/chat/completions``), naming the stack's public model name
(``serving.model_name``), which every deployed model serves beside its release id.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, model_validator

from infra.config.base import MAX_NODES, PROJECT_ID_PATTERN, Strict, check
from infra.config.cohosting import ENDPOINT_ID_PATTERN
from infra.config.documents import quote
from infra.config.loading import GcsStreamingLoading as VertexLoading
from infra.config.pool import PoolCommon

#: IAM members a caller may be: named principals only; ``allUsers`` / ``allAuthenticatedUsers`` never match.
CALLER_MEMBER_PATTERN = r"^(user|group|serviceAccount|domain|principal|principalSet):[!-~]{1,300}\Z"
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
#: Roles an endpoint's callers may get: invoker roles only. ``roles/aiplatform.user`` (Vertex AI User) is the
#: narrowest predefined role holding ``aiplatform.endpoints.predict``; anything narrower is a custom role of the
#: stack's project (``projects/<p>/roles/<id>``), which Vertex AI's access-control page recommends: "create a custom
#: role with the aiplatform.endpoints.predict permission ... grants the service account permission to call the
#: endpoint for predictions, without granting permission to control the endpoint"
#: (https://cloud.google.com/vertex-ai/docs/general/access-control, "Use custom roles to grant least privilege").
#: Every other predefined role is refused: roles/aiplatform.admin, roles/editor, roles/owner ... would let a caller
#: undeploy, redeploy or re-grant the endpoint, which is the control plane's job, not a client's. (A custom role's
#: permissions are not visible offline: docs/deploying.md lists "a custom caller role holds only
#: aiplatform.endpoints.predict" among the preconditions.)
CALLER_PREDEFINED_ROLES = ("roles/aiplatform.user",)
#: (A pydantic pattern: its Rust engine's ``$`` is the end of the text, never before a final newline.)
ROLE_PATTERN = r"^(roles/aiplatform\.user|projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/roles/[a-zA-Z0-9_.]{3,64})$"
#: Autoscaling signals a Vertex pool may scale on (keys of ``components.vertex.requests.AUTOSCALING_METRICS``).
AutoscalingSignal = Literal["vllm_queue", "accelerator_duty_cycle"]


class VertexAutoscaling(Strict):
    """What the deployed model's replicas scale on (``DedicatedResources.autoscalingMetricSpecs``)."""

    signal: AutoscalingSignal = Field(
        "vllm_queue",
        description=(
            "``vllm_queue``: vLLM's waiting-request queue as Vertex AI AutoMetrics exports it "
            "(``prometheus.googleapis.com/vertex_vllm_num_requests_waiting``), the GKE HPA's signal: queued requests "
            "are pure time-to-first-token and the queue grows before latency objectives break. "
            "``accelerator_duty_cycle``: Vertex's own default, which sits near 100 % under continuous batching "
            "whether or not requests wait; the fallback when the queue series is absent from Metrics Explorer."
        ),
    )
    target: Annotated[int, Field(ge=1, le=100)] | None = Field(
        None,
        description=(
            "Per-replica target: queued requests for ``vllm_queue`` (default: observability.autoscaling."
            "queue_target_per_pod, the GKE HPA's target), percent for ``accelerator_duty_cycle`` (default 60, "
            "Vertex's own)."
        ),
    )


#: The ``target`` value of this target's pools and co-hosted groups.
TARGET: Final = "vertex"


class VertexPool(PoolCommon):
    """A pool of vLLM replicas on Vertex AI: one deployed model of the stack's endpoint."""

    TARGET_LABEL: ClassVar[str] = "Vertex pool"
    SPLIT_MECHANISM: ClassVar[str] = "one Vertex endpoint's deployed models"

    target: Literal["vertex"] = Field(
        description=("``vertex``: one deployed model (custom vLLM container) of the stack's Vertex AI endpoint.")
    )
    accelerator: str = Field(
        description=(
            "Accelerator topology key (``accelerators.<key>``): its machine type, GPU type and count make the "
            "deployed model's machine spec, its reservation the replicas' reservation affinity. One replica is one "
            "machine; the release's tensor_parallel_size must use all of its GPUs."
        )
    )
    # Vertex keeps at least one replica of a dedicated deployment (DedicatedResources.minReplicaCount >= 1).
    min_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(
        description=(
            "Warm minimum replicas (``minReplicaCount``; Vertex cannot scale a dedicated deployment to zero; >= 2 in "
            "prod)."
        )
    )
    max_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(
        description=("Replica ceiling (``maxReplicaCount``): at most what the reservation holds for this pool.")
    )
    loading: VertexLoading = Field(description="Weight streaming from Cloud Storage and its stated throughput.")
    # 1,024 GiB: above any GPU machine's memory; a figure in MiB is caught.
    shm_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        description=(
            "Shared memory (``/dev/shm``, ``sharedMemorySizeMb``) of the container: NCCL and PyTorch IPC between the "
            "tensor-parallel ranks; taken from the machine's memory."
        )
    )
    autoscaling: VertexAutoscaling = Field(
        VertexAutoscaling(),
        description=(
            "Autoscaling signal and target; the default scales on vLLM's queue at the GKE HPA's per-replica target."
        ),
    )
    startup_margin: Annotated[float, Field(ge=0, le=4)] = Field(
        0.5,
        description=(
            "Extra fraction over the cold-load estimate the startup probe waits (as on GKE): window >= cold load x "
            "(1 + margin); with the machine-provisioning allowance within Vertex's 2 h deployment timeout."
        ),
    )
    replacement: Literal["create_first", "delete_first"] = Field(
        "create_first",
        description=(
            "How a replaced deployed model (new release, arguments, machine) makes way. ``create_first``: the new one "
            "starts its ``min_replicas`` beside the old (the reservation must hold them: rule "
            "``vertex_reservation_holds_max_plus_replacement``). ``delete_first``: the old one is undeployed first and "
            "its traffic share moves to the other pools; this pool serves nothing until its successor is up (refused "
            "in prod for a pool that carries traffic)."
        ),
    )

    def accelerator_key(self) -> str | None:
        return self.accelerator

    @model_validator(mode="after")
    def _bounds(self) -> VertexPool:
        check(
            [("max_replicas", f"must be >= min_replicas ({self.min_replicas}), got {self.max_replicas}")]
            if self.max_replicas < self.min_replicas
            else []
        )
        return self


class PrivateServiceConnectAccess(Strict):
    """Expose the endpoint only through Private Service Connect, to these consumer projects."""

    # 100 projects: a PSC allowlist names the few consumer projects of one team; more is a slip.
    project_allowlist: Annotated[
        list[Annotated[str, Field(pattern=PROJECT_ID_PATTERN)]], Field(min_length=1, max_length=100)
    ] = Field(description=("Consumer projects allowed to create a PSC endpoint to this Vertex endpoint."))


#: Machine type keys of the price table: Compute Engine machine type names (``a3-highgpu-2g``, ``g2-standard-12``).
MACHINE_TYPE_PATTERN = r"^[a-z][a-z0-9]*-[a-z0-9]+(-[a-z0-9]+)*$"
#: GPU keys: the accelerators section's ``gpu_type`` spelling (``nvidia-h100-80gb``).
GPU_TYPE_PATTERN = r"^nvidia-[a-z0-9-]+$"


class VertexPricing(Strict):
    """Vertex AI prediction prices of the stack's region (not Compute Engine's: a deployed model's nodes are billed
    by Vertex AI per node hour of the machine type and per hour of each accelerator; Vertex AI pricing page, "You
    pay for each model deployed to an endpoint, even if no prediction is made")."""

    source_url: Annotated[str, Field(pattern=r"^https://[!-~]{1,500}$")] = Field(
        description="Where the figures were read (the Vertex AI pricing page, prediction for custom-trained models)."
    )
    as_of: Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")] = Field(
        description="The day they were read (YYYY-MM-DD, quoted): prices change; re-read them after it."
    )
    # $200 per node hour is ~2x the largest 8-GPU machine's list price; $50 per GPU hour ~5x an H100's.
    machine_hour_usd: dict[
        Annotated[str, Field(pattern=MACHINE_TYPE_PATTERN)], Annotated[float, Field(ge=0, le=200)]
    ] = Field(
        description=(
            "Per machine type: the prediction price of one node hour (its vCPUs and memory), USD. Every machine type "
            "a Vertex pool or group runs on needs one."
        )
    )
    accelerator_hour_usd: dict[
        Annotated[str, Field(pattern=GPU_TYPE_PATTERN)], Annotated[float, Field(ge=0, le=50)]
    ] = Field(
        description=(
            "Per GPU type (``accelerators.<key>.gpu_type``): the prediction price of one accelerator hour, USD; 0 where "
            "the machine's price already includes its GPUs."
        )
    )

    @model_validator(mode="after")
    def _real_date(self) -> VertexPricing:
        try:
            dt.date.fromisoformat(self.as_of)
        except ValueError as err:
            check([("as_of", f"{self.as_of!r} is not a calendar date: {err}")])
        return self

    def replica_hour_usd(self, machine_type: str, gpu_type: str, gpus: int) -> float | None:
        """One node of ``machine_type`` with its ``gpus`` accelerators for an hour; None when a price is missing."""
        if machine_type not in self.machine_hour_usd or gpu_type not in self.accelerator_hour_usd:
            return None
        # Rounded to a millionth of a dollar: the sum of two decimal prices is exact to that, not to a float's last bit.
        return round(self.machine_hour_usd[machine_type] + gpus * self.accelerator_hour_usd[gpu_type], 6)


class RequestResponseLoggingConfig(Strict):
    """Request-response logging of the endpoint to BigQuery (``Endpoint.predictRequestResponseLoggingConfig``)."""

    bigquery: Annotated[str, Field(pattern=r"^bq://[a-z][a-z0-9-]{4,28}[a-z0-9](\.[A-Za-z0-9_]{1,1024}){0,2}$")] = (
        Field(
            description=(
                "Destination: ``bq://<project>`` (Vertex creates a dataset and table), ``bq://<project>.<dataset>`` or "
                "``bq://<project>.<dataset>.<table>`` (the dataset must exist and the table must not)."
            )
        )
    )
    sampling_rate: Annotated[float, Field(gt=0, le=1)] = Field(
        description="Fraction of requests logged, in (0, 1]: 1 logs every request, 0.01 one in a hundred."
    )


class VertexConfig(Strict):
    """The Vertex AI endpoint the ``vertex`` pools are deployed models of."""

    endpoint_id: Annotated[str, Field(pattern=ENDPOINT_ID_PATTERN)] = Field(
        description=(
            "Endpoint id (the last part of its resource name, 2-26 characters: the serving account ``<id>-vtx`` must "
            "fit IAM's 30); also its display name."
        )
    )
    access: Literal["dedicated", "private_service_connect"] = Field(
        description=(
            "``dedicated``: a dedicated public endpoint (its own DNS name, IAM-authenticated); "
            "``private_service_connect``: reachable only through PSC from ``private_service_connect.project_allowlist``."
        )
    )
    private_service_connect: PrivateServiceConnectAccess | None = Field(
        None, description=("Required with ``access: private_service_connect``; absent otherwise.")
    )
    # 100 members: one endpoint's callers are a few groups or service accounts; more is a slip.
    caller_members: Annotated[list[str], Field(min_length=1, max_length=100)] = Field(
        description=("Principals granted ``caller_role`` on the endpoint only; never allUsers / allAuthenticatedUsers.")
    )
    caller_role: Annotated[str, Field(pattern=ROLE_PATTERN)] = Field(
        "roles/aiplatform.user",
        description=(
            "Role the callers get on the endpoint: Vertex AI User is the narrowest predefined role with "
            "``aiplatform.endpoints.predict``; a custom role holding just that permission is narrower."
        ),
    )
    repository: Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")] | None = Field(
        None,
        description=(
            "Artifact Registry repository (in the stack's project and region) the releases' images come from: the "
            "upload then runs as the serving account, which reads this repository only. Absent: the Vertex AI "
            "Service Agent pulls the image."
        ),
    )
    protect: bool = Field(
        False,
        description=(
            "Protect the endpoint and the serving account from deletion (Pulumi ``protect``); required in prod."
        ),
    )
    pricing: VertexPricing = Field(
        description=(
            "Vertex AI prediction prices per machine type and GPU (with their source and date): the cost figures of "
            "the Vertex pools."
        )
    )
    request_response_logging: RequestResponseLoggingConfig | None = Field(
        None,
        description=(
            "Log a sample of requests and responses (prompts and completions) to BigQuery. Absent (the default): off, "
            "for privacy: nothing users send or receive is stored beyond the container's own logs."
        ),
    )

    @model_validator(mode="after")
    def _access(self) -> VertexConfig:
        problems: list[tuple[str, str]] = []
        if self.access == "private_service_connect" and self.private_service_connect is None:
            problems.append(
                ("private_service_connect", "required with access: private_service_connect (the consumer projects)")
            )
        if self.access == "dedicated" and self.private_service_connect is not None:
            problems.append(("private_service_connect", "only with access: private_service_connect"))
        for i, member in enumerate(self.caller_members):
            if member in PUBLIC_MEMBERS:
                problems.append(
                    (
                        f"caller_members.{i}",
                        f"{member} would let anyone call the endpoint and spend its "
                        "GPUs: name principals (user:, group:, serviceAccount:, domain:, principal:, "
                        "principalSet:)",
                    )
                )
            elif not re.match(CALLER_MEMBER_PATTERN, member):
                problems.append(
                    (
                        f"caller_members.{i}",
                        f"{quote(member)} is not an IAM member: <type>:<id> with type "
                        "user, group, serviceAccount, domain, principal or principalSet",
                    )
                )
        check(problems)
        return self
