"""serving-keeps-warm-minimum: every serving pool keeps its environment's warm floor, in the unit its target keeps
warm (the design: "scaling from zero is a poor default for an interactive SLO").

Replicas hold a whole copy of the model: a GKE HPA's ``minReplicas``, a Vertex AI deployment's
``dedicatedResources.minReplicaCount`` are judged against ``minReplicas``. Cloud Run instances:
a GPU service's ``template.scaling.minInstanceCount`` against ``minInstances`` (0 = may scale to zero).

The program's one definition of these floors is ``infra/config/environment.py`` (``WARM_MINIMUM``); the pack cannot
import it, so ``config/<env>.json`` repeats it and the defaults below (used without a config file: fail closed) are
prod's. ``tests/test_architecture.py`` keeps all of them equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind
from ._common import UNKNOWN, Res, as_int, resource_validator

NAME = "serving-keeps-warm-minimum"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: Prod's floors (``WARM_MINIMUM["prod"]``): the fail-closed defaults.
DEFAULT_MIN_REPLICAS = 2
DEFAULT_MIN_INSTANCES = 1
#: The config property (and its default) that bounds each unit.
PROPERTY = {"replica": ("minReplicas", DEFAULT_MIN_REPLICAS), "instance": ("minInstances", DEFAULT_MIN_INSTANCES)}
REMEDIATION = (
    f"Keep the environment's warm floor: a GKE HPA's minReplicas and a Vertex AI deployment's "
    f"dedicatedResources.minReplicaCount at least minReplicas ({DEFAULT_MIN_REPLICAS} in prod), a Cloud Run GPU "
    f"revision's scaling.minInstanceCount at least minInstances ({DEFAULT_MIN_INSTANCES} in prod): from zero, the "
    "first request after idle waits a whole GPU cold load."
)
FACTS: tuple[FactKind, ...] = ("warm_floors",)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    for adapter in ADAPTERS:
        for floor in adapter.warm_floors(res):
            if floor.value is UNKNOWN:
                continue
            key, default = PROPERTY[floor.unit]
            n, need = as_int(floor.value), int(cfg.get(key, default))
            if n is not None and n >= need:
                continue
            unit = floor.unit if need == 1 else f"{floor.unit}s"
            shown = "not set" if floor.value is None else f"{floor.value}"
            yield f"{floor.field} is {shown}: keep at least {need} warm {unit}; {floor.cold_start}"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving pools keep their environment's warm minimum of replicas (GKE, Vertex AI) or instances "
    "(Cloud Run).",
    validate=resource_validator(types_of(*FACTS), check),
    config_schema=PolicyConfigSchema(
        properties={
            "minReplicas": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MIN_REPLICAS,
                "description": "Least warm replicas of a pool: GKE HPA minReplicas, Vertex AI minReplicaCount "
                f"({DEFAULT_MIN_REPLICAS} in prod).",
            },
            "minInstances": {
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_MIN_INSTANCES,
                "description": "Least minInstanceCount of a Cloud Run serving revision "
                f"({DEFAULT_MIN_INSTANCES} in prod, 0 = scale to zero).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "autoscaling"],
)
