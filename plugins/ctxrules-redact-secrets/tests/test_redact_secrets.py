"""The plugin's own tests, written as a third party writes them: only ctxrules' public
test kit (``ctxrules.testing`` and its pytest fixture ``ctxrules_kit``)."""

from ctxrules_redact_secrets import RedactSecrets

from ctxrules.testing import check_rule, commit_of, tool_turn


def test_keeps_the_ctxrules_invariants():
    check_rule(RedactSecrets(), examples=5, max_steps=6)


def test_a_key_in_a_tool_result_is_redacted(ctxrules_kit):
    key = "sk-proj-" + "Z9y8" * 8
    commit = ctxrules_kit.commit_of([RedactSecrets()], ctxrules_kit.tool_turn({"output": key}))
    assert commit.items[-1].rendered == "[redacted:openai_api_key]"


def test_text_without_secrets_is_left_alone():
    commit = commit_of([RedactSecrets()], tool_turn({"output": "all tests passed"}))
    assert commit.items[-1].rendered == "all tests passed"
    assert commit.items[-1].reason == "new"
