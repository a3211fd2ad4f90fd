"""A co-hosted group on Vertex AI, as seed 003 built co-hosting on it: **one** deployed model with dedicated resources
whose custom container runs the co-host server (``components/cohost/server.py``) on every GPU of its machine. The
server starts each model's instances as child processes on the GPU sets the planner placed them on, each in its
memory partition, and routes every request by the ``model`` its body names; the group has one endpoint, so clients
reach every co-hosted model through it by name.

Why not a deployment resource pool (aiplatform.v1 ``DeploymentResourcePool``, deployed models naming it in
``sharedResources``): Vertex AI's "Share resources across deployments" page, Limitations, says of deploying with
resource sharing that "custom containers aren't supported" (only prebuilt containers), and every model this program
uploads is a custom vLLM container. Why several instances per machine are allowed: ``MachineSpec.acceleratorCount``
is the accelerators of one replica's machine (aiplatform.v1), and what runs on them is the container's business.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from infra.config.base import check
from infra.config.cohosting import ENDPOINT_ID_PATTERN, CoHostedGroupCommon, UpdateModels


class CoHostedGroup(CoHostedGroupCommon):
    """A co-hosted group on Vertex AI: one deployed model running the co-host server on every GPU of its machine."""

    target: Literal["vertex"] = Field(
        description=(
            "``vertex``: one deployed model (dedicated resources: the whole machine) whose container runs the co-host "
            "server with every model; one endpoint, requests routed by the model name they send."
        )
    )
    endpoint_id: Annotated[str, Field(pattern=ENDPOINT_ID_PATTERN)] = Field(
        description=(
            "Vertex endpoint id of the group (2-26 characters): its one deployed model serves every model of the "
            "group, each by its model_name."
        )
    )
    shm_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        description="Shared memory (``/dev/shm``) of the container, GiB: every instance's PyTorch IPC shares it."
    )
    startup_margin: Annotated[float, Field(ge=0, le=4)] = Field(
        0.5,
        description=(
            "Extra fraction over the group's cold load (every instance's, one after another) its startup probe waits."
        ),
    )

    update_models: UpdateModels | None = Field(
        None,
        description=(
            "A model-set document in Cloud Storage every replica's co-host server follows (update_models, seed 003's "
            "hot reload); none: the plan's set only. The group's serving account may read that one object."
        ),
    )

    @model_validator(mode="after")
    def _checks(self) -> CoHostedGroup:
        check(self._common_problems())
        return self
