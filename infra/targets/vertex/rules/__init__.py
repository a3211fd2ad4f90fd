"""The ``vertex`` target's rules: the endpoint and its pools' machines (``endpoint``), the co-hosted groups."""

from __future__ import annotations

from . import cohosting, endpoint

MODULES = (cohosting, endpoint)
