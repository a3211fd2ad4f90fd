"""Entry of the ``llm-serving-policies`` CrossGuard pack.

The Pulumi engine (``pulumi preview --policy-pack policies --policy-pack-config policies/config/<env>.json``) and the
offline ``llm-serving policy`` command both run ``python -m pulumi.policy <engine> .`` in this folder, which executes
this file; constructing ``PolicyPack`` starts the Analyzer gRPC server and prints its port.

Every policy defaults to ``mandatory`` (fail closed when run without a config file); the per-environment files in
``config/`` lower the level (dev: advisory) and set the environment's properties.
"""

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import POLICIES

PolicyPack(
    name="llm-serving-policies",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
    description="Release identity, availability, capacity, identity and network rules for the llm-serving platform.",
)
