"""Issue 28: one hostile value per class of bad input on the newer surfaces (release staging, runbooks, bench,
measurement records, the Vertex caller role), each seen to fail before its fix. The CLI-level cases run the real
``llm-serving`` entry point and assert one ``error:`` line naming the flag, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import ConfigError
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import resolve_stack


def _values(stack: str) -> dict[str, Any]:
    return json.loads(json.dumps(read_stack_file(stack, ROOT / "stacks").values))


# ---- the Vertex caller role --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "role",
    ["roles/aiplatform.admin", "roles/owner", "roles/editor", "roles/aiplatform.user\n", "roles/iam.securityAdmin"],
)
def test_endpoint_callers_get_invoker_roles_only(role: str) -> None:
    v = _values("staging-vertex")
    v["llm-serving:vertex"]["caller_role"] = role
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, "staging-vertex", ROOT)
    assert any("caller_role" in str(i) for i in err.value.issues), err.value.issues


@pytest.mark.parametrize("role", ["roles/aiplatform.user", "projects/acme-llm-staging/roles/endpointPredictOnly"])
def test_the_invoker_role_and_a_custom_role_are_accepted(role: str) -> None:
    v = _values("staging-vertex")
    v["llm-serving:vertex"]["caller_role"] = role
    assert resolve_stack(v, "staging-vertex", ROOT).config is not None
