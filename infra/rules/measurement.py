"""Rules about measurement records: a pool's record measured exactly what the pool deploys, it has an operating
point, and the pool keeps the replicas the measurement says the contract needs (with the one-replica spare)."""

from __future__ import annotations

from collections.abc import Iterator

from ..config.bench import DEFAULT_DURATION_S
from ..config.measurement import MIN_GOODPUT_SHARE, Measurement, args_sha256, identity_differences
from ..config.stack import StackConfig
from ..planning.plan import StackPlan
from . import Finding, rule


class _PoolFacts:
    """The identity a record must match: the pool's release, image, engine, machine (as its target plans it) and
    rendered args."""

    def __init__(self, plan: StackPlan, role: str) -> None:
        p = plan.pools[role]
        self.release = p.release.release
        self.image_digest = p.release.digest
        self.vllm_version = p.release.vllm_version
        self.machine_type, self.gpu_type = p.machine.machine_type, p.machine.gpu_type
        self.gpus_per_node = p.machine.gpus_per_node
        self.tensor_parallel_size = p.release.tensor_parallel_size
        self.vllm_args = tuple(p.vllm_args)
        self.vllm_args_sha256 = args_sha256(p.vllm_args)


@rule(needs={"serving", "environment"})
def adapted_args_only_in_dev(cfg: StackConfig) -> Iterator[Finding]:
    for role, pool in cfg.pools():
        if pool.measured_with_adapted_args is None:
            continue
        if pool.measured is None:
            yield (("serving", role, "measured_with_adapted_args"), "only with a measurement record (measured)")
        elif cfg.environment != "dev":
            yield (
                ("serving", role, "measured_with_adapted_args"),
                f"not in {cfg.environment}: a record of another server configuration may only size a dev stack",
            )


def contract_differences(record: Measurement, cfg: StackConfig) -> list[str]:
    """How the objectives and workload the record was judged under differ from the stack's contract (empty: the
    contract's). A record measured under looser objectives or other lengths would size the pool for another
    contract; one measured with shorter runs than the full DEFAULT_DURATION_S per rate (``--quick``, a smoke test)
    is accepted in dev only, where it is stated by the record's own ``workload.duration_floor_seconds``."""
    c = cfg.contract
    pairs: list[tuple[str, float, float]] = [
        ("slo.ttft_p95_ms", record.slo.ttft_p95_ms, c.ttft_p95_ms),
        ("slo.itl_p95_ms", record.slo.itl_p95_ms, c.itl_p95_ms),
        ("workload.prompt.contract_mean", record.workload.prompt.contract_mean, c.prompt_tokens.mean),
        ("workload.prompt.contract_p95", record.workload.prompt.contract_p95, c.prompt_tokens.p95),
        ("workload.output.contract_mean", record.workload.output.contract_mean, c.output_tokens.mean),
        ("workload.output.contract_p95", record.workload.output.contract_p95, c.output_tokens.p95),
    ]
    out = [f"{name}: record {have:g}, contract {want:g}" for name, have, want in pairs if have != want]
    if record.slo.min_goodput_share < MIN_GOODPUT_SHARE:
        out.append(f"slo.min_goodput_share: record {record.slo.min_goodput_share:g}, at least {MIN_GOODPUT_SHARE:g}")
    seconds = record.workload.duration_floor_seconds
    if seconds < DEFAULT_DURATION_S and cfg.environment != "dev":
        out.append(
            f"workload.duration_floor_seconds: record {seconds:g} s per rate, a measurement that sizes a "
            f"{cfg.environment} pool runs {DEFAULT_DURATION_S:g} s (shorter runs size dev stacks only)"
        )
    return out


def _differences(cfg: StackConfig, plan: StackPlan, role: str) -> list[str]:
    """How the pool's record differs from what the pool deploys and from the stack's contract (empty: it measured
    this pool under this contract)."""
    pool = dict(cfg.pools())[role]
    record = plan.measurements[role]
    return [
        *identity_differences(
            record, _PoolFacts(plan, role), accept_served=pool.measured_with_adapted_args is not None
        ),
        *contract_differences(record, cfg),
    ]


@rule(needs={"serving", "releases", "accelerators", "contract", "environment"}, plan=True)
def measurement_matches_pool(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """The record measured this release on this topology with these arguments, and found an operating point."""
    for role, record in sorted(plan.measurements.items()):
        pool = dict(cfg.pools())[role]
        where = ("serving", role, "measured")
        for diff in _differences(cfg, plan, role):
            yield where, f"{pool.measured} measured another configuration: {diff}"
        if record.operating_point is None:
            yield (
                where,
                (
                    f"{pool.measured} has no operating point ({record.no_operating_point_reason}): "
                    "nothing to size the pool from"
                ),
            )


@rule(needs={"serving", "releases", "accelerators", "contract", "environment"}, plan=True)
def warm_minimum_covers_the_measured_need(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """replicas = max(decode, prefill) + 1 at the contract's peak share of this pool: the HPA's warm minimum must
    hold them (a cold replica takes a cold load to arrive), and its maximum must reach them."""
    for role, p in sorted(plan.pools.items()):
        cap = p.capacity
        if cap.required_replicas is None:
            continue
        if role in plan.measurements and _differences(cfg, plan, role):
            continue  # a refused record sizes nothing: only its mismatch is reported
        need = (
            f"{cap.required_replicas} replicas (decode {cap.decode_replicas}, prefill {cap.prefill_replicas}, "
            f"+ 1 for a replica failure) at this pool's peak share of the contract's arrival rate"
        )
        if p.min_replicas < cap.required_replicas:
            yield (
                ("serving", role, p.MIN_KEY),
                f"{p.min_replicas} is below the measured need of {need}: raise it to {cap.required_replicas}, or "
                "lower the peak rate or weight if the contract changed",
            )
        if cap.max_replicas < cap.required_replicas:
            yield (("serving", role, p.MAX_KEY), f"{cap.max_replicas} cannot reach the measured need of {need}")
