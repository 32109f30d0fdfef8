"""plugins/ctxrules-example: its rule is discovered through its entry point, its own tests
pass with only the public kit, and docs/rules.md shows its source exactly."""

from __future__ import annotations

import re
from pathlib import Path

from ctxrules.plugins import loaded_plugins, registry

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "plugins" / "ctxrules-example"


def test_the_rule_is_registered_through_its_entry_point():
    loaded = {p.name: p for p in loaded_plugins()}
    assert "example_rules" in loaded, "install plugins/ctxrules-example (make setup)"
    assert loaded["example_rules"].distribution == "ctxrules-example"
    assert not loaded["example_rules"].builtin
    assert loaded["example_rules"].hooks == ["register_rules"]
    rule = registry("rules").get("answer_aging")
    assert rule.__module__ == "ctxrules_example.answer_aging" and rule.promise


def test_docs_show_the_worked_rule_exactly_as_shipped():
    docs = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    source = (PACKAGE / "ctxrules_example" / "answer_aging.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", docs, flags=re.DOTALL)
    assert source in blocks


def test_the_packages_own_tests_pass_with_only_the_public_kit(package_tests):
    passed, out = package_tests(PACKAGE)
    assert passed, out
    assert "4 passed" in out
