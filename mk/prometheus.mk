# Prometheus / promtool (Debian `prometheus` package): `promtool check rules` / `promtool test rules` in the unit
# tier (tests/test_promql.py) and the real Prometheus of the integration tier (tests/integration/
# test_prometheus_real.py). Installed only when a binary is missing; the unit target depends on it too, so CI's
# `make test` never silently skips the PromQL checks (they skip with a visible reason outside make).
.PHONY: prometheus-tools
prometheus-tools:
	@command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || \
		( apt-get update && apt-get install -y --no-install-recommends prometheus )

test-unit: prometheus-tools

integration-deps:: prometheus-tools
