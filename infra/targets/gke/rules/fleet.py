"""Rules of a fleet stack (``fleet``): its regions are distinct places with their own clusters, address plans and
reservations, their shares add up to the whole peak, and the fleet holds the peak with its largest region lost."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from components.gateway.multicluster import MC_GATEWAY_CLASS
from components.gpu_pool import member_node_account_id
from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan
from infra.rules import Finding, rule

from ..config import TARGET, GkeCoHostedGroup, fleet_section, gateway_section, gke_section
from ..config.platform import GKE_MINOR_RE, parse_gke_version
from ..planning import gke_part, gke_pools

#: Shares are fractions written in YAML; their sum is compared with 1 to this tolerance (0.1 + 0.2 + 0.7 != 1.0
#: in binary floating point).
SHARE_TOLERANCE = 1e-9


@rule(target=TARGET, needs={"fleet", "gke", "region"})
def fleet_regions_are_distinct(cfg: StackConfig) -> Iterator[Finding]:
    """One cluster per region, each with its own name: a Hub membership and a Gateway backend are keyed by cluster
    name and location, and two clusters of one region would be one failure domain counted twice."""
    fleet, g = fleet_section(cfg), gke_section(cfg)
    if fleet is None or g is None:
        return
    if cfg.region in fleet.regions:
        yield (
            ("fleet", "regions", cfg.region),
            f"{cfg.region} is the stack's own region (the config cluster, gcp:region); list only the other regions",
        )
    names = {g.cluster_name: "gke.cluster_name"}
    for region, r in sorted(fleet.regions.items()):
        if r.cluster_name in names:
            yield (
                ("fleet", "regions", region, "cluster_name"),
                f"{r.cluster_name!r} is already the cluster of {names[r.cluster_name]}: every cluster of the fleet "
                "needs its own name (its Hub membership is named after it)",
            )
        else:
            names[r.cluster_name] = f"fleet.regions.{region}"


@rule(target=TARGET, needs={"fleet"})
def fleet_shares_sum_to_one(cfg: StackConfig) -> Iterator[Finding]:
    """Each region's pools are sized for share x peak: shares that do not add up to 1 size the fleet for a peak
    that is not the contract's."""
    fleet = fleet_section(cfg)
    if fleet is None:
        return
    total = fleet.share + sum(r.share for r in fleet.regions.values())
    if abs(total - 1.0) > SHARE_TOLERANCE:
        parts = " + ".join(
            [f"{fleet.share:g} (fleet.share)", *(f"{r.share:g} ({k})" for k, r in sorted(fleet.regions.items()))]
        )
        yield (("fleet", "share"), f"{parts} = {total:g}: the regions' shares of the peak must add up to 1")


@rule(target=TARGET, needs={"fleet", "gke"})
def fleet_address_plans_are_disjoint(cfg: StackConfig) -> Iterator[Finding]:
    """The clusters of a fleet reach each other's endpoints through the load balancer and, for the config cluster,
    through the imported pools' network endpoint groups: overlapping node, Pod or Service ranges make two clusters'
    endpoints the same address."""
    fleet, g = fleet_section(cfg), gke_section(cfg)
    if fleet is None or g is None:
        return
    plans = [("gke.ranges", ("gke", "ranges"), g.ranges)] + [
        (f"fleet.regions.{k}.ranges", ("fleet", "regions", k, "ranges"), r.ranges)
        for k, r in sorted(fleet.regions.items())
    ]
    seen: list[tuple[str, str, ipaddress.IPv4Network]] = []
    for label, loc, ranges in plans:
        for field in ("subnet", "pods", "services", "proxy_only", "master"):
            net = ipaddress.IPv4Network(getattr(ranges, field))
            clash = next((f"{o}.{f}" for o, f, n in seen if n.overlaps(net) and o != label), None)
            if clash is not None:
                yield ((*loc, field), f"{net} overlaps {clash}: every region of the fleet needs its own ranges")
            seen.append((label, field, net))


@rule(target=TARGET, needs={"fleet", "serving", "accelerators", "environment"})
def every_region_places_every_accelerator(cfg: StackConfig) -> Iterator[Finding]:
    """A pool runs in every region, so every region names where each of its accelerators runs there; a zonal
    reservation exists in one zone only, so a reserved topology needs a reservation of its own in each region (in
    prod every region's GPU pools consume one, like the stack's own)."""
    fleet = fleet_section(cfg)
    if fleet is None:
        return
    used = sorted({pool.accelerator for _, pool in gke_pools(cfg) if pool.accelerator in cfg.accelerators})
    for region, r in sorted(fleet.regions.items()):
        for key in used:
            here = r.accelerators.get(key)
            if here is None:
                yield (
                    ("fleet", "regions", region, "accelerators"),
                    f"no entry for accelerator {key!r}, which a pool runs on: name its zone (and reservation) in {region}",
                )
            elif here.reservation is None and (cfg.environment == "prod" or cfg.accelerators[key].reservation):
                yield (
                    ("fleet", "regions", region, "accelerators", key, "reservation"),
                    f"{key} consumes a reservation in {cfg.region}; {region} needs its own (a zonal reservation "
                    "serves one zone only)"
                    if cfg.accelerators[key].reservation
                    else "prod GPU pools run on a specific reservation in every region",
                )
        for key in sorted(set(r.accelerators) - set(used)):
            yield (
                ("fleet", "regions", region, "accelerators", key),
                f"no pool runs on {key!r}" + ("" if key in cfg.accelerators else " (not a key of accelerators)"),
            )


@rule(target=TARGET, needs={"fleet", "serving", "cohosting", "gke"})
def fleet_serves_pools_only(cfg: StackConfig) -> Iterator[Finding]:
    """What a fleet stack does not build (yet), refused rather than half-built: co-hosted groups and Hyperdisk ML
    volumes would need one copy per region (a Hyperdisk ML volume and its snapshots are zonal)."""
    fleet, g = fleet_section(cfg), gke_section(cfg)
    if fleet is None or g is None:
        return
    for key, group in cfg.groups():
        if isinstance(group, GkeCoHostedGroup):
            yield (("cohosting", key), "co-hosted groups are served from one region: not part of a fleet stack")
    for role, pool in gke_pools(cfg):
        if pool.loading.path == "hyperdisk_ml":
            yield (
                ("serving", role, "loading", "path"),
                "hyperdisk_ml volumes are zonal (one region): a fleet stack loads weights with gcs_streaming or "
                "gcs_fuse from the stack's bucket",
            )


@rule(target=TARGET, needs={"fleet", "serving", "accelerators", "contract"}, plan=True)
def fleet_holds_peak_with_a_region_lost(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """The region-level N+1 (planning/fleet.py): with any one region down, the surviving regions' HPA ceilings
    (each capped by its own reservation) hold the replicas the whole peak needs at the measured operating point."""
    for loss in gke_part(plan).region_losses:
        if not loss.holds:
            yield (
                ("serving", loss.role, "max_replicas"),
                f"with {loss.lost_region} lost the other regions reach {loss.surviving_max_replicas} {loss.role} "
                f"replica(s) at most, but the whole peak needs {loss.needed_replicas}: raise max_replicas (and the "
                "reservations) or add a region",
            )


#: GKE "Set up the GKE multi-cluster Inference Gateway", Requirements: "Use GKE version 1.34.1-gke.1127000 or later."
MULTI_CLUSTER_INFERENCE_MIN_GKE = "1.34.1-gke.1127000"


@rule(target=TARGET, needs={"fleet", "gke"})
def fleet_clusters_run_the_multi_cluster_minimum(cfg: StackConfig) -> Iterator[Finding]:
    """Every cluster of the fleet (they share ``gke.min_version``) runs at least the multi-cluster Inference
    Gateway's minimum. A bare minor ``1.34`` lets the channel pick an older 1.34 patch, so it must be exact (or a
    later minor)."""
    fleet, g = fleet_section(cfg), gke_section(cfg)
    if fleet is None or g is None:
        return
    floor = parse_gke_version(MULTI_CLUSTER_INFERENCE_MIN_GKE)
    assert floor is not None
    exact = parse_gke_version(g.min_version)
    minor = GKE_MINOR_RE.match(g.min_version)
    low = (
        exact < floor
        if exact is not None
        else minor is not None and (int(minor["major"]), int(minor["minor"])) <= floor[:2]
    )
    if low:
        yield (
            ("gke", "min_version"),
            f"{g.min_version} may run below {MULTI_CLUSTER_INFERENCE_MIN_GKE}, the multi-cluster GKE Inference "
            f"Gateway's minimum: state {MULTI_CLUSTER_INFERENCE_MIN_GKE} or later (or 1.{floor[1] + 1})",
        )


@rule(target=TARGET, needs={"fleet", "gateway"})
def no_model_armor_on_a_fleet(cfg: StackConfig) -> Iterator[Finding]:
    """GKE "About the multi-cluster GKE Inference Gateway", Limitations: the multi-cluster GKE Inference Gateway does
    not support the Model Armor integration. A template configured here would screen nothing."""
    gw = gateway_section(cfg)
    if fleet_section(cfg) is not None and gw is not None and gw.model_armor is not None:
        yield (
            ("gateway", "model_armor"),
            "the multi-cluster GKE Inference Gateway does not support Model Armor (its Limitations): screen prompts "
            "in the application, or serve from one region",
        )


#: IAM service-account ids: 6-30 characters, a lowercase letter first, lowercase letters, digits and hyphens, no
#: trailing hyphen (IAM API ``projects.serviceAccounts.create``, ``accountId``).
SERVICE_ACCOUNT_ID_RE = re.compile(r"^[a-z](?:[-a-z0-9]{4,28}[a-z0-9])$")


@rule(target=TARGET, needs={"fleet", "serving", "accelerators"})
def fleet_node_accounts_are_valid_ids(cfg: StackConfig) -> Iterator[Finding]:
    """A fleet region's GPU nodes run as ``<cluster>-<accelerator>`` (components.gpu_pool.member_node_account_id):
    service-account ids are project-wide, so the config cluster's ``gke-gpu-<accelerator>`` cannot be reused, and the
    id must be one IAM accepts."""
    fleet = fleet_section(cfg)
    if fleet is None:
        return
    used = sorted({pool.accelerator for _, pool in gke_pools(cfg)})
    for region, r in sorted(fleet.regions.items()):
        for key in used:
            account = member_node_account_id(r.cluster_name, key)
            if not SERVICE_ACCOUNT_ID_RE.fullmatch(account):
                yield (
                    ("fleet", "regions", region, "cluster_name"),
                    f"the GPU nodes of {region} would run as service account {account!r} ({len(account)} characters):"
                    " an id must be 6-30 lowercase letters, digits or hyphens; shorten the cluster name",
                )


@rule(target=TARGET, needs={"fleet", "gateway"})
def fleet_gateway_is_multi_cluster(cfg: StackConfig) -> Iterator[Finding]:
    """A fleet is served by the config cluster's multi-cluster Gateway, whose class is the cross-regional internal
    one (GKE "Set up the GKE multi-cluster Inference Gateway", "Deploy resources to the config cluster"); that class
    routes to imported pools only, so a single-region stack cannot use it."""
    gw = gateway_section(cfg)
    if gw is None:
        return
    fleet = fleet_section(cfg) is not None
    if fleet and gw.gateway_class != MC_GATEWAY_CLASS:
        yield (
            ("gateway", "gateway_class"),
            f"a fleet stack is served by the multi-cluster Gateway: set {MC_GATEWAY_CLASS} (got {gw.gateway_class})",
        )
    if not fleet and gw.gateway_class == MC_GATEWAY_CLASS:
        yield (
            ("gateway", "gateway_class"),
            f"{MC_GATEWAY_CLASS} routes to pools imported from a fleet: a stack without `fleet` uses "
            "gke-l7-regional-external-managed or gke-l7-rilb",
        )


@rule(target=TARGET, needs={"fleet", "contract"})
def fleet_tenant_budgets_have_no_enforcement_point(cfg: StackConfig) -> Iterator[Finding]:
    """A tenant's ``requests_per_minute`` is a Cloud Armor throttle on each pool's backend service
    (components/gateway/tenants.py). Cloud Armor's security policy overview lists the load balancers its policies
    attach to, and the cross-region internal Application Load Balancer, the multi-cluster Gateway's class, is not
    among them (docs/multiregion.md); the GKE setup page attaches none to an imported pool. A fleet would serve the
    budget as if it held while nothing enforces it, so a budgeted tenant is refused. Tenants without budgets (the
    router's fair share of a saturated queue, per region) are allowed."""
    if fleet_section(cfg) is None:
        return
    for i, t in enumerate(cfg.contract.tenants):
        if t.requests_per_minute is not None:
            yield (
                ("contract", "tenants", i, "requests_per_minute"),
                f"tenant {t.id!r}: a fleet has no load balancer a Cloud Armor budget is known to attach to (the "
                "multi-cluster Gateway's cross-region internal load balancer is not among those Cloud Armor lists): "
                "enforce budgets in the API front and drop requests_per_minute, or serve from one region",
            )
