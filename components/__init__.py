"""Typed Pulumi ComponentResources, one per logical entity (type tokens ``llm-serving:<area>:<Name>``)."""
