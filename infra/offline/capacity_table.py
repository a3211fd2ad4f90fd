"""The capacity plan as a human table (one column per pool), for ``llm-serving capacity`` and the plan summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..planning.capacity import PoolCapacity
from ..planning.cohosting import Recipe
from ..planning.plan import StackPlan
from ..planning.tenants import TenantFit
from ..registry import REGISTRY, Registry

if TYPE_CHECKING:
    from ..config.stack import StackConfig


def _measured(plan: StackPlan, role: str) -> str:
    record = plan.measurements.get(role)
    op = record.operating_point if record is not None else None
    if op is None:
        return "unmeasured"
    bound = " (lower bound: sweep ended)" if op.limit == "sweep_end" else ""
    return (
        f"{op.output_tokens_per_s:.0f} / {op.input_tokens_per_s:.0f} at {op.achieved_rps:.3g} req/s "
        f"({op.offered_rps:g} offered){bound}"
    )


def tenant_line(fit: TenantFit) -> str:
    """The tenants' summed budgets against the capacity at the measured operating points, or "unmeasured"."""
    budgets = f"{fit.budget_requests_per_s:.3g} req/s, {fit.budget_output_tokens_per_s:,.0f} output tokens/s"
    if fit.capacity_requests_per_s is None or fit.capacity_output_tokens_per_s is None:
        pools = ", ".join(fit.unmeasured_pools) or "none carrying traffic"
        return f"tenant budgets: {budgets}; capacity unmeasured ({pools}): not checked"
    verdict = "fit" if fit.requests_fit and fit.output_tokens_fit else "DO NOT FIT"
    return (
        f"tenant budgets: {budgets}; capacity {fit.capacity_requests_per_s:.3g} req/s, "
        f"{fit.capacity_output_tokens_per_s:,.0f} output tokens/s (first to saturate: {fit.limiting_pool}): {verdict}"
    )


def render_table(plan: StackPlan, registry: Registry = REGISTRY) -> str:
    """Human capacity table (one column per pool): the rows every pool has, then each target's own rows (``-`` for
    another target's pools), then each target's lines (node arithmetic, co-hosted groups) and the warnings."""
    roles = sorted(plan.pools, key=lambda r: (r != "stable", r))
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Callable[[PoolCapacity], str]) -> None:
        rows.append((label, [fn(plan.pools[r].capacity) for r in roles]))

    row("release", lambda p: p.release)
    row("accelerator", lambda p: f"{p.accelerator} (TP {p.tensor_parallel_size}, {p.replicas_per_node} replica/node)")
    row("weights / per GPU", lambda p: f"{p.weights_gib:.1f} GiB / {p.weight_shard_gib_per_device:.1f} GiB")
    row(
        "KV bytes/token (model / per GPU)",
        lambda p: f"{p.kv_bytes_per_token / 1024:.0f} KiB / {p.kv_bytes_per_token_per_device / 1024:.0f} KiB",
    )
    row("KV budget per GPU", lambda p: f"{p.kv_budget_gib_per_device:.1f} GiB ({p.kv_tokens_per_replica:,} tokens)")
    row("seqs @ max_model_len", lambda p: f"{p.max_seqs_at_max_model_len} @ {p.max_model_len}")
    row("seqs @ mean context", lambda p: f"{p.max_seqs_at_mean_context} @ {p.mean_context_tokens:.0f}")
    row("--max-num-seqs / batched tokens", lambda p: f"{p.max_num_seqs} / {p.max_num_batched_tokens}")
    row("cold load estimate", lambda p: f"{p.cold_load_seconds:.0f} s (verify {p.verify_seconds:.0f} s)")
    row("replica cost", lambda p: f"${p.replica_hourly_usd:.2f}/h")
    row("throughput", lambda p: p.throughput)
    row("measured θ_o / θ_i (tokens/s)", lambda p: _measured(plan, p.role))
    row(
        "decode / prefill replicas",
        lambda p: "unmeasured" if p.decode_replicas is None else f"{p.decode_replicas} / {p.prefill_replicas}",
    )
    row("required replicas (N+1)", lambda p: "unmeasured" if p.required_replicas is None else str(p.required_replicas))
    row("replica bounds", lambda p: f"{p.min_replicas}..{p.max_replicas}")
    row(
        "$ per 1M output tokens",
        lambda p: (
            "unmeasured"
            if p.cost_per_million_output_tokens_usd is None
            else f"${p.cost_per_million_output_tokens_usd:.2f}"
        ),
    )
    if any(plan.pools[r].capacity.cost_per_million_input_tokens_usd is not None for r in roles):
        row(
            "$ per 1M input tokens (prefill-bound)",
            lambda p: (
                "-" if p.cost_per_million_input_tokens_usd is None else f"${p.cost_per_million_input_tokens_usd:.2f}"
            ),
        )
    targets = [
        t
        for t in registry.targets
        if any(p.target == t.name for p in plan.pools.values())
        or any(g.target == t.name for g in plan.cohosting.values())
    ]
    for t in targets:
        rows += [(r.label, [r.values.get(role, "-") for role in roles]) for r in t.report_rows(plan)]
    width = max(len(label) for label, _ in rows)
    colw = [max(len(r), *(len(vals[i]) for _, vals in rows)) for i, r in enumerate(roles)]
    out = [" " * width + "  " + "  ".join(r.ljust(colw[i]) for i, r in enumerate(roles))]
    out += [label.ljust(width) + "  " + "  ".join(v.ljust(colw[i]) for i, v in enumerate(vals)) for label, vals in rows]
    for t in targets:
        out += t.report_lines(plan)
    if plan.tenants is not None:
        out.append(tenant_line(plan.tenants))
    for r in roles:
        for w in plan.pools[r].capacity.warnings:
            out.append(f"warning [{r}]: {w}")
    return "\n".join(line.rstrip() for line in out)


def deployable_recipes(
    cfg: StackConfig, release: str, accelerator: str, registry: Registry = REGISTRY
) -> list[tuple[Recipe, tuple[str, ...]]]:
    """The layouts of ``release`` on ``accelerator``'s machine that fit memory and that a target the stack serves that
    release on there can deploy, each with how (``Target.recipe_forms``); a layout whose tensor parallelism is not the
    release's needs a release file stating it (same weights, another identity)."""
    from ..planning.cohosting import recipes
    from ..planning.plan import release_geometry

    used = {p.target for _, p in cfg.pools() if p.release == release and p.accelerator_key() == accelerator}
    used |= {
        g.target
        for _, g in cfg.groups()
        if g.accelerator == accelerator and any(m.release == release for m in g.models)
    }
    targets = [t for t in registry.targets if t.name in used]
    rel, topo = cfg.release(release), cfg.accelerators[accelerator]
    mean = cfg.contract.prompt_tokens.mean + cfg.contract.output_tokens.mean
    out = []
    for r in recipes(release_geometry(rel), rel.max_model_len, topo.gpus_per_node, topo.gpu_memory_gib, mean):
        forms = tuple(f for t in targets for f in t.recipe_forms(r))
        if forms:
            out.append((r, forms))
    return out


def render_recipes(cfg: StackConfig, registry: Registry = REGISTRY) -> str:
    """``capacity --recipes``: for every release a pool or co-hosted group serves, on that pool's (group's) machine
    shape, the (instances x TP) layouts that fit memory and that the stack's targets can deploy, with per-instance
    concurrency and how each deploys. Offline and unmeasured: the benchmark picks the operating point of each
    candidate on a GPU (``llm-serving bench-layout``)."""
    pairs: list[tuple[str, str]] = []
    for _, pool in cfg.pools():
        acc = pool.accelerator_key()
        if acc is not None and acc in cfg.accelerators:
            pairs.append((pool.release, acc))
    for _, g in cfg.groups():
        pairs += [(m.release, g.accelerator) for m in g.models if g.accelerator in cfg.accelerators]
    mean = cfg.contract.prompt_tokens.mean + cfg.contract.output_tokens.mean
    lines: list[str] = []
    for release, key in sorted(set(pairs)):
        rel, topo = cfg.release(release), cfg.accelerators[key]
        lines.append(
            f"{release} on {key} ({topo.machine_type}, {topo.gpus_per_node} x {topo.gpu_type} of "
            f"{topo.gpu_memory_gib:g} GiB), max_model_len {rel.max_model_len}, mean context {mean:g}:"
        )
        found = deployable_recipes(cfg, release, key, registry)
        if not found:
            lines.append("  no layout the stack's targets can deploy fits memory")
            continue
        lines.append(
            "  instances x TP  per GPU set  partition  KV/GPU      seqs/instance @ mean  @ max_model_len  "
            "machine @ mean  deployable as"
        )
        for r, forms in found:
            how = "; ".join(forms)
            if r.tensor_parallel_size != rel.tensor_parallel_size:
                how += f" (a release with tensor_parallel_size {r.tensor_parallel_size})"
            lines.append(
                f"  {r.instances:>3} x TP {r.tensor_parallel_size:<3}   {r.instances_per_gpu_set:>2}        "
                f"   {r.partition:<9g}  {r.kv_budget_gib_per_gpu:6.2f} GiB  {r.max_seqs_at_mean_context:>20}  "
                f"{r.max_seqs_at_max_model_len:>15}  {r.machine_seqs_at_mean_context:>14}  {how}"
            )
    return "\n".join(lines)
