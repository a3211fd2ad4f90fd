"""Composition: typed config + capacity plan -> components. Each component derives its own properties."""

from __future__ import annotations

import pulumi

from components.project import ProjectServices, ProjectServicesArgs

from .config import StackConfig
from .sizing import plan_stack


def deploy(cfg: StackConfig) -> None:
    plan = plan_stack(cfg)
    services = ProjectServices("platform-services", ProjectServicesArgs(project=cfg.project))

    pulumi.export("environment", cfg.environment)
    pulumi.export("releases", {r.release: {
        "model_revision": r.model_revision, "tokenizer_revision": r.tokenizer_revision, "image": r.image,
        "weight_manifest": r.weight_manifest, "max_model_len": r.max_model_len,
        "tensor_parallel_size": r.tensor_parallel_size, "sampling_defaults_version": r.sampling_defaults_version,
        "quantization": r.quantization, "dtype": r.dtype, "vllm_version": r.vllm_version,
    } for r in cfg.releases})
    pulumi.export("capacity", plan.to_dict())
    pulumi.export("enabled_services", services.enabled)
