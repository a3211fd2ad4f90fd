"""``secure:`` config values: they reach resources only as Pulumi secrets, and only through fields that keep them
secret; anywhere else is a config error naming the key, and no message shows a secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import ConfigError
from infra.offline import cli
from infra.offline.planrun import run_plan
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import resolve_stack

CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
ALLOWED = "observability.alerts.notification_channels.*.service_key, observability.alerts.notification_channels.*.url"


def _stack(tmp_path: Path, mutate) -> Path:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    mutate(doc["config"])
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def _add_secret_channels(c: dict[str, Any]) -> None:
    chans = c["llm-serving:observability"]["alerts"]["notification_channels"]
    chans.append({"type": "pagerduty", "display_name": "PD", "service_key": {"secure": "v1:AAAA-service-key"}})
    chans.append({"type": "webhook", "display_name": "hook", "url": {"secure": "v1:BBBB-webhook-url"}})


def test_every_secure_value_reaches_resources_only_as_a_secret(tmp_path: Path):
    """Under the SDK's mock monitor: the channel credentials arrive as secret Outputs, nothing shows them."""
    run = run_plan("prod", _stack(tmp_path, _add_secret_channels))
    inv = run.inventory.to_dict()
    text = json.dumps(inv)
    # Offline a secure value is the placeholder "<secret:KEY>": were it plain anywhere, it would be in the text.
    assert "<secret:" not in text and "v1:AAAA" not in text and "v1:BBBB" not in text
    chans = {r["inputs"]["displayName"]: r["inputs"] for r in inv["resources"] if r["type"] == CHANNEL}
    assert chans["PD"]["sensitiveLabels"] == {"serviceKey": "[secret]"}
    assert chans["hook"]["labels"] == {"url": "[secret]"}
    assert chans["hook"]["type"] == "webhook_tokenauth"


def test_a_secure_value_in_a_plain_field_is_a_config_error(tmp_path: Path, capsys):
    stacks = _stack(tmp_path, lambda c: c["llm-serving:gateway"].update(hostnames=[{"secure": "v1:CCCC-host"}]))
    out = tmp_path / "plan"
    assert cli.main(["plan", "--stack", "prod", "--stacks-dir", str(stacks), "--out", str(out)]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert (
        "llm-serving:gateway.hostnames[0]: holds a secure value, but this field reaches labels, annotations or "
        f"resource names in plain text; only these fields may be secure: {ALLOWED}"
    ) in err
    assert "v1:CCCC" not in err and not out.exists()


def test_an_engine_secret_key_without_secret_fields_is_a_config_error():
    """A real engine only says which top-level keys are secret (``pulumi config set --secret``)."""
    values = read_stack_file("prod").values
    with pytest.raises(ConfigError) as exc:
        resolve_stack(values, "prod", ROOT, frozenset({"llm-serving:contract", "llm-serving:observability"}))
    issues = {i.path: i.message for i in exc.value.issues}
    assert issues == {
        "llm-serving:contract": (
            "is a secret, but nothing in this section may be secret: its values reach labels, annotations or resource "
            f"names in plain text; only these fields may be secure: {ALLOWED}"
        )
    }


def test_secrets_never_appear_in_error_messages(tmp_path: Path, capsys):
    """A secure value that is also of the wrong type: the message names the key, never the ciphertext."""
    stacks = _stack(tmp_path, lambda c: c["llm-serving:contract"].update(max_model_len={"secure": "v1:DDDD-len"}))
    assert cli.main(["plan", "--stack", "prod", "--stacks-dir", str(stacks), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "llm-serving:contract.max_model_len: holds a secure value" in err
    assert "v1:DDDD" not in err and "<secret:" not in err


def test_a_secret_sections_values_are_never_quoted():
    """Under a real engine a secret section holds decrypted values: schema errors there quote nothing."""
    values = dict(read_stack_file("prod").values)
    obs = json.loads(json.dumps(values["llm-serving:observability"]))
    obs["scrape_interval_seconds"] = "hunter2-not-a-number"
    values["llm-serving:observability"] = obs
    with pytest.raises(ConfigError) as exc:
        resolve_stack(values, "prod", ROOT, frozenset({"llm-serving:observability"}))
    text = str(exc.value)
    assert "llm-serving:observability.scrape_interval_seconds: Input should be a valid integer" in text
    assert "hunter2" not in text
    with pytest.raises(ConfigError) as exc:
        resolve_stack(values, "prod", ROOT)  # not secret: the value is quoted to help
    assert "(got 'hunter2-not-a-number')" in str(exc.value)
