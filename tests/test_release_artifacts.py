"""Release staging and in-pod verification against a real Cloud Storage JSON API on loopback.

The stage tool (infra/offline/release/stage.py) uploads with the official google-cloud-storage client to
gcp-storage-emulator; the verifier is the very file the pods run (components/serving/verify_release.py), started
as ``python3 components/serving/verify_release.py ...`` and once as ``python3 -c <its source> ...``. What the
emulator lacks (preconditions, pagination) is added by the test-side shim in tests/gcs_emulator.py, which says
exactly what it adds; ``test_emulator_capabilities`` pins those findings. The Hyperdisk ML runbook
(infra/offline/release/hydrate.py) is checked against the installed gcloud's static CLI tree and the Compute Engine
discovery document.
"""

from __future__ import annotations

import argparse
import ast
import base64
import glob
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.serving import verify_release as vr
from infra.config.release import ReleaseIdentity
from infra.offline.release import cli as release_cli
from infra.offline.release import hydrate, stage
from infra.offline.release.stage import StageError, stage_release

from .gcs_emulator import BUCKET, Gcs, free_port, running_emulator

REPO = Path(__file__).resolve().parents[1]
VERIFIER = REPO / "components" / "serving" / "verify_release.py"
REV = "0123456789abcdef0123456789abcdef01234567"
TOKENIZER_REV = "fedcba9876543210fedcba9876543210fedcba98"
OTHER_REV = "89abcdef0123456789abcdef0123456789abcdef"
MODEL = "tiny-test"
FOLDER = f"{MODEL}/{REV}/"
#: Just above the client's 8 MiB multipart limit: the weights of ``big_snapshot`` take the resumable upload path.
BIG_WEIGHTS_BYTES = stage.SMALL_FILE_BYTES + 3
#: Weights of the other tests' snapshot: small, so that each test stages and hashes in milliseconds.
WEIGHTS_BYTES = (64 << 10) + 3
#: The files a staged snapshot holds: a nested file, a hidden file that IS model content, the symlinked weights.
STAGED = (".gitattributes", "config.json", "model.safetensors", "tokenizer/tokenizer.json")
#: Verifier runs are stdlib-only Python start-ups of ~50 ms; 60 s only bounds a hung run.
RUN_TIMEOUT_S = 60
#: Upload threads in tests: the emulator is single-threaded, and its listen backlog is 5 connections.
TEST_WORKERS = 4


# ---- fixtures ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def gcs_session() -> Iterator[Gcs]:
    with running_emulator() as gcs:
        yield gcs


@pytest.fixture
def gcs(gcs_session: Gcs) -> Gcs:
    gcs_session.wipe()
    return gcs_session


def make_hf_snapshot(root: Path, revision: str = REV, weights_bytes: int = WEIGHTS_BYTES) -> Path:
    """A Hugging Face cache layout (models--org--name/{blobs,snapshots/<rev>}) whose weights are a symlink into
    blobs/, plus a .git/ and a .cache/ that staging must leave out."""
    repo = root / "hub" / "models--acme--tiny"
    blobs = repo / "blobs"
    blobs.mkdir(parents=True)
    weights = random.Random(0).randbytes(weights_bytes)
    blob = blobs / hashlib.sha256(weights).hexdigest()
    blob.write_bytes(weights)
    snap = repo / "snapshots" / revision
    (snap / "tokenizer").mkdir(parents=True)
    (snap / "model.safetensors").symlink_to(os.path.relpath(blob, snap))
    (snap / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 128}\n')
    (snap / "tokenizer" / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"}}\n')
    (snap / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    (snap / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (snap / ".cache" / "huggingface" / "download" / "config.json.metadata").write_text(f"{revision}\n")
    (snap / ".git").mkdir()
    (snap / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return snap


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return make_hf_snapshot(tmp_path)


@pytest.fixture
def big_snapshot(tmp_path: Path) -> Path:
    return make_hf_snapshot(tmp_path, weights_bytes=BIG_WEIGHTS_BYTES)


def do_stage(gcs: Gcs, source: Path, url: str | None = None, **kw: Any) -> stage.StageResult:
    return stage_release(
        source,
        gcs.bucket,
        kw.pop("model", MODEL),
        kw.pop("revision", REV),
        kw.pop("tokenizer_revision", TOKENIZER_REV),
        client=Gcs.client(url or gcs.shim_url),
        workers=TEST_WORKERS,
        **kw,
    )


@pytest.fixture
def staged(gcs: Gcs, snapshot: Path) -> stage.StageResult:
    return do_stage(gcs, snapshot)


def objects(gcs: Gcs, prefix: str = FOLDER) -> dict[str, Any]:
    """name -> blob of everything under ``prefix`` (through the bare emulator: one listing, no shim)."""
    return {b.name: b for b in Gcs.client(gcs.emulator_url).list_blobs(gcs.bucket, prefix=prefix)}


def generations(gcs: Gcs) -> dict[str, int]:
    return {name: b.generation for name, b in objects(gcs).items()}


def put(gcs: Gcs, name: str, data: bytes) -> None:
    """Write an object behind the tools' back (plain upload, no precondition): corruption and extra files."""
    Gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(name).upload_from_string(data)


def crc32c(data: bytes) -> str:
    return base64.b64encode(google_crc32c.Checksum(data).digest()).decode()


def download_release(gcs: Gcs, dest: Path, folder: str = FOLDER) -> Path:
    for name, blob in objects(gcs, folder).items():
        target = dest / name[len(folder) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        blob.download_to_filename(str(target))
    return dest


def run_verifier(
    *args: str,
    url: str | None = None,
    python: str = sys.executable,
    inline: bool = False,
    env: dict[str, str] | None = None,
    user: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """The pod's command: ``python3 verify_release.py ARGS`` (or ``python3 -c <source> ARGS``)."""
    head = [python, "-c", VERIFIER.read_text()] if inline else [python, str(VERIFIER)]
    environment = env if env is not None else (Gcs.env(url) if url else {**os.environ})
    return subprocess.run(
        [*head, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=environment, cwd="/", user=user
    )


def gcs_args(revision: str = REV, prefix: str = f"{MODEL}/{REV}") -> list[str]:
    return ["gcs", "--bucket", BUCKET, "--prefix", prefix, "--expect-revision", revision, "--attempts", "1"]


def lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return proc.stdout.splitlines()


def manifest_of(result: stage.StageResult) -> dict[str, vr.ManifestFile]:
    return {f.path: f for f in result.files}


# ---- the emulator: what it supports ------------------------------------------------------------------------------
def test_emulator_capabilities(gcs: Gcs) -> None:
    """Pins what gcp-storage-emulator implements (see tests/gcs_emulator.py); if an upgrade adds preconditions or
    pagination, this fails and the shim can shrink."""
    bare = Gcs.client(gcs.emulator_url).bucket(gcs.bucket)
    first = bare.blob("probe/a")
    first.upload_from_string(b"one", if_generation_match=0)
    assert first.crc32c == crc32c(b"one")  # crc32c is in the metadata, GCS's encoding
    again = bare.blob("probe/a")
    again.upload_from_string(b"two", if_generation_match=0)  # GCS: 412; the emulator replaces the object
    assert again.generation != first.generation
    wrong = bare.blob("probe/b")
    wrong.crc32c = crc32c(b"something else")
    with pytest.raises(Exception, match="400"):  # a supplied crc32c IS checked
        wrong.upload_from_string(b"data", checksum=None)
    for i in range(3):
        bare.blob(f"probe/n{i}").upload_from_string(b"x")
    conn = http.client.HTTPConnection("127.0.0.1", int(gcs.emulator_url.rsplit(":", 1)[1]), timeout=10)
    conn.request("GET", f"/storage/v1/b/{gcs.bucket}/o?prefix=probe/&maxResults=1&fields=items(name)")
    doc = json.loads(conn.getresponse().read())
    assert len(doc["items"]) == 4 and "nextPageToken" not in doc  # no pagination
    assert "crc32c" in doc["items"][0]  # fields= ignored: full resources


def test_shim_adds_preconditions_and_pagination(gcs: Gcs) -> None:
    from google.api_core.exceptions import PreconditionFailed

    shimmed = Gcs.client(gcs.shim_url)
    for i in range(5):
        shimmed.bucket(gcs.bucket).blob(f"p/{i}").upload_from_string(b"x", if_generation_match=0)
    with pytest.raises(PreconditionFailed):
        shimmed.bucket(gcs.bucket).blob("p/0").upload_from_string(b"y", if_generation_match=0)
    assert sorted(b.name for b in shimmed.list_blobs(gcs.bucket, prefix="p/")) == [f"p/{i}" for i in range(5)]
    pages = [path for method, path, _ in gcs.shim.requests if method == "GET" and "/o?" in path]
    assert len(pages) == 3  # 5 objects in pages of 2


# ---- the manifest format -----------------------------------------------------------------------------------------
def _file(path: str = "a.bin", size: int = 1, sha: str = "0" * 64, crc: str = "AAAAAA==") -> vr.ManifestFile:
    return vr.ManifestFile(path, size, sha, crc)


def test_manifest_is_deterministic_and_round_trips() -> None:
    files = [_file("b/c.json", 3), _file("a.bin", 5, "f" * 64, "mnG7TA==")]
    m = vr.build_manifest(MODEL, REV, TOKENIZER_REV, files)
    data = vr.render_manifest(m)
    assert data == vr.render_manifest(vr.build_manifest(MODEL, REV, TOKENIZER_REV, reversed(files)))
    assert vr.parse_manifest(data) == m
    assert [f.path for f in m.files] == ["a.bin", "b/c.json"]
    doc = json.loads(data)
    assert list(doc) == sorted(doc) and doc["format_version"] == 1 and data.endswith(b"}\n")
    assert vr.MANIFEST_NAME not in data.decode()  # the manifest does not list itself


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_crc32c_encoding_is_cloud_storages(data: bytes) -> None:
    encoded = vr.crc32c_to_base64(google_crc32c.value(data))
    assert encoded == crc32c(data)  # the emulator's (and GCS's) base64 of the big-endian value
    assert vr.CRC32C_RE.match(encoded)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(extra=1), "unknown ['extra']"),
        (lambda d: d.update(revision="ABC"), "revision must be 40 lowercase hex"),
        (lambda d: d.update(format_version=2), "format_version 2 is not supported"),
        (lambda d: d.update(format="other"), "manifest format is 'other'"),
        (lambda d: d["files"].append(dict(d["files"][0])), "is listed twice"),
        (lambda d: d["files"][0].update(path="/etc/passwd"), "is absolute"),
        (lambda d: d["files"][0].update(path="a/../../x"), "'..' segment"),
        (lambda d: d["files"][0].update(path="manifest.json"), "does not list itself"),
        (lambda d: d["files"][0].update(size=True), "size must be a non-negative integer"),
        (lambda d: d["files"][0].update(crc32c="AAAA"), "crc32c must be the base64 of 4 bytes"),
        (lambda d: d["files"][0].update(sha256="0" * 63), "sha256 must be 64"),
        (lambda d: d["files"].append({**d["files"][0], "path": "a.bin/x"}), "listed as a file and as a directory"),
        (lambda d: d.update(files=[]), "at least one file"),
    ],
    ids=[
        "unknown-key",
        "revision",
        "version",
        "format",
        "duplicate",
        "absolute",
        "dotdot",
        "self",
        "bool-size",
        "crc",
        "sha",
        "file-and-dir",
        "empty",
    ],
)
def test_parse_manifest_refuses(change: Any, message: str) -> None:
    doc = json.loads(vr.render_manifest(vr.build_manifest(MODEL, REV, TOKENIZER_REV, [_file()])))
    change(doc)
    with pytest.raises(vr.ManifestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        vr.parse_manifest(json.dumps(doc).encode())


# ---- staging -----------------------------------------------------------------------------------------------------
def test_stage_uploads_files_then_the_manifest(gcs: Gcs, big_snapshot: Path, tmp_path: Path) -> None:
    """Both upload paths (multipart for the small files, resumable for the > 8 MiB weights), then both verifiers."""
    snapshot = big_snapshot
    result = do_stage(gcs, snapshot)
    assert [f.path for f in result.files] == list(STAGED)
    assert sorted(result.uploaded) == list(STAGED) and result.unchanged == () and result.manifest == "written"
    assert [(e.path, e.files) for e in result.excluded] == [(".cache", 1), (".git", 1)]
    assert sorted(objects(gcs)) == sorted([FOLDER + p for p in STAGED] + [FOLDER + vr.MANIFEST_NAME])
    weights = (snapshot / "model.safetensors").read_bytes()  # the symlink staged as the blob it points to
    entry = manifest_of(result)["model.safetensors"]
    assert (entry.size, entry.sha256, entry.crc32c) == (
        len(weights),
        hashlib.sha256(weights).hexdigest(),
        crc32c(weights),
    )
    stored = objects(gcs)
    assert stored[FOLDER + "model.safetensors"].crc32c == entry.crc32c
    manifest_bytes = stored[FOLDER + vr.MANIFEST_NAME].download_as_bytes()
    assert manifest_bytes == vr.render_manifest(vr.build_manifest(MODEL, REV, TOKENIZER_REV, result.files))
    assert vr.parse_manifest(manifest_bytes).tokenizer_revision == TOKENIZER_REV
    gens = generations(gcs)  # (a download resets the blob's generation: no x-goog-generation from the emulator)
    assert max(gens, key=gens.__getitem__) == FOLDER + vr.MANIFEST_NAME  # the manifest was written last
    assert result.identity_fields() == {
        "model_revision": REV,
        "tokenizer_revision": TOKENIZER_REV,
        "weight_manifest": f"gs://{BUCKET}/{FOLDER}manifest.json",
    }
    assert any(line.startswith("excluded .git/ (1 file)") for line in result.summary_lines())
    assert run_verifier(*gcs_args(), url=gcs.shim_url).returncode == vr.EXIT_OK
    assert run_verifier(*dir_args(download_release(gcs, tmp_path / "copy"))).returncode == vr.EXIT_OK


def test_restaging_the_same_folder_is_a_no_op(gcs: Gcs, staged: stage.StageResult, snapshot: Path) -> None:
    before = generations(gcs)
    gcs.shim.requests.clear()
    again = do_stage(gcs, snapshot)
    assert again.uploaded == () and sorted(again.unchanged) == list(STAGED) and again.manifest == "unchanged"
    assert generations(gcs) == before  # nothing rewritten
    uploads = [p for m, p, _ in gcs.shim.requests if p.startswith("/upload/")]
    assert uploads == []


def test_a_changed_file_is_refused_and_nothing_is_rewritten(
    gcs: Gcs, staged: stage.StageResult, snapshot: Path
) -> None:
    before = generations(gcs)
    config = snapshot / "config.json"
    old = manifest_of(staged)["config.json"]
    config.write_bytes(config.read_bytes().replace(b"128", b"129"))
    with pytest.raises(StageError) as err:
        do_stage(gcs, snapshot)
    assert err.value.problems == [
        f"gs://{BUCKET}/{FOLDER}config.json already exists with {old.size} bytes, crc32c {old.crc32c}, but source "
        f"file {config.resolve()} has {old.size} bytes, crc32c {crc32c(config.read_bytes())}: a release folder is "
        f"never overwritten: stage a new revision"
    ]
    assert generations(gcs) == before


def test_interrupted_staging_resumes_and_a_changed_file_keeps_the_manifest_out(
    gcs: Gcs, staged: stage.StageResult, snapshot: Path
) -> None:
    bare = Gcs.client(gcs.emulator_url).bucket(gcs.bucket)
    bare.blob(FOLDER + vr.MANIFEST_NAME).delete()  # as if the first run had stopped before its last write
    bare.blob(FOLDER + "tokenizer/tokenizer.json").delete()
    (snapshot / "config.json").write_text("{}\n")
    with pytest.raises(StageError, match=re.escape("config.json already exists")):
        do_stage(gcs, snapshot)
    assert FOLDER + vr.MANIFEST_NAME not in objects(gcs)  # refused: no manifest, no upload
    assert FOLDER + "tokenizer/tokenizer.json" not in objects(gcs)
    (snapshot / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 128}\n')
    resumed = do_stage(gcs, snapshot)
    assert resumed.uploaded == ("tokenizer/tokenizer.json",) and resumed.manifest == "written"


def test_an_object_the_source_lacks_is_refused(gcs: Gcs, staged: stage.StageResult, snapshot: Path) -> None:
    put(gcs, FOLDER + "stray.bin", b"stray")
    with pytest.raises(StageError) as err:
        do_stage(gcs, snapshot)
    assert err.value.problems == [
        f"gs://{BUCKET}/{FOLDER}stray.bin exists in the release folder but stray.bin is "
        f"not in the source: a release folder is never overwritten: stage a new revision"
    ]


def test_a_different_manifest_is_refused(gcs: Gcs, staged: stage.StageResult, snapshot: Path) -> None:
    with pytest.raises(StageError, match=r"manifest\.json already exists with other content"):
        do_stage(gcs, snapshot, tokenizer_revision=OTHER_REV)  # same files, other manifest


def test_an_upload_losing_the_race_is_compared_not_overwritten(gcs: Gcs, tmp_path: Path) -> None:
    """Another writer created the object between our listing and our upload: Cloud Storage's 412 (added by the
    shim) leads to a comparison, never to a second write."""
    bucket = Gcs.client(gcs.shim_url).bucket(gcs.bucket)
    data = b"weights"
    f = vr.ManifestFile("w.bin", len(data), hashlib.sha256(data).hexdigest(), crc32c(data))
    src = tmp_path / "w.bin"
    src.write_bytes(data)
    put(gcs, FOLDER + "w.bin", data)
    gen = objects(gcs)[FOLDER + "w.bin"].generation
    assert stage.upload_file(bucket, FOLDER, f, src) == "unchanged"
    assert objects(gcs)[FOLDER + "w.bin"].generation == gen
    put(gcs, FOLDER + "w.bin", b"WEIGHTS")
    gen = objects(gcs)[FOLDER + "w.bin"].generation
    with pytest.raises(StageError, match=f"w.bin already exists with 7 bytes, crc32c {crc32c(b'WEIGHTS')}"):
        stage.upload_file(bucket, FOLDER, f, src)
    assert objects(gcs)[FOLDER + "w.bin"].generation == gen


def test_a_file_changed_after_hashing_is_not_uploaded(gcs: Gcs, tmp_path: Path) -> None:
    bucket = Gcs.client(gcs.shim_url).bucket(gcs.bucket)
    big = tmp_path / "big.bin"
    big.write_bytes(b"a" * BIG_WEIGHTS_BYTES)
    f = vr.ManifestFile("big.bin", BIG_WEIGHTS_BYTES, "0" * 64, crc32c(b"a" * BIG_WEIGHTS_BYTES))
    big.write_bytes(b"b" * BIG_WEIGHTS_BYTES)  # same size, other bytes: Cloud Storage checks the stated crc32c
    with pytest.raises(Exception, match="400"):
        stage.upload_file(bucket, FOLDER, f, big)
    small = tmp_path / "small.bin"
    small.write_bytes(b"new")
    with pytest.raises(StageError, match="changed while staging"):
        stage.upload_file(bucket, FOLDER, vr.ManifestFile("small.bin", 3, "0" * 64, crc32c(b"old")), small)
    assert objects(gcs) == {}


def test_a_failed_upload_keeps_the_manifest_out_until_a_re_run(gcs: Gcs, snapshot: Path) -> None:
    gcs.shim.inject("POST", r"^/upload/", 400, count=1)  # not transient: the client does not retry it
    with pytest.raises(StageError) as err:
        do_stage(gcs, snapshot)
    assert err.value.problems[0].startswith("uploading ") and "400" in err.value.problems[0]
    assert err.value.problems[-1].startswith("manifest not written")
    assert FOLDER + vr.MANIFEST_NAME not in objects(gcs)
    again = do_stage(gcs, snapshot)
    assert again.manifest == "written" and len(again.uploaded) + len(again.unchanged) == len(STAGED)


def test_stage_works_against_the_bare_emulator_too(gcs: Gcs, snapshot: Path) -> None:
    result = do_stage(gcs, snapshot, url=gcs.emulator_url)
    assert sorted(result.uploaded) == list(STAGED)
    assert run_verifier(*gcs_args(), url=gcs.emulator_url).returncode == 0


def _fifo(dir_: Path) -> None:
    os.mkfifo(dir_ / "pipe")


def _emptied(dir_: Path) -> None:
    shutil.rmtree(dir_)
    dir_.mkdir()


def _only_git(dir_: Path) -> None:
    shutil.rmtree(dir_)
    (dir_ / ".git").mkdir(parents=True)
    (dir_ / ".git" / "HEAD").write_text("x")


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: shutil.rmtree(d), "source directory {d} does not exist"),
        (_emptied, "{d} has no files to stage"),
        (_only_git, "{d} has no files to stage (excluded: .git/ (1 file)"),
        (lambda d: (d / "escape").symlink_to("/etc/hostname"), "symlink escape points outside the source folder"),
        (lambda d: (d / "dangling").symlink_to(d / "nothing"), "symlink dangling is broken"),
        (lambda d: (d / "dirlink").symlink_to(d / "tokenizer"), "which is not a regular file"),
        (lambda d: (d / "manifest.json").write_text("{}"), "has the release manifest's name"),
        (_fifo, "pipe is not a regular file, directory or symlink"),
    ],
    ids=[
        "missing",
        "empty",
        "only-excluded",
        "escaping-symlink",
        "broken-symlink",
        "dir-symlink",
        "own-manifest",
        "fifo",
    ],
)
def test_stage_refuses_bad_sources(gcs: Gcs, snapshot: Path, setup: Any, message: str) -> None:
    setup(snapshot)
    with pytest.raises(StageError) as err:
        do_stage(gcs, snapshot)
    assert any(message.format(d=snapshot) in p for p in err.value.problems), err.value.problems
    assert objects(gcs, "") == {}


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"revision": "main"}, "--revision must be a commit: 40 lowercase hex characters, got 'main'"),
        ({"revision": REV.upper()}, "--revision must be a commit"),
        ({"tokenizer_revision": "v1"}, "--tokenizer-revision must be a commit"),
        ({"bucket": "gs://llm-weights-test"}, "bucket name 'gs://llm-weights-test' is invalid"),
        ({"bucket": "Upper"}, "bucket name 'Upper' is invalid"),
        ({"bucket": "goog-weights"}, "bucket name 'goog-weights' is invalid"),
        ({"model": "a/b"}, "model 'a/b' must match"),
        ({"workers": 0}, "workers must be between 1 and 64"),
    ],
    ids=["branch", "upper-hex", "tokenizer", "gs-prefix", "uppercase-bucket", "goog", "model-slash", "workers"],
)
def test_stage_refuses_bad_arguments(gcs: Gcs, snapshot: Path, kw: dict[str, Any], message: str) -> None:
    args = {
        "bucket": gcs.bucket,
        "model": MODEL,
        "revision": REV,
        "tokenizer_revision": TOKENIZER_REV,
        "workers": TEST_WORKERS,
        **kw,
    }
    with pytest.raises(StageError) as err:
        stage_release(
            snapshot,
            args.pop("bucket"),
            args.pop("model"),
            args.pop("revision"),
            args.pop("tokenizer_revision"),
            client=Gcs.client(gcs.shim_url),
            **args,
        )
    assert any(message in p for p in err.value.problems), err.value.problems


def test_stage_refuses_a_snapshot_of_another_revision(gcs: Gcs, tmp_path: Path) -> None:
    snap = make_hf_snapshot(tmp_path, revision=OTHER_REV)
    with pytest.raises(StageError, match=f"is the Hugging Face snapshot of revision {OTHER_REV}, not --revision {REV}"):
        do_stage(gcs, snap)


def test_stage_refuses_a_missing_bucket(gcs: Gcs, snapshot: Path) -> None:
    with pytest.raises(StageError, match="bucket gs://no-such-bucket does not exist"):
        stage_release(snapshot, "no-such-bucket", MODEL, REV, client=Gcs.client(gcs.shim_url), workers=TEST_WORKERS)


# ---- the release identity and the CLI ----------------------------------------------------------------------------
TEMPLATE = REPO / "stacks" / "releases" / "prod" / "qwen3-32b-fp8-2026-08-23.1.json"


def test_identity_block_fills_and_validates_the_template(staged: stage.StageResult) -> None:
    doc = json.loads(stage.release_identity_json(staged.identity_fields(), TEMPLATE))
    template = json.loads(TEMPLATE.read_text())
    assert list(doc) == list(template)  # same keys, same order
    assert {k: doc[k] for k in staged.identity_fields()} == staged.identity_fields()
    assert {k: v for k, v in doc.items() if k not in staged.identity_fields()} == {
        k: v for k, v in template.items() if k not in staged.identity_fields()
    }
    identity = ReleaseIdentity.model_validate(doc)
    assert (identity.weights_bucket, identity.weights_prefix) == (BUCKET, f"{MODEL}/{REV}")
    assert json.loads(stage.release_identity_json(staged.identity_fields())) == staged.identity_fields()


def test_identity_block_reports_an_invalid_template(staged: stage.StageResult, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(TEMPLATE.read_text()), "image": "repo/vllm:latest", "max_model_len": 0}))
    with pytest.raises(StageError) as err:
        stage.release_identity_json(staged.identity_fields(), bad)
    (line,) = err.value.problems
    assert line.startswith(f"release template {bad} with the staged fields is not a valid release: ")
    assert "max_model_len: Input should be greater than 0" in line


def test_cli_checks_the_template_before_uploading(
    gcs: Gcs, snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.shim_url)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(TEMPLATE.read_text()), "vllm_version": "0.99.0"}))
    code, out, err = _cli(
        [
            "release",
            "stage",
            str(snapshot),
            "--bucket",
            BUCKET,
            "--model",
            MODEL,
            "--revision",
            REV,
            "--project",
            "p-test",
            "--no-progress",
            "--release-template",
            str(bad),
        ],
        capsys,
    )
    assert (code, out) == (2, "") and err.startswith(
        f"error: release template {bad} with the staged fields is not a "
        f"valid release: (release): Value error, vllm_version: "
    )
    assert err.count("\n") == 1 and objects(gcs, "") == {}


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = release_cli.main(argv)
    except SystemExit as e:  # argparse errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_stage_prints_and_writes_the_release_file(
    gcs: Gcs, snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.shim_url)
    out_file = tmp_path / "release.json"
    argv = [
        "release",
        "stage",
        str(snapshot),
        "--bucket",
        BUCKET,
        "--model",
        MODEL,
        "--revision",
        REV,
        "--tokenizer-revision",
        TOKENIZER_REV,
        "--project",
        "llm-serving-test",
        "--workers",
        "2",
        "--no-progress",
        "--release-template",
        str(TEMPLATE),
        "--write",
        str(out_file),
    ]
    code, out, err = _cli(argv, capsys)
    assert code == 0, err
    assert json.loads(out) == json.loads(out_file.read_text())
    assert ReleaseIdentity.model_validate(json.loads(out)).weight_manifest == f"gs://{BUCKET}/{FOLDER}manifest.json"
    assert "uploaded 4" in err and "excluded .cache/ (1 file)" in err
    code, out, err = _cli(argv, capsys)  # the release file exists: refused before anything is staged
    assert (code, out) == (2, "")
    assert err == f"error: --write {out_file} already exists: refusing to overwrite it\n"
    code, out, err = _cli(argv[:-4], capsys)  # no template: the three fields, and what to do with them
    assert code == 0 and set(json.loads(out)) == {"model_revision", "tokenizer_revision", "weight_manifest"}
    assert "merge these fields into the release file" in err and "unchanged 4" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["release", "stage", "/nonexistent", "--bucket", BUCKET, "--model", MODEL, "--revision", REV],
            "error: source directory /nonexistent does not exist\n",
        ),
        (
            ["release", "stage", "{src}", "--bucket", BUCKET, "--model", MODEL, "--revision", "abc"],
            "error: --revision must be a commit: 40 lowercase hex characters, got 'abc'\n",
        ),
        (
            ["release", "stage", "{src}", "--bucket", "no-such-bucket", "--model", MODEL, "--revision", REV],
            "error: bucket gs://no-such-bucket does not exist (or this identity cannot see it)\n",
        ),
        (
            ["release", "stage", "{src}", "--model", MODEL, "--revision", REV],
            "llm-serving release stage: error: the following arguments are required: --bucket (see --help)\n",
        ),
        (
            ["release", "stage", "{src}", "--bucket", BUCKET, "--model", MODEL, "--revision", REV, "--write", "x.json"],
            "error: --write needs --release-template (the file written is the completed release file)\n",
        ),
        (
            [
                "release",
                "hydrate-runbook",
                "--project",
                "acme-llm-prod",
                "--zone",
                "us-central1",
                "--bucket",
                BUCKET,
                "--prefix",
                f"{MODEL}/{REV}",
                "--release",
                "r1",
                "--size-gib",
                "64",
                "--throughput-mib-s",
                "1200",
            ],
            "error: zone 'us-central1' is not a zone such as us-central1-a\n",
        ),
    ],
    ids=["missing-dir", "bad-revision", "missing-bucket", "missing-flag", "write-without-template", "bad-zone"],
)
def test_cli_errors_are_one_line_and_exit_2(
    argv: list[str],
    message: str,
    gcs: Gcs,
    snapshot: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.shim_url)
    argv = [a.format(src=snapshot) for a in argv] + (
        ["--no-progress", "--project", "p-test"] if argv[1] == "stage" else []
    )
    code, out, err = _cli(argv, capsys)
    assert (code, out, err) == (2, "", message)


def test_register_adds_the_release_group_to_an_existing_cli() -> None:
    parser = argparse.ArgumentParser(prog="llm-serving")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("plan")
    release_cli.register(sub)
    args = parser.parse_args(
        [
            "release",
            "hydrate-runbook",
            "--project",
            "acme-llm-prod",
            "--zone",
            "us-central1-a",
            "--bucket",
            BUCKET,
            "--prefix",
            f"{MODEL}/{REV}",
            "--release",
            "r1",
            "--size-gib",
            "64",
            "--throughput-mib-s",
            "1200",
        ]
    )
    assert args.fn is release_cli.cmd_hydrate_runbook
    assert (
        parser.parse_args(["release", "stage", "d", "--bucket", "b", "--model", "m", "--revision", REV]).fn
        is release_cli.cmd_stage
    )


# ---- the verifier: gcs mode --------------------------------------------------------------------------------------
def test_gcs_mode_passes_on_the_staged_folder(gcs: Gcs, staged: stage.StageResult) -> None:
    proc = run_verifier(*gcs_args(), url=gcs.shim_url)
    assert proc.returncode == vr.EXIT_OK, proc.stdout
    (line,) = lines(proc)
    assert line.startswith(f"verify_release: verified 4 files, {staged.total_bytes} bytes (64.2 KiB) in ")
    assert line.endswith(
        f"s: gs://{BUCKET}/{FOLDER} matches the manifest of {MODEL} revision {REV} "
        f"(sizes and crc32c from object metadata)"
    )
    pages = [p for m, p, h in gcs.shim.requests if "/o?" in p and "fields=" in p]
    assert len(pages) == 3  # 5 objects (4 files + manifest) in pages of 2: pagination followed
    assert all("Authorization" not in h for _, _, h in gcs.shim.requests)  # emulator: no token


def test_gcs_mode_reports_each_problem_with_its_own_line(gcs: Gcs, staged: stage.StageResult) -> None:
    m = manifest_of(staged)
    config = (FOLDER + "config.json", b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 256}\n')
    put(gcs, *config)  # same size, other bytes
    put(gcs, FOLDER + "tokenizer/tokenizer.json", b"{}")  # other size
    Gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(FOLDER + ".gitattributes").delete()
    put(gcs, FOLDER + "extra.bin", b"12345")
    proc = run_verifier(*gcs_args(), url=gcs.shim_url)
    assert proc.returncode == vr.EXIT_MISMATCH
    where = f"gs://{BUCKET}/{FOLDER}"
    assert lines(proc) == [
        f"verify_release: missing: .gitattributes: listed in the manifest ({m['.gitattributes'].size} bytes) but not "
        f"in {where}",
        f"verify_release: crc32c mismatch: config.json: manifest {m['config.json'].crc32c}, object {crc32c(config[1])}",
        f"verify_release: extra: extra.bin: in {where} (5 bytes) but not listed in the manifest",
        f"verify_release: size mismatch: tokenizer/tokenizer.json: manifest {m['tokenizer/tokenizer.json'].size} "
        f"bytes, object 2 bytes",
        f"verify_release: FAILED: 4 problem(s) in {where} against the manifest of {MODEL} revision {REV} (4 files); "
        f"this release must not be served",
    ]


@pytest.mark.parametrize(
    "damage, expected",
    [
        ("corrupt", "crc32c mismatch: config.json: manifest {crc}, object {bad}"),
        ("remove", "missing: config.json: listed in the manifest ({size} bytes) but not in gs://{folder}"),
        ("add", "extra: tokenizer/added.json: in gs://{folder} (2 bytes) but not listed in the manifest"),
    ],
)
def test_gcs_mode_fails_on_one_damaged_object(gcs: Gcs, staged: stage.StageResult, damage: str, expected: str) -> None:
    entry = manifest_of(staged)["config.json"]
    bad = b"x" * entry.size
    if damage == "corrupt":
        put(gcs, FOLDER + "config.json", bad)
    elif damage == "remove":
        Gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(FOLDER + "config.json").delete()
    else:
        put(gcs, FOLDER + "tokenizer/added.json", b"{}")
    proc = run_verifier(*gcs_args(), url=gcs.shim_url)
    assert proc.returncode == vr.EXIT_MISMATCH
    assert lines(proc)[0] == "verify_release: " + expected.format(
        crc=entry.crc32c, bad=crc32c(bad), size=entry.size, folder=f"{BUCKET}/{FOLDER}"
    )
    assert lines(proc)[1].startswith("verify_release: FAILED: 1 problem(s)")


def test_gcs_mode_refuses_another_revision(gcs: Gcs, staged: stage.StageResult) -> None:
    proc = run_verifier(*gcs_args(revision=OTHER_REV), url=gcs.shim_url)
    assert (proc.returncode, lines(proc)) == (
        vr.EXIT_IDENTITY,
        [
            f"verify_release: revision mismatch: the manifest is for revision {REV}, expected {OTHER_REV} "
            f"(--expect-revision)"
        ],
    )


def test_gcs_mode_refuses_a_manifest_copied_into_another_folder(gcs: Gcs, staged: stage.StageResult) -> None:
    manifest = objects(gcs)[FOLDER + vr.MANIFEST_NAME].download_as_bytes()
    put(gcs, f"other-model/{REV}/{vr.MANIFEST_NAME}", manifest)
    proc = run_verifier(*gcs_args(prefix=f"other-model/{REV}"), url=gcs.shim_url)
    assert (proc.returncode, lines(proc)) == (
        vr.EXIT_IDENTITY,
        [f"verify_release: folder mismatch: the manifest is for {MODEL}/{REV} but sits in other-model/{REV}"],
    )


def test_gcs_mode_without_a_manifest_or_bucket_or_server(gcs: Gcs, staged: stage.StageResult) -> None:
    Gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(FOLDER + vr.MANIFEST_NAME).delete()
    proc = run_verifier(*gcs_args(), url=gcs.shim_url)
    assert (proc.returncode, lines(proc)) == (
        vr.EXIT_MANIFEST,
        [
            f"verify_release: manifest problem: no manifest at gs://{BUCKET}/{FOLDER}manifest.json (not staged, or "
            f"staging did not finish)"
        ],
    )
    put(gcs, FOLDER + vr.MANIFEST_NAME, b"not json")
    proc = run_verifier(*gcs_args(), url=gcs.shim_url)
    assert proc.returncode == vr.EXIT_MANIFEST and "manifest is not JSON" in proc.stdout
    args = gcs_args()
    args[2] = "no-such-bucket"
    proc = run_verifier(*args, url=gcs.shim_url)
    assert proc.returncode == vr.EXIT_MANIFEST  # the manifest download is the first request: 404
    dead = f"http://127.0.0.1:{free_port()}"
    proc = run_verifier(*gcs_args(), url=dead)
    assert proc.returncode == vr.EXIT_ACCESS
    assert lines(proc) == [
        f"verify_release: cannot read the release: GET gs://{BUCKET}/{FOLDER}manifest.json at "
        f"{dead}: ConnectionRefusedError: [Errno 111] Connection refused (gave up after 1 "
        f"attempt(s))"
    ]


def test_gcs_mode_listing_of_a_missing_bucket_is_an_access_error(gcs: Gcs) -> None:
    getter = vr.HttpGetter(attempts=1)
    client = vr.StorageClient(getter, vr.storage_endpoint({"STORAGE_EMULATOR_HOST": gcs.shim_url})[0], None)
    with pytest.raises(vr.AccessError, match="bucket gs://no-such-bucket does not exist"):
        client.list_folder("no-such-bucket", FOLDER)


def test_transient_errors_are_retried_with_their_reason(gcs: Gcs, staged: stage.StageResult) -> None:
    gcs.shim.inject("GET", r"/o$", 503, count=2)  # the first two listing requests
    logged: list[str] = []
    waits: list[float] = []
    getter = vr.HttpGetter(attempts=3, log=logged.append, sleep=waits.append)
    report = vr.verify_gcs(BUCKET, f"{MODEL}/{REV}", REV, getter, {"STORAGE_EMULATOR_HOST": gcs.shim_url})
    assert report.code == vr.EXIT_OK
    assert [line.split(" in ")[0] for line in logged] == [
        f"retry 1/2 of list gs://{BUCKET}/{FOLDER} (page 1)",
        f"retry 2/2 of list gs://{BUCKET}/{FOLDER} (page 1)",
    ]
    assert all(line.endswith("HTTP 503 injected HTTP 503 for a retry test") for line in logged)
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0  # exponential backoff with jitter
    gcs.shim.inject("GET", r"/o$", 503, count=3)
    with pytest.raises(vr.AccessError, match=r"HTTP 503 .*\(gave up after 3 attempt\(s\)\)"):
        vr.verify_gcs(BUCKET, f"{MODEL}/{REV}", REV, getter, {"STORAGE_EMULATOR_HOST": gcs.shim_url})
    gcs.shim.inject("GET", r"/o$", 403, count=1)  # not transient: no retry
    logged.clear()
    with pytest.raises(vr.AccessError, match="answered HTTP 403"):
        vr.verify_gcs(BUCKET, f"{MODEL}/{REV}", REV, getter, {"STORAGE_EMULATOR_HOST": gcs.shim_url})
    assert logged == []


class _FakeMetadata(BaseHTTPRequestHandler):
    """The metadata server's token endpoint (https://cloud.google.com/compute/docs/access/authenticate-workloads)."""

    seen: ClassVar[list[dict[str, str]]] = []
    status = 200

    def do_GET(self) -> None:
        _FakeMetadata.seen.append({"path": self.path, **dict(self.headers.items())})
        ok = self.path == vr.TOKEN_PATH and self.headers.get("Metadata-Flavor") == "Google"
        body = json.dumps({"access_token": "ya29.test", "expires_in": 3599, "token_type": "Bearer"}).encode()
        self.send_response(_FakeMetadata.status if ok else 403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_token_from_the_metadata_server_is_sent_as_bearer(gcs: Gcs, staged: stage.StageResult) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeMetadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {"GCE_METADATA_HOST": f"127.0.0.1:{server.server_address[1]}"}
        getter = vr.HttpGetter(attempts=1)
        token = vr.fetch_token(getter, env)
        assert token == "ya29.test" and _FakeMetadata.seen[-1]["Metadata-Flavor"] == "Google"
        client = vr.StorageClient(getter, vr.storage_endpoint({"STORAGE_EMULATOR_HOST": gcs.shim_url})[0], token)
        assert sorted(client.list_folder(BUCKET, FOLDER)) == sorted([*STAGED, vr.MANIFEST_NAME])
        assert gcs.shim.requests[-1][2]["Authorization"] == "Bearer ya29.test"
        _FakeMetadata.status = 404
        with pytest.raises(vr.AccessError, match="answered HTTP 404 for an access token"):
            vr.fetch_token(getter, env)
    finally:
        _FakeMetadata.status = 200
        server.shutdown()
        server.server_close()
    assert vr.storage_endpoint({}) == (vr.Endpoint("https", "storage.googleapis.com", 443), True)
    assert vr.storage_endpoint({"STORAGE_EMULATOR_HOST": "localhost:9023"}) == (
        vr.Endpoint("http", "localhost", 9023),
        False,
    )


# ---- the verifier: dir mode --------------------------------------------------------------------------------------
@pytest.fixture
def copy(gcs: Gcs, staged: stage.StageResult, tmp_path: Path) -> Path:
    return download_release(gcs, tmp_path / "weights")


def dir_args(path: Path, revision: str = REV, *extra: str) -> list[str]:
    return ["dir", "--path", str(path), "--expect-revision", revision, *extra]


def test_dir_mode_passes_on_a_downloaded_copy(copy: Path, staged: stage.StageResult) -> None:
    (copy / "lost+found").mkdir(mode=0o700)
    proc = run_verifier(*dir_args(copy, REV, "--workers", "2"))
    assert proc.returncode == vr.EXIT_OK, proc.stdout
    first, note, last = lines(proc)
    assert first == f"verify_release: hashing 4 files (64.2 KiB) under {copy} with 2 thread(s)"
    assert note == (
        f"verify_release: note: skipped lost+found/ at the top of {copy} (made by mkfs.ext4, not part of the release)"
    )
    assert last.startswith(f"verify_release: verified 4 files, {staged.total_bytes} bytes (64.2 KiB) in ")
    assert f"s: {copy} matches the manifest of {MODEL} revision {REV} (SHA-256 of every file, " in last


def test_dir_mode_reports_each_problem_with_its_own_line(copy: Path, staged: stage.StageResult) -> None:
    m = manifest_of(staged)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of the weights
    weights.write_bytes(bytes(data))
    (copy / "tokenizer" / "tokenizer.json").write_text("{}")
    (copy / "config.json").unlink()
    (copy / "extra.bin").write_bytes(b"abc")
    (copy / "link").symlink_to("extra.bin")
    proc = run_verifier(*dir_args(copy))
    assert proc.returncode == vr.EXIT_MISMATCH
    assert lines(proc)[1:] == [
        f"verify_release: missing: config.json: listed in the manifest ({m['config.json'].size} bytes) but not in "
        f"{copy}",
        f"verify_release: extra: extra.bin: in {copy} (3 bytes) but not listed in the manifest",
        "verify_release: not a regular file: link: a symbolic link to 'extra.bin'",
        f"verify_release: sha256 mismatch: model.safetensors: manifest {m['model.safetensors'].sha256}, file "
        f"{hashlib.sha256(bytes(data)).hexdigest()}",
        f"verify_release: size mismatch: tokenizer/tokenizer.json: manifest {m['tokenizer/tokenizer.json'].size} "
        f"bytes, file 2 bytes",
        f"verify_release: FAILED: 5 problem(s) in {copy} against the manifest of {MODEL} revision {REV} (4 files); "
        f"this release must not be served",
    ]


@pytest.mark.parametrize(
    "damage, expected",
    [
        ("corrupt", "sha256 mismatch: config.json: manifest {sha}, file {bad}"),
        ("remove", "missing: config.json: listed in the manifest ({size} bytes) but not in {copy}"),
        ("add", "extra: tokenizer/added.json: in {copy} (2 bytes) but not listed in the manifest"),
    ],
)
def test_dir_mode_fails_on_one_damaged_file(copy: Path, staged: stage.StageResult, damage: str, expected: str) -> None:
    entry = manifest_of(staged)["config.json"]
    bad = b"x" * entry.size
    if damage == "corrupt":
        (copy / "config.json").write_bytes(bad)
    elif damage == "remove":
        (copy / "config.json").unlink()
    else:
        (copy / "tokenizer" / "added.json").write_text("{}")
    proc = run_verifier(*dir_args(copy))
    assert proc.returncode == vr.EXIT_MISMATCH
    assert lines(proc)[1] == "verify_release: " + expected.format(
        sha=entry.sha256, bad=hashlib.sha256(bad).hexdigest(), size=entry.size, copy=copy
    )
    assert len(lines(proc)) == 3


def test_dir_mode_refuses_another_revision_and_a_missing_manifest(copy: Path, tmp_path: Path) -> None:
    proc = run_verifier(*dir_args(copy, OTHER_REV))
    assert (proc.returncode, lines(proc)) == (
        vr.EXIT_IDENTITY,
        [
            f"verify_release: revision mismatch: the manifest is for revision {REV}, expected {OTHER_REV} "
            f"(--expect-revision)"
        ],
    )
    (copy / vr.MANIFEST_NAME).unlink()
    proc = run_verifier(*dir_args(copy))
    assert (proc.returncode, lines(proc)) == (
        vr.EXIT_MANIFEST,
        [f"verify_release: manifest problem: no manifest at {copy}/manifest.json"],
    )
    proc = run_verifier(*dir_args(tmp_path / "not-mounted"))
    assert proc.returncode == vr.EXIT_ACCESS and "is not a directory (is the weights volume mounted?)" in proc.stdout


def test_dir_mode_as_a_non_root_user(copy: Path) -> None:
    """Pods run the verifier as a non-root user: an ext4 volume's lost+found/ (root, mode 0700) is skipped without
    being read, and a file it cannot read is an access error (exit 5), not a mismatch. As root, the verifier runs
    as nobody (uid 65534) with the system python3 on a world-readable copy, so root's permission bypass cannot hide
    the behaviour; the inline form needs no access to this checkout."""
    as_root = os.geteuid() == 0
    python = "/usr/bin/python3" if as_root else sys.executable
    if as_root and not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 to run as an unprivileged user")
    work = Path(tempfile.mkdtemp(prefix="verify-non-root-", dir="/tmp"))
    try:
        work.chmod(0o755)
        root = work / "weights"
        shutil.copytree(copy, root)
        (root / "lost+found").mkdir(mode=0o700)
        kw: dict[str, Any] = {"python": python, "inline": True, "user": 65534 if as_root else None}
        proc = run_verifier(*dir_args(root), **kw)
        assert proc.returncode == vr.EXIT_OK, proc.stdout + proc.stderr
        assert f"verify_release: note: skipped lost+found/ at the top of {root}" in proc.stdout
        (root / "config.json").chmod(0)
        proc = run_verifier(*dir_args(root), **kw)
        assert proc.returncode == vr.EXIT_ACCESS
        assert lines(proc)[2:] == [
            "verify_release: unreadable: config.json: PermissionError: Permission denied",
            f"verify_release: FAILED: 1 problem(s) in {root} against the manifest of {MODEL} revision {REV} (4 files); "
            f"this release must not be served",
        ]
    finally:
        shutil.rmtree(work)


# ---- the verifier: the command line, --exec, the inline form, Python 3.8 -----------------------------------------
def test_exec_replaces_the_verifier_after_success(copy: Path) -> None:
    """--exec: the command runs in the verifier's own process (same PID), so it receives the container's signals."""
    probe = "import os, sys; print('exec pid', os.getpid()); sys.exit(7)"
    proc = subprocess.Popen(
        [sys.executable, str(VERIFIER), *dir_args(copy), "--exec", "--", sys.executable, "-c", probe],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 7  # the exec'd command's status
    assert out.splitlines()[-2] == f"verify_release: exec: {sys.executable} -c {probe}"
    assert out.splitlines()[-1] == f"exec pid {proc.pid}"


def test_exec_is_skipped_when_verification_fails(copy: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (copy / "config.json").write_text("changed")
    proc = run_verifier(*dir_args(copy), "--exec", "--", "touch", str(marker))
    assert proc.returncode == vr.EXIT_MISMATCH and not marker.exists() and "exec:" not in proc.stdout


def test_exec_errors(copy: Path) -> None:
    proc = run_verifier(*dir_args(copy), "--exec", "--", "/nonexistent/vllm", "serve")
    assert proc.returncode == vr.EXIT_EXEC
    assert lines(proc)[-1] == (
        "verify_release: error: --exec could not start '/nonexistent/vllm': "
        "FileNotFoundError: No such file or directory"
    )
    proc = run_verifier(*dir_args(copy), "--exec", "vllm")
    assert (proc.returncode, lines(proc)) == (
        vr.EXIT_USAGE,
        ["verify_release: error: --exec must be followed by -- and the command to run, e.g. --exec -- vllm serve ..."],
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["dir", "--path", "/w", "--expect-revision", "main"], "must be 40 lowercase hex characters, got 'main'"),
        (["dir", "--path", "/w", "--expect-revision", REV, "--workers", "0"], "must be between 1 and 64, got 0"),
        (
            ["gcs", "--bucket", "gs://b", "--prefix", f"m/{REV}", "--expect-revision", REV],
            "--bucket is the bare bucket",
        ),
        (["gcs", "--bucket", "b", "--prefix", "m/main", "--expect-revision", REV], "--prefix must be <model>/<40 hex"),
        (["gcs", "--bucket", "b", "--prefix", f"m/{REV}"], "the following arguments are required: --expect-revision"),
    ],
)
def test_bad_command_lines_exit_2(args: list[str], message: str) -> None:
    proc = run_verifier(*args)
    assert proc.returncode == vr.EXIT_USAGE and message in proc.stderr


def test_inline_python_c_form_with_exec(gcs: Gcs, staged: stage.StageResult) -> None:
    """Cloud Run / Vertex: ``python3 -c <source> gcs ... --exec -- CMD`` without the file on disk."""
    proc = run_verifier(
        *gcs_args(), "--exec", "--", sys.executable, "-c", "print('serving')", url=gcs.shim_url, inline=True
    )
    assert proc.returncode == 0, proc.stdout
    out = lines(proc)
    assert out[0].startswith("verify_release: verified 4 files") and out[-1] == "serving"
    proc = run_verifier(
        *gcs_args(revision=OTHER_REV),
        "--exec",
        "--",
        sys.executable,
        "-c",
        "print('serving')",
        url=gcs.shim_url,
        inline=True,
    )
    assert proc.returncode == vr.EXIT_IDENTITY and "serving" not in proc.stdout


def _python38() -> str | None:
    """A Python 3.8 interpreter, the oldest the verifier supports (pyenv's, where this machine has one)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    for candidate in [shutil.which("python3.8"), *pyenv]:
        if (
            candidate
            and subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 8)"], capture_output=True
            ).returncode
            == 0
        ):
            return candidate
    return None


def test_the_verifier_runs_on_python_3_8(gcs: Gcs, copy: Path) -> None:
    python = _python38()
    if python is None:
        pytest.skip("no Python 3.8 interpreter here (python3.8 on PATH or ~/.pyenv/versions/3.8*)")
    assert run_verifier(*gcs_args(), url=gcs.shim_url, python=python).returncode == 0
    assert run_verifier(*dir_args(copy), python=python).returncode == 0
    (copy / "config.json").write_text("changed")
    assert run_verifier(*dir_args(copy), python=python).returncode == vr.EXIT_MISMATCH


def test_the_verifier_is_stdlib_only_small_and_python_3_8_syntax() -> None:
    source = VERIFIER.read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules - set(sys.stdlib_module_names)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "__file__" not in names  # it also runs as python3 -c <source>, where there is no file
    # One argv string is at most MAX_ARG_STRLEN = 32 pages = 128 KiB on Linux (execve(2)); keep ample room.
    assert len(source.encode()) < 96 * 1024


# ---- the Hyperdisk ML runbook ------------------------------------------------------------------------------------
def _book(**kw: Any) -> hydrate.HydrationRunbook:
    args = {
        "project": "acme-llm-prod",
        "zone": "us-central1-a",
        "bucket": "acme-llm-prod-weights",
        "prefix": f"qwen3-32b-fp8/{REV}",
        "release": "qwen3-32b-fp8-2026-08-23.1",
        "size_gib": 64,
        "provisioned_throughput_mib_s": 1200,
        **kw,
    }
    return hydrate.hydration_runbook(**args)


def test_runbook_fills_verifies_and_snapshots_the_disk() -> None:
    book = _book()
    text = hydrate.render_runbook(book)
    assert text == hydrate.render_runbook(_book())  # deterministic
    assert book.snapshot == f"qwen3-32b-fp8-{REV[:12]}" and book.config_key.endswith(".qwen3-32b-fp8-2026-08-23.1")
    order = [
        "gcloud compute disks create",
        "gcloud compute instances create",
        "gcloud compute scp",
        "verify_release.py gcs",
        "sudo mkfs.ext4",
        "gcloud storage rsync --recursive",
        "verify_release.py dir",
        "sudo umount",
        "gcloud compute instances detach-disk",
        "gcloud compute instances delete",
        "gcloud compute snapshots create",
        "snapshots describe",
        "gcloud compute disks delete",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)
    assert text.count("--access-mode=") == 1 and "--access-mode=READ_WRITE_SINGLE" in text
    assert f"--expect-revision {REV}" in text and "gs://acme-llm-prod-weights/qwen3-32b-fp8/" + REV in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    iap = hydrate.render_runbook(_book(subnet="nodes"))
    assert "--no-address" in iap and iap.count("--tunnel-through-iap") == 5


def test_runbook_names_stay_valid_when_long() -> None:
    long_model = "a-very-long-model-name-for-testing-the-compute-engine-63-char-limit"
    book = _book(prefix=f"{long_model}/{REV}")
    for name in (book.snapshot, book.disk, book.vm):
        assert hydrate.NAME_RE.match(name) and len(name) <= 63, name
    assert book.vm.endswith("-vm") and book.snapshot != _book(prefix=f"{long_model}x/{REV}").snapshot
    assert hydrate.snapshot_name("7b-model", REV).startswith("w-7b-model-")


def test_runbook_refuses_bad_inputs() -> None:
    with pytest.raises(hydrate.HydrationError) as err:
        _book(
            project="P",
            zone="us-central1",
            bucket="gs://x",
            prefix="model/main",
            release="R!",
            size_gib=2,
            provisioned_throughput_mib_s=100,
        )
    assert len(err.value.problems) == 7


def _gcloud_tree() -> dict[str, Any]:
    gcloud = shutil.which("gcloud")
    tree_file = Path(os.path.realpath(gcloud)).parents[1] / "data" / "cli" / "gcloud_completions.py" if gcloud else None
    if tree_file is None or not tree_file.exists():
        pytest.skip("no Google Cloud CLI with its static CLI tree (data/cli/gcloud_completions.py) here")
    namespace: dict[str, Any] = {}
    exec(compile(tree_file.read_text(), str(tree_file), "exec"), namespace)  # a data module: one dict literal
    return namespace["STATIC_COMPLETION_CLI_TREE"]


def test_runbook_commands_and_flags_exist_in_the_installed_gcloud() -> None:
    tree = _gcloud_tree()
    global_flags = tree["flags"]
    checked = 0
    for argv in _book(subnet="nodes").gcloud_commands():
        node, i = tree, 1
        while i < len(argv) and argv[i] in node["commands"]:
            node, i = node["commands"][argv[i]], i + 1
        assert not node["commands"], f"{' '.join(argv[:i])} is a command group, not a command"
        for arg in argv[i:]:
            if not arg.startswith("--"):
                continue
            name, _, value = arg.partition("=")
            kind = node["flags"].get(name, global_flags.get(name))
            assert kind is not None, f"{' '.join(argv[:i])}: no flag {name}"
            if isinstance(kind, list):
                assert value in kind, f"{name}={value} is not one of {kind}"
            checked += 1
    assert checked > 40


def test_runbook_enums_are_the_compute_api_s() -> None:
    googleapiclient = pytest.importorskip("googleapiclient", reason="google-api-python-client ships compute.v1.json")
    doc_path = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents" / "compute.v1.json"
    schemas = json.loads(doc_path.read_text())["schemas"]
    assert hydrate.WRITE_ACCESS_MODE in schemas["Disk"]["properties"]["accessMode"]["enum"]
    assert "READ_ONLY_MANY" in schemas["Disk"]["properties"]["accessMode"]["enum"]  # what the stack creates
    assert hydrate.SNAPSHOT_TYPE in schemas["Snapshot"]["properties"]["snapshotType"]["enum"]
    assert hydrate.DISK_TYPE == "hyperdisk-ml"  # components/weights.py's type; disk types are not an API enum


def test_runbook_cli_prints_the_runbook_and_the_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(
        [
            "release",
            "hydrate-runbook",
            "--project",
            "acme-llm-prod",
            "--zone",
            "us-central1-a",
            "--bucket",
            "acme-llm-prod-weights",
            "--prefix",
            f"qwen3-32b-fp8/{REV}",
            "--release",
            "qwen3-32b-fp8-2026-08-23.1",
            "--size-gib",
            "64",
            "--throughput-mib-s",
            "1200",
        ],
        capsys,
    )
    assert code == 0 and out == hydrate.render_runbook(_book())
    assert err == (
        f"snapshot for gke.weights.hyperdisk_ml.snapshots.qwen3-32b-fp8-2026-08-23.1: qwen3-32b-fp8-{REV[:12]}\n"
    )


def test_progress_bars_render_without_a_terminal(gcs: Gcs, snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    do_stage(gcs, snapshot, progress=True)
    err = capsys.readouterr().err
    assert "hashing" in err and "uploading" in err
