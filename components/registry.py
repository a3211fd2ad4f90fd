"""The Artifact Registry Docker repository serving images come from (issue 3 §5): immutable tags,
cleanup policies, vulnerability scanning, and read access for the GPU node service accounts only."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config.gke import ArtifactRegistry, registry_prefix

from .options import child_options

READER_ROLE = "roles/artifactregistry.reader"
SECONDS_PER_DAY = 86400


@dataclass(frozen=True)
class RegistryArgs:
    project: str
    region: str
    config: ArtifactRegistry
    #: IAM members allowed to pull (the GPU node service accounts), by a stable key.
    readers: tuple[tuple[str, pulumi.Input[str]], ...]
    labels: dict[str, str]


def cleanup_policies(cfg: ArtifactRegistry) -> list[gcp.artifactregistry.RepositoryCleanupPolicyArgs]:
    """Keep the N most recent versions of every image (a KEEP policy wins over DELETE), delete untagged
    versions after the retention period. Tagged release images are never deleted by these rules."""
    return [
        gcp.artifactregistry.RepositoryCleanupPolicyArgs(
            id="keep-recent", action="KEEP",
            most_recent_versions=gcp.artifactregistry.RepositoryCleanupPolicyMostRecentVersionsArgs(
                keep_count=cfg.keep_recent_versions)),
        gcp.artifactregistry.RepositoryCleanupPolicyArgs(
            id="delete-untagged", action="DELETE",
            condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                tag_state="UNTAGGED", older_than=f"{cfg.untagged_retention_days * SECONDS_PER_DAY}s")),
    ]


class Registry(pulumi.ComponentResource):
    TYPE = "llm-serving:registry:Registry"

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        child = child_options(self, opts)
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-repo", project=args.project, location=args.region, repository_id=args.config.repository_id,
            format="DOCKER", description="Immutable vLLM serving images, deployed by digest",
            docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
            cleanup_policy_dry_run=False, cleanup_policies=cleanup_policies(args.config),
            vulnerability_scanning_config=gcp.artifactregistry.RepositoryVulnerabilityScanningConfigArgs(
                enablement_config="INHERITED"),
            labels=args.labels, opts=child)
        self.readers = [
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-reader-{key}", project=args.project, location=args.region,
                repository=self.repository.repository_id, role=READER_ROLE, member=member, opts=child)
            for key, member in args.readers
        ]
        self.prefix = registry_prefix(args.project, args.region, args.config.repository_id)
        self.register_outputs({"repository": self.repository.id, "prefix": self.prefix})
