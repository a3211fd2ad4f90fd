"""Weight loading that several targets share: vLLM's Run:ai streamer reading the release's Cloud Storage folder.

Vertex AI pools and co-hosted groups (on either target) stream their weights this way; a GKE pool may also mount
them (``infra/targets/gke/config/pool.py`` ``WeightLoading``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Strict


class GcsStreamingLoading(Strict):
    """The weights streamed from the release's Cloud Storage folder by vLLM's Run:ai streamer (``--load-format
    runai_streamer``), after the verifier compared the folder's object metadata with the release manifest."""

    path: Literal["gcs_streaming"] = Field(
        description=(
            "``gcs_streaming``: vLLM reads gs://<bucket>/<model>/<revision>/ itself as the deployed model's service "
            "account (bucket read only); Vertex mounts no volume a custom container could load from."
        )
    )
    # 100,000 MiB/s: as for GKE, four times the fastest VM network; a figure in KiB/s is caught.
    throughput_mib_s: Annotated[float, Field(gt=0, le=100_000)] = Field(
        description=("Stated sustained streaming read throughput from Cloud Storage on this machine shape, MiB/s.")
    )
    # 7,200 s: Vertex's longest deployment timeout (aiplatform.v1 ModelContainerSpec.deploymentTimeout).
    engine_init_seconds: Annotated[int, Field(ge=0, le=7200)] = Field(
        description=(
            "Stated start-up time outside weight I/O (process start, KV-cache allocation, CUDA graphs / compile), s."
        )
    )
    streamer_concurrency: Annotated[int, Field(ge=1, le=256)] = Field(
        16,
        description=(
            'Run:ai streamer reader threads per process (``--model-loader-extra-config {"concurrency": N}``).'
        ),
    )
