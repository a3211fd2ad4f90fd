"""The Vertex container's command line (standard library only): the release verifier first, then vLLM.

Vertex runs one container per replica and has no init containers, so the container's ``command`` is the release
verifier (``components/serving/verify_release.py``, its source passed inline with ``python3 -c``) in ``gcs`` mode:
it compares the object metadata of ``gs://<bucket>/<model>/<revision>/`` with the release manifest (no second
download: vLLM streams the weights itself) and then ``exec``\\ s ``vllm serve``, so vLLM is the process Vertex
signals. ``args`` (``ModelContainerSpec.args``, appended to ``command`` as on Kubernetes) are exactly the planner's
``vllm serve`` arguments from the one renderer (``infra/planning/vllm_args.py``).
"""

from __future__ import annotations

from pathlib import Path

from ..serving.spec import VLLM_COMMAND

VERIFY_SCRIPT = Path(__file__).resolve().parents[1] / "serving" / "verify_release.py"
#: Linux's limit for one argument (MAX_ARG_STRLEN = 32 pages, execve(2)): the inline script must stay below it.
MAX_ARG_BYTES = 128 * 1024


def verifier_source() -> str:
    text = VERIFY_SCRIPT.read_text(encoding="utf-8")
    if len(text.encode("utf-8")) >= MAX_ARG_BYTES:
        raise ValueError(
            f"{VERIFY_SCRIPT.name} is {len(text.encode('utf-8'))} bytes: it cannot be passed as one "
            f"argument (MAX_ARG_STRLEN {MAX_ARG_BYTES})"
        )
    return text


def verified_server_command(bucket: str, prefix: str, revision: str) -> tuple[str, ...]:
    """``python3 -c <verifier> gcs --bucket B --prefix <model>/<revision> --expect-revision R --exec -- vllm serve``;
    the container's ``args`` follow it."""
    return (
        "python3",
        "-c",
        verifier_source(),
        "gcs",
        "--bucket",
        bucket,
        "--prefix",
        prefix,
        "--expect-revision",
        revision,
        "--exec",
        "--",
        *VLLM_COMMAND,
    )


#: The container's environment: the weights come from the release folder, never from a model hub (hub downloads
#: at boot hit HTTP 429 on shared egress and take minutes), and vLLM reports no usage statistics; the same values
#: as the Cloud Run container's (``components/cloud_run/service.py``).
SERVER_ENV: tuple[tuple[str, str], ...] = (
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_OFFLINE", "1"),
    ("VLLM_NO_USAGE_STATS", "1"),
)
