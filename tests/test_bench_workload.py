"""The bench workload: the censored-normal length fit (arithmetic by hand), the priority mix and the prefix."""

from __future__ import annotations

from typing import Any

import pytest

from infra.offline.bench.workload import (
    PRIORITY_HEADER,
    Z95,
    ClassShare,
    WorkloadError,
    censored_normal_mean,
    fit_lengths,
    parse_priority_mix,
    plan_workload,
)

CLASSES = (("interactive", 100), ("batch", 0))


def test_z95_is_the_normal_95th_percentile():
    # Phi(1.644854) = 0.95 (normal table).
    assert Z95 == pytest.approx(1.644854, abs=1e-6)


def test_fit_without_clipping_is_the_plain_normal():
    # mean 500, p95 665: sigma = (665 - 500) / 1.644854 = 100.31 -> 100 and mu = 500. The clips sit at
    # (2 - 500)/100 = -4.98 sigma and (2000 - 500)/100 = +15 sigma, so the mean stays 500 and
    # p95 = 500 + 1.644854 * 100 = 664.49.
    f = fit_lengths(500, 665, 2000, lower=2)
    assert (f.mu, f.sigma) == (500, 100)
    assert f.fitted_mean == pytest.approx(500.0, abs=1e-3)
    assert f.fitted_p95 == pytest.approx(664.49, abs=0.01)
    assert f.exact and f.distribution == "censored_normal"
    assert f.guidellm_fields("prompt") == {
        "prompt_tokens": 500,
        "prompt_tokens_stdev": 100,
        "prompt_tokens_min": 2,
        "prompt_tokens_max": 2000,
    }


def test_censored_mean_formula_by_hand():
    # mu 31, sigma 468, clipped to [1, 1024]: a = (1 - 31)/468 = -0.0641, b = (1024 - 31)/468 = 2.1218.
    # Phi(a) = 0.4744, phi(a) = 0.3981, Phi(b) = 0.9831, phi(b) = 0.0420 (normal tables), so
    # E = 1*0.4744 + 31*(0.9831 - 0.4744) + 468*(0.3981 - 0.0420) + 1024*(1 - 0.9831)
    #   = 0.474 + 15.770 + 166.655 + 17.306 = 200.2
    assert censored_normal_mean(31, 468, 1, 1024) == pytest.approx(200.2, abs=0.1)


def test_fit_with_clipping_hits_mean_and_p95():
    # The dev stack's output contract: mean 200, p95 800, max 1024. Clipping at 1 token raises the mean, so mu
    # must sit far below 200: the fit finds mu = 31, sigma = (800 - 31)/1.644854 = 467.5 -> 468 (the formula
    # above gives 200.2), and p95 = 31 + 1.644854*468 = 800.8.
    f = fit_lengths(200, 800, 1024, lower=1)
    assert (f.mu, f.sigma) == (31, 468)
    assert f.fitted_mean == pytest.approx(200.2, abs=0.1)
    assert f.fitted_p95 == pytest.approx(800.8, abs=0.1)
    assert f.exact
    assert f.lower_clip_share == pytest.approx(0.4744, abs=1e-3)  # Phi((1 - 31)/468)


def test_heavy_tail_keeps_p95_and_reports_the_mean_it_misses():
    # prod prompts: mean 1800, p95 8000, max 12000. Even mu = 1 (guidellm's smallest) overshoots: sigma =
    # (8000 - 1)/1.644854 = 4863.1 -> 4863, a = (2 - 1)/4863 = 0.0002, b = (12000 - 1)/4863 = 2.4674,
    # Phi(a) = 0.5001, phi(a) = 0.3989, Phi(b) = 0.9932, phi(b) = 0.0190:
    # E = 2*0.5001 + 1*(0.9932 - 0.5001) + 4863*(0.3989 - 0.0190) + 12000*0.0068 = 1.0 + 0.5 + 1847.5 + 81.6
    #   = 1930.6 (to table precision; 1930.8 exactly) > 1800.
    f = fit_lengths(1800, 8000, 12000, lower=2)
    assert (f.mu, f.sigma) == (1, 4863)
    assert f.fitted_mean == pytest.approx(1930.8, abs=0.1)
    assert f.fitted_p95 == pytest.approx(8000, abs=0.5)
    assert not f.exact
    assert f.lower_clip_share == pytest.approx(0.5001, abs=1e-3)


def test_p95_equal_to_mean_is_a_constant():
    f = fit_lengths(64, 64, 128)
    assert (f.mu, f.sigma, f.distribution) == (64, 0, "constant")
    assert f.guidellm_fields("output") == {"output_tokens": 64, "output_tokens_min": 64, "output_tokens_max": 64}


@pytest.mark.parametrize(
    "args, message",
    [
        ((100, 50, 200), "lengths must satisfy 1 <= lower (1) <= mean (100) <= p95 (50) <= max (200)"),
        ((100, 300, 200), "lengths must satisfy 1 <= lower (1) <= mean (100) <= p95 (300) <= max (200)"),
    ],
)
def test_fit_rejects_inconsistent_lengths(args, message):
    with pytest.raises(WorkloadError) as err:
        fit_lengths(*args)
    assert str(err.value) == message


def test_priority_mix_default_is_equal_shares_in_contract_order():
    assert parse_priority_mix(None, CLASSES) == (ClassShare("interactive", 100, 0.5), ClassShare("batch", 0, 0.5))


def test_priority_mix_parses_shares_and_keeps_contract_order():
    assert parse_priority_mix("batch=0.2, interactive=0.8", CLASSES) == (
        ClassShare("interactive", 100, 0.8),
        ClassShare("batch", 0, 0.2),
    )
    assert parse_priority_mix("interactive=1", CLASSES) == (ClassShare("interactive", 100, 1.0),)


@pytest.mark.parametrize(
    "text, message",
    [
        ("interactive=0.8,batch=0.3", "--priority-mix: shares must sum to 1, got 1.1"),
        ("chat=1", "--priority-mix: unknown class 'chat' (contract classes: interactive, batch)"),
        ("interactive", "--priority-mix: expected NAME=SHARE, got 'interactive'"),
        ("interactive=x", "--priority-mix: share of 'interactive' is not a number: 'x'"),
        ("interactive=0,batch=1", "--priority-mix: share of 'interactive' must be > 0, got 0"),
        ("batch=0.5,batch=0.5", "--priority-mix: class 'batch' given twice"),
    ],
)
def test_priority_mix_errors(text, message):
    with pytest.raises(WorkloadError) as err:
        parse_priority_mix(text, CLASSES)
    assert str(err.value) == message


def _plan(**kw):
    args: dict[str, Any] = dict(
        prompt_mean=40,
        prompt_p95=100,
        max_input=128,
        output_mean=20,
        output_p95=50,
        max_output=64,
        prefix_ratio=0.0,
        mix=parse_priority_mix(None, CLASSES),
    )
    args.update(kw)
    return plan_workload(**args)


def test_prefix_is_taken_out_of_the_fitted_prompt():
    # ratio 0.25 of a 40-token mean: a 10-token prefix; the rest of the prompt has mean 30, p95 90, max 118.
    plan = _plan(prefix_ratio=0.25)
    assert plan.prefix_tokens == 10
    assert (plan.prompt.contract_mean, plan.prompt.contract_p95, plan.prompt.upper) == (30, 90, 118)
    data = plan.synthetic_data()
    assert data["kind"] == "synthetic_text"
    assert (data["prefix_tokens"], data["prefix_count"]) == (10, 1)
    assert data["prompt_tokens_min"] == 2 and data["output_tokens_min"] == 1


def test_no_prefix_sends_no_prefix_fields():
    assert "prefix_tokens" not in _plan().synthetic_data()


@pytest.mark.parametrize(
    "ratio, message",
    [
        (1.0, "--prefix-ratio must be in [0, 1), got 1.0"),
        (-0.1, "--prefix-ratio must be in [0, 1), got -0.1"),
        (
            0.02,
            "--prefix-ratio 0.02 gives a 1-token prefix, which guidellm would send empty; use 0 or a ratio "
            "giving >= 2 tokens",
        ),
        (0.97, "--prefix-ratio 0.97 leaves no prompt after a 39-token prefix (mean prompt 40)"),
    ],
)
def test_prefix_ratio_errors(ratio, message):
    with pytest.raises(WorkloadError) as err:
        _plan(prefix_ratio=ratio)
    assert str(err.value) == message


def test_headers_name_the_class_unless_disabled():
    plan = _plan()
    assert plan.headers(plan.mix[1]) == {PRIORITY_HEADER: "batch"}
    assert _plan(send_priority_header=False).headers(plan.mix[1]) is None
