"""Verify a staged model release against its checksum manifest before vLLM may serve it.

Standard library only, Python 3.8 or later: it runs inside serving pods with the vLLM image's ``python3``, shipped
in a ConfigMap, or passed inline where there is no init container (Cloud Run, Vertex AI)::

    python3 -c "<source of this file>" gcs --bucket B --prefix <model>/<revision> --expect-revision R \\
        --exec -- vllm serve ...

so it never reads ``__file__`` and keeps its source well under Linux's 128 KiB limit for one argument
(``MAX_ARG_STRLEN``, see execve(2)).

The release folder ``gs://<bucket>/<model>/<revision>/`` holds the weight files and, beside them, ``manifest.json``
(written last by ``llm-serving release stage``; it does not list itself). This file owns the manifest format::

    {"files": [{"crc32c": "<base64>", "path": "config.json", "sha256": "<64 hex>", "size": 663}, ...],
     "format": "llm-serving.io/weight-manifest", "format_version": 1, "model": "<model>",
     "revision": "<40 hex>", "tokenizer_revision": "<40 hex>"}

rendered by :func:`render_manifest` with sorted keys, files sorted by path and no timestamps, so one release always
has the same manifest bytes. ``path`` is relative and POSIX; ``crc32c`` is the base64 of the big-endian CRC32C
exactly as Cloud Storage reports it in object metadata; ``sha256`` is hex. The stage tool computes both in the same
read of each file, so they describe the same bytes.

Modes (each also checks that the manifest's revision is ``--expect-revision``):

``gcs --bucket B --prefix <model>/<revision>``
    Downloads the manifest and lists the folder with the Cloud Storage JSON API (``objects.get`` with
    ``alt=media``, ``objects.list`` paginated with ``fields=``), then compares name, size and crc32c of every
    object with the manifest. Metadata only: the weights are not read a second time. For pods that stream the
    weights from ``gs://``. Cloud Storage itself checked each object's crc32c when it was written.
``dir --path /weights [--workers N]``
    Reads ``<path>/manifest.json`` and hashes every file with SHA-256 on N threads, comparing size and sha256. For a
    mounted or downloaded copy: a Hyperdisk ML volume, a GCS FUSE mount, the hydration VM's disk. A top-level
    ``lost+found/`` directory (created by ``mkfs.ext4`` on every ext4 volume, unreadable for non-root users) is
    skipped with a note when the manifest lists nothing under it.

Both modes report every problem, each on its own line naming the file and the difference: a file the manifest
lists but the release lacks (``missing``), a file the release has but the manifest does not list (``extra``), and
any size or checksum that differs. Only when everything matches does the script print one summary line (files,
bytes, seconds) and exit 0; with ``--exec -- CMD ...`` it then replaces itself with CMD (``os.execvp``), so the
container's main process becomes vLLM and receives the kubelet's / Cloud Run's signals directly.

Exit codes (``EXIT_*`` below): 0 verified; 1 a file differs, is missing or is extra; 2 bad command line; 3 the
manifest is absent or malformed; 4 the manifest belongs to another release (revision differs from
``--expect-revision``, or model/revision differ from the folder it sits in); 5 the release could not be read
(network, permissions, I/O) after the bounded retries; 6 ``--exec`` could not start the command.

Access to Cloud Storage: HTTPS to ``storage.googleapis.com`` with an OAuth access token from the metadata server
(``/computeMetadata/v1/instance/service-accounts/default/token`` with ``Metadata-Flavor: Google``), which GKE
Workload Identity, Cloud Run and Vertex AI all serve; ``GCE_METADATA_HOST`` overrides the metadata server's
address, as for Google's own client libraries. When ``STORAGE_EMULATOR_HOST`` is set (``http://127.0.0.1:9023``),
the requests go there instead, over plain HTTP unless it says ``https://``, and without a token: the
``google-cloud-storage`` client reads the same variable. Connections are made with ``http.client`` directly, so
``HTTP(S)_PROXY`` settings are not used (pods reach Google APIs through Private Google Access, not a proxy).
Transient failures (connection errors, timeouts, HTTP 408, 429 and 5xx) are retried with exponential backoff and
jitter, as Cloud Storage's retry strategy recommends (https://cloud.google.com/storage/docs/retry-strategy); each
retry is logged with its reason.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import re
import ssl
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple
from urllib.parse import quote, urlencode, urlsplit

# ---- the manifest format (imported by infra/offline/release/stage.py) --------------------------------------------

#: File name of the manifest inside the release folder; never listed in itself.
MANIFEST_NAME = "manifest.json"
#: Identifies the document type, so that an unrelated ``manifest.json`` is refused rather than misread.
MANIFEST_FORMAT = "llm-serving.io/weight-manifest"
#: Bump when the format changes; a verifier refuses versions it does not know instead of guessing.
MANIFEST_FORMAT_VERSION = 1
#: Keys of a version-1 manifest and of each of its file entries (unknown keys are refused).
MANIFEST_KEYS = frozenset({"format", "format_version", "model", "revision", "tokenizer_revision", "files"})
FILE_KEYS = frozenset({"path", "size", "sha256", "crc32c"})
#: Immutable commit of a model or tokenizer (40 hex), as RELEASE in infra/config/release.py requires.
REVISION_RE = re.compile(r"^[0-9a-f]{40}\Z")
#: The ``<model>`` segment of ``gs://<bucket>/<model>/<revision>/``: one path segment of the characters the release
#: identity's ``weight_manifest`` allows; 128 characters is far above any model name and keeps object names short.
MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
#: Base64 of exactly 4 bytes (a CRC32C): 6 significant characters and "==" padding.
CRC32C_RE = re.compile(r"^[A-Za-z0-9+/]{5}[AQgw]==\Z")
#: Largest manifest accepted: an entry is ~200 bytes, so 16 MiB is ~80,000 files, far above any model repository.
MAX_MANIFEST_BYTES = 16 << 20
#: Most files one manifest may list; model repositories have tens to a few thousand files.
MAX_MANIFEST_FILES = 100_000
#: Cloud Storage object names are at most 1024 bytes of UTF-8 (https://cloud.google.com/storage/docs/objects#naming).
MAX_OBJECT_NAME_BYTES = 1024
#: Directory every ext4 volume has at its root (mkfs.ext4), owned by root with mode 0700.
LOST_AND_FOUND = "lost+found"

# ---- exit codes --------------------------------------------------------------------------------------------------
EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_USAGE = 2  # also what argparse uses for a bad command line
EXIT_MANIFEST = 3
EXIT_IDENTITY = 4
EXIT_ACCESS = 5
EXIT_EXEC = 6

# ---- bounds ------------------------------------------------------------------------------------------------------
#: Default threads hashing in ``dir`` mode. hashlib releases the GIL, so threads hash in parallel; 4 keeps several
#: reads in flight on a network volume (Hyperdisk ML) while leaving the node's other cores alone.
DEFAULT_HASH_WORKERS = 4
#: Upper bound of ``--workers``: more threads than this only add contention on any volume we read from.
MAX_HASH_WORKERS = 64
#: Read size while hashing: large sequential reads suit network block devices; 4 MiB per worker bounds memory.
HASH_CHUNK_BYTES = 4 << 20
#: Per-request socket timeout (connect, and each read): a listing page or a manifest is small, so 30 s only trips
#: on a stalled connection.
DEFAULT_TIMEOUT_SECONDS = 30.0
#: Attempts per request. With the backoff below the waits are 1 + 2 + 4 + 8 s: the GKE metadata server needs a few
#: seconds after pod start before it serves tokens, and brief Cloud Storage 429/503s clear within that.
DEFAULT_ATTEMPTS = 5
#: First retry delay; doubled per attempt up to MAX_RETRY_DELAY_SECONDS, each scaled by a random 0.5-1.0 (jitter, so
#: replicas starting together do not retry in lockstep).
RETRY_BASE_SECONDS = 1.0
MAX_RETRY_DELAY_SECONDS = 16.0
#: HTTP statuses Cloud Storage's retry strategy calls transient.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: Objects per listing page: the JSON API's maximum for ``maxResults``.
LIST_PAGE_SIZE = 1000
#: Listing pages followed at most (10 million objects): a bound against a server that never stops paginating.
MAX_LIST_PAGES = 10_000
#: Largest listing page read: 1000 entries of name, size and crc32c are ~200 kB.
MAX_LIST_PAGE_BYTES = 8 << 20
#: Largest metadata-server response read: a token document is ~1-2 kB.
MAX_TOKEN_BYTES = 64 << 10
#: Longest error detail kept in a log line: enough for any Google API error message, short enough that kubelet
#: events and log viewers show the line whole.
MAX_DETAIL_CHARS = 300

STORAGE_HOST = "storage.googleapis.com"
#: Link-local metadata server address; the IP avoids depending on DNS for metadata.google.internal.
METADATA_HOST = "169.254.169.254"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
#: Fields of objects.list the comparison needs (partial response keeps pages small).
LIST_FIELDS = "items(name,size,crc32c),nextPageToken"
#: Prefix of every line this script prints, so its lines stand out in a container log that vLLM continues.
LOG_PREFIX = "verify_release: "


class ManifestError(Exception):
    """The manifest is absent, not JSON, or not a valid version-1 manifest."""


class IdentityError(Exception):
    """The manifest is valid but belongs to another release."""


class AccessError(Exception):
    """The release could not be read (network, HTTP status, permissions, I/O)."""


class UsageError(Exception):
    """A bad command line or environment setting that argparse cannot detect."""


class ManifestFile(NamedTuple):
    """One file of a release: its relative POSIX path, size and checksums."""

    path: str
    size: int
    sha256: str
    crc32c: str


class Manifest(NamedTuple):
    """A parsed manifest; ``files`` is sorted by path."""

    model: str
    revision: str
    tokenizer_revision: str
    files: Tuple[ManifestFile, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def crc32c_to_base64(value: int) -> str:
    """Encode a CRC32C value the way Cloud Storage reports ``crc32c``: base64 of its 4 big-endian bytes."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"a CRC32C is a 32-bit unsigned value, got {value}")
    return base64.b64encode(value.to_bytes(4, "big")).decode("ascii")


def path_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be a file path in a manifest, or None when it can.

    Paths are relative POSIX paths without empty, ``.`` or ``..`` segments, so that every manifest entry names
    exactly one object ``<prefix>/<path>`` and one file ``<dir>/<path>`` and cannot escape either.
    """
    if not isinstance(path, str) or not path:
        return "is empty"
    if path.startswith("/"):
        return "is absolute"
    if "\\" in path:
        return "contains a backslash (paths are POSIX)"
    if any(c in path for c in ("\x00", "\n", "\r")):
        return "contains NUL, CR or LF (not allowed in Cloud Storage object names)"
    if any(seg in ("", ".", "..") for seg in path.split("/")):
        return "has an empty, '.' or '..' segment"
    if path == MANIFEST_NAME:
        return f"is the manifest's own name ({MANIFEST_NAME} does not list itself)"
    return None


def _check_revision(value: Any, field: str) -> str:
    if not isinstance(value, str) or not REVISION_RE.match(value):
        raise ManifestError(f"{field} must be 40 lowercase hex characters, got {value!r}")
    return value


def build_manifest(model: str, revision: str, tokenizer_revision: str, files: Iterable[ManifestFile]) -> Manifest:
    """Validate the parts of a manifest and return it with its files sorted by path (raises ManifestError)."""
    if not isinstance(model, str) or not MODEL_RE.match(model):
        raise ManifestError(f"model must match {MODEL_RE.pattern} (one path segment), got {model!r}")
    _check_revision(revision, "revision")
    _check_revision(tokenizer_revision, "tokenizer_revision")
    entries = list(files)
    if not entries:
        raise ManifestError("a manifest lists at least one file")
    if len(entries) > MAX_MANIFEST_FILES:
        raise ManifestError(f"{len(entries)} files is more than the {MAX_MANIFEST_FILES} a manifest may list")
    seen = set()
    for f in entries:
        if not isinstance(f.path, str):
            raise ManifestError(f"file path must be a string, got {f.path!r}")
        problem = path_problem(f.path)
        if problem:
            raise ManifestError(f"file path {f.path!r} {problem}")
        if f.path in seen:
            raise ManifestError(f"file path {f.path!r} is listed twice")
        seen.add(f.path)
        if isinstance(f.size, bool) or not isinstance(f.size, int) or f.size < 0:
            raise ManifestError(f"{f.path}: size must be a non-negative integer, got {f.size!r}")
        if not isinstance(f.sha256, str) or not SHA256_RE.match(f.sha256):
            raise ManifestError(f"{f.path}: sha256 must be 64 lowercase hex characters, got {f.sha256!r}")
        if not isinstance(f.crc32c, str) or not CRC32C_RE.match(f.crc32c):
            raise ManifestError(f"{f.path}: crc32c must be the base64 of 4 bytes, got {f.crc32c!r}")
    # A file and a directory of the same name cannot both exist on disk (a and a/b): refuse such a manifest early.
    for f in entries:
        parts = f.path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in seen:
                raise ManifestError(f"{'/'.join(parts[:i])!r} is listed as a file and as a directory of {f.path!r}")
    return Manifest(model, revision, tokenizer_revision, tuple(sorted(entries, key=lambda f: f.path)))


def manifest_document(manifest: Manifest) -> Dict[str, Any]:
    """The JSON document of a manifest."""
    return {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_FORMAT_VERSION,
        "model": manifest.model,
        "revision": manifest.revision,
        "tokenizer_revision": manifest.tokenizer_revision,
        "files": [dict(f._asdict()) for f in manifest.files],
    }


def render_manifest(manifest: Manifest) -> bytes:
    """Deterministic bytes: sorted keys, 2-space indent, ASCII only, trailing newline."""
    text = json.dumps(manifest_document(manifest), sort_keys=True, indent=2, ensure_ascii=True)
    return (text + "\n").encode("ascii")


def parse_manifest(data: bytes) -> Manifest:
    """Parse and validate manifest bytes (raises ManifestError naming the first problem)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"manifest is {len(data)} bytes, more than the {MAX_MANIFEST_BYTES} accepted")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ManifestError(f"manifest is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ManifestError("manifest is not a JSON object")
    if doc.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f"manifest format is {doc.get('format')!r}, expected {MANIFEST_FORMAT!r}")
    if doc.get("format_version") != MANIFEST_FORMAT_VERSION:
        raise ManifestError(
            f"manifest format_version {doc.get('format_version')!r} is not supported "
            f"(this verifier reads version {MANIFEST_FORMAT_VERSION})"
        )
    unknown = sorted(set(doc) - MANIFEST_KEYS)
    missing = sorted(MANIFEST_KEYS - set(doc))
    if unknown or missing:
        raise ManifestError(f"manifest keys: unknown {unknown}, missing {missing}")
    raw_files = doc["files"]
    if not isinstance(raw_files, list):
        raise ManifestError("manifest 'files' is not a list")
    files = []
    for i, entry in enumerate(raw_files):
        if not isinstance(entry, dict) or set(entry) != FILE_KEYS:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise ManifestError(f"manifest files[{i}] must have exactly the keys {sorted(FILE_KEYS)}, got {keys}")
        files.append(ManifestFile(entry["path"], entry["size"], entry["sha256"], entry["crc32c"]))
    return build_manifest(doc["model"], doc["revision"], doc["tokenizer_revision"], files)


# ---- output ------------------------------------------------------------------------------------------------------
def say(line: str) -> None:
    """One line on stdout (flushed: the container log must show it even if the process is killed next)."""
    print(LOG_PREFIX + " ".join(line.split("\n")), flush=True)


def _short(text: str) -> str:
    return " ".join(text.split())[:MAX_DETAIL_CHARS]


def human_bytes(n: int) -> str:
    """Bytes in the largest binary unit up to GiB, one decimal (``1.5 GiB``)."""
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024.0, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024.0, bigger
    return f"{value:.1f} {unit}"


# ---- HTTP --------------------------------------------------------------------------------------------------------
class Endpoint(NamedTuple):
    scheme: str
    host: str
    port: int

    def describe(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def storage_endpoint(environ: Dict[str, str]) -> Tuple[Endpoint, bool]:
    """(endpoint, needs a token): Cloud Storage over HTTPS, or ``STORAGE_EMULATOR_HOST`` without auth."""
    raw = environ.get("STORAGE_EMULATOR_HOST", "").strip()
    if not raw:
        return Endpoint("https", STORAGE_HOST, 443), True
    url = raw if "://" in raw else "http://" + raw  # the Python client also accepts host:port without a scheme
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1 or parts.path not in ("", "/"):
        raise UsageError(f"STORAGE_EMULATOR_HOST must look like http://HOST:PORT, got {raw!r}")
    return Endpoint(parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)), False


def metadata_endpoint(environ: Dict[str, str]) -> Endpoint:
    raw = environ.get("GCE_METADATA_HOST", "").strip() or METADATA_HOST
    parts = urlsplit("http://" + raw)
    try:
        port = parts.port or 80
    except ValueError:
        raise UsageError(f"GCE_METADATA_HOST must be HOST or HOST:PORT, got {raw!r}") from None
    if not parts.hostname:
        raise UsageError(f"GCE_METADATA_HOST must be HOST or HOST:PORT, got {raw!r}")
    return Endpoint("http", parts.hostname, port)


Log = Callable[[str], None]
Sleep = Callable[[float], None]


class HttpGetter:
    """Bounded GET requests with retries of transient failures."""

    def __init__(
        self,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        attempts: int = DEFAULT_ATTEMPTS,
        log: Log = say,
        sleep: Sleep = time.sleep,
    ) -> None:
        self.timeout = timeout
        self.attempts = attempts
        self.log = log
        self.sleep = sleep

    def _once(self, endpoint: Endpoint, target: str, headers: Dict[str, str], max_bytes: int) -> Tuple[int, bytes]:
        if endpoint.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                endpoint.host, endpoint.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=self.timeout)
        try:
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
            body = resp.read(max_bytes + 1)
            status = resp.status
        finally:
            conn.close()
        if len(body) > max_bytes:
            where = f"{endpoint.describe()}{target.split('?')[0]}"
            raise AccessError(f"GET {where}: response larger than {max_bytes} bytes")
        return status, body

    def get(
        self, endpoint: Endpoint, target: str, what: str, headers: Dict[str, str], max_bytes: int
    ) -> Tuple[int, bytes]:
        """(status, body) of the first non-transient answer; AccessError once the attempts are used up."""
        for attempt in range(1, self.attempts + 1):
            try:
                status, body = self._once(endpoint, target, headers, max_bytes)
            except ssl.SSLCertVerificationError as e:  # a certificate problem does not fix itself
                raise AccessError(f"{what}: TLS certificate verification failed: {_short(str(e))}") from None
            except (OSError, http.client.HTTPException) as e:  # includes timeouts and refused connections
                reason = f"{type(e).__name__}: {_short(str(e)) or 'no detail'}"
            else:
                if status not in RETRYABLE_STATUS:
                    return status, body
                reason = f"HTTP {status} {_short(_error_text(body))}".rstrip()
            if attempt == self.attempts:
                raise AccessError(f"{what} at {endpoint.describe()}: {reason} (gave up after {attempt} attempt(s))")
            delay = min(RETRY_BASE_SECONDS * 2 ** (attempt - 1), MAX_RETRY_DELAY_SECONDS) * random.uniform(0.5, 1.0)
            self.log(f"retry {attempt}/{self.attempts - 1} of {what} in {delay:.1f} s: {reason}")
            self.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises


def _error_text(body: bytes) -> str:
    """The message of a Google API error body ({"error": {"message": ...}}), else the start of the raw text."""
    try:
        doc = json.loads(body.decode("utf-8"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    except (UnicodeDecodeError, ValueError):
        pass
    return body[:MAX_DETAIL_CHARS].decode("utf-8", "replace")


def fetch_token(getter: HttpGetter, environ: Dict[str, str]) -> str:
    """An OAuth access token of the workload's identity from the metadata server."""
    endpoint = metadata_endpoint(environ)
    what = "GET access token from the metadata server"
    status, body = getter.get(endpoint, TOKEN_PATH, what, {"Metadata-Flavor": "Google"}, MAX_TOKEN_BYTES)
    if status != 200:
        raise AccessError(
            f"metadata server {endpoint.describe()} answered HTTP {status} for an access token: "
            f"{_short(_error_text(body))} (runs on GKE with Workload Identity, Cloud Run or Vertex AI?)"
        )
    try:
        token = json.loads(body.decode("utf-8")).get("access_token")
    except (UnicodeDecodeError, ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        raise AccessError(f"metadata server {endpoint.describe()} returned no access_token")
    return token


class StorageClient:
    """The two Cloud Storage JSON API calls the verifier needs (https://cloud.google.com/storage/docs/json_api)."""

    def __init__(self, getter: HttpGetter, endpoint: Endpoint, token: Optional[str]) -> None:
        self.getter = getter
        self.endpoint = endpoint
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def _get(self, target: str, what: str, max_bytes: int) -> Tuple[int, bytes]:
        return self.getter.get(self.endpoint, target, what, self.headers, max_bytes)

    def download(self, bucket: str, name: str, max_bytes: int) -> Optional[bytes]:
        """The object's bytes (objects.get with alt=media), or None when it does not exist."""
        target = f"/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}?alt=media"
        status, body = self._get(target, f"GET gs://{bucket}/{name}", max_bytes)
        if status == 404:
            return None
        if status != 200:
            raise AccessError(f"GET gs://{bucket}/{name} answered HTTP {status}: {_short(_error_text(body))}")
        return body

    def list_folder(self, bucket: str, folder: str) -> Dict[str, Tuple[int, Optional[str]]]:
        """``{name relative to folder: (size, crc32c)}`` of every live object whose name starts with ``folder``."""
        out: Dict[str, Tuple[int, Optional[str]]] = {}
        page_token: Optional[str] = None
        seen_tokens = set()
        for page in range(1, MAX_LIST_PAGES + 1):
            query = [("prefix", folder), ("fields", LIST_FIELDS), ("maxResults", str(LIST_PAGE_SIZE))]
            if page_token:
                query.append(("pageToken", page_token))
            target = f"/storage/v1/b/{quote(bucket, safe='')}/o?{urlencode(query)}"
            what = f"list gs://{bucket}/{folder} (page {page})"
            status, body = self._get(target, what, MAX_LIST_PAGE_BYTES)
            if status == 404:
                raise AccessError(f"bucket gs://{bucket} does not exist (objects.list answered HTTP 404)")
            if status != 200:
                raise AccessError(f"{what} answered HTTP {status}: {_short(_error_text(body))}")
            try:
                doc = json.loads(body.decode("utf-8"))
                items = doc.get("items") or []
                for item in items:
                    name, size = item["name"], int(item["size"])  # the JSON API sends uint64 as a string
                    crc = item.get("crc32c")
                    out[name[len(folder):]] = (size, crc if isinstance(crc, str) else None)
                page_token = doc.get("nextPageToken") or None
            except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise AccessError(f"{what}: unexpected response ({type(e).__name__}: {_short(str(e))})") from None
            if page_token is None:
                return out
            if page_token in seen_tokens:
                raise AccessError(f"{what}: the server repeated page token {page_token!r}")
            seen_tokens.add(page_token)
        raise AccessError(f"list gs://{bucket}/{folder}: more than {MAX_LIST_PAGES} pages")


# ---- comparison --------------------------------------------------------------------------------------------------
def check_identity(manifest: Manifest, expect_revision: str, folder: Optional[Tuple[str, str]]) -> None:
    """The manifest must be for ``expect_revision`` and, when known, for the ``(model, revision)`` of its folder."""
    if manifest.revision != expect_revision:
        raise IdentityError(
            f"revision mismatch: the manifest is for revision {manifest.revision}, expected {expect_revision} "
            f"(--expect-revision)"
        )
    if folder is not None and folder != (manifest.model, manifest.revision):
        raise IdentityError(
            f"folder mismatch: the manifest is for {manifest.model}/{manifest.revision} but sits in "
            f"{folder[0]}/{folder[1]}"
        )


def compare_listing(manifest: Manifest, objects: Dict[str, Tuple[int, Optional[str]]], where: str) -> List[str]:
    """Problems between the manifest and an object listing (sizes and crc32c from object metadata)."""
    problems = []
    expected = {f.path: f for f in manifest.files}
    for path in sorted(set(expected) | set(objects)):
        f = expected.get(path)
        o = objects.get(path)
        if f is None and o is not None:
            problems.append(f"extra: {path}: in {where} ({o[0]} bytes) but not listed in the manifest")
        elif f is not None and o is None:
            problems.append(f"missing: {path}: listed in the manifest ({f.size} bytes) but not in {where}")
        elif f is not None and o is not None:
            if o[0] != f.size:
                problems.append(f"size mismatch: {path}: manifest {f.size} bytes, object {o[0]} bytes")
            elif o[1] != f.crc32c:
                problems.append(f"crc32c mismatch: {path}: manifest {f.crc32c}, object {o[1]}")
    return problems


def sha256_file(path: str) -> Tuple[str, int]:
    """(hex SHA-256, bytes read) of a file, read in HASH_CHUNK_BYTES pieces into one reused buffer."""
    digest = hashlib.sha256()
    buf = bytearray(HASH_CHUNK_BYTES)
    view = memoryview(buf)
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            digest.update(view[:n])
            total += n
    return digest.hexdigest(), total


class DirScan(NamedTuple):
    """What a walk of the local copy found."""

    #: Regular files (relative POSIX path -> size), the root manifest excepted.
    files: Dict[str, int]
    #: Path -> problem line for entries that are not regular files (a mismatch).
    irregular: Dict[str, str]
    #: Path -> problem line for entries that could not be read (an access problem).
    unreadable: Dict[str, str]
    notes: List[str]


def _os_error(e: OSError) -> str:
    return f"{type(e).__name__}: {_short(e.strerror or str(e))}"


def scan_dir(root: str, skip_lost_found: bool) -> DirScan:
    """Walk ``root`` without following symlinks (a release copy holds regular files only)."""
    scan = DirScan({}, {}, {}, [])
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            scan.unreadable[rel_dir] = f"unreadable: {rel_dir}/: {_os_error(e)}"
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel == MANIFEST_NAME:
                continue
            try:
                if entry.is_symlink():
                    scan.irregular[rel] = f"not a regular file: {rel}: a symbolic link to {os.readlink(entry.path)!r}"
                elif entry.is_dir(follow_symlinks=False):
                    if rel == LOST_AND_FOUND and skip_lost_found:
                        scan.notes.append(f"note: skipped {LOST_AND_FOUND}/ at the top of {root} (made by mkfs.ext4, "
                                          f"not part of the release)")
                    else:
                        pending.append(rel)
                elif entry.is_file(follow_symlinks=False):
                    scan.files[rel] = entry.stat(follow_symlinks=False).st_size
                else:
                    scan.irregular[rel] = f"not a regular file: {rel}: a device, socket or pipe"
            except OSError as e:
                scan.unreadable[rel] = f"unreadable: {rel}: {_os_error(e)}"
    return scan


def _covered(path: str, flagged: Dict[str, str]) -> bool:
    """Whether ``path`` or one of its parent directories already has a problem line (no second 'missing' line)."""
    parts = path.split("/")
    return any("/".join(parts[:i]) in flagged for i in range(1, len(parts) + 1))


def compare_dir(manifest: Manifest, root: str, workers: int) -> Tuple[List[str], List[str], List[str], float]:
    """(mismatch lines, access lines, notes, seconds spent hashing) between the manifest and ``root``.

    Sizes are compared first (a stat), so only files of the right size are read and hashed."""
    skip_lost_found = not any(f.path.split("/")[0] == LOST_AND_FOUND for f in manifest.files)
    scan = scan_dir(root, skip_lost_found)
    mismatches = list(scan.irregular.values())
    unreadable = list(scan.unreadable.values())
    flagged = {**scan.irregular, **scan.unreadable}
    expected = {f.path: f for f in manifest.files}
    to_hash = []
    for path in sorted(set(expected) | set(scan.files)):
        f = expected.get(path)
        size = scan.files.get(path)
        if f is None and size is not None:
            mismatches.append(f"extra: {path}: in {root} ({size} bytes) but not listed in the manifest")
        elif f is not None and size is None:
            if not _covered(path, flagged):
                mismatches.append(f"missing: {path}: listed in the manifest ({f.size} bytes) but not in {root}")
        elif f is not None and size is not None:
            if size != f.size:
                mismatches.append(f"size mismatch: {path}: manifest {f.size} bytes, file {size} bytes")
            else:
                to_hash.append(f)

    def hash_one(f: ManifestFile) -> Tuple[ManifestFile, Optional[str], int, Optional[str]]:
        try:
            digest, n = sha256_file(os.path.join(root, *f.path.split("/")))
            return f, digest, n, None
        except OSError as e:
            return f, None, 0, _os_error(e)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(hash_one, to_hash))
    seconds = time.monotonic() - started
    for f, digest, n, error in results:
        if error is not None:
            unreadable.append(f"unreadable: {f.path}: {error}")
        elif n != f.size:
            mismatches.append(f"size mismatch: {f.path}: manifest {f.size} bytes, read {n} bytes (file changed?)")
        elif digest != f.sha256:
            mismatches.append(f"sha256 mismatch: {f.path}: manifest {f.sha256}, file {digest}")
    return mismatches, unreadable, scan.notes, seconds


def _sort_key(line: str) -> Tuple[str, str]:
    """Problem lines ('kind: path: detail') sort by path, then kind."""
    kind, _, rest = line.partition(": ")
    return rest.split(": ", 1)[0], kind


class Report(NamedTuple):
    code: int
    lines: List[str]


def _verdict(
    manifest: Manifest, where: str, mismatches: List[str], unreadable: List[str], started: float, extra: str = ""
) -> Report:
    lines = sorted(mismatches, key=_sort_key) + sorted(unreadable, key=_sort_key)
    seconds = time.monotonic() - started
    if lines:
        code = EXIT_ACCESS if unreadable else EXIT_MISMATCH
        lines.append(
            f"FAILED: {len(lines)} problem(s) in {where} against the manifest of {manifest.model} revision "
            f"{manifest.revision} ({len(manifest.files)} files); this release must not be served"
        )
        return Report(code, lines)
    return Report(
        EXIT_OK,
        [
            f"verified {len(manifest.files)} files, {manifest.total_bytes} bytes "
            f"({human_bytes(manifest.total_bytes)}) in {seconds:.2f} s: {where} matches the manifest of "
            f"{manifest.model} revision {manifest.revision}{extra}"
        ],
    )


def verify_gcs(
    bucket: str, prefix: str, expect_revision: str, getter: HttpGetter, environ: Dict[str, str]
) -> Report:
    """``gcs`` mode: manifest + listing from the JSON API; compares names, sizes and crc32c."""
    started = time.monotonic()
    endpoint, needs_token = storage_endpoint(environ)
    token = fetch_token(getter, environ) if needs_token else None
    client = StorageClient(getter, endpoint, token)
    folder = prefix + "/"
    where = f"gs://{bucket}/{folder}"
    data = client.download(bucket, folder + MANIFEST_NAME, MAX_MANIFEST_BYTES)
    if data is None:
        raise ManifestError(f"no manifest at {where}{MANIFEST_NAME} (not staged, or staging did not finish)")
    manifest = parse_manifest(data)
    model, _, revision = prefix.partition("/")
    check_identity(manifest, expect_revision, (model, revision))
    objects = client.list_folder(bucket, folder)
    objects.pop(MANIFEST_NAME, None)
    problems = compare_listing(manifest, objects, where)
    return _verdict(manifest, where, problems, [], started, " (sizes and crc32c from object metadata)")


def verify_dir(path: str, expect_revision: str, workers: int) -> Report:
    """``dir`` mode: ``<path>/manifest.json``; compares sizes and SHA-256 of every file."""
    started = time.monotonic()
    if not os.path.isdir(path):
        raise AccessError(f"{path} is not a directory (is the weights volume mounted?)")
    manifest_path = os.path.join(path, MANIFEST_NAME)
    try:
        with open(manifest_path, "rb") as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise ManifestError(f"no manifest at {manifest_path}") from None
    except OSError as e:
        raise AccessError(f"cannot read {manifest_path}: {_os_error(e)}") from None
    manifest = parse_manifest(data)
    check_identity(manifest, expect_revision, None)
    say(f"hashing {len(manifest.files)} files ({human_bytes(manifest.total_bytes)}) under {path} "
        f"with {workers} thread(s)")
    mismatches, unreadable, notes, hash_seconds = compare_dir(manifest, path, workers)
    for note in notes:
        say(note)
    rate = manifest.total_bytes / (1 << 20) / hash_seconds if hash_seconds > 0 else 0.0
    extra = f" (SHA-256 of every file, {rate:.0f} MiB/s on {workers} thread(s))"
    return _verdict(manifest, path, mismatches, unreadable, started, extra)


# ---- command line ------------------------------------------------------------------------------------------------
def split_exec(argv: Sequence[str]) -> Tuple[List[str], Optional[List[str]]]:
    """Split ``... --exec -- CMD ...`` into (verifier arguments, CMD); CMD is None without ``--exec``.

    Done before argparse so that CMD's own options (``vllm serve --port ...``) are never parsed as ours."""
    args = list(argv)
    if "--exec" not in args:
        return args, None
    i = args.index("--exec")
    rest = args[i + 1:]
    if len(rest) < 2 or rest[0] != "--":
        raise UsageError("--exec must be followed by -- and the command to run, e.g. --exec -- vllm serve ...")
    return args[:i], rest[1:]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    def revision(text: str) -> str:
        if not REVISION_RE.match(text):
            raise argparse.ArgumentTypeError(f"must be 40 lowercase hex characters, got {text!r}")
        return text

    def bounded_int(low: int, high: int) -> Callable[[str], int]:
        def parse(text: str) -> int:
            try:
                value = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
            if not low <= value <= high:
                raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
            return value

        return parse

    def positive(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    exec_help = "append --exec -- CMD ... to run CMD in place of this process once the release verified"
    p = argparse.ArgumentParser(
        prog="verify_release",
        description="Verify a staged model release against its manifest (exit 0 only when everything matches).",
        epilog=exec_help,
    )
    sub = p.add_subparsers(dest="mode", required=True)
    g = sub.add_parser("gcs", help="compare object metadata in gs://BUCKET/PREFIX/ with its manifest", epilog=exec_help)
    g.add_argument("--bucket", required=True, help="weights bucket name (without gs://)")
    g.add_argument("--prefix", required=True, help="<model>/<revision>: the release folder inside the bucket")
    g.add_argument("--timeout-seconds", type=positive, default=DEFAULT_TIMEOUT_SECONDS,
                   help=f"socket timeout per request (default {DEFAULT_TIMEOUT_SECONDS:g})")
    # 10 attempts already wait about two minutes with the backoff; more only delays a clear failure.
    g.add_argument("--attempts", type=bounded_int(1, 10), default=DEFAULT_ATTEMPTS,
                   help=f"attempts per request; only transient failures are retried (default {DEFAULT_ATTEMPTS})")
    d = sub.add_parser("dir", help="hash every file of a local copy and compare with its manifest", epilog=exec_help)
    d.add_argument("--path", required=True, help="the release folder's local copy, holding manifest.json")
    d.add_argument("--workers", type=bounded_int(1, MAX_HASH_WORKERS), default=DEFAULT_HASH_WORKERS,
                   help=f"hashing threads (default {DEFAULT_HASH_WORKERS})")
    for s in (g, d):
        s.add_argument("--expect-revision", required=True, type=revision,
                       help="the model revision the release identity names; the manifest must be for it")
    args = p.parse_args(argv)
    if args.mode == "gcs":
        if args.bucket.startswith("gs://") or "/" in args.bucket:
            p.error(f"--bucket is the bare bucket name, got {args.bucket!r}")
        args.prefix = args.prefix.strip("/")
        model, _, rev = args.prefix.partition("/")
        if not MODEL_RE.match(model) or not REVISION_RE.match(rev):
            p.error(f"--prefix must be <model>/<40 hex revision>, got {args.prefix!r}")
    return args


def run(args: argparse.Namespace, environ: Dict[str, str]) -> int:
    """Verify; print one line per problem and one verdict line; return the exit code."""
    try:
        if args.mode == "gcs":
            getter = HttpGetter(timeout=args.timeout_seconds, attempts=args.attempts)
            report = verify_gcs(args.bucket, args.prefix, args.expect_revision, getter, environ)
        else:
            report = verify_dir(args.path, args.expect_revision, args.workers)
    except UsageError as e:
        say(f"error: {e}")
        return EXIT_USAGE
    except ManifestError as e:
        say(f"manifest problem: {e}")
        return EXIT_MANIFEST
    except IdentityError as e:
        say(str(e))
        return EXIT_IDENTITY
    except AccessError as e:
        say(f"cannot read the release: {e}")
        return EXIT_ACCESS
    for line in report.lines:
        say(line)
    return report.code


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        own, command = split_exec(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        say(f"error: {e}")
        return EXIT_USAGE
    code = run(parse_args(own), dict(os.environ))
    if code != EXIT_OK or command is None:
        return code
    say(f"exec: {' '.join(command)}")
    try:
        os.execvp(command[0], command)
    except OSError as e:
        say(f"error: --exec could not start {command[0]!r}: {_os_error(e)}")
    return EXIT_EXEC  # os.execvp only returns by raising


if __name__ == "__main__":
    sys.exit(main())
