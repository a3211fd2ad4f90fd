"""``llm-serving release hydrate-runbook``: the ``gcloud`` steps that turn a staged release folder into the Hyperdisk ML
snapshot the stack consumes.

Why a snapshot: the stack creates each pool's Hyperdisk ML volume ``READ_ONLY_MANY`` from the snapshot named in
``gke.weights.hyperdisk_ml.snapshots.<release>`` (``components/weights.py``), because an empty read-only disk is
useless and nothing in the serving path ever writes to it. The release pipeline therefore fills one disk and
snapshots it:

1. create a temporary ``hyperdisk-ml`` disk in ``READ_WRITE_SINGLE`` mode (it is written once) and a temporary VM
   in the same zone that attaches it;
2. on the VM: check the staged folder with the serving verifier in ``gcs`` mode, format the disk ext4 (the file
   system the stack's PersistentVolume declares), copy ``gs://<bucket>/<model>/<revision>/`` onto its root with
   ``gcloud storage rsync`` (the volume's root is the release folder, mounted at ``/weights/<model>/<revision>`` in the pods), and run
   the same verifier in ``dir`` mode on the disk: every file's SHA-256 against the manifest;
3. unmount, detach, delete the VM; snapshot the disk; delete the temporary disk.

The temporary disk is never switched to ``READ_ONLY_MANY``: it only feeds the snapshot, and the stack creates its
``READ_ONLY_MANY`` disks from that snapshot. Names follow the release folder, not the release id
(``<model>-<revision[:12]>``, as in stacks/Pulumi.staging.yaml): the snapshot holds exactly that folder, so releases
sharing weights may share it. Every create is create-only (``gcloud ... create`` fails on an existing name), so a
second run cannot replace a snapshot that serving disks were made from.

How the commands were checked (``tests/test_release_artifacts.py`` repeats it on every run): the disk
``accessMode`` (``READ_WRITE_SINGLE``) and ``snapshotType`` (``STANDARD``) against the enums of the Compute Engine
v1 discovery document bundled with google-api-python-client; every command, flag and listed enum value against
the static CLI tree shipped with the installed Google Cloud CLI (``<sdk>/data/cli/gcloud_completions.py``; Cloud
SDK 528.0.0 here). Not verifiable offline, and so stated in the rendered comments: that the chosen machine type
attaches Hyperdisk ML and boots from Hyperdisk Balanced in the zone, and that the Debian image ships the gcloud
CLI and python3 (Google's public Debian images do).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field

from components.serving import verify_release as vr
from infra.config.accelerator import ZONE_RE
from infra.config.release import RELEASE_ID_PATTERN
from infra.targets.gke.config.platform import (
    HYPERDISK_ML_MAX_GIB,
    HYPERDISK_ML_MIN_GIB,
    HYPERDISK_ML_MIN_THROUGHPUT_MIB_S,
)

from ..inputs import shown
from .stage import BUCKET_RE

#: The Compute Engine disk type of the serving volumes (components/weights.py creates the same type).
DISK_TYPE = "hyperdisk-ml"
#: Disk.accessMode of the temporary disk (enum in compute.v1.json): written once, by one VM.
WRITE_ACCESS_MODE = "READ_WRITE_SINGLE"
#: Snapshot.snapshotType (enum in compute.v1.json): STANDARD is meant for frequent restores, ARCHIVE for retention.
SNAPSHOT_TYPE = "STANDARD"
#: Hydration VM: C3 attaches Hyperdisk ML and boots from Hyperdisk Balanced
#: (https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-ml#machine-series-support); 8 vCPUs run
#: gcloud storage's parallel download and the verifier's 4 hashing threads without either waiting for CPU.
DEFAULT_MACHINE_TYPE = "c3-standard-8"
BOOT_DISK_TYPE = "hyperdisk-balanced"
#: Debian 12: a public image family whose images include the gcloud CLI and python3 (>= 3.8) for the verifier.
IMAGE_FAMILY = "debian-12"
IMAGE_PROJECT = "debian-cloud"
#: The VM deletes itself after this long even if the runbook is abandoned half-way (copying and hashing even a
#: multi-TB release takes hours, not a day); the data disk survives because it is attached with auto-delete=no.
VM_MAX_RUN_DURATION = "24h"
#: Device name of the data disk inside the VM: /dev/disk/by-id/google-<name>.
DEVICE_NAME = "weights"
MOUNT_POINT = "/mnt/weights"
REMOTE_VERIFIER = "/tmp/verify_release.py"
#: Compute Engine resource names: RFC 1035 labels of at most 63 characters.
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")
PROJECT_RE = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]\Z")
#: Length of the release-id hash appended when a derived name has to be shortened (32 bits: collisions between
#: two releases of one project are negligible).
NAME_HASH_CHARS = 8
#: The local path of verify_release.py: a plain path (no leading '-', no ':', no spaces), at most 1024 characters.
VERIFIER_RE = re.compile(r"[A-Za-z0-9._/+][A-Za-z0-9._/+-]{0,1023}")


class HydrationError(ValueError):
    """Invalid runbook inputs; ``problems`` are one-line messages."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class Step:
    """One runbook step: a title, why it is needed, the commands (argv lists) it runs on the workstation, and
    checks: ``(argv, expected output, message)``; the script stops with the message unless argv prints exactly the
    expected output."""

    title: str
    why: tuple[str, ...]
    commands: tuple[tuple[str, ...], ...]
    checks: tuple[tuple[tuple[str, ...], str, str], ...] = ()


@dataclass(frozen=True)
class HydrationRunbook:
    release: str
    snapshot: str
    disk: str
    vm: str
    steps: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def config_key(self) -> str:
        return f"gke.weights.hyperdisk_ml.snapshots.{self.release}"

    def gcloud_commands(self) -> list[tuple[str, ...]]:
        """Every gcloud argv of the runbook, checks included."""
        argvs = [c for s in self.steps for c in (*s.commands, *(argv for argv, _, _ in s.checks))]
        return [c for c in argvs if c[0] == "gcloud"]


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def resource_name(stem: str, suffix: str = "") -> str:
    """A Compute Engine name from ``stem`` (lowercased, other characters as dashes) and ``suffix``; past 63
    characters the stem is shortened and a hash of it appended, so distinct stems keep distinct names."""
    slug = _slug(stem)
    if not slug[:1].isalpha():
        slug = "w-" + slug  # names start with a letter
    name = f"{slug}{suffix}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(stem.encode()).hexdigest()[:NAME_HASH_CHARS]
    keep = 63 - len(suffix) - NAME_HASH_CHARS - 1
    return f"{slug[:keep].rstrip('-')}-{digest}{suffix}"


def snapshot_name(model: str, revision: str) -> str:
    """``<model>-<first 12 hex of the revision>``: the snapshot holds the release folder ``<model>/<revision>/``, so
    it is named after the folder (as in stacks/Pulumi.staging.yaml) and several releases may share it."""
    return resource_name(f"{model}-{revision[:12]}")


def _problems(
    project: str,
    zone: str,
    bucket: str,
    prefix: str,
    release: str,
    size_gib: int,
    throughput_mib_s: int,
    machine_type: str,
    subnet: str | None,
    verifier: str,
) -> list[str]:
    problems = []
    if not PROJECT_RE.fullmatch(project):
        problems.append(f"project {shown(project)} is not a project id ({PROJECT_RE.pattern})")
    if not ZONE_RE.fullmatch(zone):
        problems.append(f"zone {shown(zone)} is not a zone such as us-central1-a")
    if not BUCKET_RE.fullmatch(bucket):
        problems.append(f"bucket {shown(bucket)} is not a weights bucket name ({BUCKET_RE.pattern}, no gs://)")
    model, _, revision = prefix.strip("/").partition("/")
    if not vr.MODEL_RE.fullmatch(model) or not vr.REVISION_RE.fullmatch(revision):
        problems.append(f"prefix {shown(prefix)} must be <model>/<40 hex revision>, the staged release folder")
    if re.fullmatch(RELEASE_ID_PATTERN.rstrip("$"), release) is None:
        problems.append(f"release {shown(release)} is not a release id ({RELEASE_ID_PATTERN})")
    if not HYPERDISK_ML_MIN_GIB <= size_gib <= HYPERDISK_ML_MAX_GIB:
        problems.append(
            f"size {size_gib} GiB is outside Hyperdisk ML's {HYPERDISK_ML_MIN_GIB}-{HYPERDISK_ML_MAX_GIB} GiB"
        )
    if throughput_mib_s < HYPERDISK_ML_MIN_THROUGHPUT_MIB_S:
        problems.append(
            f"provisioned throughput {throughput_mib_s} MiB/s is below Hyperdisk ML's minimum "
            f"{HYPERDISK_ML_MIN_THROUGHPUT_MIB_S} MiB/s"
        )
    if not NAME_RE.fullmatch(machine_type):
        problems.append(f"machine type {shown(machine_type)} is not a machine type name")
    if subnet is not None and not re.fullmatch(r"[a-z]([-a-z0-9/]{0,200}[a-z0-9])?", subnet):
        problems.append(f"subnet {shown(subnet)} is not a subnet name or path")
    if VERIFIER_RE.fullmatch(verifier) is None:
        # It is `gcloud compute scp`'s source argument: a leading '-' would be read as one of its flags
        # (--scp-flag=-oProxyCommand=... runs a command), a ':' as a remote host, a space or newline splits it.
        problems.append(
            f"verifier {shown(verifier)} must be a local file path of letters, digits and ._/+- not starting with '-'"
        )
    return problems


def _remote(vm: str, common: list[str], iap: list[str], *lines: str) -> tuple[str, ...]:
    """``gcloud compute ssh VM --command=...`` running ``lines`` under ``set -euo pipefail``."""
    script = "; ".join(("set -euo pipefail", *lines))
    return ("gcloud", "compute", "ssh", vm, *common, *iap, f"--command={script}")


def hydration_runbook(
    *,
    project: str,
    zone: str,
    bucket: str,
    prefix: str,
    release: str,
    size_gib: int,
    provisioned_throughput_mib_s: int,
    machine_type: str = DEFAULT_MACHINE_TYPE,
    subnet: str | None = None,
    verifier: str = "components/serving/verify_release.py",
) -> HydrationRunbook:
    """The steps for one release (raises HydrationError listing every invalid input).

    ``subnet``: when given, the VM gets no external address there (the subnet needs Private Google Access for
    ``gcloud storage``) and ssh/scp go through IAP TCP forwarding; otherwise the VM uses the project's default
    network with an ephemeral external address. ``verifier``: local path of ``verify_release.py``, copied to the VM.
    """
    problems = _problems(
        project, zone, bucket, prefix, release, size_gib, provisioned_throughput_mib_s, machine_type, subnet, verifier
    )
    if problems:
        raise HydrationError(problems)
    prefix = prefix.strip("/")
    revision = prefix.partition("/")[2]
    m = ZONE_RE.fullmatch(zone)
    assert m is not None
    region = m.group("region")
    model = prefix.partition("/")[0]
    snap = snapshot_name(model, revision)
    disk = resource_name(f"hydrate-{model}-{revision[:12]}")
    vm = resource_name(f"hydrate-{model}-{revision[:12]}", "-vm")
    # Label values: lowercase letters, digits, '-' and '_', at most 63 characters.
    labels = f"--labels=llm-serving-io-model={_slug(model)[:63]},llm-serving-io-revision={revision}"
    common = [f"--project={project}", f"--zone={zone}"]
    iap = ["--tunnel-through-iap"] if subnet else []
    folder_uri = f"gs://{bucket}/{prefix}"
    device = f"/dev/disk/by-id/google-{DEVICE_NAME}"
    # Remote command lines: every interpolated value validated above AND shell-quoted (the remote shell parses them).
    q = shlex.quote
    verify_dir = f"python3 {REMOTE_VERIFIER} dir --path {MOUNT_POINT} --expect-revision {q(revision)}"
    verify_gcs = (
        f"python3 {REMOTE_VERIFIER} gcs --bucket {q(bucket)} --prefix {q(prefix)} --expect-revision {q(revision)}"
    )
    network = [f"--subnet={subnet}", "--no-address"] if subnet else []

    steps = (
        Step(
            "Create the temporary Hyperdisk ML disk",
            (
                f"{WRITE_ACCESS_MODE}: written once by one VM. The stack's serving disks are created READ_ONLY_MANY from",
                "the snapshot of this disk; this disk itself never needs another access mode.",
                "gcloud's GB is GiB (2^30 bytes) for Compute Engine disk sizes.",
                "The help text of gcloud 528 still says --provisioned-throughput is 'only for hyperdisk-throughput'; the",
                "Compute Engine API takes provisionedThroughput for hyperdisk-ml too (components/weights.py sets it).",
            ),
            (
                (
                    "gcloud",
                    "compute",
                    "disks",
                    "create",
                    disk,
                    *common,
                    f"--type={DISK_TYPE}",
                    f"--size={size_gib}GB",
                    f"--provisioned-throughput={provisioned_throughput_mib_s}",
                    f"--access-mode={WRITE_ACCESS_MODE}",
                    labels,
                ),
            ),
        ),
        Step(
            "Create the temporary VM with the disk attached",
            (
                f"Not verifiable offline: that {machine_type} attaches Hyperdisk ML and boots from {BOOT_DISK_TYPE} in "
                f"{zone};",
                "see https://cloud.google.com/compute/docs/disks/hd-types/hyperdisk-ml#machine-series-support.",
                "storage-ro: the VM only reads the bucket; its service account needs roles/storage.objectViewer on it.",
                f"The VM deletes itself after {VM_MAX_RUN_DURATION} if this runbook is abandoned; the data disk is kept "
                "(auto-delete=no).",
            ),
            (
                (
                    "gcloud",
                    "compute",
                    "instances",
                    "create",
                    vm,
                    *common,
                    f"--machine-type={machine_type}",
                    f"--image-family={IMAGE_FAMILY}",
                    f"--image-project={IMAGE_PROJECT}",
                    f"--boot-disk-type={BOOT_DISK_TYPE}",
                    f"--disk=name={disk},device-name={DEVICE_NAME},mode=rw,boot=no,auto-delete=no",
                    "--scopes=storage-ro",
                    "--shielded-secure-boot",
                    f"--max-run-duration={VM_MAX_RUN_DURATION}",
                    "--instance-termination-action=DELETE",
                    *network,
                    labels,
                ),
            ),
        ),
        Step(
            "Copy the verifier to the VM and check the staged folder",
            (
                "The same verify_release.py the serving pods run; gcs mode compares every object's size and crc32c with",
                "the manifest. If ssh is refused right after the VM was created, wait a few seconds and repeat the step.",
            ),
            (
                ("gcloud", "compute", "scp", verifier, f"{vm}:{REMOTE_VERIFIER}", *common, *iap),
                _remote(vm, common, iap, verify_gcs),
            ),
        ),
        Step(
            "Format, mount and fill the disk from the release folder",
            (
                "ext4 as the stack's PersistentVolume declares (fsType ext4); mkfs options from Compute Engine's",
                "'Format and mount a non-boot disk' guide. The release folder's content becomes the disk's root.",
            ),
            (
                _remote(
                    vm,
                    common,
                    iap,
                    f"sudo mkfs.ext4 -m 0 -E lazy_itable_init=0,lazy_journal_init=0,discard {device}",
                    f"sudo mkdir -p {MOUNT_POINT}",
                    f"sudo mount -o discard,defaults {device} {MOUNT_POINT}",
                    f'sudo chown "$(id -u):$(id -g)" {MOUNT_POINT}',
                    "umask 022",  # world-readable files: the pods read them as a non-root user
                    f"gcloud storage rsync --recursive {q(folder_uri)} {MOUNT_POINT}",
                ),
            ),
        ),
        Step(
            "Verify the disk against the manifest",
            ("dir mode hashes every file with SHA-256; do not continue unless it prints 'verified'.",),
            (_remote(vm, common, iap, verify_dir),),
        ),
        Step(
            "Unmount, detach and delete the VM",
            ("The snapshot is taken of a disk no VM has mounted, so every write is on the disk.",),
            (
                _remote(vm, common, iap, "sync", f"sudo umount {MOUNT_POINT}"),
                ("gcloud", "compute", "instances", "detach-disk", vm, *common, f"--disk={disk}"),
                ("gcloud", "compute", "instances", "delete", vm, *common, "--quiet"),
            ),
        ),
        Step(
            "Snapshot the disk",
            (
                f"Stored in {region}, the region of the serving disks; create fails if the name exists (never replaced).",
            ),
            (
                (
                    "gcloud",
                    "compute",
                    "snapshots",
                    "create",
                    snap,
                    f"--project={project}",
                    f"--source-disk={disk}",
                    f"--source-disk-zone={zone}",
                    f"--storage-location={region}",
                    f"--snapshot-type={SNAPSHOT_TYPE}",
                    f"--description=Hyperdisk ML source of release {release}: {folder_uri}/ verified by verify_release.py",
                    labels,
                ),
            ),
            (
                (
                    (
                        "gcloud",
                        "compute",
                        "snapshots",
                        "describe",
                        snap,
                        f"--project={project}",
                        "--format=value(status)",
                    ),
                    "READY",
                    f"stop: snapshot {snap} is not READY; wait, then re-run this check before deleting the disk",
                ),
            ),
        ),
        Step(
            "Delete the temporary disk",
            ("The snapshot is READY (checked above): the disk has served its purpose.",),
            (("gcloud", "compute", "disks", "delete", disk, *common, "--quiet"),),
        ),
        Step(
            "Name the snapshot in the stack",
            (
                "Add to stacks/Pulumi.<stack>.yaml under llm-serving:gke -> weights -> hyperdisk_ml -> snapshots:",
                f"  {release}: {snap}",
            ),
            (("echo", f"{release}: snapshot {snap} (set llm-serving:gke.weights.hyperdisk_ml.snapshots.{release})"),),
        ),
    )
    return HydrationRunbook(release=release, snapshot=snap, disk=disk, vm=vm, steps=steps)


def _render_command(argv: tuple[str, ...]) -> str:
    """One command, one flag per continuation line, every token shell-quoted."""
    head = [shlex.quote(a) for a in argv if not a.startswith("--")]
    flags = [shlex.quote(a) for a in argv if a.startswith("--")]
    if not flags:
        return " ".join(head)
    return " \\\n    ".join([" ".join(head), *flags])


def render_runbook(book: HydrationRunbook) -> str:
    """The runbook as a bash script: deterministic text for the same inputs."""
    lines = [
        "#!/usr/bin/env bash",
        f"# Hyperdisk ML hydration runbook for release {book.release}",
        "# (rendered by `llm-serving release hydrate-runbook`).",
        f"# Produces snapshot {book.snapshot}, the source the stack creates READ_ONLY_MANY serving disks from.",
        "# Run step by step from a workstation with an authenticated gcloud; every step must succeed.",
        "set -euo pipefail",
    ]
    for i, step in enumerate(book.steps, 1):
        # Step headers are padded to the repository's ~110-column lines, with at least a short rule.
        lines += ["", f"# ---- {i}. {step.title} " + "-" * max(3, 100 - len(step.title))]
        lines += [f"# {w}" for w in step.why]
        lines += [_render_command(c) for c in step.commands]
        for argv, expected, message in step.checks:
            command = " ".join(shlex.quote(a) for a in argv)
            lines.append(
                f'test "$({command})" = {shlex.quote(expected)} || {{ echo {shlex.quote(message)} >&2; exit 1; }}'
            )
    return "\n".join(lines) + "\n"
