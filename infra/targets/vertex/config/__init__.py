"""The ``vertex`` target's configuration: its pool type, its co-hosted group type and its root section
(``vertex``: the endpoint, its access and callers)."""

from __future__ import annotations

from infra.config.loading import GcsStreamingLoading as VertexLoading
from infra.config.stack import Section, StackConfig, section_of

from .cohosting import CoHostedGroup
from .endpoint import (
    CALLER_MEMBER_PATTERN,
    PUBLIC_MEMBERS,
    ROLE_PATTERN,
    TARGET,
    AutoscalingSignal,
    PrivateServiceConnectAccess,
    RequestResponseLoggingConfig,
    VertexAutoscaling,
    VertexConfig,
    VertexPool,
    VertexPricing,
)

__all__ = [
    "CALLER_MEMBER_PATTERN",
    "PUBLIC_MEMBERS",
    "ROLE_PATTERN",
    "SECTIONS",
    "TARGET",
    "AutoscalingSignal",
    "CoHostedGroup",
    "PrivateServiceConnectAccess",
    "RequestResponseLoggingConfig",
    "VertexAutoscaling",
    "VertexConfig",
    "VertexLoading",
    "VertexPool",
    "VertexPricing",
    "vertex_section",
]

SECTIONS = (
    Section(
        "vertex",
        VertexConfig,
        (
            "The Vertex AI endpoint the ``vertex`` pools are deployed models of: endpoint id, dedicated or Private "
            "Service Connect access, caller members, image repository; required when a pool or a co-hosted group "
            "targets ``vertex``."
        ),
    ),
)


def vertex_section(cfg: StackConfig) -> VertexConfig | None:
    """The stack's ``vertex`` section (None when absent)."""
    return section_of(cfg, "vertex", VertexConfig)
