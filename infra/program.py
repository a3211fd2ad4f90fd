"""Composition: typed config + capacity plan -> components. Each component derives its own properties."""

from __future__ import annotations

import pulumi

from components.gateway import InferenceGateway, gateway_args
from components.observability import Observability, observability_args
from components.platform import Platform, PlatformArgs
from components.project import ProjectServices, ProjectServicesArgs
from components.serving.model_server import ModelServer, ModelServerArgs

from .config import StackConfig
from .planning.sizing import plan_stack


def deploy(cfg: StackConfig) -> None:
    plan = plan_stack(cfg)
    services = ProjectServices("platform-services", ProjectServicesArgs(project=cfg.project))
    # The Google Cloud platform (issue 3). Later components consume its naming-contract attributes:
    # platform.k8s_provider, .serving_namespace, .model_server_ksa, .gpu_node_pools, .weights_bucket_name,
    # .hyperdisk_claims, .proxy_only_cidr, .cluster, .project_number, .workload_pool.
    platform = Platform("platform", PlatformArgs(cfg=cfg, plan=plan),
                        opts=pulumi.ResourceOptions(depends_on=[services]))
    # One vLLM model server per pool (issue 4): Deployment, readiness ConfigMap, PDB, NetworkPolicy.
    model_servers = {role: ModelServer(f"vllm-{role}", ModelServerArgs(
        role=role, release=cfg.release(pool.release), pool=pool, plan=plan.pools[role], contract=cfg.contract,
        namespace=platform.serving_namespace, service_account=platform.model_server_ksa,
        proxy_only_cidr=platform.proxy_only_cidr,
        hyperdisk_claim=platform.hyperdisk_claims.get(pool.release) if pool.loading.path == "hyperdisk_ml" else None,
        depends_on=(platform.serving_namespace_resource, platform.gpu_node_pools[pool.accelerator])),
        opts=pulumi.ResourceOptions(providers=[platform.k8s_provider])) for role, pool in cfg.pools()}
    # GKE Inference Gateway (issue 5): Gateway + address + TLS policy, per pool an InferencePool selecting that
    # release's pods, its endpoint picker (upstream chart), objectives and GKE policies; the weighted HTTPRoute.
    gateway = InferenceGateway("inference-gateway", gateway_args(
        cfg, platform.serving_namespace, subnetwork=platform.network.subnet.id, project_number=platform.project_number),
        provider=platform.k8s_provider, depends_on=[platform.serving_namespace_resource, *model_servers.values()])
    # Autoscaling and observability (issue 6): custom-metrics adapter, one HPA per pool scaling the model server's
    # Deployment vllm-<role> (which ignores spec.replicas: the HPA owns the count), the vLLM PodMonitoring,
    # dashboard and alert policies.
    observability = Observability("observability", observability_args(cfg, plan, platform.project_number),
                                  opts=pulumi.ResourceOptions(providers=[platform.k8s_provider],
                                                              depends_on=[platform.serving_namespace_resource]),
                                  scale_targets={role: ms.deployment for role, ms in model_servers.items()})

    pulumi.export("environment", cfg.environment)
    pulumi.export("releases", {r.release: {
        "model_revision": r.model_revision, "tokenizer_revision": r.tokenizer_revision, "image": r.image,
        "weight_manifest": r.weight_manifest, "max_model_len": r.max_model_len,
        "tensor_parallel_size": r.tensor_parallel_size, "sampling_defaults_version": r.sampling_defaults_version,
        "quantization": r.quantization, "dtype": r.dtype, "vllm_version": r.vllm_version,
    } for r in cfg.releases})
    pulumi.export("capacity", plan.to_dict())
    pulumi.export("enabled_services", services.enabled)
    pulumi.export("cluster", {"name": platform.cluster.name, "location": platform.gke.location,
                              "workload_pool": platform.workload_pool})
    pulumi.export("gateway", {"address": gateway.address_value, "hostnames": gateway.hostnames,
                              "pools": {role: b.pool_name for role, b in sorted(gateway.pools.items())}})
    pulumi.export("gpu_node_pools", {k: p.name for k, p in sorted(platform.gpu_node_pools.items())})
    pulumi.export("weights_bucket", platform.weights_bucket_name)
    pulumi.export("image_registry", platform.registry.prefix)
    pulumi.export("model_servers", {role: {
        "deployment": m.deployment_name, "release": m.release_id, "vllm_args": m.vllm_args,
        "startup_window_seconds": m.probes.startup_window_seconds,
        "termination_grace_seconds": m.termination_grace_seconds} for role, m in sorted(model_servers.items())})
    pulumi.export("autoscaling", {p.role: {"min_replicas": p.hpa.min_replicas, "max_replicas": p.hpa.max_replicas,
                                           "max_replicas_bound": p.hpa.max_reason} for p in observability.pools})
