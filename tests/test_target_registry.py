"""A fourth serving target is one package and one registry line: a stub target defined in this file registers with the
real registry and plans a stack through the real resolver, program and offline runner, with no change anywhere else.

What the stub needed (and so what a real fourth target touches): its package (here this module: pool type, section,
planner, rules, composition, a report row), one registry line (``REGISTRY.with_target``), its components (here one
``Component`` with one bucket), a stack using it, and its tests. The test also proves that the rest of the program
neither knows nor needs to know: the root model validates its pools by their tag, its section by its model, its rule
runs only for stacks that use it, and its rows and lines reach the capacity table.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import pulumi
import pulumi_gcp as gcp
import pytest
from pydantic import Field

from components.base import Component
from components.project import ProjectServices
from infra.config import ConfigError
from infra.config.base import Strict
from infra.config.measurement import Measurement
from infra.config.pool import PoolCommon
from infra.config.stack import Section, StackConfig, section_of
from infra.entry import main as program_main
from infra.offline.capacity_table import render_table
from infra.offline.runner import run_offline
from infra.offline.stackfile import ROOT, read_stack_file
from infra.planning import capacity
from infra.planning.plan import (
    MachineIdentity,
    PlanIssue,
    PoolPlan,
    StackPlan,
    TargetPlan,
    demand,
    plan_capacity,
    release_geometry,
    release_info,
)
from infra.registry import REGISTRY
from infra.resolve import ResolvedStack, resolve_stack
from infra.rules import Finding, Rule, collect, rule
from infra.targets.base import ReportRow, Target

STUB = "stub"


# ---- the stub target's package (config, planning, rules, composition, report) ----------------------------------


class StubPool(PoolCommon):
    """A pool of the stub target: a number of identical machines of a stated GPU memory."""

    TARGET_LABEL: ClassVar[str] = "stub pool"
    SPLIT_MECHANISM: ClassVar[str] = "the stub's own split"
    target: Literal["stub"] = Field(description="``stub``: a test target.")
    min_replicas: Annotated[int, Field(ge=1, le=10)] = Field(description="Warm machines.")
    max_replicas: Annotated[int, Field(ge=1, le=10)] = Field(description="Machine ceiling.")
    gpu_memory_gib: Annotated[float, Field(gt=0, le=200)] = Field(description="GPU memory of one machine.")


class StubConfig(Strict):
    bucket: Annotated[str, Field(pattern=r"^[a-z][-a-z0-9]{2,40}$")] = Field(description="A bucket the stub creates.")


def stub_section(cfg: StackConfig) -> StubConfig | None:
    return section_of(cfg, "stub", StubConfig)


@dataclass(frozen=True)
class StubPoolPlan(PoolPlan):
    machines: int


def plan_stub(cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
    issues: list[PlanIssue] = []
    pools: dict[str, PoolPlan] = {}
    for role, pool in cfg.pools():
        if not isinstance(pool, StubPool):
            continue
        rel = cfg.release(pool.release)
        d = demand(cfg, pool, measurements.get(role))
        cap = plan_capacity(
            cfg,
            role,
            pool,
            capacity.PoolInputs(
                role=role,
                release=rel.release,
                accelerator="stub",
                geometry=release_geometry(rel),
                tensor_parallel_size=rel.tensor_parallel_size,
                max_model_len=rel.max_model_len,
                gpu_memory_gib=pool.gpu_memory_gib,
                gpus_per_node=1,
                node_hourly_usd=1.0,
                gpu_memory_utilization=pool.gpu_memory_utilization,
                runtime_overhead_gib=pool.runtime_overhead_gib,
                arrival_rps=d.arrival_rps,
                mean_prompt_tokens=d.mean_prompt_tokens,
                mean_output_tokens=d.mean_output_tokens,
                target_utilization=d.target_utilization,
                load_throughput_mib_s=1000.0,
                engine_init_seconds=60,
                verify_read_mib_s=None,
                theta_o=d.theta_o,
                theta_i=d.theta_i,
                min_replicas=pool.min_replicas,
                max_replicas=pool.max_replicas,
            ),
            "on the stub",
            issues,
        )
        if cap is None:
            continue
        pools[role] = StubPoolPlan(
            role=role,
            target=STUB,
            release=release_info(rel),
            weight=pool.weight,
            min_replicas=pool.min_replicas,
            capacity=cap,
            vllm_args=("--model", "x"),
            model_root="x",
            accelerator=None,
            machine=MachineIdentity("stub", "stub-gpu", 1),
            machines=pool.max_replicas,
        )
    return TargetPlan(target=STUB, pools=pools, issues=tuple(issues))


@rule(target=STUB, needs={"serving"})
def stub_section_present(cfg: StackConfig) -> Iterator[Finding]:
    if stub_section(cfg) is None:
        yield ("stub",), "required when a pool targets stub"


@dataclass(frozen=True)
class StubServingArgs:
    project: str
    bucket: str


class StubServing(Component):
    TYPE = "llm-serving:stub:Serving"

    def __init__(self, name: str, args: StubServingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket", name=args.bucket, project=args.project, location="US", opts=self.child_opts()
        )
        self.register_outputs({"bucket": self.bucket.name})


class StubTarget(Target):
    name = STUB
    services = ("storage.googleapis.com",)
    pool_type = StubPool
    sections = (Section("stub", StubConfig, "The stub target's one setting."),)

    def rules(self) -> Sequence[Rule]:
        return collect([sys.modules[__name__]])

    def plan(self, cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
        return plan_stub(cfg, measurements)

    def compose(self, resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
        s = stub_section(resolved.config)
        assert s is not None
        serving = StubServing(
            "stub",
            StubServingArgs(resolved.config.project, s.bucket),
            opts=pulumi.ResourceOptions(depends_on=[services]),
        )
        return {"stub": {"bucket": serving.bucket.name}}

    def report_rows(self, plan: StackPlan) -> Sequence[ReportRow]:
        return [ReportRow("stub machines", {r: str(p.machines) for r, p in plan.pools_of(StubPoolPlan).items()})]

    def report_lines(self, plan: StackPlan) -> Sequence[str]:
        return [f"stub: {len(plan.pools_of(StubPoolPlan))} pool(s)"]


# ---- the dry run --------------------------------------------------------------------------------------------------

WITH_STUB = REGISTRY.with_target(StubTarget())


def _stub_stack() -> dict[str, Any]:
    """dev-cloudrun's contract and release, its stable pool on the stub target."""
    values = json.loads(json.dumps(read_stack_file("dev-cloudrun").values))
    for key in ("llm-serving:cloud_run",):
        values.pop(key, None)
    values["llm-serving:serving"]["stable"] = {
        "target": "stub",
        "release": values["llm-serving:serving"]["stable"]["release"],
        "weight": 100,
        "min_replicas": 1,
        "max_replicas": 3,
        "gpu_memory_gib": 24,
    }
    values["llm-serving:stub"] = {"bucket": "stub-bucket"}
    return values


def _engine_config(values: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def test_a_fourth_target_plans_through_the_real_program():
    values = _stub_stack()
    seen: list[ResolvedStack] = []
    run = run_offline(
        lambda: program_main(on_resolved=seen.append, registry=WITH_STUB),
        project="llm-serving",
        stack="dev-stub",
        config=_engine_config(values),
        secret_keys=[],
    )
    (resolved,) = seen
    # The root model validated the pool as the stub's type, and its section as the stub's model.
    pool = resolved.config.serving.stable
    assert isinstance(pool, StubPool) and pool.gpu_memory_gib == 24
    assert stub_section(resolved.config) == StubConfig(bucket="stub-bucket")
    # Planned by the stub's planner with the shared capacity formulas: a 24 GiB GPU at 0.9 minus dev's 8B FP8 weights.
    p = resolved.plan.pools["stable"]
    assert isinstance(p, StubPoolPlan) and p.machines == 3
    assert p.capacity.replica_hourly_usd == 1.0
    # Composed: the project services enable the stub's API only, and its component created its bucket.
    inv = run.inventory()
    types = {r.type for r in inv.resources}
    assert "llm-serving:stub:Serving" in types and "gcp:storage/bucket:Bucket" in types
    services = [r for r in inv.resources if r.type == "gcp:projects/service:Service"]
    assert sorted(r.inputs["service"] for r in services) == ["storage.googleapis.com"]
    assert not any(t.startswith(("gcp:container", "kubernetes:", "gcp:cloudrunv2")) for t in types)
    # Its rows and lines reach the capacity table.
    table = render_table(resolved.plan, WITH_STUB)
    assert "stub machines" in table and "stub: 1 pool(s)" in table


def test_the_stub_targets_rules_run_only_where_it_is_used():
    values = _stub_stack()
    del values["llm-serving:stub"]
    with pytest.raises(ConfigError) as err:
        resolve_stack(values, "dev-stub", ROOT, registry=WITH_STUB)
    assert [str(i) for i in err.value.issues] == ["llm-serving:stub: required when a pool targets stub"]
    # A stack without stub pools never runs the stub's rules, and the shipped registry does not know the tag at all.
    resolve_stack(read_stack_file("dev-cloudrun").values, "dev-cloudrun", ROOT, registry=WITH_STUB)
    with pytest.raises(ConfigError) as err:
        resolve_stack(_stub_stack(), "dev-stub", ROOT)
    assert "llm-serving:serving.stable.target: unknown serving target 'stub'; known: gke, cloud_run, vertex" in [
        str(i) for i in err.value.issues
    ]


def test_a_target_whose_pool_tag_disagrees_with_its_name_is_refused():
    class Misnamed(StubTarget):
        name = "other"

    with pytest.raises(TypeError, match=r"StubPool.target must be Literal\['other'\]"):
        Misnamed()
