# Real-vLLM integration tier: the CPU build of vLLM 0.32 in .venv-vllm/ (included from the top-level Makefile).
#   make integration-deps   install it (~4 min and ~3.5 GB the first time; a no-op once the stamp exists)
# The integration tests themselves run with: .venv/bin/python -m pytest -m integration tests/integration -x -q
# (REQUIRE_VLLM=1 turns "vLLM missing" from a skip into a failure, for CI).

VLLM_VENV ?= .venv-vllm

integration-deps::
	VLLM_VENV="$(abspath $(VLLM_VENV))" bash scripts/install-vllm.sh
