"""Probe and shutdown timing of one vLLM pool, derived from the planner and the workload contract (pure).

Three questions, one probe each, all answered by ``components/serving/probe.py`` (an exec probe):

* startup: has a legitimate cold load finished, and is this replica really the release? Its window (period x
  failureThreshold) must cover the planner's cold-load estimate with a stated margin; a configuration whose window
  would exceed ``max_startup_seconds`` is an error, not a silently longer wait. The one generation check lives
  here: before the pod is ready nothing queues ahead of it.
* readiness: can this replica take traffic *now*? Health and identity only, answered by vLLM's API server without
  entering the engine's queue, so a healthy replica that is busy is never taken out of rotation when capacity is
  short.
* liveness: is the engine dead or hung? Dead = ``/health`` not 200; hung = requests in flight and no token
  progress for the stall window. A restart costs a full cold load, so only what cannot recover by itself counts.

Scale-down protocol (the design, "Scale-down is a protocol too"): the preStop sleep keeps the pod serving while
the endpoint picker and load balancer de-register it; SIGTERM then makes vLLM stop admitting and drain
in-flight streams for ``--shutdown-timeout`` = the longest allowed stream (TTFT objective + max output tokens x
ITL objective); the grace period covers preStop + drain + a teardown slack.
"""

from __future__ import annotations

import math

from components.serving.spec import ProbeTimings

#: The startup generation deadline is this many TTFT objectives: a 1-token request for a 1-token prompt on an idle
#: engine (no traffic reaches a pod before its startup probe passed) is far below one TTFT objective; 3x leaves
#: room for the first request's lazy initialisation. Change with ttft_p95_ms.
STARTUP_TTFT_FACTOR = 3
#: Floor of every probe deadline (the probe script's own default): interpreter start plus a few loopback requests
#: need a few seconds on a loaded node even when the TTFT objective is tiny.
MIN_DEADLINE_SECONDS = 4
#: timeoutSeconds = deadline + this: room for starting python3 so the script reports its own "deadline exceeded"
#: line rather than the kubelet's bare "command timed out".
TIMEOUT_SLACK_SECONDS = 2
#: Seconds between readiness probes (at least timeout + 1 so runs never queue): a dead engine is out of rotation
#: within period x failureThreshold = 30 s, matching the load balancer's own health check within a probe period.
READINESS_PERIOD_SECONDS = 10
#: Three misses in a row: one slow answer of a saturated API server does not eject a replica.
READINESS_FAILURE_THRESHOLD = 3
#: Liveness every 10 s, restart after 2 consecutive failures: the script itself already waited the stall window
#: before its first "hung" answer, and a dead engine (/health 503) never recovers in place.
LIVENESS_PERIOD_SECONDS = 10
LIVENESS_FAILURE_THRESHOLD = 2
#: Shortest stall window: with requests in flight a healthy engine moves its token counters every step (a few
#: ms to ~1 s for a full prefill chunk), so a minute without progress is a hang, never a slow step.
MIN_STALL_SECONDS = 60
#: The stall window is at least this many TTFT objectives, so a contract with a long TTFT (big prompts, long
#: prefill chunks) gets a proportionally longer window. Change with ttft_p95_ms.
STALL_TTFT_FACTOR = 10

#: Grace beyond preStop + drain for vLLM to stop its engine processes and release the GPUs (process
#: teardown, NCCL shutdown) before the kubelet sends SIGKILL.
SHUTDOWN_SLACK_SECONDS = 15


class ProbeError(ValueError):
    """The probes cannot be made consistent with the planner's numbers; the message names them."""


def startup_failure_threshold(
    cold_load_seconds: float, margin: float, period_seconds: int, max_startup_seconds: int
) -> int:
    """Smallest failureThreshold whose window period x threshold covers cold_load x (1 + margin).

    Raises ProbeError when that window would exceed ``max_startup_seconds``."""
    required = cold_load_seconds * (1 + margin)
    threshold = max(1, math.ceil(required / period_seconds))
    if period_seconds * threshold > max_startup_seconds:
        raise ProbeError(
            f"the startup probe cannot cover the cold-load estimate: {cold_load_seconds:.0f} s x (1 + margin "
            f"{margin:g}) = {required:.0f} s needs {threshold} x {period_seconds} s = {period_seconds * threshold} s, "
            f"above max_startup_seconds {max_startup_seconds}; load faster (loading.throughput_mib_s / path), "
            f"or raise max_startup_seconds knowingly"
        )
    return threshold


def startup_deadline_seconds(ttft_p95_ms: int) -> int:
    return max(MIN_DEADLINE_SECONDS, math.ceil(STARTUP_TTFT_FACTOR * ttft_p95_ms / 1000))


def stall_seconds(ttft_p95_ms: int) -> int:
    return max(MIN_STALL_SECONDS, math.ceil(STALL_TTFT_FACTOR * ttft_p95_ms / 1000))


def plan_probes(
    *,
    cold_load_seconds: float,
    stream_bound_seconds: float,
    ttft_p95_ms: int,
    startup_margin: float,
    startup_period_seconds: int,
    max_startup_seconds: int,
    drain_seconds: int,
) -> ProbeTimings:
    """All probe / shutdown numbers for one pool; raises ProbeError when the startup window cannot be covered."""
    threshold = startup_failure_threshold(
        cold_load_seconds, startup_margin, startup_period_seconds, max_startup_seconds
    )
    startup_deadline = startup_deadline_seconds(ttft_p95_ms)
    shutdown = math.ceil(stream_bound_seconds)
    timeout = MIN_DEADLINE_SECONDS + TIMEOUT_SLACK_SECONDS
    return ProbeTimings(
        cold_load_seconds=cold_load_seconds,
        startup_margin=startup_margin,
        startup_required_seconds=cold_load_seconds * (1 + startup_margin),
        startup_period_seconds=startup_period_seconds,
        startup_failure_threshold=threshold,
        startup_deadline_seconds=startup_deadline,
        startup_timeout_seconds=startup_deadline + TIMEOUT_SLACK_SECONDS,
        readiness_deadline_seconds=MIN_DEADLINE_SECONDS,
        readiness_timeout_seconds=timeout,
        readiness_period_seconds=max(READINESS_PERIOD_SECONDS, timeout + 1),
        readiness_failure_threshold=READINESS_FAILURE_THRESHOLD,
        liveness_deadline_seconds=MIN_DEADLINE_SECONDS,
        liveness_timeout_seconds=timeout,
        liveness_period_seconds=max(LIVENESS_PERIOD_SECONDS, timeout + 1),
        liveness_failure_threshold=LIVENESS_FAILURE_THRESHOLD,
        liveness_stall_seconds=stall_seconds(ttft_p95_ms),
        stream_bound_seconds=stream_bound_seconds,
        pre_stop_seconds=drain_seconds,
        shutdown_timeout_seconds=shutdown,
        termination_grace_seconds=drain_seconds + shutdown + SHUTDOWN_SLACK_SECONDS,
    )
