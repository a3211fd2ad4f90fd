"""Measurement records in Cloud Storage: what the in-cluster Job uploads, and ``llm-serving bench fetch``.

    llm-serving bench ... --record-uri gs://<bucket>/measurements/<name>.json
    llm-serving bench fetch gs://<bucket>/measurements/<name>.json --to stacks/measurements/<name>.json

* **Upload, create-only.** ``--record-uri`` writes the record with ``ifGenerationMatch=0``, which Cloud Storage
  accepts only while no live object of that name exists (https://cloud.google.com/storage/docs/request-preconditions):
  a record is written once and never replaced. An existing object is an error, except one with exactly these bytes
  (size and CRC32C), which is what a retried request of ours that had already landed leaves behind. The in-cluster
  identity holds ``storage.objectCreator`` on ``measurements/`` only; it cannot read the object back, so an
  existing object it cannot inspect is reported as existing.
* **Fetch, validated, create-only.** The object is downloaded (at most ``MAX_RECORD_BYTES``, the bound the stack
  loader reads records under, at the generation whose size was checked, CRC32C-verified by the client), parsed by
  the same strict JSON reader and validated by the same schema as a record a pool cites
  (infra/config/measurement.py ``load_measurement_file``). Only a valid record is written, byte for byte as stored,
  and only to a path that does not exist yet (a temporary file linked into place, so a failed write leaves
  nothing behind).

Every failure is one :class:`RecordStoreError` line; the CLI prints it as ``error: ...`` and exits 2.
"""

from __future__ import annotations

import base64
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from ...config.documents import MAX_JSON_BYTES, DocumentError, load_json_document
from ...config.measurement import Measurement, validation_problems
from .runner import BenchError

if TYPE_CHECKING:  # imported lazily: the CLI registers the commands without importing the client
    from google.cloud.storage import Client

#: ``gs://<bucket>/<object>.json``. Bucket names as the stack's ``gke.weights.bucket`` accepts them (no dots, 3-63
#: characters); object names of portable characters in ``/``-separated segments, no empty, ``.`` or ``..`` segment.
GS_URI_RE = re.compile(
    r"^gs://(?P<bucket>[a-z0-9][a-z0-9_-]{1,61}[a-z0-9])/(?P<name>(?:[A-Za-z0-9_-][A-Za-z0-9._-]*/)*"
    r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.json)\Z"
)
#: A local record's file name: what ``serving.<role>.measured`` accepts (``stacks/measurements/<name>.json``).
LOCAL_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+\.json\Z")
#: The largest record fetched: the bound the stack loader reads every record under (a larger one could not be cited).
MAX_RECORD_BYTES = MAX_JSON_BYTES
#: Per-request timeout: a record is at most 64 KiB, so even a slow link answers in seconds; 60 s bounds a hung call.
REQUEST_TIMEOUT_S = 60.0
CONTENT_TYPE = "application/json"


class RecordStoreError(BenchError):
    """An upload or fetch that was refused or failed; the message is one line."""


def parse_gs_uri(uri: str, flag: str) -> tuple[str, str]:
    """``gs://b/o.json`` -> (``b``, ``o.json``); RecordStoreError naming ``flag`` otherwise."""
    from ..inputs import redact_url, shown

    m = GS_URI_RE.fullmatch(uri)
    if not m:
        raise RecordStoreError(
            f"{flag} {shown(redact_url(uri))}: expected gs://<bucket>/<path>.json (bucket: 3-63 of a-z 0-9 - _; "
            "path: segments of A-Z a-z 0-9 . _ -)"
        )
    return m["bucket"], m["name"]


def storage_client(project: str | None = None) -> Client:
    """The google-cloud-storage client with Application Default Credentials (Workload Identity in the cluster);
    ``STORAGE_EMULATOR_HOST`` points it at an emulator (the tests)."""
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import storage

    try:
        return storage.Client(project=project)
    except DefaultCredentialsError as err:
        raise RecordStoreError(
            f"no Google credentials for Cloud Storage ({' '.join(str(err).split())}); run "
            "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"
        ) from None


def crc32c_b64(data: bytes) -> str:
    """Cloud Storage's ``crc32c`` of ``data``: base64 of the big-endian CRC32C."""
    import google_crc32c

    return base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode("ascii")


def _api_error(uri: str, err: Exception) -> RecordStoreError:
    return RecordStoreError(f"{uri}: {type(err).__name__}: {' '.join(str(err).split())[:300]}")


def upload_record(client: Client, bucket: str, name: str, data: bytes) -> Literal["written", "unchanged"]:
    """Create ``gs://bucket/name`` with ``data``; never replace an object. ``unchanged`` when the object already
    holds exactly these bytes."""
    from google.api_core.exceptions import Forbidden, GoogleAPICallError, PreconditionFailed
    from google.auth.exceptions import GoogleAuthError

    uri = f"gs://{bucket}/{name}"
    b = client.bucket(bucket)
    try:
        b.blob(name).upload_from_string(
            data, content_type=CONTENT_TYPE, if_generation_match=0, checksum="crc32c", timeout=REQUEST_TIMEOUT_S
        )
        return "written"
    except PreconditionFailed:
        pass
    except (GoogleAPICallError, GoogleAuthError, OSError) as err:  # OSError: requests' connection errors
        raise _api_error(uri, err) from None
    try:
        existing = b.get_blob(name, timeout=REQUEST_TIMEOUT_S)
    except Forbidden:  # the Job's identity may create, not read: it cannot tell our own retried write from another
        existing = None
    except (GoogleAPICallError, GoogleAuthError, OSError) as err:
        raise _api_error(uri, err) from None
    if existing is not None and existing.size == len(data) and existing.crc32c == crc32c_b64(data):
        return "unchanged"
    raise RecordStoreError(
        f"{uri}: already exists; a measurement record is written once and never overwritten "
        "(measure again under a new name, or retire the old object deliberately)"
    )


def fetch_record(client: Client, uri: str, to: Path) -> Measurement:
    """Download the record at ``uri``, validate it as a pool would read it, and write it to ``to`` (which must not
    exist). Nothing is written unless every check passed."""
    from google.api_core.exceptions import GoogleAPICallError, NotFound, PreconditionFailed
    from google.auth.exceptions import GoogleAuthError

    bucket, name = parse_gs_uri(uri, "bench fetch")
    if not LOCAL_NAME_RE.match(to.name):
        raise RecordStoreError(
            f"--to {to}: the file name must be <name>.json of A-Z a-z 0-9 . _ - (what "
            "serving.<role>.measured cites as stacks/measurements/<name>.json)"
        )
    if to.exists() or to.is_symlink():
        raise RecordStoreError(f"--to {to}: already exists; a measurement record is written once")
    try:
        blob = client.bucket(bucket).get_blob(name, timeout=REQUEST_TIMEOUT_S)
        if blob is None:
            raise RecordStoreError(f"{uri}: no such object")
        if blob.size is not None and blob.size > MAX_RECORD_BYTES:
            raise RecordStoreError(
                f"{uri}: {blob.size} bytes, more than the {MAX_RECORD_BYTES} a stack reads a record "
                "under (MAX_JSON_BYTES); refused"
            )
        data = blob.download_as_bytes(if_generation_match=blob.generation, checksum="crc32c", timeout=REQUEST_TIMEOUT_S)
    except (NotFound, PreconditionFailed):
        raise RecordStoreError(f"{uri}: the object was replaced or removed while it was read; fetch again") from None
    except (GoogleAPICallError, GoogleAuthError, OSError) as err:  # OSError: requests' connection errors
        raise _api_error(uri, err) from None
    try:
        doc = load_json_document(data, uri)
    except DocumentError as err:
        raise RecordStoreError(str(err)) from None
    try:
        record = Measurement.model_validate(doc, strict=False)
    except ValidationError as err:
        problems = validation_problems(err)
        raise RecordStoreError(
            f"{uri}: not a valid measurement record, {len(problems)} problem(s): " + "; ".join(problems[:5])
        ) from None
    write_new_file(to, data)
    return record


def write_new_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` only if ``path`` does not exist: a temporary file in the same directory, hard-linked
    into place (the link fails if the name was taken meanwhile), so no reader ever sees a half-written record."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise RecordStoreError(f"--to {path}: cannot write: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    except FileExistsError:
        raise RecordStoreError(f"--to {path}: already exists; a measurement record is written once") from None
    except OSError as err:
        raise RecordStoreError(f"--to {path}: cannot write: {err.strerror or err}") from None
    finally:
        os.unlink(tmp)
