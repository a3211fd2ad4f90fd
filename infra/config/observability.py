"""Observability section: autoscaling signal targets, scraping, alert thresholds and who is notified.

Latency thresholds are NOT entered here: the TTFT / ITL alerts fire at the contract's own objectives
(``contract.ttft_p95_ms`` / ``contract.itl_p95_ms``), so the alert can never drift from the promise.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Strict, check

#: Cloud Monitoring notification channel resource name.
CHANNEL_RE = re.compile(r"^projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/notificationChannels/[0-9]+\Z")
EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\Z")


class NotificationChannel(Strict):
    """Who an alert reaches: a channel the stack creates (``type`` email / pagerduty / webhook), or an existing one
    referenced by its full name with ``existing: true``. Secrets (PagerDuty service key, webhook URL with its
    token) are given as ``secure:`` values in the stack file."""

    existing: bool = Field(False, description="Reference an existing channel by ``name`` instead of creating one.")
    name: str | None = Field(
        None,
        description=(
            "Existing channel: ``projects/<project>/notificationChannels/<numeric id>`` (only with ``existing: true``)."
        ),
    )
    type: Literal["email", "pagerduty", "webhook"] | None = Field(
        None,
        description=(
            "Channel the stack creates: ``email`` (``email_address``), ``pagerduty`` (``service_key``) or ``webhook`` "
            "(token-authenticated ``url``)."
        ),
    )
    display_name: Annotated[str, Field(min_length=1, max_length=100)] | None = Field(
        None, description=("Name shown in Cloud Monitoring for a created channel.")
    )
    email_address: str | None = Field(None, description="E-mail address of an ``email`` channel.")
    # secret: the channel component wraps these as Pulumi secrets (infra/config/secrets.py).
    service_key: str | None = Field(
        None,
        json_schema_extra={"secret": True},
        description=("PagerDuty integration key of a ``pagerduty`` channel (a ``secure:`` value)."),
    )
    url: str | None = Field(
        None,
        json_schema_extra={"secret": True},
        description=("HTTPS endpoint of a ``webhook`` channel, token included (a ``secure:`` value)."),
    )

    @model_validator(mode="after")
    def _consistent(self) -> NotificationChannel:
        problems: list[tuple[str, str]] = []
        created_fields = {
            "type": self.type,
            "display_name": self.display_name,
            "email_address": self.email_address,
            "service_key": self.service_key,
            "url": self.url,
        }
        if self.existing:
            if self.name is None:
                problems.append(("name", "required for an existing channel"))
            elif not CHANNEL_RE.match(self.name):
                problems.append(("name", "must be projects/<project>/notificationChannels/<numeric id>"))
            problems += [
                (k, "only for a channel the stack creates (existing: false)")
                for k, v in created_fields.items()
                if v is not None
            ]
            check(problems)
            return self
        if self.name is not None:
            problems.append(
                (
                    "name",
                    "only for an existing channel (existing: true); a created channel gets its name "
                    "from Cloud Monitoring",
                )
            )
        needed = {"email": "email_address", "pagerduty": "service_key", "webhook": "url"}
        if self.type is None:
            problems.append(("type", "required for a channel the stack creates: email, pagerduty or webhook"))
        else:
            if created_fields[needed[self.type]] is None:
                problems.append(
                    (
                        needed[self.type],
                        f"required for an {self.type} channel"
                        if self.type == "email"
                        else f"required for a {self.type} channel",
                    )
                )
            problems += [
                (k, f"not used by a {self.type} channel")
                for k in needed.values()
                if k != needed[self.type] and created_fields[k] is not None
            ]
        if self.display_name is None and self.type is not None:
            problems.append(("display_name", "required for a channel the stack creates"))
        if self.email_address is not None and not EMAIL_RE.match(self.email_address):
            problems.append(("email_address", "not an e-mail address"))
        if self.url is not None and not (self.url.startswith("https://") or self.url.startswith("<secret:")):
            problems.append(("url", "must be an https:// URL (the token travels in it)"))
        check(problems)
        return self


SHA256_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")


class Autoscaling(Strict):
    queue_target_per_pod: Annotated[int, Field(ge=1, le=100)] = Field(
        3,
        description=(
            "HPA ``AverageValue`` target of ``vllm:num_requests_waiting`` per pod. GKE's inference autoscaling guidance "
            'says "start with a value between 3-5" (GKE inference autoscaling guide and samples); 3, the low end, because this contract is interactive and '
            "every queued request is pure TTFT. Change it together with the latency curve of one replica."
        ),
    )
    kv_cache_target: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        None,
        description=(
            "Optional second HPA metric: ``vllm:kv_cache_usage_perc`` average per pod (0-1). Off by default: the queue "
            "already grows when KV blocks run out; set it to scale out before preemptions start. Must stay below "
            "``alerts.kv_cache_usage`` so scale-out starts before the alert fires."
        ),
    )


class Alerts(Strict):
    notification_channels: Annotated[list[NotificationChannel], Field(max_length=16)] = Field(
        [],
        description=(
            "Who every alert policy notifies: channels the stack creates, or existing ones by name. Prod must have at "
            "least one: an alert nobody receives is not an alert. At most 16 (Cloud Monitoring's limit per policy)."
        ),
    )
    kv_cache_usage: Annotated[float, Field(gt=0, le=1)] = Field(
        0.9,
        description=(
            "KV-cache usage (0-1) that, sustained for ``kv_cache_for_minutes``, means the pool is out of KV blocks: new "
            "sequences wait or preempt others. 0.9 is the issue's threshold."
        ),
    )
    kv_cache_for_minutes: Annotated[int, Field(ge=1, le=120)] = Field(
        10,
        description=(
            "How long KV usage must stay above the threshold: 10 min is two alert windows, so one long-prompt burst "
            "(which legitimately fills the cache for seconds) does not page."
        ),
    )
    canary_ttft_ratio: Annotated[float, Field(gt=1, le=10)] = Field(
        1.2,
        description=(
            "Canary TTFT p95 / stable TTFT p95 above which the canary is worse: 1.2 tolerates the noise of a pool "
            "carrying a small traffic share, and still catches a 20 % regression before a full rollout."
        ),
    )
    no_traffic_minutes: Annotated[int, Field(ge=5, le=1440)] = Field(
        15,
        description=(
            "Minutes without a single finished request on a pool that carries traffic (weight > 0) before alerting."
        ),
    )


class Observability(Strict):
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=60)] = Field(
        15,
        description=(
            "Scrape interval of the vLLM and endpoint-picker PodMonitorings (GMP CRD v0.17 requires it, GKE inference autoscaling guide and samples). 15 s "
            "(the GKE samples' value) gives the HPA a fresh queue sample well inside its 15 s sync period and puts 20 "
            "samples in every 5 min alert window."
        ),
    )
    autoscaling: Autoscaling = Field(
        Autoscaling(),
        description=("HPA signal targets per pod (queue, optional KV-cache); defaults as documented on each key."),
    )
    alerts: Alerts = Field(
        Alerts(), description=("Alert thresholds that are not contract objectives, and the notification channels.")
    )
    adapter_image_digest: str | None = Field(
        None,
        description=(
            "Digest of the pinned adapter image tag (``sha256:…``) once resolved with ``crane digest`` / ``gcloud "
            "container images describe``; the tag alone is used until then."
        ),
    )

    @model_validator(mode="after")
    def _checks(self) -> Observability:
        problems = []
        keys = [
            c.name if c.existing else (c.type, c.email_address, c.display_name)
            for c in self.alerts.notification_channels
        ]
        if len(set(keys)) != len(keys):
            problems.append(("alerts.notification_channels", "channels must be unique"))
        # A created channel's resource is named by its type and display name (components.naming.member_key), so
        # removing one channel never renames another: two with the same pair would be one resource name.
        created = [(c.type, c.display_name) for c in self.alerts.notification_channels if not c.existing]
        for pair in sorted({p for p in created if created.count(p) > 1}, key=str):
            problems.append(
                (
                    "alerts.notification_channels",
                    f"two channels the stack creates are {pair[0]} channels named {pair[1]!r}: the display name "
                    "names the channel's resource, give each its own",
                )
            )
        kv = self.autoscaling.kv_cache_target
        if kv is not None and kv >= self.alerts.kv_cache_usage:
            problems.append(
                (
                    "autoscaling.kv_cache_target",
                    f"{kv} must be below alerts.kv_cache_usage ({self.alerts.kv_cache_usage}): the HPA has to "
                    "start scaling out before the KV alert fires",
                )
            )
        if self.adapter_image_digest is not None and not SHA256_RE.match(self.adapter_image_digest):
            problems.append(("adapter_image_digest", f"must be sha256:<64 hex>, got {self.adapter_image_digest!r}"))
        check(problems)
        return self
