"""Model co-hosting on GKE as seed 003 built it (issue 24): the shipped ``dev-cohost-gke`` stack planned by the real
program under the mock monitor. One pod per node of the group's own H100 node pool runs the co-host server
(components/cohost/server.py), owning the node's GPU; the server's configuration, rendered into the pod, starts the
two models' vLLM instances with their partitions; one InferencePool and the API route's per-model rules (the header
GAIE's body-based router sets) bring every request naming one of the models to the group's pods.

Figures are hand-computed here from the models' published shapes; every GKE-only rule has a failing config.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
import yaml

from components import naming
from components.cohost import server as srv
from components.gateway import objects as gw_objects
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.planrun import run_plan
from infra.offline.stackfile import ROOT, read_stack_file
from infra.planning.cohosting import GKE_ROLE_MAX_LENGTH
from infra.resolve import resolve_stack
from infra.targets.gke.planning import gke_part
from tests.test_gateway import find, only
from tests.test_policies import evaluate

from .conftest import one, planned

STACK = "dev-cohost-gke"
GiB = 2**30
MiB = 2**20
#: H100 80GB as the stack states it (usable GiB per GPU).
M = 79.6
#: FP8 weights by tensor precision: the quantised layers at 1 byte, embedding + lm_head (vocab x hidden, untied: two
#: matrices) at bf16's 2 bytes. Llama 3.1 8B: 2 x 128,256 x 4,096 = 1,050,673,152 embedding parameters; Mistral 7B
#: v0.3: 2 x 32,768 x 4,096 = 268,435,456.
E_LLAMA, E_MISTRAL = 2 * 128_256 * 4096, 2 * 32_768 * 4096
W_LLAMA = (8_030_000_000 - E_LLAMA) * 1 + E_LLAMA * 2  # 9,080,673,152 bytes = 8.46 GiB (not 7.48)
W_MISTRAL = (7_250_000_000 - E_MISTRAL) * 1 + E_MISTRAL * 2  # 7,518,435,456 bytes = 7.00 GiB
#: KV bytes per token: 2 x 32 layers x 8 KV heads x 128 x 2 bytes (bf16 cache) for both models.
K = 2 * 32 * 8 * 128 * 2
#: The dev contract's mean context: 600 prompt + 200 output tokens (50 KV blocks of 16).
MEAN = 800
MODELS = {
    "llama-3.1-8b": ("llama-3-1-8b-0", "llama-3.1-8b-fp8-2026-11-25.1", W_LLAMA, 8100),
    "mistral-7b": ("mistral-7b-0", "mistral-7b-v0.3-fp8-2026-11-25.1", W_MISTRAL, 8101),
}


def inv() -> dict[str, Any]:
    return planned(STACK)[2]


def values() -> dict[str, Any]:
    return json.loads(json.dumps(read_stack_file(STACK, ROOT / "stacks").values))


def issues(v: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, STACK, ROOT)
    return [str(i) for i in err.value.issues]


def _group(v: dict[str, Any]) -> dict[str, Any]:
    return v["llm-serving:cohosting"]["pair"]


def pod() -> dict[str, Any]:
    return only(inv(), "Deployment", "vllm-pair")["spec"]["template"]["spec"]


def server_document(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    (c,) = (spec or pod())["containers"]
    doc: dict[str, Any] = json.loads(c["args"][c["args"].index("--config-json") + 1])
    return doc


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# ---- sizing ------------------------------------------------------------------------------------------------------


def kv_tokens(weights_bytes: float) -> int:
    # partition 0.4 of 79.6 GiB - the weights (TP 1) - 2 GiB runtime overhead, in tokens of K bytes
    return math.floor((M * 0.4 * GiB - weights_bytes - 2 * GiB) / K)


def test_hand_arithmetic_of_the_two_partitions():
    # llama: 31.84 - 8.457 - 2 = 21.383 GiB -> 175,169 tokens; mistral: 31.84 - 7.002 - 2 = 22.838 GiB -> 187,088
    assert kv_tokens(W_LLAMA) == 175_169 and kv_tokens(W_MISTRAL) == 187_088
    assert (kv_tokens(W_LLAMA) // MEAN, kv_tokens(W_LLAMA) // 4096) == (218, 42)
    assert (kv_tokens(W_MISTRAL) // MEAN, kv_tokens(W_MISTRAL) // 4096) == (233, 45)
    _, plan, _ = planned(STACK)
    g = gke_part(plan).gke_groups()["pair"]
    llama, mistral = g.layout.models
    assert llama.weights_gib == pytest.approx(W_LLAMA / GiB) and round(llama.weights_gib, 2) == 8.46
    assert (llama.kv_tokens_per_instance, llama.max_seqs_at_mean_context, llama.max_seqs_at_max_model_len) == (
        175_169,
        218,
        42,
    )
    assert (mistral.kv_tokens_per_instance, mistral.max_seqs_at_max_model_len) == (187_088, 45)
    assert g.layout.partition_sum_per_gpu == (0.8,)


def test_one_pod_owns_the_nodes_gpu_and_runs_the_server_with_the_planners_document():
    spec = pod()
    (c,) = spec["containers"]
    assert c["command"] == ["python3", "/etc/llm-serving/scripts/cohost_server.py"]
    # The whole GPU of an a3-highgpu-1g: no time-sharing slot.
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" == c["resources"]["requests"]["nvidia.com/gpu"]
    assert spec["nodeSelector"] == {"llm-serving.io/accelerator": "h100-shared"}
    assert "initContainers" not in spec  # the server checks each release before it starts it
    cfg = srv.parse_config(server_document(spec))  # the server accepts exactly what the planner rendered
    assert (cfg.port, cfg.gpus, cfg.transient_reserve) == (naming.VLLM_PORT, 1, 0.1)
    assert cfg.engine_command == ("vllm", "serve")
    by_name = {i.public_name: i for i in cfg.instances}
    assert sorted(by_name) == sorted(MODELS)
    for name, (instance, release, w, port) in MODELS.items():
        i = by_name[name]
        assert (i.name, i.release, i.model_names, i.gpus, i.partition, i.port) == (
            instance,
            release,
            (release, name),
            (0,),
            0.4,
            port,
        )
        assert arg(list(i.args), "--max-num-seqs") == str(kv_tokens(w) // MEAN)  # 218 / 233
        assert (arg(list(i.args), "--host"), arg(list(i.args), "--gpu-memory-utilization")) == ("127.0.0.1", "0.4")
        model = arg(list(i.args), "--model")
        bucket, prefix = model[len("gs://") :].rstrip("/").split("/", 1)
        assert i.verify == (
            "python3",
            "/etc/llm-serving/scripts/verify_release.py",
            "gcs",
            "--bucket",
            bucket,
            "--prefix",
            prefix,
            "--expect-revision",
            prefix.rsplit("/", 1)[1],
        )
    # update_models: the pods follow the model set in the weights bucket.
    assert c["args"][2:] == [
        "--watch",
        "gs://acme-llm-dev-weights/cohosting/dev-cohost-gke/pair.json",
        "--poll-seconds",
        "30",
    ]
    cm = only(inv(), "ConfigMap", "vllm-pair-scripts")
    assert set(cm["data"]) == {"cohost_server.py", "verify_release.py"}


def test_probes_cover_the_staggered_start_of_both_instances():
    # Each instance: a metadata-only release check (10 s), its weights streamed at the stated 1,000 MiB/s, 90 s of
    # engine start-up; one after the other. Llama 9,080,673,152 B / 1000 MiB/s = 8.66 s; Mistral 7.17 s.
    llama = 10 + W_LLAMA / (1000 * MiB) + 90
    mistral = 10 + W_MISTRAL / (1000 * MiB) + 90
    assert (round(llama, 2), round(mistral, 2)) == (108.66, 107.17)
    required = (llama + mistral) * 1.5  # startup margin 0.5: 323.75 s
    window = math.ceil(required / 10) * 10  # period 10 s: 33 probes = 330 s
    (c,) = pod()["containers"]
    assert c["startupProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] == window == 330
    assert c["readinessProbe"]["httpGet"]["path"] == "/health" and c["livenessProbe"]["httpGet"]["path"] == "/live"
    cfg = srv.parse_config(server_document())
    # One instance may take its own cold load x 1.5 to answer /health; the restart window is the pod's window.
    assert cfg.start_timeout_seconds == math.ceil(llama * 1.5) == 163
    assert cfg.restart.window_seconds == 330 and cfg.restart.max_restarts == 3
    # SIGTERM: vLLM drains for the stream bound (--shutdown-timeout), the server waits 10 s more, the kubelet 15 s more.
    timeout = int(arg(list(cfg.instances[0].args), "--shutdown-timeout"))
    assert cfg.drain_seconds == timeout + 10
    assert pod()["terminationGracePeriodSeconds"] == c["lifecycle"]["preStop"]["sleep"]["seconds"] + timeout + 15


def test_node_pool_has_whole_gpus_and_room_for_the_surge_pod():
    node_pool = one(inv(), "gcp:container/nodePool:NodePool", "platform-gpu-h100-shared-pool")["inputs"]
    (acc,) = node_pool["nodeConfig"]["guestAccelerators"]
    assert "gpuSharingConfig" not in acc
    assert (acc["type"], acc["count"]) == ("nvidia-h100-80gb", 1)
    assert node_pool["autoscaling"]["totalMinNodeCount"] == 1 and node_pool["autoscaling"]["totalMaxNodeCount"] == 2


def test_the_groups_hpa_scales_on_the_servers_per_pod_aggregate():
    hpa = only(inv(), "HorizontalPodAutoscaler", "vllm-pair")["spec"]
    (metric,) = hpa["metrics"]
    assert metric["pods"]["metric"]["name"] == "prometheus.googleapis.com|cohost:num_requests_waiting|gauge"
    assert metric["pods"]["metric"]["name"].split("|")[1] == srv.AGGREGATES[0][0]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 1)


def test_the_servers_constants_are_the_naming_contracts():
    assert [a[0] for a in srv.AGGREGATES] == [
        naming.COHOST_NUM_REQUESTS_WAITING,
        naming.COHOST_NUM_REQUESTS_RUNNING,
        naming.COHOST_KV_CACHE_USAGE,
    ]
    assert [a[1] for a in srv.AGGREGATES] == [
        naming.VLLM_NUM_REQUESTS_WAITING,
        naming.VLLM_NUM_REQUESTS_RUNNING,
        naming.VLLM_KV_CACHE_USAGE,
    ]
    assert srv.ROUTED_PATHS == gw_objects.MODEL_ROUTED_PATH_PREFIXES
    assert (srv.INSTANCE_UP, srv.INSTANCE_LABEL, srv.MODEL_LABEL) == (
        naming.COHOST_INSTANCE_UP,
        naming.COHOST_INSTANCE_LABEL,
        naming.COHOST_MODEL_LABEL,
    )


# ---- routing by model name ---------------------------------------------------------------------------------------


def test_route_sends_each_model_name_to_the_groups_pool_and_everything_else_to_the_split():
    route = only(inv(), "HTTPRoute", "llm-api")
    weighted, *models = route["spec"]["rules"]
    assert all("headers" not in m for m in weighted["matches"])
    assert {b["name"] for b in weighted["backendRefs"]} == {"vllm-stable", "vllm-canary"}
    router = only(inv(), "Deployment", "body-based-router")["spec"]["template"]["spec"]
    (bbr,) = router["containers"]
    plugin = json.loads(bbr["args"][bbr["args"].index("--plugin") + 1].split(":", 2)[2])
    header = plugin["headerName"]
    assert plugin["fieldName"] == "model"
    seen = {}
    for rule in models:
        (backend,) = rule["backendRefs"]
        names = set()
        for m in rule["matches"]:
            (h,) = m["headers"]
            assert (h["type"], h["name"]) == ("Exact", header)
            names.add(h["value"])
        (name,) = names
        assert [m["path"]["value"] for m in rule["matches"]] == ["/v1/chat/completions", "/v1/completions"]
        seen[name] = (backend["name"], backend["namespace"])
    assert seen == {"llama-3.1-8b": ("vllm-pair", "llm-serving-pair"), "mistral-7b": ("vllm-pair", "llm-serving-pair")}
    # one InferencePool for the group, selecting exactly its Deployment's pods
    (pool,) = [p for p in find(inv(), "InferencePool") if p["metadata"]["namespace"] == "llm-serving-pair"]
    dep = only(inv(), "Deployment", "vllm-pair")
    assert pool["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]


def _picker_config(role: str) -> dict[str, Any]:
    (chart,) = [
        r["inputs"]
        for r in inv()["resources"]
        if r["type"] == "kubernetes:helm.sh/v4:Chart" and r["inputs"]["name"] == f"vllm-{role}-router"
    ]
    ext = chart["values"]["router"]["epp"]
    doc: dict[str, Any] = yaml.safe_load(ext["pluginsCustomConfig"][ext["pluginsConfigFile"]])
    return doc


def test_the_groups_picker_reads_the_servers_pod_aggregates():
    labels = only(inv(), "Deployment", "vllm-pair")["spec"]["template"]["metadata"]["labels"]
    assert labels["inference.networking.k8s.io/engine-type"] == "llm-serving-cohost"
    vllm = {
        "name": "vllm",
        "queuedRequestsSpec": "vllm:num_requests_waiting",
        "runningRequestsSpec": "vllm:num_requests_running",
        "kvUsageSpec": "vllm:kv_cache_usage_perc",
        "loraSpec": "vllm:lora_requests_info",
        "cacheInfoSpec": "",
    }
    (ext,) = [p for p in _picker_config("pair")["plugins"] if p["type"] == "core-metrics-extractor"]
    # The pods keep GAIE's engine label: the llm-d Router v0.10.0 extractor's default key is llm-d.ai/engine-type,
    # so the key is stated.
    assert ext["parameters"]["engineLabelKey"] == "inference.networking.k8s.io/engine-type"
    assert ext["parameters"]["engineConfigs"] == [
        vllm,
        {
            "name": "llm-serving-cohost",
            "queuedRequestsSpec": "cohost:num_requests_waiting",
            "runningRequestsSpec": "cohost:num_requests_running",
            "kvUsageSpec": "cohost:kv_cache_usage_perc",
            "loraSpec": "",
            "cacheInfoSpec": "",
        },
    ]
    # the plain pools' pickers map vLLM's own names only
    (plain,) = [p for p in _picker_config("stable")["plugins"] if p["type"] == "core-metrics-extractor"]
    assert plain["parameters"]["engineConfigs"] == [vllm]


def test_body_router_is_wired_to_the_gateway_and_runs_restricted():
    (gateway,) = find(inv(), "Gateway")
    ext = only(inv(), "GCPRoutingExtension", "body-based-router")
    assert ext["metadata"]["namespace"] == gateway["metadata"]["namespace"]
    assert ext["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway["metadata"]["name"]}
    ]
    (chain,) = ext["spec"]["extensionChains"]
    (e,) = chain["extensions"]
    svc = only(inv(), "Service", "body-based-router")
    (port,) = svc["spec"]["ports"]
    assert e["backendRef"] == {"group": "", "kind": "Service", "name": svc["metadata"]["name"], "port": port["port"]}
    assert e["requestBodySendMode"] == "FullDuplexStreamed" and e["failOpen"] is True  # dev's picker: FailOpen
    spec = only(inv(), "Deployment", "body-based-router")["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert "--streaming" in c["args"]
    assert port["targetPort"] in [p["containerPort"] for p in c["ports"]]
    hc = only(inv(), "HealthCheckPolicy", "body-based-router")["spec"]
    assert hc["default"]["config"]["grpcHealthCheck"]["port"] == c["readinessProbe"]["grpc"]["port"]
    # Pod Security "restricted" (the gateway namespace enforces it)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["image"] == "registry.k8s.io/gateway-api-inference-extension/bbr:v1.5.0"


# What GAIE v1.5.0's router needs of its pod, read in its source (cmd/bbr/runner/runner.go and the plugins it
# registers; controller-runtime v0.23.3, its go.mod's version):
#: Run() builds its manager from ctrl.GetConfig() whatever its plugins: without --kubeconfig or KUBECONFIG that is
#: rest.InClusterConfig (pkg/client/config/config.go loadConfig), which reads the pod's service-account token and CA.
ROUTER_NEEDS_TOKEN = True
#: Run() confines the manager's cache to $NAMESPACE when set (cache.Options.DefaultNamespaces), as the chart does.
ROUTER_NAMESPACE_ENV = "NAMESPACE"
#: What each plugin lists and watches through the manager (apiGroup, resource, verbs): body-field-to-header's factory
#: ignores its handle; base-model-to-header reconciles ConfigMaps (basemodelextractor/configmap_reconciler.go, and
#: the chart's templates/rbac.yaml grants get/list/watch on configmaps for it).
ROUTER_PLUGIN_READS = {
    "body-field-to-header": set(),
    "base-model-to-header": {("", "configmaps", "get"), ("", "configmaps", "list"), ("", "configmaps", "watch")},
}


def router_requirements_met(resources: list[dict[str, Any]]) -> list[str]:
    """What the rendered router lacks of what its source requires (empty: it can start and read what it must)."""
    deps = [r["inputs"] for r in resources if r["type"] == "kubernetes:apps/v1:Deployment"]
    (dep,) = [d for d in deps if d["metadata"]["name"] == naming.BODY_ROUTER_NAME]
    spec = dep["spec"]["template"]["spec"]
    sa_name = spec["serviceAccountName"]
    (sa,) = [
        r["inputs"]
        for r in resources
        if r["type"] == "kubernetes:core/v1:ServiceAccount" and r["inputs"]["metadata"]["name"] == sa_name
    ]
    missing = []
    mounted = spec.get("automountServiceAccountToken", sa.get("automountServiceAccountToken", True))
    if ROUTER_NEEDS_TOKEN and mounted is not True:
        missing.append("the pod does not mount its service-account token: ctrl.GetConfig() fails in the cluster")
    (c,) = spec["containers"]
    env = {e["name"]: e for e in c.get("env", [])}
    if (
        env.get(ROUTER_NAMESPACE_ENV, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        != "metadata.namespace"
    ):
        missing.append("NAMESPACE is not the pod's namespace: the manager's cache would watch every namespace")
    plugins = [c["args"][i + 1].split(":", 1)[0] for i, a in enumerate(c["args"]) if a == "--plugin"]
    needed = set().union(*(ROUTER_PLUGIN_READS[p] for p in plugins)) if plugins else set()
    ns = dep["metadata"]["namespace"]
    roles = {
        r["inputs"]["metadata"]["name"]: r["inputs"]
        for r in resources
        if r["type"] == "kubernetes:rbac.authorization.k8s.io/v1:Role" and r["inputs"]["metadata"]["namespace"] == ns
    }
    granted: set[tuple[str, str, str]] = set()
    for r in resources:
        if r["type"] != "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding":
            continue
        b = r["inputs"]
        if any(s["name"] == sa_name and s["namespace"] == ns for s in b["subjects"]) and b["roleRef"]["name"] in roles:
            for rule in roles[b["roleRef"]["name"]]["rules"]:
                granted |= {(g, res, v) for g in rule["apiGroups"] for res in rule["resources"] for v in rule["verbs"]}
    for need in sorted(needed - granted):
        missing.append(f"no Role lets the router {need[2]} {need[1]} in {ns}")
    return missing


def test_the_rendered_router_has_the_api_access_its_source_requires():
    rs = copy.deepcopy(inv()["resources"])
    assert router_requirements_met(rs) == []
    assert [r for r in rs if r["type"].startswith("kubernetes:rbac") and "body-based-router" in r["name"]] == []


def test_the_router_check_fails_without_the_token_or_with_an_unreadable_plugin():
    rs = copy.deepcopy(inv()["resources"])
    (dep,) = [
        r["inputs"]
        for r in rs
        if r["type"] == "kubernetes:apps/v1:Deployment" and r["name"].startswith("inference-gateway-body-router")
    ]
    dep["spec"]["template"]["spec"]["automountServiceAccountToken"] = False  # what the program rendered before
    assert router_requirements_met(rs) == [
        "the pod does not mount its service-account token: ctrl.GetConfig() fails in the cluster"
    ]
    dep["spec"]["template"]["spec"]["automountServiceAccountToken"] = True
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    c["args"] += ["--plugin", "base-model-to-header:base-model-mapper"]
    assert router_requirements_met(rs) == [
        "no Role lets the router get configmaps in llm-serving",
        "no Role lets the router list configmaps in llm-serving",
        "no Role lets the router watch configmaps in llm-serving",
    ]


def test_the_programs_plugin_table_is_the_tests():
    assert {p: {(g, r, v) for g, r, vs in w for v in vs} for p, w in gw_objects.BODY_ROUTER_PLUGIN_WATCHES.items()} == (
        ROUTER_PLUGIN_READS
    )
    assert gw_objects.body_router_rbac_rules() == []


def test_stacks_without_gke_groups_render_no_router():
    for stack in ("dev", "staging", "prod"):
        assert find(planned(stack)[2], "GCPRoutingExtension") == []
        assert len(only(planned(stack)[2], "HTTPRoute", "llm-api")["spec"]["rules"]) == 1


# ---- refusals ----------------------------------------------------------------------------------------------------


def test_gpu_sharing_is_refused():
    v = values()
    v["llm-serving:accelerators"]["h100-shared"]["gpu_sharing"] = {
        "strategy": "TIME_SHARING",
        "max_shared_clients_per_gpu": 2,
    }
    assert issues(v) == [
        "llm-serving:accelerators.h100-shared.gpu_sharing: cohosting.pair's pod requests all 1 GPU(s) of its node "
        "and places its instances on them itself; on a TIME_SHARING node pool a container may request at most one "
        "shared GPU: remove gpu_sharing"
    ]


def test_partitions_on_one_gpu_are_bounded_by_the_transient_reserve():
    v = values()
    _group(v)["models"][0]["gpu_memory_partition"] = 0.5
    _group(v)["models"][1]["gpu_memory_partition"] = 0.45
    assert issues(v) == [
        "llm-serving:cohosting.pair.models: the partitions on GPU 0 sum to 0.95 (llama-3.1-8b 0.5 + mistral-7b 0.45), "
        "above 1 - transient_reserve 0.1 = 0.9: lower the partitions or place fewer instances"
    ]


def _two_gpu_node(v: dict[str, Any]) -> None:
    v["llm-serving:accelerators"]["h100-shared"].update(machine_type="a3-highgpu-2g", gpus_per_node=2)


def test_data_parallel_instances_are_placed_on_the_nodes_gpus():
    # Two Llama instances and one Mistral on a 2-GPU node: llama-3-1-8b-0 on GPU 0, -1 on GPU 1, mistral on GPU 0.
    v = values()
    _two_gpu_node(v)
    _group(v)["models"][0]["instances"] = 2
    run = resolve_stack(v, STACK, ROOT)
    g = gke_part(run.plan).gke_groups()["pair"]
    assert [(i.name, i.gpus, i.port) for i in g.server.instances] == [
        ("llama-3-1-8b-0", (0,), 8100),
        ("llama-3-1-8b-1", (1,), 8101),
        ("mistral-7b-0", (0,), 8102),
    ]
    assert g.layout.partition_sum_per_gpu == (0.8, 0.4)
    assert srv.parse_config(json.loads(g.server_json)).gpus == 2
    # three cold loads in turn: the startup window grows with every instance
    assert g.probes.cold_load_seconds == pytest.approx(
        2 * (10 + W_LLAMA / (1000 * MiB) + 90) + 10 + W_MISTRAL / (1000 * MiB) + 90
    )


def test_a_release_whose_tensor_parallelism_does_not_divide_the_node_is_refused():
    v = values()
    path = ROOT / "stacks/releases/dev/mistral-7b-v0.3-fp8-2026-11-25.1.json"
    rel = json.loads(path.read_text())
    rel["tensor_parallel_size"] = 2
    v["llm-serving:releases"][3] = rel
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].release: release 'mistral-7b-v0.3-fp8-2026-11-25.1' runs on "
        "tensor_parallel_size 2, which does not divide the machine's 1 GPU(s): its instances cannot be placed on "
        "whole GPU sets"
    ]


def test_one_instance_alone_is_a_pool_not_a_group():
    v = values()
    del _group(v)["models"][1]
    assert issues(v) == [
        "llm-serving:cohosting.pair.models: a group runs at least 2 instances (one instance alone is a pool), got 1"
    ]
    _group(v)["models"][0]["instances"] = 2
    _two_gpu_node(v)
    g = gke_part(resolve_stack(v, STACK, ROOT).plan).gke_groups()["pair"]
    assert [i.name for i in g.server.instances] == ["llama-3-1-8b-0", "llama-3-1-8b-1"]


def test_the_groups_releases_run_one_image():
    v = values()
    path = ROOT / "stacks/releases/dev/mistral-7b-v0.3-fp8-2026-11-25.1.json"
    rel = json.loads(path.read_text())
    rel["image"] = rel["image"].replace("b374dfda", "c374dfda")
    rel.pop("image_digest")
    v["llm-serving:releases"][3] = rel
    (msg,) = issues(v)
    assert msg.startswith(
        "llm-serving:cohosting.pair.models[1].release: release 'mistral-7b-v0.3-fp8-2026-11-25.1' runs image"
    )
    assert msg.endswith("the group's instances run in one container")


def test_the_group_needs_a_node_pool_of_its_own():
    v = values()
    _group(v)["accelerator"] = "l4"
    assert (
        "llm-serving:cohosting.pair.accelerator: 'l4' is also the accelerator of serving.stable: a gke group "
        "needs a node pool of its own"
    ) in issues(v)


def test_gke_groups_take_no_endpoint_ids():
    v = values()
    _group(v)["endpoint_id"] = "llm-dev-pair"  # a Vertex group's endpoint: the GKE gateway routes by model name
    assert issues(v) == ["llm-serving:cohosting.pair.endpoint_id: unknown key (not part of the schema)"]


def test_names_the_group_and_its_instances_take():
    v = values()
    v["llm-serving:cohosting"]["canary"] = v["llm-serving:cohosting"].pop("pair")
    assert "llm-serving:cohosting.canary: the group key 'canary' would name the namespace of serving.canary" in issues(
        v
    )
    v = values()
    _group(v)["models"][0]["model_name"] = "mistral.7b"
    assert issues(v) == [
        "llm-serving:cohosting.pair.models[1].model_name: 'mistral-7b' and 'mistral.7b' both name the instances "
        "mistral-7b-<n> ('.' and '_' become '-')"
    ]
    v = values()
    longest = "m" * GKE_ROLE_MAX_LENGTH
    _group(v)["models"][0]["model_name"] = longest
    g = gke_part(resolve_stack(v, STACK, ROOT).plan).gke_groups()["pair"]
    assert len(g.server.instances[0].name) == GKE_ROLE_MAX_LENGTH + 2 <= 63  # a DNS label with its "-0"
    _group(v)["models"][0]["model_name"] = longest + "m"
    assert issues(v) == [
        f"llm-serving:cohosting.pair.models[0].model_name: '{longest}m' names the instances {longest}m-<n>: at most "
        f"{GKE_ROLE_MAX_LENGTH} characters, got {GKE_ROLE_MAX_LENGTH + 1}"
    ]


def test_reservation_must_hold_the_surge_node():
    v = values()
    acc = v["llm-serving:accelerators"]["h100-shared"]
    acc["spot"] = False
    acc["reservation"] = {"mode": "create", "name": "llm-dev-h100-shared", "count": 1}
    assert (
        "llm-serving:accelerators.h100-shared.reservation.count: 1 reserved node(s) cannot hold cohosting.pair's "
        "max_replicas 1 + 1 rollout surge node = 2"
    ) in issues(v)


# ---- the policy pack reads the server's configuration ------------------------------------------------------------


def _resources() -> list[dict[str, Any]]:
    return copy.deepcopy(inv()["resources"])


def _edit_document(rs: list[dict[str, Any]], edit: Any) -> None:
    (d,) = [
        r["inputs"]
        for r in rs
        if r["type"] == "kubernetes:apps/v1:Deployment" and r["inputs"]["metadata"]["name"] == "vllm-pair"
    ]
    (c,) = d["spec"]["template"]["spec"]["containers"]
    at = c["args"].index("--config-json") + 1
    doc = json.loads(c["args"][at])
    edit(doc)
    c["args"][at] = json.dumps(doc)


def _set_flag(doc: dict[str, Any], i: int, flag: str, value: str) -> None:
    args = doc["instances"][i]["args"]
    args[args.index(flag) + 1] = value


def test_shipped_stack_passes_the_pack_through_the_analyzer(tmp_path, capsys):
    assert cli.main(["policy", "--stack", STACK, "--out", str(tmp_path)]) == 0
    assert "0 violation(s)" in capsys.readouterr().out


def test_policy_sums_the_partitions_the_server_places_on_one_gpu():
    rs = _resources()
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == []

    def overfill(d: dict[str, Any]) -> None:
        _set_flag(d, 0, "--gpu-memory-utilization", "0.6")
        _set_flag(d, 1, "--gpu-memory-utilization", "0.5")

    _edit_document(rs, overfill)
    assert evaluate("gpu-memory-shares-below-one", rs, {}) == [
        "vllm-pair-deployment: 2 vLLM instance(s) of co-host Deployment vllm-pair share GPU 0 of each pod and their "
        "--gpu-memory-utilization partitions sum to 1.1 = 0.6 (llama-3-1-8b-0) + 0.5 (mistral-7b-0): keep the sum at "
        "most 0.9 (1 - transient reserve 0.1)"
    ]


def test_policies_read_every_instances_command_line():
    rs = _resources()
    for name in (
        "vllm-output-capped",
        "max-model-len-within-contract",
        "vllm-no-request-logging",
        "serving-verifies-release",
        "serving-release-identity",
    ):
        assert evaluate(name, rs, {}) == [], name

    def edit(d: dict[str, Any]) -> None:
        args = d["instances"][1]["args"]
        at = args.index("--override-generation-config")
        del args[at : at + 2]
        _set_flag(d, 0, "--max-model-len", "8192")
        d["instances"][0]["args"].append("--enable-log-requests")
        d["instances"][1]["verify"] = []

    _edit_document(rs, edit)
    (capped,) = evaluate("vllm-output-capped", rs, {})
    assert capped.startswith(
        "vllm-pair-deployment: container 'cohost' instance 'mistral-7b-0': no server-side output cap: vLLM generates"
    )
    assert evaluate("max-model-len-within-contract", rs, {})[0].startswith(
        "vllm-pair-deployment: container 'cohost' instance 'llama-3-1-8b-0': --max-model-len is 8192, above the contract's"
    )
    assert evaluate("vllm-no-request-logging", rs, {})[0].startswith(
        "vllm-pair-deployment: container 'cohost' instance 'llama-3-1-8b-0' sets --enable-log-requests"
    )
    assert evaluate("serving-verifies-release", rs, {}) == [
        "vllm-pair-deployment: instance 'mistral-7b-0': its verify command does not run verify_release.py: the "
        "server would start weights nobody checked"
    ]


def test_redundant_routers_spread_and_keep_one_through_a_drain(tmp_path):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    doc["config"]["llm-serving:gateway"]["epp"]["replicas"] = 2
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc))
    rs = run_plan(STACK, tmp_path).inventory.to_dict()
    dep = only(rs, "Deployment", "body-based-router")
    assert dep["spec"]["replicas"] == 2
    (term,) = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    pdb = only(rs, "PodDisruptionBudget", "body-based-router")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": dep["spec"]["selector"]}
    # one router (the shipped dev stack): no budget, which would block every drain of its node
    assert find(inv(), "PodDisruptionBudget", "body-based-router") == []
    assert "affinity" not in only(inv(), "Deployment", "body-based-router")["spec"]["template"]["spec"]


# ---- monitoring per co-hosted model ------------------------------------------------------------------------------


def test_each_co_hosted_model_has_its_own_panels_and_alerts():
    alerts = [
        r["inputs"]["displayName"]
        for r in inv()["resources"]
        if r["type"] == "gcp:monitoring/alertPolicy:AlertPolicy" and "pair-" in r["inputs"]["displayName"]
    ]
    for model in ("pair-llama-3-1-8b", "pair-mistral-7b"):
        for name in ("TtftP95OverObjective", "ItlP95OverObjective", "KvCacheSaturated", "CoHostedInstancesMissing"):
            assert f"[dev] {name} ({model})" in alerts
    (board,) = [r["inputs"] for r in inv()["resources"] if r["type"] == "gcp:monitoring/dashboard:Dashboard"]
    text = board["dashboardJson"]
    assert 'model_name=\\"llama-3.1-8b-fp8-2026-11-25.1\\"' in text
    assert "Co-hosted mistral-7b (mistral-7b-v0.3-fp8-2026-11-25.1) in pair" in text
