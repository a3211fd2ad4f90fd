"""What each environment requires of a stack, defined once: the warm capacity every serving pool keeps.

The policy pack cannot import this module (it runs in its own process, from its own folder): its per-environment
files (``policies/config/<env>.json``: ``serving-keeps-warm-minimum.minReplicas`` and ``.minInstances``) and its
fail-closed defaults (prod's) carry the same numbers, and ``tests/test_architecture.py`` keeps them equal to this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Environment = Literal["dev", "staging", "prod"]


@dataclass(frozen=True)
class WarmMinimum:
    """The warm floor of a serving pool, by the unit its target keeps warm."""

    #: Replicas that each hold a whole copy of the model (GKE pods, Vertex AI replicas). Prod keeps 2: scaling from
    #: zero is a poor default for an interactive objective, and one replica cannot survive its own rollout, its
    #: node's maintenance or its loss.
    replicas: int
    #: Cloud Run instances. Prod keeps 1: from zero the first request after idle waits a whole cold load; Cloud
    #: Run replaces a lost instance by itself (it has no node maintenance to drain).
    instances: int


#: Per environment. dev and staging may scale to their schema floors (1 replica; 0 instances: scale to zero).
WARM_MINIMUM: dict[Environment, WarmMinimum] = {
    "dev": WarmMinimum(replicas=1, instances=0),
    "staging": WarmMinimum(replicas=1, instances=0),
    "prod": WarmMinimum(replicas=2, instances=1),
}
