"""Vertex AI serving target: vLLM custom containers from the release's Cloud Storage folder, raw (OpenAI)
requests, a traffic split between pools and optional model co-hosting on a deployment resource pool.

* :mod:`.requests` - pure builders of the aiplatform.v1 REST bodies;
* :mod:`.provider` - Pulumi dynamic providers for what pulumi-gcp 10.2.0 lacks (model upload + deploy,
  traffic split, a resource pool with service account and reservation affinity);
* :mod:`.endpoint` - the :class:`VertexServing` component.
"""

from .endpoint import (CALLER_ROLE, CoHosted, ImageRepository, PrivateServiceConnect, VertexDeployment,
                       VertexServing, VertexServingArgs, VertexServingConfigError, serving_problems)
from .requests import (AUTOSCALING_METRICS, AutoscalingTarget, ContainerSpec, DedicatedResources, EnvVar,
                       HttpProbe, MachineSpec, ModelSpec, ReleaseArtifact, Reservation, ResourcePoolSpec, Scaling,
                       VertexRequestError, startup_probe, vertex_accelerator_type)

__all__ = [
    "AUTOSCALING_METRICS", "AutoscalingTarget", "CALLER_ROLE", "CoHosted", "ContainerSpec", "DedicatedResources",
    "EnvVar", "HttpProbe", "ImageRepository", "MachineSpec", "ModelSpec", "PrivateServiceConnect",
    "ReleaseArtifact", "Reservation", "ResourcePoolSpec", "Scaling", "VertexDeployment", "VertexRequestError",
    "VertexServing", "VertexServingArgs", "VertexServingConfigError", "serving_problems", "startup_probe",
    "vertex_accelerator_type",
]
