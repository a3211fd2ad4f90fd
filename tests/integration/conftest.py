"""Fixtures for the real-vLLM integration tier (``pytest -m integration tests/integration``).

The fixtures live in vllm_harness.py so that other test modules can import the helpers too; they are
re-exported here so pytest finds them for every test in this folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .vllm_harness import NOTES, TIMINGS, VllmServer, log_tail, tiny_model_dir, vllm_server  # noqa: F401  (fixtures)


def _servers(value: Any) -> Iterator[VllmServer]:
    """The VllmServers in a fixture value: a server, an object with a ``server`` attribute, or a dict of them."""
    if isinstance(value, VllmServer):
        yield value
    elif isinstance(getattr(value, "server", None), VllmServer):
        yield value.server
    elif isinstance(value, dict):
        for v in value.values():
            yield from _servers(v)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the tail of the vLLM server log to the report of any failed test that used a server."""
    report = yield
    if report.failed:
        seen = set()
        for value in getattr(item, "funcargs", {}).values():
            for server in _servers(value):
                if server.log_path not in seen:
                    seen.add(server.log_path)
                    report.sections.append((f"vLLM server log (tail of {server.log_path})", log_tail(server.log_path)))
    return report


def pytest_terminal_summary(terminalreporter) -> None:
    if TIMINGS:
        terminalreporter.section("real vLLM timings")
        for what, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")
    if NOTES:
        terminalreporter.section("real vLLM observations")
        for what, text in NOTES.items():
            terminalreporter.write_line(f"{what}: {text}")
