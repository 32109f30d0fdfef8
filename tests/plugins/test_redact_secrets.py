"""plugins/ctxrules-redact-secrets: installed, discovered through its entry point, redacts
every kind in tool output and arguments, and keeps the invariants (checked with the kit)."""

from __future__ import annotations

import pytest

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.plugins import loaded_plugins, registry
from ctxrules.testing import check_rule, commit_of, tool_turn

KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAKC\n-----END RSA PRIVATE KEY-----"
SECRETS = {
    "private_key": KEY,
    "bearer_token": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abcdefghijklmnop",
    "anthropic_api_key": "sk-ant-api03-" + "A1b2" * 10,
    "openai_api_key": "sk-proj-" + "Z9y8" * 8,
    "aws_access_key": "AKIA" + "ABCDEFGHIJKLMNOP",
    "github_token": "ghp_" + "a" * 36,
    "google_api_key": "AIza" + "B" * 35,
    "slack_token": "xoxb-1234567890-abcdef",
    "credential": 'password = "correct-horse-battery"',
}


def rule_class():
    return registry("rules").get("redact_secrets")


def test_discovered_through_its_entry_point_not_imported_by_us():
    loaded = {p.name: p for p in loaded_plugins()}
    assert "redact_secrets" in loaded, "install plugins/ctxrules-redact-secrets (make setup)"
    assert loaded["redact_secrets"].distribution == "ctxrules-redact-secrets"
    assert not loaded["redact_secrets"].builtin
    assert loaded["redact_secrets"].hooks == ["register_rules"]


@pytest.mark.parametrize("kind", list(SECRETS))
def test_each_kind_is_redacted_in_output_and_arguments(kind):
    secret = SECRETS[kind]
    calls = tool_turn({"input": {"cmd": f"echo {secret}"}, "output": f"before {secret} after"})
    commit = commit_of([rule_class()()], calls)
    tool = commit.items[-1]
    marker = f"[redacted:{kind}]"
    assert marker in tool.rendered and marker in tool.tool_input
    assert "before" in tool.rendered and "after" in tool.rendered
    core = secret.split("= ")[-1].strip('"').split("Bearer ")[-1]
    assert core not in tool.rendered and core not in tool.tool_input
    assert tool.state == "full" and tool.reason == f"redacted:{kind}"
    assert calls[2].output == f"before {secret} after"  # the node is never touched


def test_configured_first_the_aged_stub_carries_no_secret(tmp_path):
    cfg = PipelineConfig(
        pipeline=("redact_secrets", "tool_aging"),
        rules={"tool_aging": {"tail_turns": 0, "step_turns": 1}},
    )
    secret = SECRETS["openai_api_key"]
    commit = commit_of(Pipeline.from_config(cfg), tool_turn({"output": secret}))
    assert commit.items[-1].state == "aged" and secret not in commit.items[-1].rendered


def test_unknown_kind_is_a_config_error():
    from ctxrules.errors import ConfigError

    with pytest.raises(ConfigError, match="kinds"):
        rule_class()(kinds=["nope"])


def test_redact_secrets_keeps_the_invariants():
    check_rule(rule_class()(roles=["tool", "user"]), examples=10)


def test_the_packages_own_tests_pass_with_only_the_public_kit(package_tests):
    from pathlib import Path

    passed, out = package_tests(
        Path(__file__).resolve().parents[2] / "plugins" / "ctxrules-redact-secrets"
    )
    assert passed, out
    assert "3 passed" in out
