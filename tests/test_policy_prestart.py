"""The pack process started ahead of the analysis (``StartedPack``: ``plan`` boots it while the program runs) gives
the same report as a pack started for the analysis, is refused for another stack, and never outlives its command."""

from __future__ import annotations

import os

import pytest

from infra.offline import cli
from infra.offline.analyzer import PolicyPackError, StartedPack, run_policy_pack

from .synthetic import PROJECT, STACK, inventory
from .test_policy_runner import BIG_DISK, UNPROTECTED_BUCKET, pack_dir  # noqa: F401  (fixture)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_prestarted_pack_reports_what_a_fresh_one_reports(pack_dir):  # noqa: F811
    inv = inventory(BIG_DISK, UNPROTECTED_BUCKET)
    fresh = run_policy_pack(pack_dir, inv, {})
    with StartedPack(pack_dir, PROJECT, STACK) as started:
        assert started.pack is not None
        pid = started.pack.proc.pid
        early = run_policy_pack(pack_dir, inv, {}, started=started)
    assert early.pack_pid == pid and _gone(pid)
    assert [(v.policy, v.urn, v.message) for v in early.violations] == [
        (v.policy, v.urn, v.message) for v in fresh.violations
    ]
    assert len(early.violations) == 2  # the big disk and the unprotected bucket


def test_a_pack_started_for_another_stack_is_refused_and_stopped(pack_dir):  # noqa: F811
    with StartedPack(pack_dir, PROJECT, "other") as started:
        assert started.pack is not None
        pid = started.pack.proc.pid
        with pytest.raises(
            PolicyPackError, match="the pack started for llm-serving/other cannot analyse llm-serving/dev"
        ):
            run_policy_pack(pack_dir, inventory(BIG_DISK), {}, started=started)
    assert _gone(pid)


def test_plan_stops_the_early_pack_when_the_stack_is_refused(tmp_path, capsys):
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  llm-serving:environment: dev\n")
    started: list[StartedPack] = []
    real = StartedPack.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        started.append(self)

    StartedPack.__init__ = spy  # type: ignore[method-assign]
    try:
        code = cli.main(["plan", "--stack", "dev", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    finally:
        StartedPack.__init__ = real  # type: ignore[method-assign]
    assert code == 2 and "configuration error" in capsys.readouterr().err
    (pack,) = started
    assert pack.pack is not None and _gone(pack.pack.proc.pid)
