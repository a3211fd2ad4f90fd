"""``llm-serving release stage``: turn a local model folder into an immutable release folder in Cloud Storage.

    llm-serving release stage SOURCE_DIR --bucket B --model M --revision R [--tokenizer-revision T]
        [--release-template stacks/releases/prod/<release>.json [--write FILE]]

copies every file of SOURCE_DIR (for example a Hugging Face snapshot already on disk) to
``gs://<bucket>/<model>/<revision>/`` with the official ``google-cloud-storage`` client, then writes
``manifest.json`` beside the files (format: ``components/serving/verify_release.py``, which the serving pods run
against the same folder). Serving never downloads from a model hub at boot: it reads this regional folder.

Why each rule:

* **Create-only writes.** Every object, the manifest included, is written with ``ifGenerationMatch=0``, which Cloud
  Storage only accepts while no live object of that name exists
  (https://cloud.google.com/storage/docs/request-preconditions). "The control plane never overwrites a model
  directory": a release folder that pods already serve can therefore never change under them.
* **Re-running is a no-op.** Before uploading, the folder is listed; an object whose size and crc32c equal the
  source file's is reported ``unchanged`` and not sent again, so an interrupted staging run is simply re-run. A
  differing object is an error naming the object and both checksums, and nothing is uploaded: a release folder is
  never overwritten, a changed model is a new revision. An object in the folder that the source lacks, and an
  existing manifest with other content, are errors too. A concurrent writer that wins the race between listing and
  upload is caught by the precondition (HTTP 412) and compared the same way.
* **Checksums end to end.** One read of each file computes its SHA-256 (for the ``dir`` verifier) and its CRC32C
  (what Cloud Storage stores as ``crc32c``). Uploads carry that CRC32C, so Cloud Storage rejects an object whose
  bytes differ from what the manifest will say (for files up to 8 MiB the bytes are read once more, checked
  against it and sent in one request with the client's own crc32c; larger files go through a resumable upload
  with ``crc32c_checksum_value`` plus the client's incremental crc32c check).
* **Manifest last.** ``manifest.json`` is written only after every file is in place, so a folder with a manifest is
  complete, and the verifiers treat a folder without one as not staged.
* **Nothing skipped silently.** Only the top-level directories in :data:`EXCLUDED_TOP_LEVEL_DIRS` are left out
  (each reported with its file count and reason); every other entry must be a regular file, or a symlink to one
  inside the source folder or, for a Hugging Face cache snapshot (``.../snapshots/<revision>/``), inside that
  repository's ``blobs/`` folder, where the cache keeps the real files. Such symlinks are staged as the files they
  point to; any other symlink, special file, or a root ``manifest.json`` (the manifest's own name) is an error.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from components.serving import verify_release as vr

from ..inputs import InputError, create_new_file, printable, read_input_file, shown

if TYPE_CHECKING:  # imported lazily at run time: the CLI registers this command without needing them
    from google.cloud.storage import Bucket, Client

#: Top-level directories of a model folder that are not model content, and why they are left out.
EXCLUDED_TOP_LEVEL_DIRS: dict[str, str] = {
    ".git": "git metadata of a cloned repository (history, not the files of this revision)",
    ".cache": "download bookkeeping of huggingface_hub (.cache/huggingface/ in a --local-dir download)",
}
#: Bucket names the stack accepts for its weights bucket (infra/config/gke.py WeightStores.bucket: no dots, 3-63
#: characters), within Cloud Storage's naming rules (https://cloud.google.com/storage/docs/buckets#naming).
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]\Z")  # \Z: ``$`` would accept a final newline
#: Concurrent uploads: enough parallel streams to keep a multi-Gbit/s uplink busy with shard-sized objects, while
#: memory stays bounded at workers x UPLOAD_CHUNK_BYTES.
DEFAULT_WORKERS = 8
#: Upper bound of ``--workers``: more streams than this from one machine only contend with each other.
MAX_WORKERS = 64
#: Resumable-upload chunk: the client buffers one chunk per upload in memory; must be a multiple of 256 KiB
#: (the JSON API's chunk granularity). 32 MiB keeps per-chunk request overhead small at any usual uplink speed.
UPLOAD_CHUNK_BYTES = 32 << 20
#: Files up to this size are uploaded in one multipart request: the google-cloud-storage client's own threshold
#: between multipart and resumable uploads (8 MiB).
SMALL_FILE_BYTES = 8 << 20
#: Per-request timeout of the client's HTTP calls: one 32 MiB chunk at a slow 4 Mbit/s uplink takes ~70 s.
REQUEST_TIMEOUT_SECONDS = 120.0
#: Largest Cloud Storage object (5 TiB, https://cloud.google.com/storage/quotas#objects).
MAX_OBJECT_BYTES = 5 << 40
#: Content type of every weight object: the loaders read bytes, never the type, and a fixed value keeps staging
#: independent of the machine's mimetypes database.
CONTENT_TYPE = "application/octet-stream"
MANIFEST_CONTENT_TYPE = "application/json"
#: Wording every overwrite refusal ends with.
NEVER_OVERWRITTEN = "a release folder is never overwritten: stage a new revision"


class StageError(Exception):
    """Staging refused or failed; ``problems`` are one-line messages, each complete on its own."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class ExcludedPath:
    """A top-level directory of the source that is not staged."""

    path: str
    files: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}/ ({self.files} file{'' if self.files == 1 else 's'}): {self.reason}"


@dataclass(frozen=True)
class SourceFile:
    """A file to stage: its path in the release and the regular file whose bytes it has."""

    path: str
    real_path: Path


@dataclass(frozen=True)
class StageResult:
    """What one ``stage_release`` call found and did."""

    bucket: str
    model: str
    revision: str
    tokenizer_revision: str
    files: tuple[vr.ManifestFile, ...]
    uploaded: tuple[str, ...]
    unchanged: tuple[str, ...]
    excluded: tuple[ExcludedPath, ...]
    manifest: Literal["written", "unchanged"]
    uploaded_bytes: int
    seconds: float

    @property
    def folder(self) -> str:
        return f"{self.model}/{self.revision}/"

    @property
    def folder_uri(self) -> str:
        return f"gs://{self.bucket}/{self.folder}"

    @property
    def manifest_uri(self) -> str:
        return f"{self.folder_uri}{vr.MANIFEST_NAME}"

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def identity_fields(self) -> dict[str, str]:
        """The release identity fields staging determines."""
        return identity_fields(self.bucket, self.model, self.revision, self.tokenizer_revision)

    def summary_lines(self) -> list[str]:
        lines = [
            f"staged {self.folder_uri}: {len(self.files)} files, {vr.human_bytes(self.total_bytes)}; "
            f"uploaded {len(self.uploaded)} ({vr.human_bytes(self.uploaded_bytes)}), "
            f"unchanged {len(self.unchanged)}; manifest {self.manifest} ({self.seconds:.1f} s)"
        ]
        lines += [f"excluded {e}" for e in self.excluded]
        return lines


# ---- inputs ------------------------------------------------------------------------------------------------------
def input_problems(source_dir: Path, bucket: str, model: str, revision: str, tokenizer_revision: str) -> list[str]:
    """Every problem with the arguments, before anything is read or sent."""
    problems = []
    if not source_dir.exists():
        problems.append(f"source directory {printable(source_dir)} does not exist")
    elif not source_dir.is_dir():
        problems.append(f"source {printable(source_dir)} is not a directory")
    if not BUCKET_RE.match(bucket) or bucket.startswith("goog") or "google" in bucket:
        problems.append(
            f"bucket name {shown(bucket)} is invalid: 3-63 characters of a-z, 0-9, '-' and '_', starting and ending "
            f"with a letter or digit, not starting with 'goog' nor containing 'google' (no gs:// prefix)"
        )
    if not vr.MODEL_RE.match(model):
        problems.append(
            f"model {shown(model)} must match {vr.MODEL_RE.pattern} (one path segment of the release folder)"
        )
    checks = [("--revision", revision)] + (
        [("--tokenizer-revision", tokenizer_revision)] if tokenizer_revision != revision else []
    )
    for flag, value in checks:
        if not vr.REVISION_RE.match(value):
            problems.append(f"{flag} must be a commit: 40 lowercase hex characters, got {shown(value)}")
    return problems


# ---- the source folder -------------------------------------------------------------------------------------------
def _allowed_roots(root: Path) -> list[Path]:
    """Where staged symlinks may point: the source itself and, for a Hugging Face cache snapshot
    (``<cache>/models--org--name/snapshots/<revision>``), that repository's ``blobs/`` folder, but only when it
    resolves inside that repository: a ``blobs`` that is itself a link to another folder (or whose repository is a
    link elsewhere) would let the snapshot's links read any file the process can, so it is not followed."""
    roots = [root]
    repo = root.parent.parent
    blobs = repo / "blobs"
    if root.parent.name == "snapshots" and blobs.is_dir() and not blobs.is_symlink():
        real_repo, real_blobs = Path(os.path.realpath(repo)), Path(os.path.realpath(blobs))
        if real_blobs.parent == real_repo and real_blobs.name == "blobs":
            roots.append(real_blobs)
    return roots


def _count_files(path: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def scan_source(root: Path, revision: str) -> tuple[list[SourceFile], list[ExcludedPath]]:
    """Files to stage (sorted by path) and the excluded top-level directories; StageError lists every entry that
    cannot be staged."""
    root = Path(os.path.realpath(root))
    problems: list[str] = []
    if root.parent.name == "snapshots" and vr.REVISION_RE.match(root.name) and root.name != revision:
        problems.append(
            f"{printable(root)} is the Hugging Face snapshot of revision {printable(root.name)}, not --revision {revision}"
        )
    allowed = _allowed_roots(root)
    files: list[SourceFile] = []
    excluded: list[ExcludedPath] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as e:
            problems.append(f"cannot list {printable(directory)}: {e.strerror or e}")
            continue
        for entry in entries:
            path = Path(entry.path)
            rel = path.relative_to(root).as_posix()
            if directory == root and entry.name in EXCLUDED_TOP_LEVEL_DIRS:
                # Whatever its type: a git worktree's .git is a file naming the real git directory.
                count = _count_files(path) if entry.is_dir(follow_symlinks=False) else 1
                excluded.append(ExcludedPath(entry.name, count, EXCLUDED_TOP_LEVEL_DIRS[entry.name]))
                continue
            if rel == vr.MANIFEST_NAME:
                problems.append(
                    f"{printable(path)} has the release manifest's name: rename or remove it from the source"
                )
                continue
            try:
                mode = os.lstat(path).st_mode
            except OSError as e:
                problems.append(f"cannot stat {printable(path)}: {e.strerror or e}")
                continue
            if stat.S_ISDIR(mode):
                pending.append(path)
            elif stat.S_ISREG(mode):
                files.append(SourceFile(rel, path))
            elif stat.S_ISLNK(mode):
                target = Path(os.path.realpath(path))
                if not any(target.is_relative_to(a) for a in allowed):
                    problems.append(
                        f"symlink {printable(Path(rel))} points outside the source folder (to {printable(target)}): refusing to stage it"
                    )
                elif not target.exists():
                    problems.append(f"symlink {printable(Path(rel))} is broken (points to {printable(target)})")
                elif not target.is_file():
                    problems.append(
                        f"symlink {printable(Path(rel))} points to {printable(target)}, which is not a regular file"
                    )
                else:
                    files.append(SourceFile(rel, target))
            else:
                problems.append(f"{printable(Path(rel))} is not a regular file, directory or symlink: cannot stage it")
    files.sort(key=lambda f: f.path)
    for f in files:
        problem = vr.path_problem(f.path)
        if problem:
            problems.append(f"{shown(f.path)} cannot be a release path: it {problem}")
    if not files and not problems:
        problems.append(
            f"{printable(root)} has no files to stage"
            + (f" (excluded: {', '.join(str(e) for e in excluded)})" if excluded else "")
        )
    if problems:
        raise StageError(problems)
    return files, excluded


def _crc32c_of(chunks: Iterable[bytes]) -> str:
    import google_crc32c

    crc = google_crc32c.Checksum()
    for chunk in chunks:
        crc.update(chunk)
    return vr.crc32c_to_base64(int.from_bytes(crc.digest(), "big"))


def hash_file(path: Path, on_bytes: Callable[[int], None] = lambda n: None) -> tuple[int, str, str]:
    """(size, hex SHA-256, base64 CRC32C) from one read of ``path``."""
    import hashlib

    import google_crc32c

    sha = hashlib.sha256()
    crc = google_crc32c.Checksum()
    size = 0
    # The path was resolved by scan_source: O_NOFOLLOW refuses a link swapped in since, O_NONBLOCK a FIFO, and
    # fstat on the open descriptor checks that what is read is a regular file (the manifest lists what was read).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{printable(path)} is no longer a regular file")
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(vr.HASH_CHUNK_BYTES):
            sha.update(chunk)
            crc.update(chunk)
            size += len(chunk)
            on_bytes(len(chunk))
    return size, sha.hexdigest(), vr.crc32c_to_base64(int.from_bytes(crc.digest(), "big"))


# ---- progress ----------------------------------------------------------------------------------------------------
class _Progress:
    """A rich progress bar in bytes on stderr, or nothing; thread-safe advancing."""

    def __init__(self, enabled: bool) -> None:
        self._lock = threading.Lock()
        self._bar: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(binary_units=True),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        if self._bar is None:
            yield lambda n: None
            return
        task_id = self._bar.add_task(description, total=total)

        def advance(n: int) -> None:
            with self._lock:
                self._bar.advance(task_id, n)

        yield advance

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


class _CountingReader(io.RawIOBase):
    """A read-only file wrapper that reports newly read bytes (a retried chunk is not counted twice)."""

    def __init__(self, raw: io.BufferedReader, on_bytes: Callable[[int], None]) -> None:
        super().__init__()
        self._raw = raw
        self._on_bytes = on_bytes
        self._high = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        end = self._raw.tell()
        if end > self._high:
            self._on_bytes(end - self._high)
            self._high = end
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()


# ---- Cloud Storage -----------------------------------------------------------------------------------------------
def _conflict(uri: str, size: int, crc32c: str | None, source: str, f: vr.ManifestFile) -> str:
    return (
        f"{uri} already exists with {size} bytes, crc32c {crc32c}, but source file {source} has {f.size} bytes, "
        f"crc32c {f.crc32c}: {NEVER_OVERWRITTEN}"
    )


def upload_file(
    bucket: Bucket, folder: str, f: vr.ManifestFile, source: Path, on_bytes: Callable[[int], None] = lambda n: None
) -> Literal["uploaded", "unchanged"]:
    """Create ``<folder><f.path>`` from ``source`` unless it exists; an existing object must have f's size and crc32c.

    Raises StageError when the object exists with other content, when the file changed since it was hashed, or
    when Cloud Storage holds other bytes than the manifest will claim."""
    from google.api_core.exceptions import PreconditionFailed
    from google.cloud.storage.exceptions import DataCorruption

    name = folder + f.path
    uri = f"gs://{bucket.name}/{name}"
    blob = bucket.blob(name, chunk_size=UPLOAD_CHUNK_BYTES)
    try:
        if f.size <= SMALL_FILE_BYTES:
            data = source.read_bytes()
            now = _crc32c_of([data])
            if len(data) != f.size or now != f.crc32c:
                raise StageError(
                    [
                        f"{source} changed while staging ({len(data)} bytes, crc32c {now}; hashed as "
                        f"{f.size} bytes, crc32c {f.crc32c}): re-run"
                    ]
                )
            blob.upload_from_string(
                data,
                content_type=CONTENT_TYPE,
                if_generation_match=0,
                checksum="crc32c",
                timeout=REQUEST_TIMEOUT_SECONDS,
            )
            on_bytes(len(data))
        else:
            with open(source, "rb") as raw:
                blob.upload_from_file(
                    _CountingReader(raw, on_bytes),
                    size=f.size,
                    content_type=CONTENT_TYPE,
                    if_generation_match=0,
                    checksum="crc32c",
                    crc32c_checksum_value=f.crc32c,
                    timeout=REQUEST_TIMEOUT_SECONDS,
                )
    except PreconditionFailed:  # someone created it after our listing (or a retried request of ours did)
        existing = bucket.get_blob(name, timeout=REQUEST_TIMEOUT_SECONDS)
        if existing is None:
            raise StageError(
                [
                    f"{uri}: Cloud Storage refused the create-only write (HTTP 412) but the object is gone "
                    f"again: another writer is working on this folder; re-run when it is done"
                ]
            ) from None
        if existing.size == f.size and existing.crc32c == f.crc32c:
            return "unchanged"
        raise StageError([_conflict(uri, existing.size or 0, existing.crc32c, str(source), f)]) from None
    except DataCorruption as e:  # the client deleted the corrupted object already
        raise StageError([f"{uri}: upload corrupted in transit ({e}): re-run"]) from None
    if blob.size != f.size or blob.crc32c != f.crc32c:
        raise StageError(
            [
                f"{uri} was stored with {blob.size} bytes, crc32c {blob.crc32c}, but the manifest says "
                f"{f.size} bytes, crc32c {f.crc32c}: the source file changed while staging; this revision's "
                f"folder now needs manual repair"
            ]
        )
    return "uploaded"


def _write_manifest(bucket: Bucket, name: str, data: bytes) -> Literal["written", "unchanged"]:
    from google.api_core.exceptions import PreconditionFailed

    blob = bucket.blob(name)
    try:
        blob.upload_from_string(
            data,
            content_type=MANIFEST_CONTENT_TYPE,
            if_generation_match=0,
            checksum="crc32c",
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
    except PreconditionFailed:
        return _compare_manifest(bucket, name, data)
    return "written"


def _compare_manifest(bucket: Bucket, name: str, data: bytes) -> Literal["unchanged"]:
    existing = bucket.blob(name).download_as_bytes(timeout=REQUEST_TIMEOUT_SECONDS)
    if existing != data:
        raise StageError(
            [
                f"gs://{bucket.name}/{name} already exists with other content than this source's manifest "
                f"({len(existing)} vs {len(data)} bytes): {NEVER_OVERWRITTEN}"
            ]
        )
    return "unchanged"


def _storage_client(project: str | None) -> Client:
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import storage

    try:
        return storage.Client(project=project)
    except DefaultCredentialsError as e:
        raise StageError(
            [
                f"no Google credentials for Cloud Storage ({e}); run `gcloud auth application-default "
                f"login` or set GOOGLE_APPLICATION_CREDENTIALS"
            ]
        ) from None


# ---- the command -------------------------------------------------------------------------------------------------
def stage_release(
    source_dir: Path | str,
    bucket: str,
    model: str,
    revision: str,
    tokenizer_revision: str | None = None,
    *,
    client: Client | None = None,
    project: str | None = None,
    workers: int = DEFAULT_WORKERS,
    progress: bool = False,
) -> StageResult:
    """Stage ``source_dir`` as ``gs://<bucket>/<model>/<revision>/`` (see the module docstring for the rules).

    ``tokenizer_revision`` defaults to ``revision`` (the tokenizer ships in the same repository commit). Raises
    StageError with every problem found; nothing is uploaded when the folder conflicts with the source.
    """
    from google.api_core.exceptions import GoogleAPICallError, NotFound

    started = time.monotonic()
    source = Path(source_dir)
    tokenizer_revision = revision if tokenizer_revision is None else tokenizer_revision
    problems = input_problems(source, bucket, model, revision, tokenizer_revision)
    if not 1 <= workers <= MAX_WORKERS:
        problems.append(f"workers must be between 1 and {MAX_WORKERS}, got {workers}")
    if problems:
        raise StageError(problems)
    sources, excluded = scan_source(source, revision)
    folder = f"{model}/{revision}/"
    too_long = [s.path for s in sources if len((folder + s.path).encode()) > vr.MAX_OBJECT_NAME_BYTES]
    if too_long:
        raise StageError(
            [
                f"object name {folder}{p} is longer than Cloud Storage's {vr.MAX_OBJECT_NAME_BYTES} bytes"
                for p in too_long
            ]
        )

    def hashed_file(s: SourceFile, advance: Callable[[int], None]) -> tuple[int, str, str]:
        try:
            return hash_file(s.real_path, advance)
        except OSError as e:
            raise StageError([f"cannot read {s.real_path}: {e.strerror or e}"]) from None

    with _Progress(progress) as bars:
        total = sum(s.real_path.stat().st_size for s in sources)
        with bars.task("hashing", total) as advance, ThreadPoolExecutor(max_workers=workers) as pool:
            hashed = list(pool.map(lambda s: hashed_file(s, advance), sources))
        entries = [vr.ManifestFile(s.path, size, sha, crc) for s, (size, sha, crc) in zip(sources, hashed, strict=True)]
        huge = [e.path for e in entries if e.size > MAX_OBJECT_BYTES]
        if huge:
            raise StageError([f"{p} is larger than Cloud Storage's 5 TiB object limit" for p in huge])
        try:
            manifest = vr.build_manifest(model, revision, tokenizer_revision, entries)
        except vr.ManifestError as e:
            raise StageError([f"cannot build the manifest: {e}"]) from None
        manifest_bytes = vr.render_manifest(manifest)
        by_path = {s.path: s for s in sources}

        client = client or _storage_client(project)
        gcs_bucket = client.bucket(bucket)
        try:
            listing = client.list_blobs(gcs_bucket, prefix=folder, timeout=REQUEST_TIMEOUT_SECONDS)
            existing = {b.name: b for b in listing}
        except NotFound:
            raise StageError([f"bucket gs://{bucket} does not exist (or this identity cannot see it)"]) from None
        except GoogleAPICallError as e:
            raise StageError([f"cannot list gs://{bucket}/{folder}: {e}"]) from None

        conflicts: list[str] = []
        to_upload: list[vr.ManifestFile] = []
        unchanged: list[str] = []
        for f in manifest.files:
            blob = existing.get(folder + f.path)
            if blob is None:
                to_upload.append(f)
            elif blob.size == f.size and blob.crc32c == f.crc32c:
                unchanged.append(f.path)
            else:
                conflicts.append(
                    _conflict(
                        f"gs://{bucket}/{blob.name}", blob.size or 0, blob.crc32c, str(by_path[f.path].real_path), f
                    )
                )
        listed = {folder + f.path for f in manifest.files} | {folder + vr.MANIFEST_NAME}
        for name in sorted(set(existing) - listed):
            conflicts.append(
                f"gs://{bucket}/{name} exists in the release folder but {name[len(folder) :]} is not "
                f"in the source: {NEVER_OVERWRITTEN}"
            )
        manifest_name = folder + vr.MANIFEST_NAME
        if manifest_name in existing and not conflicts:
            try:
                _compare_manifest(gcs_bucket, manifest_name, manifest_bytes)
            except StageError as e:
                conflicts += e.problems
        if conflicts:
            raise StageError(conflicts)

        uploaded = _upload_all(gcs_bucket, folder, to_upload, by_path, workers, bars, unchanged)
        manifest_state: Literal["written", "unchanged"] = "unchanged"  # an existing one was compared above
        if manifest_name not in existing:
            try:
                manifest_state = _write_manifest(gcs_bucket, manifest_name, manifest_bytes)
            except GoogleAPICallError as e:
                raise StageError(
                    [f"writing gs://{bucket}/{manifest_name} failed: {e}; every file is in place: re-run"]
                ) from None

    return StageResult(
        bucket=bucket,
        model=model,
        revision=revision,
        tokenizer_revision=tokenizer_revision,
        files=manifest.files,
        uploaded=tuple(sorted(uploaded)),
        unchanged=tuple(sorted(unchanged)),
        excluded=tuple(excluded),
        manifest=manifest_state,
        uploaded_bytes=sum(f.size for f in to_upload if f.path in uploaded),
        seconds=time.monotonic() - started,
    )


def _upload_all(
    bucket: Bucket,
    folder: str,
    files: list[vr.ManifestFile],
    by_path: dict[str, SourceFile],
    workers: int,
    bars: _Progress,
    unchanged: list[str],
) -> set[str]:
    """Upload ``files`` on ``workers`` threads; stop starting new uploads at the first failure and report all."""
    from google.api_core.exceptions import GoogleAPICallError

    uploaded: set[str] = set()
    problems: list[str] = []
    with bars.task("uploading", sum(f.size for f in files)) as advance, ThreadPoolExecutor(max_workers=workers) as pool:
        futures: dict[Future[str], vr.ManifestFile] = {
            pool.submit(upload_file, bucket, folder, f, by_path[f.path].real_path, advance): f for f in files
        }
        _, not_done = wait(futures, return_when=FIRST_EXCEPTION)
        cancelled = sum(1 for fut in not_done if fut.cancel())
        done, _ = wait(futures)
        for fut in sorted(done, key=lambda x: futures[x].path):
            f = futures[fut]
            if fut.cancelled():
                continue
            try:
                state = fut.result()
            except StageError as e:
                problems += e.problems
            except (GoogleAPICallError, OSError) as e:
                problems.append(f"uploading {f.path} to gs://{bucket.name}/{folder}{f.path} failed: {e}")
            else:
                if state == "uploaded":
                    uploaded.add(f.path)
                else:
                    unchanged.append(f.path)
    if problems:
        tail = f"; {cancelled} upload(s) not started" if cancelled else ""
        raise StageError(
            [
                *problems,
                f"manifest not written{tail}: fix the problem and re-run (uploaded files are kept "
                f"and reported unchanged)",
            ]
        )
    return uploaded


# ---- the release identity ----------------------------------------------------------------------------------------
def identity_fields(bucket: str, model: str, revision: str, tokenizer_revision: str) -> dict[str, str]:
    """``model_revision``, ``tokenizer_revision`` and ``weight_manifest`` of a release staged to this folder: known
    before the upload, so a release template can be checked before anything is sent."""
    return {
        "model_revision": revision,
        "tokenizer_revision": tokenizer_revision,
        "weight_manifest": f"gs://{bucket}/{model}/{revision}/{vr.MANIFEST_NAME}",
    }


def release_identity_json(fields: dict[str, str], template: Path | None = None) -> str:
    """The release identity block: the template with ``fields`` filled in and validated by ``ReleaseIdentity``,
    or, without a template, just those fields. Raises StageError."""
    if template is None:
        return json.dumps(fields, indent=2) + "\n"
    from pydantic import ValidationError

    from infra.config.documents import MAX_JSON_BYTES, DocumentError, load_json_document
    from infra.config.release import ReleaseIdentity

    try:
        # Bounded, non-blocking, regular files only; duplicate keys, NaN and over-deep nesting refused: the
        # stack loader's rules for release files.
        data = read_input_file("--release-template", template, MAX_JSON_BYTES, "MAX_JSON_BYTES")
        doc = load_json_document(data, f"release template {printable(template)}")
    except InputError as e:
        raise StageError([str(e)]) from None
    except DocumentError as e:
        raise StageError([str(e)]) from None
    if not isinstance(doc, dict):
        raise StageError([f"release template {printable(template)} is not a JSON object"])
    doc.update(fields)
    try:
        ReleaseIdentity.model_validate(doc)
    except ValidationError as e:
        details = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(release)'}: {err['msg']}" for err in e.errors()
        )
        raise StageError(
            [
                f"release template {printable(template)} with the staged fields is not a valid release: {printable(details, 400)}"
            ]
        ) from None
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_new_file(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` whole or not at all; an existing file is never replaced (release files are
    immutable too)."""
    try:
        create_new_file(path, text.encode("utf-8"))
    except InputError as e:
        raise StageError([f"{e}: refusing to overwrite a release file"]) from None
    except OSError as e:
        raise StageError([f"cannot write {printable(path)}: {e.strerror or e}"]) from None
