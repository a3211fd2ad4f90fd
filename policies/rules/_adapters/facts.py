"""The facts the cross-target policies judge, and the shape of a target adapter.

A serving target renders the same intent in its own resources: a warm floor is an HPA's ``minReplicas`` on GKE, a
revision's ``scaling.minInstanceCount`` on Cloud Run, a deployed model's ``dedicatedResources.minReplicaCount`` on
Vertex AI. An adapter (one module per target beside this one) reads its target's resources and returns these small
typed facts; a cross-target policy is written once over the facts of every adapter.

Unknown values at preview stay :data:`~.._common.UNKNOWN` inside a fact (the adapters read ``Res.props``, already
copied by :func:`~.._common.plain`): the policy skips that one value and still checks the rest. A field an adapter
does not know how to read is never guessed: the adapter returns no fact for it.

Each field that names where a value lives (``where``, ``field``, ``container``...) is the target's own spelling, so a
message names the property the operator has to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from .._common import Res

F = TypeVar("F")


# ---- the facts ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRef:
    """One container image a resource runs."""

    #: Where the reference is written, as a message names it: ``container 'vllm' image``, ``containerSpec.imageUri``.
    where: str
    #: The reference: a string, UNKNOWN at preview, or None when the field is not set.
    image: Any
    #: A serving image must be ``<repository>@sha256:<64 hex>``; any other image must only never be ``:latest``.
    digest_required: bool
    #: What starts again from the reference (a tag can move between two of them): ``pod``, ``instance``, ``replica``.
    starts: str


@dataclass(frozen=True)
class WarmFloor:
    """The least number of serving units a target keeps running when idle."""

    #: The property, as the target spells it: ``minReplicas``, ``template.scaling.minInstanceCount``.
    field: str
    #: Its value with the target's default applied when unset; UNKNOWN at preview; None when unset without default.
    value: Any
    #: What the target keeps warm: a ``replica`` (a whole copy of the model: GKE pods, Vertex AI replicas) or a Cloud
    #: Run ``instance``. The policy's ``minReplicas`` / ``minInstances`` property applies accordingly.
    unit: Literal["replica", "instance"]
    #: Why one more cold unit hurts, for the message.
    cold_start: str


@dataclass(frozen=True)
class ProbeLimit:
    """A bound the target puts on ``periodSeconds x failureThreshold`` of a startup probe."""

    seconds: int
    #: Completes "exceeds the <seconds> s ...": who imposes it, and what happens above it.
    rule: str


@dataclass(frozen=True)
class StartupWindow:
    """The startup probe of a vLLM container, and the cold-load estimate it has to outlast."""

    #: The container, as a message names it: ``container 'vllm'``.
    container: str
    #: The probe: a dict, None / ``{}`` when absent, UNKNOWN at preview.
    probe: Any
    #: The probe defaults of the target's API (Kubernetes and run.v2 both: 0 / 10 / 3).
    defaults: Mapping[str, int]
    #: What goes wrong without a startup probe (the message adds what to do).
    without_probe: str
    #: The estimate the program renders (annotation ``llm-serving.io/cold-load-seconds``): a string or number, None
    #: when not rendered, UNKNOWN at preview.
    cold_load: Any
    #: Where the estimate is rendered (``the Deployment``, ``the revision template``), for the message.
    rendered_on: str
    #: Key of the policy's ``coldLoadSeconds`` fallback: the Deployment's or the service's name.
    key: str
    #: Whether the target has a readiness probe that must exist and differ from the startup probe (Kubernetes).
    readiness_required: bool = False
    #: The readiness probe when ``readiness_required`` (same conventions as ``probe``).
    readiness: Any = None
    limit: ProbeLimit | None = None
    #: How many times the estimate the window must cover: Cloud Run 2 (issue 23: a start the probe kills is lost
    #: whole, and the estimate rests on stated throughputs); 1 elsewhere.
    min_factor: float = 1.0


@dataclass(frozen=True)
class VllmServer:
    """One vLLM server process: the container that runs ``vllm serve``."""

    #: The container, as a message names it: ``container 'vllm'``, ``containerSpec``.
    container: str
    #: The arguments vLLM parses; UNKNOWN at preview; None when the container never runs ``vllm serve``.
    args: Any
    #: Environment variables by name: a literal value, or ``{"valueFrom"|"valueSource": ...}`` for a reference; the
    #: whole mapping UNKNOWN when the list is unknown at preview.
    env: Any


@dataclass(frozen=True)
class ReservationClaim:
    """The reservation affinity of GPU machines (a node pool's, a deployment's machines)."""

    #: The machines, as a message names them: ``GPU node pool``, ``machineSpec``.
    machines: str
    #: The affinity: a dict, None when absent, UNKNOWN at preview.
    affinity: Any
    #: The property holding the consumption type: ``consumeReservationType``, ``reservationAffinityType``.
    type_field: str
    #: How ``values`` names the reservation: ``name``, ``resource name``.
    by: str
    #: The required form of a resource name (``projects/<p>/zones/<z>/reservations/<name>``), None for a bare name.
    resource_form: str | None = None


@dataclass(frozen=True)
class SharedGpu:
    """vLLM servers that can meet on one GPU, each pre-allocating its ``--gpu-memory-utilization`` of it."""

    #: The resource the finding is reported on (the node pool, the co-host Deployment or deployed model).
    urn: str
    #: How they share it, for the message: "up to 2 servers share one GPU of this pool (maxSharedClientsPerGpu 2)".
    sharing: str
    #: (utilisation, server name) of the worst case that can meet on one GPU, largest first.
    shares: tuple[tuple[float, str], ...]


@dataclass(frozen=True)
class CallerGrant:
    """An IAM grant on a serving endpoint (a Cloud Run service, a Vertex AI endpoint)."""

    role: Any
    member: Any
    #: What a public member could call: ``service``, ``endpoint``.
    noun: str


@dataclass(frozen=True)
class IamCheckSwitch:
    """A property that, when true, lets an endpoint answer callers without checking their IAM role."""

    field: str
    #: True / False / None (unset), UNKNOWN at preview.
    value: Any
    #: The role named principals need instead (``roles/run.invoker``).
    caller_role: str


@dataclass(frozen=True)
class ServingEndpoint:
    """How a serving endpoint admits callers, beyond its IAM grants."""

    noun: str
    #: The target's switch that turns the IAM check off (Cloud Run ``invokerIamDisabled``); None: it has none.
    iam_check_switch: IamCheckSwitch | None = None
    #: Whether it has its own DNS name or is reachable through Private Service Connect only (Vertex AI); UNKNOWN at
    #: preview; None when the target has no shared public endpoint domain.
    private: Any = None


# ---- the adapter ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reader(Generic[F]):
    """Facts of one kind from one resource, for the resource types in ``types`` (nothing for any other type)."""

    types: tuple[str, ...] = ()
    read: Callable[[Res], Iterable[F]] = lambda _res: ()

    def __call__(self, res: Res) -> list[F]:
        return list(self.read(res)) if res.type in self.types else []


@dataclass(frozen=True)
class StackReader(Generic[F]):
    """Facts of one kind from the stack's resources of ``types`` (a relationship between resources)."""

    types: tuple[str, ...] = ()
    read: Callable[[list[Res]], Iterable[F]] = lambda _resources: ()

    def __call__(self, resources: list[Res]) -> list[F]:
        mine = [r for r in resources if r.type in self.types]
        return list(self.read(mine)) if mine else []


@dataclass(frozen=True)
class Adapter:
    """What one serving target tells the cross-target policies. A reader left empty: the target has no such fact
    (Cloud Run has no reservations; only Kubernetes and Cloud Run render a cold-load estimate)."""

    target: Literal["gke", "cloud_run", "vertex"]
    images: Reader[ImageRef] = field(default_factory=Reader)
    warm_floors: Reader[WarmFloor] = field(default_factory=Reader)
    vllm_servers: Reader[VllmServer] = field(default_factory=Reader)
    startup_windows: Reader[StartupWindow] = field(default_factory=Reader)
    reservations: Reader[ReservationClaim] = field(default_factory=Reader)
    caller_grants: Reader[CallerGrant] = field(default_factory=Reader)
    endpoints: Reader[ServingEndpoint] = field(default_factory=Reader)
    shared_gpus: StackReader[SharedGpu] = field(default_factory=StackReader)


#: The readers of :class:`Adapter`, by the name a policy module gives as its ``FACTS``.
FactKind = Literal[
    "images",
    "warm_floors",
    "vllm_servers",
    "startup_windows",
    "reservations",
    "caller_grants",
    "endpoints",
    "shared_gpus",
]
