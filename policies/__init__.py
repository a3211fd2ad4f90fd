"""The llm-serving CrossGuard policy pack (``pulumi preview --policy-pack policies``); rules live in ``rules/``."""
