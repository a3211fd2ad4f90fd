"""The Artifact Registry Docker repository serving images come from : immutable tags,
cleanup policies, vulnerability scanning, and read access for the GPU node service accounts only."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from . import naming
from .base import Component

READER_ROLE = "roles/artifactregistry.reader"
SECONDS_PER_DAY = 86400


@dataclass(frozen=True)
class RegistryArgs:
    project: str
    region: str
    repository_id: str
    #: Versions per image kept by the cleanup policy regardless of age (and so never deleted).
    keep_recent_versions: int
    #: Untagged versions older than this are deleted.
    untagged_retention_days: int
    #: IAM members allowed to pull (the GPU node service accounts), by a stable key.
    readers: tuple[tuple[str, pulumi.Input[str]], ...]
    labels: dict[str, str]
    #: Pulumi ``protect`` on the repository: every pod pulls its image from it by digest (prod protects it).
    protect: bool = False


def cleanup_policies(args: RegistryArgs) -> list[gcp.artifactregistry.RepositoryCleanupPolicyArgs]:
    """Keep the N most recent versions of every image (a KEEP policy wins over DELETE), delete untagged
    versions after the retention period. Tagged release images are never deleted by these rules."""
    return [
        gcp.artifactregistry.RepositoryCleanupPolicyArgs(
            id="keep-recent",
            action="KEEP",
            most_recent_versions=gcp.artifactregistry.RepositoryCleanupPolicyMostRecentVersionsArgs(
                keep_count=args.keep_recent_versions
            ),
        ),
        gcp.artifactregistry.RepositoryCleanupPolicyArgs(
            id="delete-untagged",
            action="DELETE",
            condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                tag_state="UNTAGGED", older_than=f"{args.untagged_retention_days * SECONDS_PER_DAY}s"
            ),
        ),
    ]


class Registry(Component):
    TYPE = "llm-serving:registry:Registry"

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-repo",
            project=args.project,
            location=args.region,
            repository_id=args.repository_id,
            format="DOCKER",
            description="Immutable vLLM serving images, deployed by digest",
            docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
            cleanup_policy_dry_run=False,
            cleanup_policies=cleanup_policies(args),
            vulnerability_scanning_config=gcp.artifactregistry.RepositoryVulnerabilityScanningConfigArgs(
                enablement_config="INHERITED"
            ),
            labels=args.labels,
            opts=self.child_opts(protect=args.protect),
        )
        self.readers = [
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-reader-{key}",
                project=args.project,
                location=args.region,
                repository=self.repository.repository_id,
                role=READER_ROLE,
                member=member,
                opts=child,
            )
            for key, member in args.readers
        ]
        self.prefix = naming.registry_prefix(args.project, args.region, args.repository_id)
        self.register_outputs({"repository": self.repository.id, "prefix": self.prefix})
