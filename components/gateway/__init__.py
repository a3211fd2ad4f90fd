"""GKE Inference Gateway (issue 5): Gateway, InferencePools per release, endpoint pickers, objectives, policies."""

from .component import InferenceGateway, InferenceGatewayArgs, PoolBackend, PoolBackendArgs, gateway_args

__all__ = ["InferenceGateway", "InferenceGatewayArgs", "PoolBackend", "PoolBackendArgs", "gateway_args"]
