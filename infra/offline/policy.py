"""Run the policy pack (``policies/``) against a plan through the Analyzer gRPC protocol, with the stack
environment's enforcement file (the same one ``pulumi preview --policy-pack-config`` takes) plus the facts the
plan derived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components import naming

from ..config.documents import MAX_JSON_BYTES, DocumentError, load_json_document, quote, read_regular_file
from ..resolve import ResolvedStack
from .analyzer import ENFORCEMENT_LEVELS, PolicyConfigError, PolicyReport, StartedPack, run_policy_pack
from .inventory import Inventory
from .stackfile import ROOT

POLICY_PACK = ROOT / "policies"


def policy_config_path(environment: str) -> Path:
    return POLICY_PACK / "config" / f"{environment}.json"


def policy_facts(resolved: ResolvedStack) -> dict[str, dict[str, Any]]:
    """Facts the policies read from Deployment annotations when present, given here as config properties for
    the offline check: cold-load estimates per Deployment, the contract's stream bound, token limits and tenant ids."""
    plan, cfg = resolved.plan, resolved.config
    cold = {
        naming.deployment_name(role): round(p.capacity.cold_load_seconds, 3) for role, p in sorted(plan.pools.items())
    }
    return {
        "startup-window-covers-cold-load": {"coldLoadSeconds": cold},
        "hpa-scale-up-damped": {"coldLoadSeconds": cold},
        "grace-period-covers-stream-bound": {"streamBoundSeconds": plan.stream_bound_seconds},
        "max-model-len-within-contract": {
            "maxModelLen": cfg.contract.max_model_len,
            "maxInputTokens": cfg.contract.max_input_tokens,
            "maxOutputTokens": cfg.contract.max_output_tokens,
        },
        "vllm-output-capped": {"maxOutputTokens": cfg.contract.max_output_tokens},
        "every-tenant-bounded": {"tenants": [t.id for t in cfg.contract.tenants]},
    }


def read_policy_config(path: Path) -> dict[str, Any]:
    """The policy config file, read by the hardened document loader (bounded size and nesting, no duplicate
    keys, no NaN); each entry is an enforcement level or an object, checked here so messages stay short."""
    source = f"policy config {path}"
    try:
        doc = load_json_document(
            read_regular_file(Path(path), source=source, max_bytes=MAX_JSON_BYTES, limit_name="MAX_JSON_BYTES"), source
        )
    except DocumentError as err:
        raise PolicyConfigError(str(err)) from None
    if not isinstance(doc, dict):
        raise PolicyConfigError(f"{source} must be a JSON object, got {type(doc).__name__}")
    levels = ", ".join(ENFORCEMENT_LEVELS)
    for name, entry in doc.items():
        level = entry.get("enforcementLevel", "") if isinstance(entry, dict) else entry
        if not isinstance(level, str):
            raise PolicyConfigError(
                f"{source}: {quote(name)}: must be an enforcement level ({levels}) or an "
                f"object with a string 'enforcementLevel', not {type(level).__name__}"
            )
        if level and level not in ENFORCEMENT_LEVELS:
            raise PolicyConfigError(
                f"{source}: {quote(name)}: {quote(level)} is not an enforcement level (one of {levels})"
            )
    return doc


def merged_policy_config(resolved: ResolvedStack, path: Path) -> dict[str, Any]:
    """The environment file with the stack's facts added; a property the file sets itself wins."""
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in read_policy_config(path).items()}
    for name, facts in policy_facts(resolved).items():
        entry = merged.get(name)
        if isinstance(entry, str):
            entry = {"enforcementLevel": entry}
        merged[name] = {**facts, **(entry or {})}
    return merged


def start_pack(project: str, stack: str) -> StartedPack:
    """The pack process for a stack's check, started now so its start-up overlaps the plan (``check_policies``
    with ``started=`` uses it)."""
    return StartedPack(POLICY_PACK, project, stack)


def check_policies(
    resolved: ResolvedStack, inventory: Inventory, config_path: Path | None = None, started: StartedPack | None = None
) -> tuple[PolicyReport, Path]:
    """Run the pack against an inventory with the environment's config."""
    path = config_path or policy_config_path(resolved.config.environment)
    try:
        config = merged_policy_config(resolved, path)
    except BaseException:
        if started is not None:
            started.stop()
        raise
    report = run_policy_pack(POLICY_PACK, inventory.to_dict(), config, started=started)
    return report, path


def policy_summary(report: PolicyReport) -> str:
    return (
        f"{len(report.violations)} violation(s): {report.mandatory_count} mandatory, "
        f"{report.advisory_count} advisory, {len(report.policies)} policies"
    )
