"""The offered workload: prompt and output lengths fitted to the contract, a shared prefix, and the priority mix.

Length distribution
-------------------
guidellm 0.8.1's synthetic text data (``kind: synthetic_text``) draws each length as
``round(clip(gauss(mu, sigma), min, max))`` with integer ``mu`` >= 1 and integer ``sigma`` > 0
(``guidellm/utils/random.py`` ``IntegerRangeSampler``), or a constant when min == max. So the family it can
express is a *censored normal*: a normal N(mu, sigma) whose mass below ``lower`` sits at ``lower`` and whose mass
above ``upper`` sits at ``upper``. We fit its two parameters to the contract's two numbers, mean m and p95 q,
with ``lower`` the shortest prompt (2 tokens, ``PROMPT_MIN_TOKENS``) or completion (1 token) and ``upper`` the
contract maximum.

- p95: censoring moves no mass across q when lower < q <= upper, so the 95th percentile is that of the
  uncensored normal: ``q = mu + z*sigma`` with ``z = Phi^-1(0.95) = 1.644854``; hence ``sigma = (q - mu) / z``.
- mean of the censored normal, with ``a = (lower - mu)/sigma`` and ``b = (upper - mu)/sigma``::

      E = lower*Phi(a) + mu*(Phi(b) - Phi(a)) + sigma*(phi(a) - phi(b)) + upper*(1 - Phi(b))

  (the clipped tails at their bounds plus the truncated normal's first moment in between).
- E rises monotonically from about ``0.95*lower + 0.05*upper`` (mu -> -inf) to q (mu -> q), so ``E(mu) = m``
  has one root; it is found by bisection on ``mu`` in [1, q] and rounded to the integers guidellm takes.

Example (the unit tests check it by hand): m = 500, q = 665, upper = 2000 gives mu = 500 and
sigma = 165 / 1.644854 = 100.3 -> 100; both clips are more than 4.9 sigma away, so E = 500.0 and p95 = 664.5.

A contract with a heavier tail than a normal can carry has no root with ``mu >= 1`` (guidellm rejects
``mu <= 0``): for m = 1800, q = 8000, upper = 12000 even ``mu = 1`` gives E = 1931. The fit then keeps the p95
and the maximum exact, takes ``mu = 1``, and reports the mean it overshoots by (``exact = False``), together
with the share of requests sitting at the lower clip. Keeping p95 rather than the mean is deliberate: the
latency objectives are judged at p95 and the maximum bounds the KV footprint, while θ is a rate in tokens per
second that a few percent of mean length barely moves. The realised mean and p95 of what was actually sent
(from the server's token counts) are recorded beside the fit either way.

Shared prefix
-------------
guidellm can prepend a prefix to every prompt (``prefix_tokens``, ``prefix_count``). With a prefix ratio r the
prefix is ``P = round(r * m)`` tokens, one prefix per stream (``prefix_count = 1``: one system prompt), and the
fitted distribution is that of the rest of the prompt: mean ``m - P``, p95 ``q - P``, maximum ``max - P``.

Priority mix
------------
Each priority class is an independent Poisson stream of rate ``lambda * share``; the superposition of
independent Poisson processes is a Poisson process of rate ``lambda``, so the offered load is the same open loop
as a single stream, with each arrival labelled by class in proportion to its share. guidellm sets one fixed
header set per run (``backend.extras.headers``), so each class runs as its own guidellm process and sends
``x-llm-d-inference-objective: <class>``, the header the GKE Inference Gateway maps to an InferenceObjective.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components import naming

from .stats import Phi, normal_quantile, phi

#: The header the GKE Inference Gateway reads to pick a request's InferenceObjective (docs/rollout.md, priority classes).
PRIORITY_HEADER = naming.OBJECTIVE_HEADER
#: z such that Phi(z) = 0.95.
Z95 = normal_quantile(0.95)
#: Bisection steps for the mean fit: each halves the interval, 200 reach float precision for any token count.
FIT_BISECTION_STEPS = 200
#: The mean is "exact" when within one token of the contract: rounding mu and sigma to integers (guidellm's
#: types) can move it by up to about that much and no further.
EXACT_MEAN_TOLERANCE_TOKENS = 1.0
#: Shortest prompt sent. Not 1: guidellm builds an N-token prompt by encoding text, keeping N token ids and
#: decoding them without special tokens, so with a tokenizer that prepends BOS (Llama's, the test model's) a
#: 1-token prompt is the BOS alone, decodes to an empty string and fails inside guidellm before it is sent
#: (measured: "Cannot build /v1/completions prompt"). Two tokens always leave at least one text token.
PROMPT_MIN_TOKENS = 2
#: Shortest completion: one token, the least a request can ask for.
OUTPUT_MIN_TOKENS = 1
#: Shares of the priority mix must sum to 1 within this: they are fractions of lambda, and a typo such as
#: ``0.8,0.3`` must not silently change the offered load.
SHARE_SUM_TOLERANCE = 1e-6


class WorkloadError(ValueError):
    """A workload the contract or guidellm cannot express; the message names the numbers."""


# ---- length fit ----------------------------------------------------------------------------------------------


def censored_normal_mean(mu: float, sigma: float, lower: float, upper: float) -> float:
    """Mean of ``clip(N(mu, sigma), lower, upper)``; ``sigma == 0`` is the constant ``clip(mu)``."""
    if sigma == 0:
        return min(max(mu, lower), upper)
    a = (lower - mu) / sigma
    b = (upper - mu) / sigma
    return lower * Phi(a) + mu * (Phi(b) - Phi(a)) + sigma * (phi(a) - phi(b)) + upper * (1 - Phi(b))


@dataclass(frozen=True)
class LengthFit:
    """Parameters guidellm receives for one length, and what they imply."""

    contract_mean: float
    contract_p95: int
    lower: int
    upper: int
    #: guidellm ``*_tokens`` (the normal's mean before clipping).
    mu: int
    #: guidellm ``*_tokens_stdev``; 0 means a constant length (min = max = mu).
    sigma: int
    fitted_mean: float
    fitted_p95: float
    #: Whether the fitted mean is within EXACT_MEAN_TOLERANCE_TOKENS of the contract mean.
    exact: bool
    #: Share of requests at the lower clip (``Phi((lower - mu)/sigma)``): large when the contract's tail is heavy.
    lower_clip_share: float
    #: Share of requests at the upper clip (the contract maximum).
    upper_clip_share: float

    @property
    def distribution(self) -> str:
        return "constant" if self.sigma == 0 else "censored_normal"

    def guidellm_fields(self, prefix: str) -> dict[str, int]:
        """``{prefix}_tokens`` / ``_stdev`` / ``_min`` / ``_max`` for guidellm's synthetic_text data args."""
        if self.sigma == 0:
            return {f"{prefix}_tokens": self.mu, f"{prefix}_tokens_min": self.mu, f"{prefix}_tokens_max": self.mu}
        return {
            f"{prefix}_tokens": self.mu,
            f"{prefix}_tokens_stdev": self.sigma,
            f"{prefix}_tokens_min": self.lower,
            f"{prefix}_tokens_max": self.upper,
        }


def fit_lengths(mean: float, p95: int, upper: int, lower: int = 1) -> LengthFit:
    """Fit guidellm's censored normal to a contract's mean and p95 (see the module docstring for the algebra)."""
    if not (1 <= lower <= mean <= p95 <= upper):
        raise WorkloadError(
            f"lengths must satisfy 1 <= lower ({lower}) <= mean ({mean}) <= p95 ({p95}) <= max ({upper})"
        )
    if p95 - mean < 0.5:
        # A p95 within rounding of the mean is a constant length: guidellm's min = max form.
        mu = round(mean)
        return LengthFit(
            mean,
            p95,
            lower,
            upper,
            mu,
            0,
            float(mu),
            float(mu),
            abs(mu - mean) <= EXACT_MEAN_TOLERANCE_TOKENS,
            0.0,
            0.0,
        )

    def sigma_for(mu: float) -> float:
        return (p95 - mu) / Z95

    lo, hi = 1.0, float(p95)
    if censored_normal_mean(lo, sigma_for(lo), lower, upper) < mean:
        for _ in range(FIT_BISECTION_STEPS):
            mid = (lo + hi) / 2
            if censored_normal_mean(mid, sigma_for(mid), lower, upper) < mean:
                lo = mid
            else:
                hi = mid
    # else: even mu = 1 overshoots the mean (a tail heavier than a normal's); keep mu = 1, p95 and max exact.
    mu_i = max(1, round(lo))
    sigma_i = max(1, round(sigma_for(mu_i)))
    fitted_mean = censored_normal_mean(mu_i, sigma_i, lower, upper)
    fitted_p95 = min(max(mu_i + Z95 * sigma_i, lower), upper)
    return LengthFit(
        contract_mean=mean,
        contract_p95=p95,
        lower=lower,
        upper=upper,
        mu=mu_i,
        sigma=sigma_i,
        fitted_mean=fitted_mean,
        fitted_p95=fitted_p95,
        exact=abs(fitted_mean - mean) <= EXACT_MEAN_TOLERANCE_TOKENS,
        lower_clip_share=Phi((lower - mu_i) / sigma_i),
        upper_clip_share=1 - Phi((upper - mu_i) / sigma_i),
    )


# ---- priority mix --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassShare:
    name: str
    priority: int
    share: float


def parse_priority_mix(text: str | None, classes: Sequence[tuple[str, int]]) -> tuple[ClassShare, ...]:
    """``interactive=0.8,batch=0.2`` -> shares; ``None`` -> equal shares of every contract class.

    Classes left out of the text get no traffic. Order follows the contract, so runs are reproducible.
    """
    priorities = dict(classes)
    if text is None:
        return tuple(ClassShare(n, p, 1 / len(classes)) for n, p in classes)
    given: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        name = name.strip()
        if not sep or not name:
            raise WorkloadError(f"--priority-mix: expected NAME=SHARE, got {item.strip()!r}")
        if name not in priorities:
            raise WorkloadError(f"--priority-mix: unknown class {name!r} (contract classes: {', '.join(priorities)})")
        if name in given:
            raise WorkloadError(f"--priority-mix: class {name!r} given twice")
        try:
            share = float(value)
        except ValueError:
            raise WorkloadError(f"--priority-mix: share of {name!r} is not a number: {value.strip()!r}") from None
        if not (math.isfinite(share) and share > 0):
            raise WorkloadError(f"--priority-mix: share of {name!r} must be > 0, got {value.strip()}")
        given[name] = share
    total = sum(given.values())
    if abs(total - 1) > SHARE_SUM_TOLERANCE:
        raise WorkloadError(f"--priority-mix: shares must sum to 1, got {total:g}")
    return tuple(ClassShare(n, p, given[n]) for n, p in classes if n in given)


# ---- the whole workload --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadPlan:
    """Everything guidellm needs to generate the contract's traffic, plus what the record states about it."""

    prompt: LengthFit  # the part of the prompt after the shared prefix
    output: LengthFit
    prefix_ratio: float
    prefix_tokens: int
    mix: tuple[ClassShare, ...]
    send_priority_header: bool

    def synthetic_data(self) -> dict[str, Any]:
        """guidellm ``synthetic_text`` data args (one dataset, identical for every class)."""
        data: dict[str, Any] = {
            "kind": "synthetic_text",
            **self.prompt.guidellm_fields("prompt"),
            **self.output.guidellm_fields("output"),
        }
        if self.prefix_tokens:
            data.update(prefix_tokens=self.prefix_tokens, prefix_count=1)
        return data

    def headers(self, share: ClassShare) -> dict[str, str] | None:
        return {PRIORITY_HEADER: share.name} if self.send_priority_header else None


def plan_workload(
    *,
    prompt_mean: float,
    prompt_p95: int,
    max_input: int,
    output_mean: float,
    output_p95: int,
    max_output: int,
    prefix_ratio: float,
    mix: tuple[ClassShare, ...],
    send_priority_header: bool = True,
) -> WorkloadPlan:
    """Fit both lengths (prompt after the prefix) and validate the prefix ratio."""
    if not (math.isfinite(prefix_ratio) and 0 <= prefix_ratio < 1):
        raise WorkloadError(f"--prefix-ratio must be in [0, 1), got {prefix_ratio}")
    prefix = round(prefix_ratio * prompt_mean)
    if prompt_mean - prefix < PROMPT_MIN_TOKENS:
        raise WorkloadError(
            f"--prefix-ratio {prefix_ratio} leaves no prompt after a {prefix}-token prefix (mean prompt {prompt_mean})"
        )
    if 0 < prefix < PROMPT_MIN_TOKENS:
        raise WorkloadError(
            f"--prefix-ratio {prefix_ratio} gives a {prefix}-token prefix, which guidellm would "
            f"send empty; use 0 or a ratio giving >= {PROMPT_MIN_TOKENS} tokens"
        )
    prompt = fit_lengths(prompt_mean - prefix, prompt_p95 - prefix, max_input - prefix, lower=PROMPT_MIN_TOKENS)
    output = fit_lengths(output_mean, output_p95, max_output, lower=OUTPUT_MIN_TOKENS)
    return WorkloadPlan(prompt, output, prefix_ratio, prefix, mix, send_priority_header)
