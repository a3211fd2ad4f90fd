"""The Google Cloud platform layer , asserted on the real stack plans: each test checks a property
the components DERIVE (from config + capacity plan), as a subset of the registered inputs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.cluster import kubeconfig, maintenance_window
from components.identity import principal_text
from components.network import HEALTH_CHECK_RANGES
from components.weights import weights_disk_name
from infra.offline.runner import placeholder
from infra.planning import capacity
from infra.planning.plan import accelerator_plan

from .conftest import STACKS, one, resources

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
RESERVATION = "gcp:compute/reservation:Reservation"
DISK = "gcp:compute/disk:Disk"
BUCKET = "gcp:storage/bucket:Bucket"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"
REPO_IAM = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
PLATFORM_URN = "llm-serving:platform:Platform"


def subset(expected: Any, actual: Any, path: str = "") -> None:
    """``expected`` is contained in ``actual`` (dict keys recursively; lists/scalars equal)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a mapping, got {actual!r}"
        for k, v in expected.items():
            assert k in actual, f"{path}.{k} missing; have {sorted(actual)}"
            subset(v, actual[k], f"{path}.{k}")
    else:
        assert expected == actual, f"{path}: expected {expected!r}, got {actual!r}"


def gpu_pool(inv: dict, accelerator: str) -> dict:
    pools = [r for r in resources(inv, NODE_POOL) if r["inputs"]["name"] == f"gpu-{accelerator}"]
    assert len(pools) == 1, [r["inputs"]["name"] for r in resources(inv, NODE_POOL)]
    return pools[0]


def platform_resources(inv: dict) -> list[dict]:
    """Every resource under the Platform component (following parent links)."""
    root = one(inv, PLATFORM_URN)["urn"]
    by_urn = {r["urn"]: r for r in inv["resources"]}

    def under(r: dict) -> bool:
        while r["parent"]:
            if r["parent"] == root:
                return True
            r = by_urn.get(r["parent"]) or {"parent": None}
        return False

    return [r for r in inv["resources"] if under(r)]


def member_of(account_id: str, project: str) -> str:
    return f"serviceAccount:{account_id}@{project}.iam.gserviceaccount.com"


# ---- GPU node pools and reservations ---------------------------------------------------------------------


def test_prod_gpu_pool_consumes_the_stack_owned_reservation(plans):
    _cfg, _plan, inv = plans["prod"]
    reservation = one(inv, RESERVATION)
    pool = gpu_pool(inv, "h100-tp2")
    # The affinity names the reservation the stack registers, and the nodes live in its zone.
    subset(
        {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [reservation["inputs"]["name"]],
        },
        pool["inputs"]["nodeConfig"]["reservationAffinity"],
    )
    assert pool["inputs"]["nodeLocations"] == [reservation["inputs"]["zone"]]
    assert reservation["urn"] in pool["dependencies"]
    # The reservation is exclusive and holds the very shape the pool asks for.
    subset(
        {
            "specificReservationRequired": True,
            "specificReservation": {
                "instanceProperties": {
                    "machineType": pool["inputs"]["nodeConfig"]["machineType"],
                    "guestAccelerators": [
                        {
                            "acceleratorType": pool["inputs"]["nodeConfig"]["guestAccelerators"][0]["type"],
                            "acceleratorCount": pool["inputs"]["nodeConfig"]["guestAccelerators"][0]["count"],
                        }
                    ],
                }
            },
        },
        reservation["inputs"],
    )
    # Autoscaling: warm replicas at the bottom, max replicas + one surge per pool at the top, inside the reservation.
    # a3-highgpu-2g holds one TP-2 replica per node. Warm: stable 2 + canary 2 = 4 nodes; top: max 4 + 2 plus one
    # surge replica per pool = 8 nodes, exactly the 8 reserved.
    subset({"totalMinNodeCount": 4, "totalMaxNodeCount": 8}, pool["inputs"]["autoscaling"])
    assert reservation["inputs"]["specificReservation"]["count"] == 8


def test_gpu_pool_node_shape(plans):
    for stack in STACKS:
        cfg, _, inv = plans[stack]
        for name, acc in cfg.accelerators.items():
            nc = gpu_pool(inv, name)["inputs"]["nodeConfig"]
            subset(
                {
                    "labels": {"llm-serving.io/accelerator": name},
                    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
                    "workloadMetadataConfig": {"mode": "GKE_METADATA"},
                    "shieldedInstanceConfig": {"enableSecureBoot": True, "enableIntegrityMonitoring": True},
                    "serviceAccount": f"gke-gpu-{name}@{cfg.project}.iam.gserviceaccount.com",
                    "spot": acc.spot,
                },
                nc,
                f"{stack}.{name}",
            )
            assert nc["guestAccelerators"] == [
                {
                    "type": acc.gpu_type,
                    "count": acc.gpus_per_node,
                    "gpuDriverInstallationConfig": {"gpuDriverVersion": cfg.gke.gpu_driver_version},
                }
            ]


def test_staging_pool_targets_the_shared_reservation_by_project_path(plans):
    cfg, _, inv = plans["staging"]
    res = cfg.accelerators["h100-tp2"].reservation
    assert res is not None and res.mode == "existing"
    pool = gpu_pool(inv, "h100-tp2")
    assert pool["inputs"]["nodeConfig"]["reservationAffinity"]["values"] == [
        f"projects/{res.owner_project}/reservations/{res.name}"
    ]
    assert resources(inv, RESERVATION) == []  # referenced, not owned


def test_dev_spot_pool_consumes_no_reservation(plans):
    _, _, inv = plans["dev"]
    pool = gpu_pool(inv, "l4")
    assert pool["inputs"]["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert resources(inv, RESERVATION) == []


def test_node_bounds_cover_all_pools_on_a_topology():
    def pp(role: str, lo: int, hi: int) -> capacity.PoolCapacity:
        fields: dict[str, Any] = {f: 0 for f in capacity.PoolCapacity.__dataclass_fields__}
        fields.update(
            role=role,
            release="r",
            accelerator="a",
            throughput="unmeasured",
            replicas_per_node=2,
            min_replicas=lo,
            max_replicas=hi,
            warnings=(),
        )
        for f in ("decode_replicas", "prefill_replicas", "required_replicas", "cost_per_million_output_tokens_usd"):
            fields[f] = None
        return capacity.PoolCapacity(**fields)

    pools = [pp("stable", 2, 5), pp("canary", 1, 2)]
    b = accelerator_plan("a", pools, None)
    # 3 warm replicas at 2/node -> 2 nodes; 7 max + 2 surge = 9 replicas -> 5 nodes.
    assert (b.min_nodes, b.max_nodes) == (2, 5)


# ---- cluster ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stack,location", [("dev", "us-central1-a"), ("staging", "us-central1"), ("prod", "us-central1")]
)
def test_cluster_location_and_protection(plans, stack, location):
    _cfg, _, inv = plans[stack]
    cluster = one(inv, CLUSTER)
    assert cluster["inputs"]["location"] == location
    assert cluster["inputs"]["deletionProtection"] is (stack == "prod")
    assert cluster["options"]["protect"] is (stack == "prod")


def test_cluster_features(plans):
    cfg, _, inv = plans["prod"]
    c = one(inv, CLUSTER)["inputs"]
    subset(
        {
            "workloadIdentityConfig": {"workloadPool": f"{cfg.project}.svc.id.goog"},
            "gatewayApiConfig": {"channel": "CHANNEL_STANDARD"},
            "monitoringConfig": {"managedPrometheus": {"enabled": True}},
            "addonsConfig": {
                "gcsFuseCsiDriverConfig": {"enabled": True},
                "gcePersistentDiskCsiDriverConfig": {"enabled": True},
                "httpLoadBalancing": {"disabled": False},
            },
            "datapathProvider": "ADVANCED_DATAPATH",
            "networkingMode": "VPC_NATIVE",
            "privateClusterConfig": {"enablePrivateNodes": True, "masterIpv4CidrBlock": cfg.gke.ranges.master},
            "enableShieldedNodes": True,
            "removeDefaultNodePool": True,
            "minMasterVersion": cfg.gke.min_version,
            "nodeLocations": sorted(cfg.zones),
        },
        c,
    )
    assert "DCGM" in c["monitoringConfig"]["enableComponents"]
    assert [b["cidrBlock"] for b in c["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == [
        n.cidr for n in cfg.gke.authorized_networks
    ]


def test_system_pool_is_autoscaled_and_untainted(plans):
    cfg, _, inv = plans["prod"]
    sp = next(r for r in resources(inv, NODE_POOL) if r["inputs"]["name"] == "system")
    subset(
        {
            "autoscaling": {
                "minNodeCount": cfg.gke.system_pool.min_nodes_per_zone,
                "maxNodeCount": cfg.gke.system_pool.max_nodes_per_zone,
            },
            "nodeLocations": sorted(cfg.zones),
            "nodeConfig": {"workloadMetadataConfig": {"mode": "GKE_METADATA"}},
        },
        sp["inputs"],
    )
    assert "taints" not in sp["inputs"]["nodeConfig"]


def test_maintenance_window_is_a_weekly_rrule():
    import pulumi_gcp as gcp

    from components.cluster import MaintenanceWindow

    w = maintenance_window(MaintenanceWindow(days=("SU", "SA"), start_utc="22:30", duration_hours=6)).recurring_window
    assert isinstance(w, gcp.container.ClusterMaintenancePolicyRecurringWindowArgs)
    # Days in RRULE order; a window starting late crosses midnight.
    assert (w.start_time, w.end_time, w.recurrence) == (
        "2026-01-05T22:30:00Z",
        "2026-01-06T04:30:00Z",
        "FREQ=WEEKLY;BYDAY=SA,SU",
    )


def test_kubernetes_provider_uses_the_gke_auth_plugin(plans):
    _cfg, _, inv = plans["prod"]
    provider = one(inv, "pulumi:providers:kubernetes")
    kc = yaml.safe_load(provider["inputs"]["kubeconfig"])
    cluster = one(inv, CLUSTER)
    assert kc["clusters"][0]["cluster"]["server"] == f"https://{placeholder(cluster['name'] + '.endpoint')}"
    exec_ = kc["users"][0]["user"]["exec"]
    assert (
        exec_["command"] == "gke-gcloud-auth-plugin" and exec_["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    )
    assert "token" not in kc["users"][0]["user"] and "client-key-data" not in kc["users"][0]["user"]
    assert cluster["urn"] in provider["dependencies"]
    # Every Kubernetes object of the platform goes through this provider.
    for r in platform_resources(inv):
        if r["type"].startswith("kubernetes:"):
            assert r["provider"] == provider["urn"], r["name"]
    assert yaml.safe_load(kubeconfig("c", "1.2.3.4", "Q0E="))["current-context"] == "c"


# ---- network -------------------------------------------------------------------------------------------------


def test_proxy_only_subnet_and_firewall_openings(plans):
    cfg, _, inv = plans["prod"]
    subnets = {r["inputs"]["name"]: r["inputs"] for r in resources(inv, "gcp:compute/subnetwork:Subnetwork")}
    proxy = subnets[f"{cfg.gke.cluster_name}-proxy-only"]
    subset({"purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE", "ipCidrRange": cfg.gke.ranges.proxy_only}, proxy)
    nodes = subnets[f"{cfg.gke.cluster_name}-nodes"]
    assert sorted(r["rangeName"] for r in nodes["secondaryIpRanges"]) == ["pods", "services"]
    fws = {
        r["inputs"]["name"]: r["inputs"]
        for r in platform_resources(inv)
        if r["type"] == "gcp:compute/firewall:Firewall"
    }
    expected_sources = sorted([cfg.gke.ranges.proxy_only, *HEALTH_CHECK_RANGES])
    gpu_sas = [f"gke-gpu-{a}@{cfg.project}.iam.gserviceaccount.com" for a in sorted(cfg.accelerators)]
    model = fws[f"{cfg.gke.cluster_name}-allow-lb-model-server"]
    epp = fws[f"{cfg.gke.cluster_name}-allow-lb-epp"]
    assert model["allows"] == [{"protocol": "tcp", "ports": ["8000"]}] and model["targetServiceAccounts"] == gpu_sas
    assert epp["allows"] == [{"protocol": "tcp", "ports": ["9002"]}]
    assert epp["targetServiceAccounts"] == [f"{cfg.gke.cluster_name}-system@{cfg.project}.iam.gserviceaccount.com"]
    for fw in (model, epp):
        assert sorted(fw["sourceRanges"]) == expected_sources and "0.0.0.0/0" not in fw["sourceRanges"]
    assert len(fws) == 2
    nat = one(inv, "gcp:compute/routerNat:RouterNat")["inputs"]
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"


# ---- registry, weights, identity ------------------------------------------------------------------------------------


def test_node_service_accounts_hold_only_gkes_node_role_and_repository_read(plans):
    """GKE documents roles/container.defaultNodeServiceAccount as the minimum for a custom node service account
    (logs, metrics, monitoring read, resource metadata); images are pulled through a per-repository grant."""
    for stack in STACKS:
        cfg, _, inv = plans[stack]
        for acc in cfg.accelerators:
            member = member_of(f"gke-gpu-{acc}", cfg.project)
            roles = sorted(r["inputs"]["role"] for r in resources(inv, PROJECT_IAM) if r["inputs"]["member"] == member)
            assert roles == ["roles/container.defaultNodeServiceAccount"], (stack, roles)
            readers = [r["inputs"] for r in resources(inv, REPO_IAM) if r["inputs"]["member"] == member]
            assert readers == [
                {
                    "location": cfg.region,
                    "member": member,
                    "project": cfg.project,
                    "repository": cfg.gke.registry.repository_id,
                    "role": "roles/artifactregistry.reader",
                }
            ]
        # The repository's readers are the GPU node service accounts and nobody else.
        assert sorted(r["inputs"]["member"] for r in resources(inv, REPO_IAM)) == sorted(
            member_of(f"gke-gpu-{a}", cfg.project) for a in cfg.accelerators
        )


def test_registry_is_immutable_with_cleanup(plans):
    cfg, _, inv = plans["prod"]
    repo = one(inv, "gcp:artifactregistry/repository:Repository")["inputs"]
    subset(
        {
            "format": "DOCKER",
            "dockerConfig": {"immutableTags": True},
            "location": cfg.region,
            "repositoryId": cfg.gke.registry.repository_id,
            "cleanupPolicyDryRun": False,
        },
        repo,
    )
    policies = {p["id"]: p for p in repo["cleanupPolicies"]}
    assert policies["keep-recent"]["action"] == "KEEP"
    assert policies["delete-untagged"]["condition"] == {
        "tagState": "UNTAGGED",
        "olderThan": f"{cfg.gke.registry.untagged_retention_days * 86400}s",
    }


def test_weights_bucket(plans):
    for stack in STACKS:
        cfg, _, inv = plans[stack]
        b = one(inv, BUCKET)
        subset(
            {
                "name": cfg.gke.weights.bucket,
                "location": cfg.region.upper(),
                "uniformBucketLevelAccess": True,
                "publicAccessPrevention": "enforced",
                "versioning": {"enabled": True},
                "softDeletePolicy": {"retentionDurationSeconds": cfg.gke.weights.soft_delete_days * 86400},
            },
            b["inputs"],
            stack,
        )
        assert b["options"]["protect"] is (stack == "prod")
        # Every release's weights live in it.
        assert {r.weights_bucket for r in cfg.releases} == {b["inputs"]["name"]}


def test_weights_reader_is_each_pools_model_server_principal_on_the_bucket_only(plans):
    for stack in STACKS:
        cfg, _, inv = plans[stack]
        bindings = [
            b
            for b in resources(inv, "gcp:storage/bucketIAMMember:BucketIAMMember")
            if b["inputs"]["role"] == "roles/storage.objectViewer"
        ]
        assert len(bindings) == len(cfg.pools())
        for role, _ in cfg.pools():
            ns = f"llm-serving-{role}"
            principal = principal_text(placeholder("project-number"), f"{cfg.project}.svc.id.goog", ns, "model-server")
            binding = one(
                inv, "gcp:storage/bucketIAMMember:BucketIAMMember", f"platform-identity-weights-reader-{role}"
            )
            assert binding["inputs"] == {
                "bucket": cfg.gke.weights.bucket,
                "member": principal,
                "role": "roles/storage.objectViewer",
            }
            assert principal.startswith("principal://iam.googleapis.com/projects/")
            assert f"/subject/ns/{ns}/sa/model-server" in principal
            ksa = one(inv, "kubernetes:core/v1:ServiceAccount", f"platform-identity-ksa-{role}-model-server")
            assert ksa["inputs"]["metadata"]["namespace"] == ns
        # No Google service account keys anywhere.
        assert not resources(inv, "gcp:serviceaccount/key:Key")


def test_hub_token_secret_accessor_is_that_one_ksa(plans):
    cfg, _, inv = plans["prod"]
    assert cfg.gke.hub_token is not None
    for role, _ in cfg.pools():
        acc = one(
            inv, "gcp:secretmanager/secretIamMember:SecretIamMember", f"platform-identity-hub-token-accessor-{role}"
        )["inputs"]
        assert acc["secretId"] == cfg.gke.hub_token.secret_id
        assert acc["member"] == principal_text(
            placeholder("project-number"), f"{cfg.project}.svc.id.goog", f"llm-serving-{role}", "model-server"
        )
    assert len(resources(inv, "gcp:secretmanager/secretIamMember:SecretIamMember")) == len(cfg.pools())
    assert not resources(inv, "gcp:secretmanager/secretVersion:SecretVersion")  # the value is added out of band


def test_hyperdisk_ml_volume_in_the_reservation_zone(plans):
    cfg, _, inv = plans["staging"]
    stable = cfg.serving.stable
    assert stable.loading.path == "hyperdisk_ml"
    zone = cfg.accelerators[stable.accelerator].zone
    name = weights_disk_name(stable.release)
    disk = one(inv, DISK)
    subset(
        {
            "name": name,
            "type": "hyperdisk-ml",
            "accessMode": "READ_ONLY_MANY",
            "zone": zone,
            "snapshot": cfg.gke.weights.hyperdisk_ml.snapshots[stable.release],
        },
        disk["inputs"],
    )
    pv = one(inv, "kubernetes:core/v1:PersistentVolume")["inputs"]
    subset(
        {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "hyperdisk-ml",
            "csi": {
                "driver": "pd.csi.storage.gke.io",
                "readOnly": True,
                "volumeHandle": f"projects/{cfg.project}/zones/{zone}/disks/{name}",
            },
        },
        pv["spec"],
    )
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [zone]
    pvc = one(inv, "kubernetes:core/v1:PersistentVolumeClaim")["inputs"]
    # The stable pool's claim, in its namespace; its PV is reserved for exactly that claim.
    assert (pvc["metadata"]["namespace"], pvc["spec"]["volumeName"], pvc["spec"]["accessModes"]) == (
        "llm-serving-stable",
        pv["metadata"]["name"],
        ["ReadOnlyMany"],
    )
    assert pv["metadata"]["name"] == f"{name}-stable"
    assert pv["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "name": name, "namespace": "llm-serving-stable"}
    sc = one(inv, "kubernetes:storage.k8s.io/v1:StorageClass")["inputs"]
    assert sc["provisioner"] == "pd.csi.storage.gke.io" and sc["parameters"]["type"] == "hyperdisk-ml"
    # Only the canary's streaming release has no disk.
    assert weights_disk_name("qwen3-32b-fp8-2026-08-23.1") == "weights-qwen3-32b-fp8-2026-08-23-1"


def test_no_hyperdisk_when_no_pool_loads_from_it(plans):
    for stack in ("dev", "prod"):
        _, _, inv = plans[stack]
        assert not resources(inv, DISK) and not resources(inv, "kubernetes:core/v1:PersistentVolume")


def test_prod_protects_stateful_resources_only(plans):
    """What a delete would lose (docs/reviewing-changes.md, "holds data"): the cluster, the reservation, the weights
    bucket, the image repository every pod pulls from by digest, the hub-token secret, the gateway's reserved
    address, and the GPU node pool; nothing else (the CPU system pool is recreated at no cost)."""
    _, _, inv = plans["prod"]
    protected = sorted((r["type"], r["name"]) for r in inv["resources"] if r["options"]["protect"])
    assert protected == [
        ("gcp:artifactregistry/repository:Repository", "platform-registry-repo"),
        ("gcp:compute/address:Address", "inference-gateway-address"),
        (RESERVATION, "platform-gpu-h100-tp2-reservation"),
        (CLUSTER, "platform-cluster-gke"),
        (NODE_POOL, "platform-gpu-h100-tp2-pool"),
        ("gcp:secretmanager/secret:Secret", "platform-identity-hub-token"),
        (BUCKET, "platform-weights-bucket"),
    ]
    for stack in ("dev", "staging"):
        assert not [r["name"] for r in plans[stack][2]["resources"] if r["options"]["protect"]]


def test_every_platform_resource_is_parented_and_waits_for_the_apis(plans):
    _, _, inv = plans["prod"]
    services = {r["urn"] for r in resources(inv, "gcp:projects/service:Service")}
    mine = platform_resources(inv)
    assert len(mine) > 30
    for r in mine:
        assert r["parent"], r["urn"]
        if r["custom"] and r["type"].startswith("gcp:"):
            assert services & set(r["dependencies"]), f"{r['name']} does not wait for the project services"
    types = {r["type"] for r in mine if not r["custom"]}
    assert types >= {
        "llm-serving:network:Network",
        "llm-serving:cluster:Cluster",
        "llm-serving:gpu:GpuNodePool",
        "llm-serving:registry:Registry",
        "llm-serving:weights:Weights",
        "llm-serving:identity:WorkloadIdentity",
        "llm-serving:identity:NodeServiceAccount",
        "llm-serving:network:LoadBalancerFirewall",
    }


def test_weights_bucket_never_lets_a_staged_file_change(plans):
    """Create-only for the release pipeline (objectCreator has no storage.objects.delete, which replacing or
    deleting an object needs), and an event-based hold on every new object for everyone else."""
    for stack in STACKS:
        cfg, _, inv = plans[stack]
        (bucket,) = resources(inv, "gcp:storage/bucket:Bucket")
        assert bucket["inputs"]["defaultEventBasedHold"] is True
        writes = [
            b["inputs"]
            for b in resources(inv, "gcp:storage/bucketIAMMember:BucketIAMMember")
            if b["inputs"]["role"] != "roles/storage.objectViewer"
        ]
        assert writes == [
            {"bucket": cfg.gke.weights.bucket, "member": m, "role": "roles/storage.objectCreator"}
            for m in cfg.gke.weights.writers
        ]
        assert cfg.gke.weights.writers == [f"serviceAccount:release-pipeline@{cfg.project}.iam.gserviceaccount.com"]
