"""The llm-serving policy pack's rules: one module per policy, each exporting ``POLICY`` (a pulumi_policy
``ResourceValidationPolicy`` or ``StackValidationPolicy`` carrying severity, compliance framework and
remediation steps) plus ``NAME``, ``SEVERITY``, ``FRAMEWORK`` and ``REMEDIATION`` for the README table."""

from __future__ import annotations

from types import ModuleType

from . import (
    artifact_registry_immutable_tags,
    deletion_protection_stateful,
    epp_kv_metric_matches_vllm,
    epp_min_replicas,
    gateway_https_only,
    gateway_tls_min_1_2,
    gke_cluster_workload_identity,
    gke_no_spot_nodes,
    gke_nodepool_gke_metadata,
    gke_nodepool_specific_reservation,
    gpu_memory_shares_below_one,
    grace_period_covers_stream_bound,
    hpa_max_within_reservation,
    hpa_min_replicas,
    iam_no_project_roles_for_serving_identities,
    iam_no_public_members,
    iam_no_service_account_keys,
    max_model_len_within_contract,
    networkpolicy_selects_serving_pods,
    pdb_for_serving_workloads,
    serving_images_pinned_by_digest,
    serving_release_identity,
    serving_requires_authentication,
    startup_window_covers_cold_load,
    storage_bucket_public_access_prevention,
    storage_bucket_uniform_access,
    storage_bucket_versioning,
    vllm_no_request_logging,
)

#: Every rule module, in the order the pack registers them (sorted by policy name).
MODULES: list[ModuleType] = sorted(
    [
        artifact_registry_immutable_tags, deletion_protection_stateful, epp_kv_metric_matches_vllm, epp_min_replicas,
        gateway_https_only, gateway_tls_min_1_2, gke_cluster_workload_identity, gke_no_spot_nodes,
        gke_nodepool_gke_metadata, gke_nodepool_specific_reservation, gpu_memory_shares_below_one,
        grace_period_covers_stream_bound, hpa_max_within_reservation, hpa_min_replicas,
        iam_no_project_roles_for_serving_identities, iam_no_public_members, iam_no_service_account_keys,
        max_model_len_within_contract, networkpolicy_selects_serving_pods, pdb_for_serving_workloads,
        serving_images_pinned_by_digest, serving_release_identity, serving_requires_authentication,
        startup_window_covers_cold_load, storage_bucket_public_access_prevention, storage_bucket_uniform_access,
        storage_bucket_versioning, vllm_no_request_logging,
    ],
    key=lambda m: m.NAME,
)

POLICIES = [m.POLICY for m in MODULES]
