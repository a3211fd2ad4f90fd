"""The endpoint picker's flow-control bounds, derived from the contract and a pool's plan (pure arithmetic).

With flow control on, the llm-d Router (v0.10.0) holds every request in a per-priority-band queue while its pool is
saturated and dispatches the highest band first as capacity frees (pkg/epp/flowcontrol/controller/internal/
processor.go ``dispatchCycle``). Two knobs bound that queue (apix/config/v1alpha1/endpointpickerconfig_types.go
``FlowControlConfig``):

* ``defaultRequestTTL``: one queue-wait budget for every request (the admission adapter passes no per-request or
  per-band TTL at v0.10.0, pkg/epp/requestcontrol/admission.go ``InitialEffectiveTTL`` returns 0). A request still
  queued after it is answered 429 ``rejected-ttl-expired`` (503 when the pool has no endpoint). It must leave the
  prefill inside the TTFT objective::

      prefill_ms = ceil(prompt_tokens.p95 / max_num_batched_tokens) x itl_p95_ms
      TTL_ms     = ttft_p95_ms - prefill_ms

  The p95 prompt needs that many chunked-prefill engine steps, and each step (decode of the running batch plus one
  prefill chunk) must stay within the ITL objective for the ITL promise to hold, so ``itl_p95_ms`` bounds a step.
* ``priorityBands[].maxRequests``: how many requests a band may hold queued; one more is answered 429
  ``rejected-saturated`` at once (processor.go ``hasCapacity``). A non-sheddable band holds what the pool drains
  within the TTL at its planned concurrency, so the last queued request still dispatches before its TTL::

      drain_rps      = replicas x max_num_seqs / ((ttft_p95_ms + output_tokens.mean x itl_p95_ms) / 1000)
      max_requests   = max(1, floor(TTL_ms / 1000 x drain_rps))     (queue wait of the last <= TTL)

  with ``replicas`` the pool's warm minimum (the slowest drain, before the HPA adds any). A sheddable band holds only
  what the pool may queue before the picker calls it saturated (``queue_target_per_pod x replicas``): once the pool
  is saturated the band fills and every further sheddable request is answered 429 at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.config.contract import WorkloadContract


@dataclass(frozen=True)
class PoolDrain:
    """What a pool's plan says about how fast it serves: its warm minimum and the sequences one replica runs."""

    replicas: int
    max_num_seqs: int
    max_num_batched_tokens: int


@dataclass(frozen=True)
class BandBound:
    priority: int
    max_requests: int


@dataclass(frozen=True)
class FlowControlBounds:
    prefill_ms: int
    request_ttl_ms: int
    drain_rps: float
    bands: tuple[BandBound, ...]


class FlowControlError(ValueError):
    """The contract leaves no queue-wait budget (the p95 prompt's prefill alone reaches the TTFT objective)."""


def prefill_ms(contract: WorkloadContract, max_num_batched_tokens: int) -> int:
    """Engine steps of the p95 prompt (one chunk of ``max_num_batched_tokens`` each) x the ITL objective per step."""
    return math.ceil(contract.prompt_tokens.p95 / max_num_batched_tokens) * contract.itl_p95_ms


def request_ttl_ms(contract: WorkloadContract, max_num_batched_tokens: int) -> int:
    """Queue-wait budget: the TTFT objective minus the p95 prompt's prefill."""
    ttl = contract.ttft_p95_ms - prefill_ms(contract, max_num_batched_tokens)
    if ttl <= 0:
        raise FlowControlError(
            f"the p95 prompt ({contract.prompt_tokens.p95} tokens) needs "
            f"{prefill_ms(contract, max_num_batched_tokens)} ms of prefill at {max_num_batched_tokens} tokens per "
            f"step and {contract.itl_p95_ms} ms per step, which leaves no queue wait within ttft_p95_ms "
            f"({contract.ttft_p95_ms})"
        )
    return ttl


def drain_rps(contract: WorkloadContract, pool: PoolDrain) -> float:
    """Requests a saturated pool completes per second: its running sequences over one mean request's duration."""
    mean_request_s = (contract.ttft_p95_ms + contract.output_tokens.mean * contract.itl_p95_ms) / 1000.0
    return pool.replicas * pool.max_num_seqs / mean_request_s


def flow_control_bounds(contract: WorkloadContract, pool: PoolDrain, queue_target_per_pod: int) -> FlowControlBounds:
    """One band per priority class (classes sharing a priority share a band, the router keys bands by priority)."""
    ttl = request_ttl_ms(contract, pool.max_num_batched_tokens)
    drain = drain_rps(contract, pool)
    interactive = max(1, math.floor(ttl / 1000.0 * drain))
    sheddable = max(1, queue_target_per_pod * pool.replicas)
    by_priority: dict[int, int] = {}
    for c in contract.priority_classes:
        by_priority[c.priority] = sheddable if c.sheddable else interactive
    bands = tuple(BandBound(p, n) for p, n in sorted(by_priority.items(), reverse=True))
    return FlowControlBounds(
        prefill_ms=prefill_ms(contract, pool.max_num_batched_tokens),
        request_ttl_ms=ttl,
        drain_rps=drain,
        bands=bands,
    )
