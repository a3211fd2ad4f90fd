"""The llm-serving policy pack's rules: one module per policy, each exporting ``POLICY`` (a pulumi_policy
``ResourceValidationPolicy`` or ``StackValidationPolicy`` carrying severity, compliance framework and
remediation steps) plus ``NAME``, ``SEVERITY``, ``FRAMEWORK`` and ``REMEDIATION`` for the README table.

Modules are discovered: adding a policy means adding its module (and its test). Names starting with ``_`` are
shared helpers, not policies.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def _discover() -> list[ModuleType]:
    found = [
        importlib.import_module(f"{__name__}.{m.name}")
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_")
    ]
    missing = [
        m.__name__ for m in found if not all(hasattr(m, a) for a in ("NAME", "POLICY", "SEVERITY", "REMEDIATION"))
    ]
    if missing:
        raise ImportError(f"policy modules without NAME / POLICY / SEVERITY / REMEDIATION: {', '.join(missing)}")
    return sorted(found, key=lambda m: m.NAME)


#: Every rule module, in the order the pack registers them (sorted by policy name).
MODULES: list[ModuleType] = _discover()

POLICIES = [m.POLICY for m in MODULES]
