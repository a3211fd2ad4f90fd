"""A co-hosted group on Vertex AI: a deployment resource pool (aiplatform.v1 ``DeploymentResourcePool``: "resources
that can be shared by multiple DeployedModels") that every model's deployed model names in ``sharedResources``; each
model has its own endpoint, so a request reaches the model it names (a Vertex traffic split is by percentage, never by
model name)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from infra.config.base import check
from infra.config.cohosting import CoHostedGroupCommon


class CoHostedGroup(CoHostedGroupCommon):
    """A co-hosted group on Vertex AI: a deployment resource pool shared by the models' deployed models."""

    target: Literal["vertex"] = Field(
        description=("``vertex``: a Vertex AI deployment resource pool shared by the models' deployed models.")
    )
    shm_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        description="Shared memory (``/dev/shm``) per container, GiB."
    )
    startup_margin: Annotated[float, Field(ge=0, le=4)] = Field(
        0.5, description=("Extra fraction over each model's cold-load estimate its startup probe waits.")
    )

    @model_validator(mode="after")
    def _checks(self) -> CoHostedGroup:
        problems = self._common_problems(
            "a Vertex deployed model is one container, one vLLM server per replica: 1, "
            "got {got} (more instances need a GKE pod)"
        )
        for i, m in enumerate(self.models):
            if m.endpoint_id is None:
                problems.append((f"models.{i}.endpoint_id", "required on vertex: one endpoint per co-hosted model"))
        check(problems)
        return self
