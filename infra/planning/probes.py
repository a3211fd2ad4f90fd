"""Probe and shutdown timing of one vLLM pool, derived from the planner and the workload contract (pure).

Seed 000 separates three questions, and each gets its own probe:

* startup: has a legitimate cold load finished? Its window (period x failureThreshold) must cover the planner's
  cold-load estimate with a stated margin; a configuration whose window would exceed ``max_startup_seconds``
  is an error, not a silently longer wait.
* readiness: can this replica take traffic *now*? An exec probe runs ``readiness_probe.py`` (health, exactly the
  declared release served, a rate-limited 1-token generation within a deadline) and fails fast.
* liveness: is the engine dead? ``/health`` with a generous threshold, because a restart costs a full cold load.

Scale-down protocol (the design, "Scale-down is a protocol too"): the preStop sleep keeps the pod serving while
the endpoint picker and load balancer de-register it; SIGTERM then makes vLLM stop admitting and drain
in-flight streams for ``--shutdown-timeout`` = the longest allowed stream (TTFT objective + max output tokens x
ITL objective); the grace period covers preStop + drain + a teardown slack.
"""

from __future__ import annotations

import math

from components.serving.spec import ProbeTimings

#: Startup probe timeout: /health answers in milliseconds once the server is up; 5 s tolerates a busy node.
STARTUP_TIMEOUT_SECONDS = 5

#: The readiness generation deadline is this many TTFT objectives: a 1-token request for a 1-token prompt
#: only waits behind the engine's own queue, so a healthy replica even under load answers well within
#: 3 x the p95 TTFT objective; missing it means the engine is stuck, not busy. Change with ttft_p95_ms.
READINESS_TTFT_FACTOR = 3
#: Floor of the readiness deadline (the probe script's own default): interpreter start + three loopback
#: requests need a few seconds on a loaded node even when the TTFT objective is tiny.
READINESS_MIN_DEADLINE_SECONDS = 4
#: Readiness timeoutSeconds = deadline + this: room for starting python3 so the script reports its own
#: "deadline exceeded" line rather than the kubelet's bare "command timed out".
READINESS_TIMEOUT_SLACK_SECONDS = 2
#: Seconds between readiness probes (at least timeout + 1 so runs never queue): a stuck replica is out of
#: rotation within period x failureThreshold = 30 s. Change together with READINESS_FAILURE_THRESHOLD.
READINESS_PERIOD_SECONDS = 10
#: Three misses in a row: one slow generation during a burst does not eject a replica.
READINESS_FAILURE_THRESHOLD = 3
#: The generation check runs at most once per this many seconds per replica (one token a minute: no
#: measurable load); in between, /health and /v1/models suffice. The plan lowers it to the cold-load
#: estimate when that is shorter, so a state file left in /tmp (an emptyDir survives container restarts) by
#: a restarted container is always stale by the time its successor passes the startup probe.
READINESS_GENERATION_INTERVAL_SECONDS = 60

#: Liveness on /health: every 10 s, 5 s timeout, restart after 6 consecutive failures (a full minute):
#: generous, since a restart throws away a warm KV cache and costs a full cold load.
LIVENESS_PERIOD_SECONDS = 10
LIVENESS_TIMEOUT_SECONDS = 5
LIVENESS_FAILURE_THRESHOLD = 6

#: Grace beyond preStop + drain for vLLM to stop its engine processes and release the GPUs (process
#: teardown, NCCL shutdown) before the kubelet sends SIGKILL.
SHUTDOWN_SLACK_SECONDS = 15


class ProbeError(ValueError):
    """The probes cannot be made consistent with the planner's numbers; the message names them."""


def startup_failure_threshold(cold_load_seconds: float, margin: float, period_seconds: int,
                              max_startup_seconds: int) -> int:
    """Smallest failureThreshold whose window period x threshold covers cold_load x (1 + margin).

    Raises ProbeError when that window would exceed ``max_startup_seconds``."""
    required = cold_load_seconds * (1 + margin)
    threshold = max(1, math.ceil(required / period_seconds))
    if period_seconds * threshold > max_startup_seconds:
        raise ProbeError(
            f"the startup probe cannot cover the cold-load estimate: {cold_load_seconds:.0f} s x (1 + margin "
            f"{margin:g}) = {required:.0f} s needs {threshold} x {period_seconds} s = {period_seconds * threshold} s, "
            f"above max_startup_seconds {max_startup_seconds}; load faster (loading.throughput_mib_s / path), "
            f"or raise max_startup_seconds knowingly")
    return threshold


def readiness_deadline_seconds(ttft_p95_ms: int) -> int:
    return max(READINESS_MIN_DEADLINE_SECONDS, math.ceil(READINESS_TTFT_FACTOR * ttft_p95_ms / 1000))


def plan_probes(*, cold_load_seconds: float, stream_bound_seconds: float, ttft_p95_ms: int, startup_margin: float,
                startup_period_seconds: int, max_startup_seconds: int, drain_seconds: int) -> ProbeTimings:
    """All probe / shutdown numbers for one pool; raises ProbeError when the startup window cannot be covered."""
    threshold = startup_failure_threshold(cold_load_seconds, startup_margin, startup_period_seconds, max_startup_seconds)
    deadline = readiness_deadline_seconds(ttft_p95_ms)
    r_timeout = deadline + READINESS_TIMEOUT_SLACK_SECONDS
    shutdown = math.ceil(stream_bound_seconds)
    return ProbeTimings(
        cold_load_seconds=cold_load_seconds,
        startup_margin=startup_margin,
        startup_required_seconds=cold_load_seconds * (1 + startup_margin),
        startup_period_seconds=startup_period_seconds,
        startup_failure_threshold=threshold,
        startup_timeout_seconds=min(STARTUP_TIMEOUT_SECONDS, startup_period_seconds),
        readiness_deadline_seconds=deadline,
        readiness_timeout_seconds=r_timeout,
        readiness_period_seconds=max(READINESS_PERIOD_SECONDS, r_timeout + 1),
        readiness_failure_threshold=READINESS_FAILURE_THRESHOLD,
        readiness_generation_interval_seconds=max(1, min(READINESS_GENERATION_INTERVAL_SECONDS, math.floor(cold_load_seconds))),
        liveness_period_seconds=LIVENESS_PERIOD_SECONDS,
        liveness_timeout_seconds=LIVENESS_TIMEOUT_SECONDS,
        liveness_failure_threshold=LIVENESS_FAILURE_THRESHOLD,
        stream_bound_seconds=stream_bound_seconds,
        pre_stop_seconds=drain_seconds,
        shutdown_timeout_seconds=shutdown,
        termination_grace_seconds=drain_seconds + shutdown + SHUTDOWN_SLACK_SECONDS,
    )
