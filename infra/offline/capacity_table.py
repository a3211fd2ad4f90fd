"""The capacity plan as a human table (one column per pool), for ``llm-serving capacity`` and the plan summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..planning.capacity import PoolCapacity
from ..planning.plan import CloudRunPoolPlan, StackPlan, VertexPoolPlan

if TYPE_CHECKING:
    from ..config.stack import StackConfig
    from ..planning.cohosting import GroupLayout


def _measured(plan: StackPlan, role: str) -> str:
    record = plan.measurements.get(role)
    op = record.operating_point if record is not None else None
    if op is None:
        return "unmeasured"
    bound = " (lower bound: sweep ended)" if op.limit == "sweep_end" else ""
    return f"{op.output_tokens_per_s:.0f} / {op.input_tokens_per_s:.0f} at {op.offered_rps:g} req/s{bound}"


def render_table(plan: StackPlan) -> str:
    """Human capacity table (one column per pool)."""
    roles = sorted(plan.pools, key=lambda r: (r != "stable", r))
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Callable[[PoolCapacity], str]) -> None:
        rows.append((label, [fn(plan.pools[r].capacity) for r in roles]))

    row("release", lambda p: p.release)
    row("accelerator", lambda p: f"{p.accelerator} (TP {p.tensor_parallel_size}, {p.replicas_per_node} replica/node)")
    row("weights / per GPU", lambda p: f"{p.weights_gib:.1f} GiB / {p.weight_shard_gib_per_device:.1f} GiB")
    row("KV bytes/token (model / per GPU)", lambda p: f"{p.kv_bytes_per_token / 1024:.0f} KiB / {p.kv_bytes_per_token_per_device / 1024:.0f} KiB")
    row("KV budget per GPU", lambda p: f"{p.kv_budget_gib_per_device:.1f} GiB ({p.kv_tokens_per_replica:,} tokens)")
    row("seqs @ max_model_len", lambda p: f"{p.max_seqs_at_max_model_len} @ {p.max_model_len}")
    row("seqs @ mean context", lambda p: f"{p.max_seqs_at_mean_context} @ {p.mean_context_tokens:.0f}")
    row("--max-num-seqs / batched tokens", lambda p: f"{p.max_num_seqs} / {p.max_num_batched_tokens}")
    row("cold load estimate", lambda p: f"{p.cold_load_seconds:.0f} s (verify {p.verify_seconds:.0f} s)")
    row("replica cost", lambda p: f"${p.replica_hourly_usd:.2f}/h")
    row("throughput", lambda p: p.throughput)
    row("measured θ_o / θ_i (tokens/s)", lambda p: _measured(plan, p.role))
    row("decode / prefill replicas", lambda p: "unmeasured" if p.decode_replicas is None else f"{p.decode_replicas} / {p.prefill_replicas}")
    row("required replicas (N+1)", lambda p: "unmeasured" if p.required_replicas is None else str(p.required_replicas))
    row("replica bounds", lambda p: f"{p.min_replicas}..{p.max_replicas}")
    row("$ per 1M output tokens", lambda p: "unmeasured" if p.cost_per_million_output_tokens_usd is None else f"${p.cost_per_million_output_tokens_usd:.2f}")
    if any(plan.pools[r].capacity.cost_per_million_input_tokens_usd is not None for r in roles):
        row("$ per 1M input tokens (prefill-bound)", lambda p: "-" if p.cost_per_million_input_tokens_usd is None
            else f"${p.cost_per_million_input_tokens_usd:.2f}")
    runs = {r: p.cloud_run for r, p in plan.pools.items() if isinstance(p, CloudRunPoolPlan)}
    if runs:
        def run_row(label: str, fn: Callable[..., str]) -> None:
            rows.append((label, [fn(runs[r]) if r in runs else "-" for r in roles]))

        run_row("Cloud Run instance", lambda c: f"{c.gpu} x{c.gpu_count}, {c.cpu} vCPU, {c.memory_gib} GiB"
                f"{', no zonal redundancy' if c.zonal_redundancy_disabled else ''}")
        run_row("cold load (copy / verify / read / init)", lambda c: f"{c.copy_seconds:.0f} / {c.verify_seconds:.0f} / "
                f"{c.weights_read_seconds:.0f} / {c.engine_init_seconds:.0f} s")
        run_row("startup probe", lambda c: f"{c.probes.startup_initial_delay_seconds} s + {c.probes.startup_failure_threshold} x "
                f"{c.probes.startup_period_seconds} s = {c.probes.startup_window_seconds} s")
        run_row("concurrency / request timeout", lambda c: f"{c.concurrency} / {c.request_timeout_seconds} s")
        run_row("instance price", lambda c: f"${c.instance_second_usd:.6f}/s (${c.instance_hourly_usd:.2f}/h)")
        run_row("cold start cost", lambda c: f"${c.cold_start_usd:.4f} per cold start (min instances {c.min_instances}"
                f"{': scale to zero, the first request after idle waits it' if c.min_instances == 0 else ''})")
    vertex = {r: p.vertex for r, p in plan.pools.items() if isinstance(p, VertexPoolPlan)}
    if vertex:
        def vx_row(label: str, fn: Callable[..., str]) -> None:
            rows.append((label, [fn(vertex[r]) if r in vertex else "-" for r in roles]))

        vx_row("Vertex machine", lambda v: f"{v.machine_type} ({v.accelerator_count} x {v.gpu_type})"
               f"{', Spot' if v.spot else ''}")
        vx_row("reservation", lambda v: v.reservation_resource or "none")
        vx_row("Vertex replicas", lambda v: f"{v.min_replicas}..{v.max_replicas} ({v.max_reason})")
        vx_row("autoscaling", lambda v: f"{v.autoscaling_signal} target {v.autoscaling_target}")
        vx_row("startup probe / deployment timeout", lambda v: f"{v.startup_failure_threshold} x "
               f"{v.startup_period_seconds} s = {v.startup_window_seconds} s / {v.deployment_timeout_seconds} s")
    width = max(len(label) for label, _ in rows)
    colw = [max(len(r), *(len(vals[i]) for _, vals in rows)) for i, r in enumerate(roles)]
    out = [" " * width + "  " + "  ".join(r.ljust(colw[i]) for i, r in enumerate(roles))]
    out += [label.ljust(width) + "  " + "  ".join(v.ljust(colw[i]) for i, v in enumerate(vals)) for label, vals in rows]
    for name, ap in sorted(plan.accelerators.items()):
        a = ap.capacity
        reserved = "no reservation" if a.reserved_nodes is None else f"{a.reserved_nodes} reserved"
        out.append(f"nodes on {name}: {a.nodes_for_max_replicas} at max replicas ({a.max_replicas}), "
                   f"{a.nodes_for_max_plus_surge} with rollout surge; {reserved}")
    for key, vg in sorted(plan.vertex_groups().items()):
        m = vg.machine
        out.append(f"co-hosted group {key} ({vg.target}) on {m.machine_type} ({m.accelerator_count} x {m.gpu_type}), "
                   f"{m.min_replicas}..{m.max_replicas} machine(s): partitions per GPU "
                   f"{', '.join(f'{x:g}' for x in vg.layout.partition_sum_per_gpu)} (at most 1 - transient reserve "
                   f"{vg.layout.transient_reserve:g} = {1 - vg.layout.transient_reserve:g})")
        out += _placement_lines(vg.layout)
    for key, gg in sorted(plan.gke_groups().items()):
        out.append(f"co-hosted group {key} ({gg.target}) on accelerator {gg.accelerator} ({gg.layout.gpus_per_machine} "
                   f"GPU(s) per node, {gg.clients_per_gpu} time-shared clients per GPU), "
                   f"{gg.min_nodes}..{gg.max_nodes} node(s) incl. one rollout surge node: worst-case partitions on one "
                   f"GPU {gg.worst_case_partition_sum:g} (at most 1 - transient reserve "
                   f"{gg.layout.transient_reserve:g} = {1 - gg.layout.transient_reserve:g})")
        out += _placement_lines(gg.layout, {m.model_name: m.role for m in gg.models})
    for r in roles:
        for w in plan.pools[r].capacity.warnings:
            out.append(f"warning [{r}]: {w}")
    return "\n".join(line.rstrip() for line in out)


def _placement_lines(lay: "GroupLayout", roles: dict[str, str] | None = None) -> list[str]:
    out = []
    for p in lay.models:
        where = (f"pod of role {roles[p.model_name]} on one time-shared slot" if roles is not None
                 else f"{p.instances} x TP {p.tensor_parallel_size} on GPUs {' '.join(str(list(x)) for x in p.gpus)}")
        out.append(f"  {p.model_name} ({p.release}): partition {p.partition:g} = {p.preallocated_gib_per_gpu:.2f} "
                   f"GiB/GPU, {where}; weights {p.weight_shard_gib_per_gpu:.2f} GiB/GPU, "
                   f"KV budget {p.kv_budget_gib_per_gpu:.2f} GiB/GPU; {p.max_seqs_at_mean_context} seqs @ "
                   f"{p.mean_context_tokens:g} (useful {p.useful_concurrency}), {p.max_seqs_at_max_model_len} seqs "
                   f"@ max_model_len {p.max_model_len}")
    return out


def render_recipes(cfg: "StackConfig") -> str:
    """``capacity --recipes``: for every release a pool or co-hosted group serves, on that pool's (group's) machine
    shape, the (instances x TP) layouts that fit memory with per-instance concurrency. Offline and unmeasured: the
    benchmark picks the operating point of each candidate on a GPU."""
    from ..planning.cohosting import recipes
    from ..planning.plan import release_geometry

    pairs: list[tuple[str, str]] = []
    for _, pool in cfg.pools():
        acc = getattr(pool, "accelerator", None)
        if isinstance(acc, str) and acc in cfg.accelerators:
            pairs.append((pool.release, acc))
    for g in (cfg.cohosting or {}).values():
        pairs += [(m.release, g.accelerator) for m in g.models if g.accelerator in cfg.accelerators]
    mean = cfg.contract.prompt_tokens.mean + cfg.contract.output_tokens.mean
    lines: list[str] = []
    for release, key in sorted(set(pairs)):
        rel, acc = cfg.release(release), cfg.accelerators[key]
        lines.append(f"{release} on {key} ({acc.machine_type}, {acc.gpus_per_node} x {acc.gpu_type} of "
                     f"{acc.gpu_memory_gib:g} GiB), max_model_len {rel.max_model_len}, mean context {mean:g}:")
        found = recipes(release_geometry(rel), rel.max_model_len, acc.gpus_per_node, acc.gpu_memory_gib, mean)
        if not found:
            lines.append("  no layout fits memory")
        lines.append("  instances x TP  per GPU set  partition  KV/GPU      seqs/instance @ mean  @ max_model_len  "
                     "machine @ mean")
        for r in found:
            lines.append(f"  {r.instances:>3} x TP {r.tensor_parallel_size:<3}   {r.instances_per_gpu_set:>2}        "
                         f"   {r.partition:<9g}  {r.kv_budget_gib_per_gpu:6.2f} GiB  {r.max_seqs_at_mean_context:>20}  "
                         f"{r.max_seqs_at_max_model_len:>15}  {r.machine_seqs_at_mean_context:>14}")
    return "\n".join(lines)
