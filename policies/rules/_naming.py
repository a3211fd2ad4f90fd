# GENERATED from components/naming.py by `python -m infra.offline.docs --write`; do not edit.
# The policy pack runs in its own process and must not import the project: this copy is checked
# byte for byte by tests/test_readme.py.
"""The naming contract: every name, label, port and metric name that more than one part of the system must agree
on, defined once.

Used by the components, the planner and the offline tools; the policy pack (which must stay self-contained, it
runs in its own process) carries a generated copy, ``policies/rules/_naming.py``, that a unit test keeps byte-equal
to this file (regenerate it with ``python -m infra.offline.docs --write``).

Standard library only, no imports from the rest of the project.
"""

from __future__ import annotations

import hashlib
import re

# ---- Kubernetes namespaces and service accounts ---------------------------------------------------------------
#: Namespace of the shared gateway front: Gateway, HTTPRoutes, gateway policy, Model Armor extension.
GATEWAY_NAMESPACE = "llm-serving"


#: Every pool namespace is this prefix + the pool's role.
POOL_NAMESPACE_PREFIX = "llm-serving-"


def pool_namespace(role: str) -> str:
    """Namespace of one serving pool: its model servers, InferencePool, endpoint picker, objectives, GKE policies,
    HPA and PodMonitoring. One namespace per pool because the endpoint picker resolves the class a request names
    (``x-gateway-inference-objective``) by object name within its pool's namespace and ignores objectives whose
    ``poolRef`` names another pool (GAIE v1.5.0 inferenceobjective_reconciler.go, datastore.go): only with a
    namespace each can every pool own an objective under the class name clients send."""
    return f"{POOL_NAMESPACE_PREFIX}{role}"


#: Kubernetes service account of the vLLM pods: the Workload Identity principal that reads the weights.
MODEL_SERVER_KSA = "model-server"

# ---- labels ---------------------------------------------------------------------------------------------------
PART_OF_LABEL = "app.kubernetes.io/part-of"
COMPONENT_LABEL = "app.kubernetes.io/component"
NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
VERSION_LABEL = "app.kubernetes.io/version"
#: Value of ``PART_OF_LABEL`` on everything this program creates.
PART_OF = "llm-serving"
#: ``COMPONENT_LABEL`` value of the vLLM pods (policies find serving Deployments by it).
MODEL_SERVER_COMPONENT = "model-server"
#: ``NAME_LABEL`` value of the vLLM pods.
VLLM_APP = "vllm"
#: Serving pool of a pod (``stable`` | ``canary``): the InferencePool and every metric split by it.
POOL_LABEL = "llm-serving.io/pool"
#: Release id of a pod: metrics and dashboards split by it.
RELEASE_LABEL = "llm-serving.io/release"
#: Node label of every GPU node: the accelerator topology key; serving pods select their node pool by it.
ACCELERATOR_LABEL = "llm-serving.io/accelerator"
#: Node label of the CPU system pool (endpoint pickers, adapters, controllers).
POOL_KIND_LABEL = "llm-serving.io/pool-kind"
#: GAIE's engine label on model-server pods (the upstream reference Deployment sets it).
ENGINE_TYPE_LABEL = "inference.networking.k8s.io/engine-type"
#: The endpoint-picker chart's pod selector label key (llm-d-router v0.10.0 routerlib/templates/_helpers.tpl
#: ``llm-d-router.selectorLabels``, gateway mode: ``llm-d-router-gateway: <release>-epp``).
EPP_POD_LABEL = "llm-d-router-gateway"

# ---- annotations: the immutable release identity and planner facts policies check ----------------------------
ANNOTATION_PREFIX = "llm-serving.io/"
COLD_LOAD_ANNOTATION = "llm-serving.io/cold-load-seconds"
STREAM_BOUND_ANNOTATION = "llm-serving.io/stream-bound-seconds"
CONTRACT_MAX_MODEL_LEN_ANNOTATION = "llm-serving.io/contract-max-model-len"
CONTRACT_MAX_INPUT_TOKENS_ANNOTATION = "llm-serving.io/contract-max-input-tokens"
CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION = "llm-serving.io/contract-max-output-tokens"
#: On each InferenceObjective: "true" when its class may be shed (the picker sheds exactly priority < 0).
SHEDDABLE_ANNOTATION = "llm-serving.io/sheddable"
SCRIPTS_SHA_ANNOTATION = "llm-serving.io/scripts-sha256"
#: The releases a co-host pod serves (comma-separated): it serves several, so it carries no release label.
RELEASES_ANNOTATION = "llm-serving.io/releases"
#: Name of the init container that verifies the release's weights against its manifest before vLLM starts.
VERIFY_CONTAINER = "verify-release"

# ---- GPU nodes -------------------------------------------------------------------------------------------------
GPU_RESOURCE = "nvidia.com/gpu"
#: Taint of every GPU node: only pods that tolerate it (the model servers) land there.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NoSchedule"
#: Reservation-affinity key a node pool uses to consume a SPECIFIC_RESERVATION by name.
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"

# ---- ports and paths -------------------------------------------------------------------------------------------
#: vLLM's HTTP port on GKE: ``/health``, ``/v1/*``, ``/metrics`` (the InferencePool's target port).
VLLM_PORT = 8000
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
MODELS_PATH = "/v1/models"
#: vLLM's in-flight request count (``--enable-server-load-tracking``), read by the liveness probe.
LOAD_PATH = "/load"
#: Endpoint-picker ext-proc port (GAIE chart default ``extProcPort``): the gateway calls the picker on it.
EPP_EXT_PROC_PORT = 9002
#: Under this folder a mounted weights volume (Hyperdisk ML, GCS FUSE, Cloud Run's Cloud Storage volume) appears in
#: the serving container, read-only, at ``<model>/<revision>`` (:func:`weights_mount_path`): the volume's root is
#: the release's immutable ``gs://<bucket>/<model>/<revision>/`` folder.
WEIGHTS_MOUNT_ROOT = "/weights"


def weights_mount_path(weights_prefix: str) -> str:
    """``/weights/<model>/<revision>``: the same tail as the release's ``gs://`` folder, so the model root vLLM
    reports in ``/v1/models`` names the revision whichever way the weights arrive."""
    return f"{WEIGHTS_MOUNT_ROOT}/{weights_prefix.strip('/')}"


#: Request header GAIE's body-based router sets from the request body's ``model`` (its ``body-field-to-header``
#: plugin, GAIE v1.5.0 pkg/bbr/plugins/bodyfieldtoheader): the API route's per-model rules match it.
MODEL_NAME_HEADER = "X-Gateway-Model-Name"
#: The body-based router's Deployment / Service / ServiceAccount / GCPRoutingExtension, in the gateway's namespace.
BODY_ROUTER_NAME = "body-based-router"
#: Its ext_proc gRPC port and gRPC health port (GAIE v1.5.0 BBR defaults ``--grpc-port`` / ``--grpc-health-port``).
BODY_ROUTER_PORT = 9004
BODY_ROUTER_HEALTH_PORT = 9005

#: Request header that chooses a priority class (llm-d-router v0.10.0 pkg/epp/metadata/consts.go ``ObjectiveKey``;
#: the GAIE name ``x-gateway-inference-objective`` is still read as its deprecated alias ``OldObjectiveKey``).
OBJECTIVE_HEADER = "x-llm-d-inference-objective"
#: Response header naming why the router answered 429 / 503 itself (pkg/common/error/error.go
#: ``RequestDroppedReasonHeaderKey``): ``rejected-saturated``, ``rejected-ttl-expired``, ``rejected-no-endpoints``...
REQUEST_DROPPED_REASON_HEADER = "x-llm-d-request-dropped-reason"

# ---- co-hosting (components/cohost/server.py) --------------------------------------------------------------------
#: The co-host server's container in a group's pod.
COHOST_CONTAINER = "cohost"
#: Port of a group's first vLLM instance inside the co-host container (loopback only); instance k uses base + k. The
#: server itself listens on VLLM_PORT, where the InferencePool, the picker and the collectors reach every pod.
COHOST_INSTANCE_BASE_PORT = 8100
#: Engine type of a co-host pod (``ENGINE_TYPE_LABEL``): the group's picker reads the server's pod-level aggregates
#: (``cohost:*``) for it instead of one instance's vLLM series (GAIE v1.5.0 core-metrics-extractor engineConfigs).
COHOST_ENGINE_TYPE = "llm-serving-cohost"
#: The server's pod-level aggregates over its instances (``components/cohost/server.py`` AGGREGATES).
COHOST_NUM_REQUESTS_WAITING = "cohost:num_requests_waiting"
COHOST_NUM_REQUESTS_RUNNING = "cohost:num_requests_running"
COHOST_KV_CACHE_USAGE = "cohost:kv_cache_usage_perc"
#: The server's own gauge per instance: 1 while healthy (labels COHOST_INSTANCE_LABEL, COHOST_MODEL_LABEL).
COHOST_INSTANCE_UP = "cohost:instance_up"
#: Labels the server adds to every sample of an instance: the instance, and the model name clients send.
COHOST_INSTANCE_LABEL = "cohost_instance"
COHOST_MODEL_LABEL = "cohost_model"
#: Where a serving pod mounts its scripts ConfigMap, and the file names in it.
SCRIPTS_MOUNT_PATH = "/etc/llm-serving/scripts"
#: Where a Vertex AI co-host container's bootstrap writes the server and the release verifier before it runs the
#: server (Vertex mounts no ConfigMap): under /tmp, which must be writable wherever vLLM runs (PyTorch's compile
#: cache, ``torch._inductor`` ``cache_dir``, defaults to ``/tmp/torchinductor_<user>``).
VERTEX_SCRIPTS_DIR = "/tmp/llm-serving/scripts"
VERIFY_SCRIPT_FILE = "verify_release.py"
COHOST_SERVER_FILE = "cohost_server.py"
#: Liveness endpoint of the co-host server (200 while it runs; /health is 200 only while every instance is healthy).
LIVE_PATH = "/live"

# ---- vLLM metric names (vLLM 0.32 ``vllm/v1/metrics/loggers.py``) ------------------------------------------------
VLLM_NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"
VLLM_NUM_REQUESTS_RUNNING = "vllm:num_requests_running"
#: KV-cache usage gauge (0-1) since vLLM 0.9.2; the only name from 0.12 on.
VLLM_KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
#: The old KV-cache gauge: the only name up to 0.9.1, hidden in 0.11, removed in 0.12.
VLLM_KV_CACHE_USAGE_LEGACY = "vllm:gpu_cache_usage_perc"
#: LoRA adapters loaded / waiting (labels ``max_lora``, ``running_lora_adapters``, ``waiting_lora_adapters``).
VLLM_LORA_REQUESTS_INFO = "vllm:lora_requests_info"


# ---- object names ----------------------------------------------------------------------------------------------


def deployment_name(role: str) -> str:
    """Model-server Deployment of a pool; also its InferencePool, PDB, NetworkPolicy, HPA and picker Helm release."""
    return f"vllm-{role}"


def pool_name(role: str) -> str:
    """InferencePool of a pool (same name as its Deployment)."""
    return deployment_name(role)


def epp_release_name(role: str) -> str:
    """Helm release name of a pool's endpoint-picker chart: ``vllm-<role>-router``. Not the pool's own name, which
    the pickers of earlier versions were released under: a name of its own gives every chart object a new name, so
    ``pulumi up`` starts the new picker beside the one the pool points at, moves the pool to it, and deletes the old
    one last (docs/gke.md "Moving an existing stack to the llm-d Router")."""
    return f"{deployment_name(role)}-router"


#: Releases the pool's picker ran under before :func:`epp_release_name`: the pool's own name, with GAIE's
#: ``inferencepool`` chart v1.5.0 (pod label ``inferencepool: <release>-epp``, config/charts/epplib/templates/
#: _helpers.tpl ``gateway-api-inference-extension.selectorLabels``) or llm-d-router v0.10.0 (``EPP_POD_LABEL``).
PREVIOUS_EPP_POD_LABELS = ("inferencepool", EPP_POD_LABEL)


def previous_epp_pod_selectors(role: str) -> tuple[dict[str, str], ...]:
    """Pod labels of the pickers earlier versions ran for the pool. The model server's NetworkPolicy still admits
    them so that, while a stack moves, the old picker keeps scraping the model servers until the pool no longer
    points at it; they match nothing once the old release is deleted."""
    return tuple({key: f"{deployment_name(role)}-epp"} for key in PREVIOUS_EPP_POD_LABELS)


#: The picker chart cuts the release name to this many characters before it appends ``-epp`` (llm-d-router v0.10.0
#: ``routerlib/templates/_helpers.tpl`` ``llm-d-router.name``:
#: ``.Release.Name | default "default-pool" | lower | trim | trunc 40``, then ``-epp``).
EPP_RELEASE_NAME_CHARS = 40


def epp_name(role: str) -> str:
    """The pool's endpoint picker as the chart names its Deployment, Service and ServiceAccount: the release name,
    lower-cased, trimmed and cut to ``EPP_RELEASE_NAME_CHARS`` (Sprig's ``trunc``), then ``-epp``. The InferencePool's
    ``endpointPickerRef`` must name exactly this Service."""
    return f"{epp_release_name(role).lower().strip()[:EPP_RELEASE_NAME_CHARS]}-epp"


def scripts_config_map_name(role: str) -> str:
    """ConfigMap carrying a pool's in-pod scripts: the probes and the release verifier."""
    return f"{deployment_name(role)}-scripts"


def registry_prefix(project: str, region: str, repository_id: str) -> str:
    """``<region>-docker.pkg.dev/<project>/<repo>/``: where every serving image of the stack lives (an Artifact
    Registry Docker repository's host and path)."""
    return f"{region}-docker.pkg.dev/{project}/{repository_id}/"


# ---- in-cluster benchmark (``gke.bench``) ----------------------------------------------------------------------
#: Namespace of the benchmark Job, its KSA and NetworkPolicy. Outside ``POOL_NAMESPACE_PREFIX`` on purpose: no
#: selector meant for every pool namespace (dashboards, alerts) may match the load generator.
BENCH_NAMESPACE = "llm-bench"
#: Kubernetes service account of the benchmark pods: the Workload Identity principal that reads the benchmarked
#: release's folder and creates the measurement record.
BENCH_KSA = "bench"
#: ``COMPONENT_LABEL`` value of the benchmark pods; the benchmarked pool's NetworkPolicy admits exactly these.
BENCH_COMPONENT = "bench"
#: Folder of the weights bucket that holds measurement records written in the cluster (create-only).
BENCH_RECORD_PREFIX = "measurements/"


def bench_job_name(role: str) -> str:
    """The benchmark Job of a pool (in ``BENCH_NAMESPACE``)."""
    return f"bench-{role}"


def bench_service_name(role: str) -> str:
    """ClusterIP Service in the pool's namespace that the benchmark Job sends its load to."""
    return f"{deployment_name(role)}-bench"


def bench_record_object(stack: str, role: str, release: str) -> str:
    """Object name of the record the Job writes: ``measurements/<stack>-<role>-<release>.json``, the same name
    ``llm-serving bench fetch`` keeps it under in ``stacks/measurements/``."""
    return f"{BENCH_RECORD_PREFIX}{stack}-{role}-{release}.json"


# ---- Cloud Run target ------------------------------------------------------------------------------------------
#: vLLM's port on Cloud Run: the port Cloud Run sends requests to by default (it also sets ``PORT=8080``), and
#: the port the Managed Prometheus sidecar's default RunMonitoring config scrapes (``0.0.0.0:8080/metrics``,
#: GoogleCloudPlatform/run-gmp-sidecar confgenerator/config.go ``DefaultRunMonitoringConfig``).
CLOUD_RUN_VLLM_PORT = 8080
#: Container names inside a Cloud Run revision: the GPU-attached vLLM server and the metrics collector sidecar.
CLOUD_RUN_SERVING_CONTAINER = "vllm"
CLOUD_RUN_COLLECTOR_CONTAINER = "collector"
#: Volume names of a Cloud Run revision: the release folder (Cloud Storage volume, read-only) and, when the
#: weights are staged into memory, the in-memory volume holding the verified copy.
CLOUD_RUN_WEIGHTS_VOLUME = "weights"
CLOUD_RUN_STAGED_VOLUME = "staged-weights"
#: Where an in-memory staged copy of the release appears, at ``<model>/<revision>`` like a mounted one. Not
#: ``/dev/shm``: Cloud Run refuses volume mounts under /dev, /proc and /sys (Cloud Run "Configure Cloud Storage
#: volume mounts", disallowed paths); an in-memory volume elsewhere is the same tmpfs, sized and counted in memory.
STAGED_WEIGHTS_ROOT = "/staged-weights"


def staged_weights_path(weights_prefix: str) -> str:
    """``/staged-weights/<model>/<revision>``: the in-memory copy keeps the revision in the model root too."""
    return f"{STAGED_WEIGHTS_ROOT}/{weights_prefix.strip('/')}"


#: The read-only Cloud Storage volume of the programs a revision runs besides vLLM (release verifier, in-memory
#: stager), at their content-addressed folder of the stack's programs bucket, and where it is mounted.
CLOUD_RUN_PROGRAMS_VOLUME = "programs"
CLOUD_RUN_PROGRAMS_ROOT = "/opt/llm-serving"
#: Folder of the programs bucket holding each content-addressed set of programs (``programs/<16 hex>/``).
CLOUD_RUN_PROGRAMS_PREFIX = "programs"
#: Revision-template annotation with the full SHA-256 of everything else the template renders: a revision found
#: under the name this program chose is adopted only when it carries the same digest.
TEMPLATE_SHA_ANNOTATION = "llm-serving.io/template-sha256"


def cloud_run_programs_bucket(project: str, service: str) -> str:
    """Default name of the Cloud Run stack's programs bucket: ``<project>-<service>-run`` (at most 30 + 26 + 5 =
    61 characters, within Cloud Storage's 63)."""
    return f"{project}-{service}-run"


def gcp_label_key(key: str) -> str:
    """A naming-contract label key spelled as a Google Cloud resource label key (lower-case letters, digits, ``_``
    and ``-`` only): ``llm-serving.io/pool`` -> ``llm-serving-io-pool``."""
    return key.replace(".", "-").replace("/", "-")


def cloud_run_revision_tag(role: str) -> str:
    """Traffic tag of a pool's revision: ``https://<role>---<service>-<hash>.<region>.run.app`` reaches it whatever
    its traffic share (a 0 % canary included)."""
    return role


def cloud_run_service_account_id(service: str) -> str:
    """Account id of a Cloud Run service's dedicated serving identity."""
    return f"{service}-run"


# ---- resource names of list members -----------------------------------------------------------------------------


def member_key(member: str) -> str:
    """The part of a resource name that identifies one member of a configured list (an IAM principal, a notification
    channel): ``group:llm-api-clients@acme.example`` -> ``group-llm-api-clients-acme-example-1c2d3e4f``. A resource
    keyed by its member keeps its name, so its URN, when another member is added or removed; a name by list position
    would shift every later member onto another's resource (an IAM member's ``member`` forces replacement, and the
    delete of the shifted one revokes a grant that should stay). The slug keeps it readable (48 characters at most),
    8 hex of its SHA-256 keep two members whose slugs agree apart."""
    slug = re.sub(r"[^a-z0-9]+", "-", member.lower()).strip("-")[:48].rstrip("-")
    return f"{slug}-{hashlib.sha256(member.encode('utf-8')).hexdigest()[:8]}"


# ---- a fleet's other clusters ---------------------------------------------------------------------------------
#: A fleet's other region is the component ``fleet-<region>`` and its Kubernetes provider ``fleet-<region>-k8s``
#: (components/fleet.py): the offline inventory and the policy pack tell each cluster's objects apart by it.
FLEET_MEMBER_PREFIX = "fleet-"
K8S_PROVIDER_SUFFIX = "-k8s"


def fleet_member_name(region: str) -> str:
    return f"{FLEET_MEMBER_PREFIX}{region}"


def member_provider_region(provider_name: str) -> str | None:
    """The region whose fleet member cluster a Kubernetes provider of this name deploys to, or None (the config
    cluster's or a single-region stack's provider)."""
    if provider_name.startswith(FLEET_MEMBER_PREFIX) and provider_name.endswith(K8S_PROVIDER_SUFFIX):
        return provider_name[len(FLEET_MEMBER_PREFIX) : -len(K8S_PROVIDER_SUFFIX)] or None
    return None
