"""A real Cloud Storage JSON API on loopback for the release tests: gcp-storage-emulator, in-process.

``running_emulator()`` starts the emulator (in-memory store, one bucket) on a free 127.0.0.1 port in a thread of
the test process and stops it afterwards; ``Gcs.env(url)`` is the environment that points clients at it
(``STORAGE_EMULATOR_HOST``, which both google-cloud-storage and components/serving/verify_release.py read) and
``Gcs.client(url)`` an anonymous google-cloud-storage client for it.

What gcp-storage-emulator 2026.7.19 does and does not implement (read in its source, handlers/objects.py and
storage.py, and asserted by ``test_emulator_capabilities`` in tests/test_release_artifacts.py, which fails when an
upgrade changes any of it):

* ``crc32c``: computed on every write as base64 of the big-endian CRC32C and returned in object metadata, like
  Cloud Storage. A ``crc32c`` given in the upload's metadata (multipart upload, resumable initiation) is checked;
  a mismatch answers HTTP 400 and stores nothing.
* ``objects.get ?alt=media`` and ``objects.list ?prefix=`` work; a missing bucket or object is HTTP 404.
* **Not implemented: preconditions.** ``ifGenerationMatch=0`` is ignored, so a create-only write over an existing
  object silently replaces it with a new generation. Cloud Storage answers HTTP 412 instead.
* **Not implemented: pagination.** ``maxResults`` and ``pageToken`` are ignored; every matching object comes in one
  response without ``nextPageToken``. Cloud Storage returns at most 1000 objects per page.
* **Not implemented: ``fields=``** (partial responses): full object resources come back. Harmless: readers take
  the fields they need.
* The server is single-threaded (``http.server.HTTPServer``): concurrent clients queue.

How the tests cope, without faking anything in the code under test: ``GcsShim`` is a small loopback proxy in
front of the emulator that adds exactly the two missing behaviours, the way Cloud Storage documents them: HTTP 412
``conditionNotMet`` for an upload with ``ifGenerationMatch=0`` whose object exists
(https://cloud.google.com/storage/docs/request-preconditions), and pages of at most ``page_size`` objects with an
opaque ``nextPageToken`` (https://cloud.google.com/storage/docs/json_api/v1/objects/list). Everything else passes
through unchanged. Tests use the shim by default (small pages, so pagination really happens) and the bare emulator
where they show the code also works against it. The shim can also answer the next N matching requests with an
error status (retry tests) and records every request's method, path and headers.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

#: The one bucket the emulator starts with (a valid weights bucket name for the stage tool).
BUCKET = "llm-weights-test"
#: Objects per listing page behind the shim: small, so a few files already span several pages.
SHIM_PAGE_SIZE = 2
#: Timeout of the shim's requests to the emulator: the in-memory emulator answers in milliseconds.
UPSTREAM_TIMEOUT_S = 30.0
#: Hop-by-hop headers a proxy must not forward (RFC 9110 section 7.6.1), plus Content-Length, which is recomputed.
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
_LIST_PATH = re.compile(r"^/storage/v1/b/(?P<bucket>[^/]+)/o$")
_UPLOAD_PATH = re.compile(r"^/upload/storage/v1/b/(?P<bucket>[^/]+)/o$")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Injected:
    """Answer the next ``count`` requests whose method and path match with ``status``."""

    method: str
    path_re: re.Pattern[str]
    status: int
    count: int = 1


@dataclass
class GcsShim:
    """A loopback proxy adding Cloud Storage's preconditions and pagination in front of the emulator."""

    upstream_port: int
    page_size: int = SHIM_PAGE_SIZE
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    injected: list[Injected] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def inject(self, method: str, path_regex: str, status: int, count: int = 1) -> None:
        with self._lock:
            self.injected.append(Injected(method, re.compile(path_regex), status, count))

    def take_injected(self, method: str, path: str) -> int | None:
        with self._lock:
            for inj in self.injected:
                if inj.method == method and inj.path_re.search(path) and inj.count > 0:
                    inj.count -= 1
                    return inj.status
        return None

    def upstream(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def object_exists(self, bucket: str, name: str) -> bool:
        status, _, _ = self.upstream("GET", f"/storage/v1/b/{bucket}/o/{quote(name, safe='')}", {}, None)
        return status == 200

    def start(self) -> None:
        shim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests print what matters
                pass

            def _body(self) -> bytes | None:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else None

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in _HOP_HEADERS:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, reason: str, message: str) -> None:
                doc = {
                    "error": {
                        "code": status,
                        "message": message,
                        "errors": [{"domain": "global", "reason": reason, "message": message}],
                    }
                }
                self._send(status, [("Content-Type", "application/json")], json.dumps(doc).encode())

            def _handle(self, method: str) -> None:
                body = self._body()
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                shim.requests.append((method, self.path, dict(self.headers.items())))
                status = shim.take_injected(method, parts.path)
                if status is not None:
                    return self._error(status, "injected", f"injected HTTP {status} for a retry test")
                upload = _UPLOAD_PATH.match(parts.path)
                if method == "POST" and upload and query.get("ifGenerationMatch") == ["0"] and "upload_id" not in query:
                    name = _upload_name(query, self.headers.get("Content-Type", ""), body)
                    if name and shim.object_exists(upload.group("bucket"), name):
                        return self._error(
                            412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold."
                        )
                listing = _LIST_PATH.match(parts.path)
                if method == "GET" and listing:
                    return self._list(parts.path, query, headers)
                self._send(*shim.upstream(method, self.path, headers, body))

            def _list(self, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> None:
                upstream_query = {k: v for k, v in query.items() if k not in ("maxResults", "pageToken")}
                status, resp_headers, body = shim.upstream(
                    "GET", f"{path}?{urlencode(upstream_query, doseq=True)}", headers, None
                )
                if status != 200:
                    return self._send(status, resp_headers, body)
                doc = json.loads(body)
                items = doc.get("items") or []
                # Cloud Storage's page: maxResults, at most 1000 (its default and maximum), here also page_size.
                size = min(int(query.get("maxResults", ["1000"])[0]), 1000, shim.page_size)
                start = int(base64.urlsafe_b64decode(query["pageToken"][0]).decode()) if "pageToken" in query else 0
                page = {"kind": "storage#objects", "items": items[start : start + size]}
                if doc.get("prefixes"):
                    page["prefixes"] = doc["prefixes"]
                if start + size < len(items):
                    page["nextPageToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
                self._send(200, [("Content-Type", "application/json")], json.dumps(page).encode())

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="gcs-shim", daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _upload_name(query: dict[str, list[str]], content_type: str, body: bytes | None) -> str | None:
    """The object name of a multipart upload or resumable initiation (query ``name`` or the JSON metadata)."""
    if "name" in query:
        return query["name"][0]
    if not body:
        return None
    if content_type.startswith("multipart/"):
        msg = BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        first = msg.get_payload(0)  # the JSON metadata part
        assert isinstance(first, Message)
        metadata = first.get_payload(decode=True)
        assert isinstance(metadata, bytes)
        return json.loads(metadata).get("name")
    try:
        return json.loads(body).get("name")
    except ValueError:
        return None


@dataclass
class Gcs:
    """The running emulator and its shim."""

    emulator_url: str
    shim: GcsShim
    server: Any
    bucket: str = BUCKET

    @property
    def shim_url(self) -> str:
        return self.shim.url

    @staticmethod
    def env(url: str) -> dict[str, str]:
        """The process environment pointing Cloud Storage clients at ``url`` (and nothing at the real metadata
        server: a verifier that wrongly asked for a token would fail fast on a closed loopback port)."""
        keep = {k: v for k, v in os.environ.items() if k not in ("STORAGE_EMULATOR_HOST", "GCE_METADATA_HOST")}
        return {**keep, "STORAGE_EMULATOR_HOST": url, "GCE_METADATA_HOST": f"127.0.0.1:{free_port()}"}

    @staticmethod
    def client(url: str) -> Any:
        """An anonymous google-cloud-storage client talking to ``url``."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project="llm-serving-test", credentials=AnonymousCredentials(), client_options={"api_endpoint": url}
        )

    def wipe(self) -> None:
        """Empty the bucket (keep it) and forget the shim's requests and injections."""
        self.server.wipe(keep_buckets=True)
        self.shim.requests.clear()
        self.shim.injected.clear()


@contextmanager
def running_emulator(bucket: str = BUCKET) -> Iterator[Gcs]:
    """The emulator (in-memory, with ``bucket``) and its shim on loopback for the duration of the block."""
    from gcp_storage_emulator.server import create_server

    # The emulator logs every 404 and every response at INFO/ERROR; the tests assert on outcomes instead.
    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
    logging.getLogger("api.object").setLevel(logging.CRITICAL)
    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    server.start()
    shim = GcsShim(upstream_port=port)
    shim.start()
    try:
        yield Gcs(f"http://127.0.0.1:{port}", shim, server, bucket)
    finally:
        shim.stop()
        server.stop()
