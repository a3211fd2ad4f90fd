"""The Vertex container's command line (standard library only): the release verifier first, then vLLM.

Vertex runs one container per replica and has no init containers, so the container's ``command`` is the release
verifier (``components/serving/verify_release.py``, its source passed inline with ``python3 -c``) in ``gcs`` mode:
it compares the object metadata of ``gs://<bucket>/<model>/<revision>/`` with the release manifest (no second
download: vLLM streams the weights itself) and then ``exec``\\ s ``vllm serve``, so vLLM is the process Vertex
signals. ``args`` (``ModelContainerSpec.args``, appended to ``command`` as on Kubernetes) are exactly the planner's
``vllm serve`` arguments from the one renderer (``infra/planning/vllm_args.py``).

A co-hosted group's container runs the co-host server instead (:func:`cohost_server_command`): a small bootstrap,
inline, writes the server and the verifier (also inline, one argument each) to a folder and ``exec``-s the server
with its configuration document; the server runs the verifier before each instance's ``vllm serve``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .. import naming
from ..serving.spec import VLLM_COMMAND, verify_gcs_command

VERIFY_SCRIPT = Path(__file__).resolve().parents[1] / "serving" / "verify_release.py"
COHOST_SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "cohost" / "server.py"
BOOTSTRAP_SCRIPT = Path(__file__).resolve().parent / "bootstrap.py"
#: Linux's limit for one argument (MAX_ARG_STRLEN = 32 pages, execve(2)): an inline script or document must stay
#: below it.
MAX_ARG_BYTES = 128 * 1024
#: Linux's default limit for all arguments and the environment together (ARG_MAX: a quarter of the default 8 MiB stack,
#: execve(2) "Limits on size of arguments and environment"); the co-host command line stays well below it.
MAX_ARGS_TOTAL_BYTES = 2 * 1024 * 1024


def inline_argument(text: str, what: str) -> str:
    """``text`` as one argument of a command line; refused when execve(2) could not pass it."""
    size = len(text.encode("utf-8"))
    if size >= MAX_ARG_BYTES:
        raise ValueError(
            f"{what} is {size} bytes: it cannot be passed as one argument (MAX_ARG_STRLEN {MAX_ARG_BYTES})"
        )
    return text


def verifier_source() -> str:
    return inline_argument(VERIFY_SCRIPT.read_text(encoding="utf-8"), VERIFY_SCRIPT.name)


def verified_server_command(bucket: str, prefix: str, revision: str) -> tuple[str, ...]:
    """``python3 -c <verifier> gcs --bucket B --prefix <model>/<revision> --expect-revision R --exec -- vllm serve``;
    the container's ``args`` follow it."""
    return verify_gcs_command(("python3", "-c", verifier_source()), bucket, prefix, revision, VLLM_COMMAND)


def cohost_server_command(
    config_json: str, watch: str | None = None, poll_seconds: int | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(command, args)`` of a co-hosted group's container: the bootstrap (inline) writes the co-host server and the
    release verifier (inline too: each one argument) to ``naming.VERTEX_SCRIPTS_DIR`` and becomes the server, whose
    ``args`` are its configuration document (and, with ``watch``, the model-set object it follows). Every instance's
    ``verify`` names the verifier in that folder."""
    if (watch is None) != (poll_seconds is None):
        raise ValueError("cohost_server_command: poll_seconds is given exactly when watch is")
    command = (
        "python3",
        "-c",
        inline_argument(BOOTSTRAP_SCRIPT.read_text(encoding="utf-8"), BOOTSTRAP_SCRIPT.name),
        naming.VERTEX_SCRIPTS_DIR,
        naming.COHOST_SERVER_FILE,
        inline_argument(COHOST_SERVER_SCRIPT.read_text(encoding="utf-8"), COHOST_SERVER_SCRIPT.name),
        naming.VERIFY_SCRIPT_FILE,
        verifier_source(),
        "--",
    )
    args: tuple[str, ...] = ("--config-json", inline_argument(config_json, "the co-host configuration document"))
    if watch is not None:
        args += ("--watch", watch, "--poll-seconds", str(poll_seconds))
    total = command_line_bytes((*command, *args))
    if total >= MAX_ARGS_TOTAL_BYTES:
        raise ValueError(f"the co-host command line is {total} bytes: above ARG_MAX {MAX_ARGS_TOTAL_BYTES}")
    return command, args


def command_line_bytes(argv: Sequence[str]) -> int:
    """What execve(2) counts of a command line: every argument with its terminating NUL."""
    return sum(len(a.encode("utf-8")) + 1 for a in argv)


#: The container's environment: the weights come from the release folder, never from a model hub (hub downloads
#: at boot hit HTTP 429 on shared egress and take minutes), and vLLM reports no usage statistics; the same values
#: as the Cloud Run container's (``components/cloud_run/service.py``).
SERVER_ENV: tuple[tuple[str, str], ...] = (
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_OFFLINE", "1"),
    ("VLLM_NO_USAGE_STATS", "1"),
)
