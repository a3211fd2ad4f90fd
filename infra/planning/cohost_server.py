"""The co-host server's configuration, as every target that runs it plans it (GKE: one pod per node; Vertex AI: one
deployed model per group): one instance per GPU set the layout placed a model on, each a loopback ``vllm serve``
with the target's rendered arguments, started one after another, and the server's restart and drain bounds.

The targets differ only in what they pass in: the rendered ``vllm serve`` arguments of each model (their own
renderer inputs), where the release verifier lives in the container, and the startup and drain figures their probes
gave. Pure: no Pulumi, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from components import naming
from components.cohost.server import CohostConfig, InstanceSpec, RestartPolicy, render_config
from components.serving.spec import VLLM_COMMAND, verify_gcs_command
from infra.config.release import ReleaseIdentity

from . import cohosting as ch
from .probes import SHUTDOWN_SLACK_SECONDS

#: The server gives its children this long beyond their own drain (vLLM's --shutdown-timeout) to exit before it
#: SIGKILLs them, and keeps the rest of the platform's teardown slack for itself: below SHUTDOWN_SLACK_SECONDS.
SERVER_DRAIN_SLACK_SECONDS = 10
#: Restarts of one instance the server makes within one startup window before it exits (and the platform restarts
#: the container): three crashes of one model inside the time a whole replica may take to start are not transient.
MAX_INSTANCE_RESTARTS = 3
#: First wait before restarting an instance, doubled per restart, at most the ceiling: long enough for a crashed
#: engine's GPU memory to be released, short next to a cold load.
RESTART_BACKOFF_SECONDS = 10
RESTART_MAX_BACKOFF_SECONDS = 120
#: Seconds between the server's /health checks of each running instance (3 misses = replaced: 15 s).
HEALTH_INTERVAL_SECONDS = 5
#: The loopback address every instance listens on: only the server's port is reachable from outside the container.
INSTANCE_HOST = "127.0.0.1"

assert SERVER_DRAIN_SLACK_SECONDS < SHUTDOWN_SLACK_SECONDS


@dataclass(frozen=True)
class ModelInstances:
    """One model of a group as the server runs it: its release, the layout's placement, and the ``vllm serve``
    arguments its target rendered for it (``--port`` among them; the builder moves each instance to its own port)."""

    release: ReleaseIdentity
    placement: ch.ModelPlacement
    served_model_names: tuple[str, ...]
    args: tuple[str, ...]


def verify_command(rel: ReleaseIdentity, scripts_dir: str) -> tuple[str, ...]:
    """The release check the server runs before each start of an instance (the weights are streamed from gs://: the
    folder's object metadata against the manifest, ``components/serving/verify_release.py`` gcs mode), from the
    folder the target puts the verifier in."""
    return verify_gcs_command(
        ("python3", f"{scripts_dir}/{naming.VERIFY_SCRIPT_FILE}"),
        rel.weights_bucket,
        rel.weights_prefix,
        rel.model_revision,
    )


def loopback_args(args: Sequence[str], port: int) -> tuple[str, ...]:
    """The rendered arguments with the server's port replaced by an instance's loopback address and port."""
    out = list(args)
    at = out.index("--port")
    out[at : at + 2] = ["--host", INSTANCE_HOST, "--port", str(port)]
    return tuple(out)


def instance_specs(model: ModelInstances, first_port: int, scripts_dir: str) -> tuple[InstanceSpec, ...]:
    """One instance per GPU set the planner placed the model on, on consecutive loopback ports from ``first_port``,
    named ``<model name as a DNS label>-<j>``."""
    role = ch.gke_role(model.placement.model_name)
    rel = model.release
    return tuple(
        InstanceSpec(
            name=f"{role}-{j}",
            release=rel.release,
            model_names=model.served_model_names,
            gpus=gpus,
            tensor_parallel_size=rel.tensor_parallel_size,
            partition=model.placement.partition,
            port=first_port + j,
            args=loopback_args(model.args, first_port + j),
            verify=verify_command(rel, scripts_dir),
        )
        for j, gpus in enumerate(model.placement.gpus)
    )


def group_instances(models: Sequence[ModelInstances], scripts_dir: str) -> tuple[tuple[InstanceSpec, ...], ...]:
    """Every model's instances, in the group's order, on consecutive ports from the first instance port."""
    out = []
    port = naming.COHOST_INSTANCE_BASE_PORT
    for m in models:
        specs = instance_specs(m, port, scripts_dir)
        port += len(specs)
        out.append(specs)
    return tuple(out)


def start_timeout_seconds(cold_load_seconds: Sequence[float], startup_margin: float) -> int:
    """How long the server waits for one instance to become healthy: the slowest model's cold load with the margin
    the platform's startup probe gives a whole replica."""
    return math.ceil(max(cold_load_seconds) * (1 + startup_margin))


def staggered_cold_load_seconds(cold_load_seconds: Sequence[float], instances: Sequence[int]) -> float:
    """The instances start one after another, so a replica is up after every instance's cold load in turn."""
    return sum(c * n for c, n in zip(cold_load_seconds, instances, strict=True))


def server_config(
    *,
    gpus: int,
    transient_reserve: float,
    start_timeout: int,
    shutdown_timeout_seconds: int,
    startup_window_seconds: int,
    instances: Sequence[InstanceSpec],
) -> tuple[CohostConfig, str]:
    """The server's configuration and its canonical JSON (what the container runs with). Its children drain within
    vLLM's ``--shutdown-timeout``; the server waits that plus its slack before killing one; an instance restarting
    more than ``MAX_INSTANCE_RESTARTS`` times within one startup window ends the server."""
    cfg = CohostConfig(
        port=naming.VLLM_PORT,
        gpus=gpus,
        transient_reserve=transient_reserve,
        engine_command=VLLM_COMMAND,
        start_timeout_seconds=float(start_timeout),
        drain_seconds=float(shutdown_timeout_seconds + SERVER_DRAIN_SLACK_SECONDS),
        health_interval_seconds=float(HEALTH_INTERVAL_SECONDS),
        restart=RestartPolicy(
            max_restarts=MAX_INSTANCE_RESTARTS,
            window_seconds=float(startup_window_seconds),
            backoff_seconds=float(RESTART_BACKOFF_SECONDS),
            max_backoff_seconds=float(RESTART_MAX_BACKOFF_SECONDS),
        ),
        instances=tuple(instances),
    )
    return cfg, render_config(cfg)
