"""Fixtures for the real-vLLM integration tier (``pytest -m integration tests/integration``).

The fixtures live in vllm_harness.py so that other test modules can import the helpers too; they are
re-exported here so pytest finds them for every test in this folder.
"""

from __future__ import annotations

import pytest

from .vllm_harness import TIMINGS, VllmServer, log_tail, tiny_model_dir, vllm_server  # noqa: F401  (fixtures)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the tail of the vLLM server log to the report of any failed test that used the server."""
    report = yield
    server = getattr(item, "funcargs", {}).get("vllm_server")
    if report.failed and isinstance(server, VllmServer):
        report.sections.append((f"vLLM server log (tail of {server.log_path})", log_tail(server.log_path)))
    return report


def pytest_terminal_summary(terminalreporter) -> None:
    if TIMINGS:
        terminalreporter.section("real vLLM timings")
        for what, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")
