"""The programs a Cloud Run revision runs besides vLLM, shipped without putting their text into the revision.

Cloud Run has no init containers and no ConfigMaps: the release verifier (``components/serving/verify_release.py``)
and the in-memory stager (:mod:`.stage_weights`) used to be passed inline (``python3 -c <source>``), so every change
of this program's text renamed every revision (issue 23). They now live in the stack's programs bucket at a
content-addressed folder, ``programs/<16 hex>/``, which each revision mounts read-only as a Cloud Storage volume
(``only-dir=programs/<16 hex>``; Cloud Run "Configure Cloud Storage volume mounts": read-only mounts, gcsfuse flags
without the leading ``--``). Why not a Secret Manager volume: a secret version's number is chosen by Secret Manager
when it is added (known only after apply, so no revision name could be derived at plan time), a payload is capped
at 64 KiB per version (Secret Manager "Quotas and limits", content limits; the verifier is ~43 KB and growing), and
a secret volume is read from Secret Manager on every file read (Cloud Run "Configure secrets for services"); none of
that holds for an object path the program chooses.

The folder name is the first 16 hex digits of the SHA-256 over each file's name and SHA-256, so it changes exactly
when the bytes a revision runs change: a revision keeps running what it was created with (its objects are never
overwritten or deleted: ``retain_on_delete``), and a program upgrade that leaves these two files alone renames no
revision. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import naming
from .spec import ProgramsVolume

VERIFY_SCRIPT = Path(__file__).resolve().parents[1] / "serving" / "verify_release.py"
STAGE_SCRIPT = Path(__file__).resolve().parent / "stage_weights.py"
#: The files, by the name each gets in the folder (the name is part of the digest).
FILES: tuple[tuple[str, Path], ...] = (("verify_release.py", VERIFY_SCRIPT), ("stage_weights.py", STAGE_SCRIPT))
#: Hex digits of the folder digest: 64 bits, far beyond the handful of program versions a bucket ever holds.
FOLDER_HASH_CHARS = 16


def folder_digest(files: tuple[tuple[str, str], ...]) -> str:
    """SHA-256 over ``{name: sha256(text)}`` (sorted JSON), cut to :data:`FOLDER_HASH_CHARS`."""
    index = {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in files}
    body = json.dumps(index, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:FOLDER_HASH_CHARS]


def programs_volume(bucket: str, files: tuple[tuple[str, str], ...] | None = None) -> ProgramsVolume:
    """The programs of this checkout (or ``files``: name -> text) at their content-addressed folder of ``bucket``."""
    texts = files if files is not None else tuple((name, path.read_text(encoding="utf-8")) for name, path in FILES)
    return ProgramsVolume(
        bucket=bucket, folder=f"{naming.CLOUD_RUN_PROGRAMS_PREFIX}/{folder_digest(texts)}", files=texts
    )


def program_path(name: str) -> str:
    """Where a program appears inside the container (the volume's root is the content-addressed folder)."""
    return f"{naming.CLOUD_RUN_PROGRAMS_ROOT}/{name}"
