"""plugins/ctxrules-llm-summarizer: installed by make setup, discovered through its entry
point as the summarizer ``llm``, and its own tests (a loopback server answering the
official SDKs) pass."""

from __future__ import annotations

from pathlib import Path

from ctxrules.plugins import loaded_plugins, registry
from ctxrules.rules import Summarize

PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "ctxrules-llm-summarizer"


def test_discovered_through_its_entry_point_not_imported_by_us():
    loaded = {p.name: p for p in loaded_plugins()}
    assert "llm_summarizer" in loaded, "install plugins/ctxrules-llm-summarizer (make setup)"
    assert loaded["llm_summarizer"].distribution == "ctxrules-llm-summarizer"
    assert not loaded["llm_summarizer"].builtin
    assert loaded["llm_summarizer"].hooks == ["register_summarizers"]
    assert registry("summarizers").origin["llm"] == "llm_summarizer"


def test_the_summarize_rule_can_name_it():
    assert Summarize(summarizer="llm").summarizer == "llm"


def test_the_packages_own_tests_pass(package_tests):
    passed, out = package_tests(PACKAGE)
    assert passed, out
    assert "19 passed" in out
