"""Serving pools: which release runs where, with what share of traffic and what replica bounds.

Stable and canary are separate pools (the design, "Rollouts Without Corrupting the Cache Boundary"): each
names one immutable release, a traffic weight and the target it runs on (``target``). The keys that only make
sense on one target live in that target's pool type (``infra/targets/<target>/config``); the root model the
registry builds (``infra/registry.py``) validates each pool as the discriminated union of every target's type.
"""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from pydantic import Field

from .base import Strict
from .pool import MEASUREMENTS_DIR, PoolCommon  # noqa: F401  (re-exported)

#: An OpenAI ``model`` value: what clients send. Lower-case so it cannot collide with a release id by case only.
PUBLIC_MODEL_NAME = r"^[a-z0-9]([-a-z0-9._]{0,62}[a-z0-9])?$"

PoolT = TypeVar("PoolT", bound=PoolCommon)


class ServingPools(Strict, Generic[PoolT]):
    """The pools of a stack and the one public model name every pool answers to. Generic over the pool type: the
    program reads pools as :class:`PoolCommon` and each target narrows to its own type."""

    model_name: Annotated[str, Field(pattern=PUBLIC_MODEL_NAME)] = Field(
        description=(
            "Public model name: the ``model`` clients send to every pool, whatever release serves them. Each pool's "
            "vLLM serves it beside its release id (``--served-model-name <release id> <model_name>``), so a weighted "
            "canary split never answers 404 and a rollout never asks clients to change names; responses carry the "
            "release id in ``model``, so the release that served a request stays identifiable. Must differ from every "
            "release id."
        )
    )
    stable: PoolT = Field(description="The pool serving the current release.")
    canary: PoolT | None = Field(None, description="Optional canary pool with a new release.")
    allow_mixed_split: bool = Field(
        False,
        description=(
            "Allow a weight split between pools of different base models / serving configurations. Off by default: KV "
            "caches and adapters belong to one base model and configuration (the design, cache compatibility)."
        ),
    )

    def items(self) -> list[tuple[str, PoolT]]:
        """(role, pool) for every configured pool, stable first."""
        return [("stable", self.stable)] + ([("canary", self.canary)] if self.canary else [])
