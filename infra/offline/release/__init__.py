"""Release pipeline tools: stage a model folder as an immutable release in Cloud Storage (``stage``) and render the
runbook that hydrates its Hyperdisk ML snapshot (``hydrate``). The manifest format and the verifier the serving pods
run belong to ``components/serving/verify_release.py``; these tools import them from there.

The main CLI adds the commands with ``register(subparsers)`` (``llm-serving release stage|hydrate-runbook``)."""

from .cli import register
from .hydrate import HydrationError, HydrationRunbook, hydration_runbook, render_runbook
from .stage import StageError, StageResult, identity_fields, release_identity_json, stage_release

__all__ = [
    "HydrationError",
    "HydrationRunbook",
    "StageError",
    "StageResult",
    "hydration_runbook",
    "identity_fields",
    "register",
    "release_identity_json",
    "render_runbook",
    "stage_release",
]
