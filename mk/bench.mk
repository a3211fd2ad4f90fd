# `llm-serving bench` load generator: guidellm 0.8.1 in .venv-vllm/ beside the CPU vLLM (included from the
# top-level Makefile). guidellm needs torch, which only .venv-vllm has; the bench itself runs in .venv and calls
# .venv-vllm/bin/guidellm as a subprocess (`--guidellm PATH` for any other install).
#   make integration-deps   installs it after vLLM (~50 s and ~0.3 GB the first time; a no-op once the stamp exists)
# Its tests: tests/integration/test_bench_real.py (and test_kv_planner_vs_engine.py, which needs only vLLM).

VLLM_VENV ?= .venv-vllm

# mk/*.mk are included in name order, so mk/bench.mk's recipe would run before mk/vllm.mk's; guidellm goes
# into the venv vLLM creates, so run the vLLM install first (a no-op when its stamp exists).
integration-deps::
	VLLM_VENV="$(abspath $(VLLM_VENV))" bash scripts/install-vllm.sh
	VLLM_VENV="$(abspath $(VLLM_VENV))" bash scripts/install-guidellm.sh
