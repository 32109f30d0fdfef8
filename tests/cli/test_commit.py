"""``ctxrules commit``: JSON shape, the readable table, --diff, notes and clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.presets import EVERY_RULE, every_rule_file

from ctxrules.cli import main
from ctxrules.store import open_store

FILE = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


def _tool_uses(path: Path) -> int:
    n = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        msg = json.loads(line).get("message") or {}
        content = msg.get("content")
        if msg.get("role") == "assistant" and isinstance(content, list):
            n += sum(1 for b in content if b.get("type") == "tool_use")
    return n


@pytest.fixture
def session(tmp_path, corpus, capsys):
    store = str(tmp_path / "store")
    assert main(["import", str(corpus / FILE), "--store", store, "--json"]) == 0
    sid = json.loads(capsys.readouterr().out)["sessions"][0]["id"]
    return store, sid


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_items_totals_and_every_field(session, capsys, corpus):
    store, sid = session
    out = run_json(capsys, "commit", sid, "--store", store, "--preset", "off", "--json")
    items = out["items"]
    assert sum(1 for it in items if it["role"] == "tool") == _tool_uses(corpus / FILE)
    for field in (
        "state",
        "tokens",
        "reason",
        "locked",
        "merged_into",
        "attached_from",
        "is_anchor",
    ):
        assert all(field in it for it in items)
    assert out["total_tokens"] == sum(it["tokens"] for it in items if it["state"] != "summarized")
    by_state = out["totals"]["by_state"]
    assert by_state["full"]["items"] == len(items) and out["totals"]["items"] == len(items)
    # The file opens with the /init command line; the task is its isMeta expansion.
    lines = [json.loads(x) for x in (corpus / FILE).read_text(encoding="utf-8").splitlines()]
    assert "<command-name>/init</command-name>" in lines[0]["message"]["content"]
    assert lines[1]["isMeta"] is True
    assert [i for i, it in enumerate(items) if it["is_anchor"]] == [1]
    assert items[1]["role"] == "user" and items[1]["reason"] == "anchor"


def test_every_rule_ages_and_a_later_now_clears(session, capsys, tmp_path):
    # aggressive's budgets without the cache ledger (tests/presets.py): aging on the
    # session's seconds-apart requests, not only once a rewrite pays.
    store, sid = session
    idle = EVERY_RULE.rules["idle_clearing"]["idle_minutes"]
    args = ["commit", sid, "--store", store, "--config", every_rule_file(tmp_path), "--json"]
    t0 = 4102444800
    first = run_json(capsys, *args, "--now", str(t0))
    aged = {it["source_node_id"] for it in first["items"] if it["state"] == "aged"}
    assert aged and any(n.startswith("tool_aging: ") for n in first["notes"])
    # a minute short of idle_minutes nothing is cleared; a minute past it every aged result is
    assert run_json(capsys, *args, "--now", str(t0 + (idle - 1) * 60))["items"] == first["items"]
    later = run_json(capsys, *args, "--now", str(t0 + (idle + 1) * 60))
    cleared = {it["source_node_id"] for it in later["items"] if it["state"] == "cleared"}
    assert cleared == aged
    reasons = {it["reason"] for it in later["items"] if it["state"] == "cleared"}
    assert reasons == {f"idle_{idle}min"}
    assert any(n.startswith("idle_clearing: ") for n in later["notes"])
    assert later["parent_ids"] and later["total_tokens"] < first["total_tokens"]


def _key(item):
    return item["source_node_id"] + (f"@{item['attached_from']}" if item["attached_from"] else "")


def test_table_shows_items_and_tokens_by_state(session, capsys, tmp_path):
    store, sid = session
    every = every_rule_file(tmp_path)  # every rule fires (tests/presets.py)
    out = run_json(capsys, "commit", sid, "--store", store, "--config", every, "--json")
    assert main(["commit", sid, "--store", store, "--config", every]) == 0
    text = capsys.readouterr().out
    expected: dict[str, list[int]] = {}
    for it in out["items"]:
        expected.setdefault(it["state"], [0, 0])
        expected[it["state"]][0] += 1
        expected[it["state"]][1] += it["tokens"]
    assert len(expected) >= 2  # the rules changed something
    for state, (n, tokens) in expected.items():
        assert re.search(rf"│ {state}\s*│\s*{n} │\s*{tokens} │", text), state
    assert re.search(rf"│ sent\s*│\s*│\s*{out['total_tokens']} │", text)


def test_diff_against_an_earlier_head(session, capsys):
    store, sid = session
    log = run_json(capsys, "log", sid, "--store", store, "--json")
    nodes = log if isinstance(log, list) else log["nodes"]
    first_assistant = next(n["id"] for n in nodes if n["role"] == "assistant")
    args = ["commit", sid, "--store", store, "--preset", "aggressive"]
    now = run_json(capsys, *args, "--json")
    then = run_json(capsys, *args, "--head", first_assistant, "--json")
    d = run_json(capsys, *args, "--diff", first_assistant, "--json")
    assert d["a"] == then["id"] and d["b"] == now["id"]
    old = {_key(it): it["state"] for it in then["items"]}
    new = {_key(it): it["state"] for it in now["items"]}
    assert set(d["added"]) == set(new) - set(old) and d["added"]
    assert set(d["removed"]) == set(old) - set(new)
    assert {k: (x, y) for k, x, y in d["changed"]} == {
        k: (old[k], new[k]) for k in old.keys() & new.keys() if old[k] != new[k]
    }
    assert 1 <= d["prefix_items"] <= len(then["items"])
    assert (d["tokens_a"], d["tokens_b"]) == (then["total_tokens"], now["total_tokens"])
    assert main([*args, "--diff", first_assistant]) == 0
    text = capsys.readouterr().out
    assert re.search(rf"│ added\s*│\s*{len(d['added'])} │", text)
    assert re.search(rf"│ shared prefix\s*│\s*{d['prefix_items']} │", text)


def test_config_file_is_used_and_bad_config_is_one_line(session, capsys, tmp_path):
    store, sid = session
    cfg = tmp_path / "ctxrules.toml"
    cfg.write_text("pipeline = []\n", encoding="utf-8")
    out = run_json(capsys, "commit", sid, "--store", store, "--config", str(cfg), "--json")
    assert {it["state"] for it in out["items"]} == {"full"}
    cfg.write_text("[rules.tool_aging]\ntail_turns = 'x'\n", encoding="utf-8")
    assert main(["commit", sid, "--store", store, "--config", str(cfg)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cfg) in err[0] and "tail_turns" in err[0]


def test_unknown_session_is_a_clear_error(tmp_path, capsys):
    open_store(tmp_path / "s").close()
    assert main(["commit", "nope", "--store", str(tmp_path / "s"), "--preset", "off"]) == 1
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err


def test_demo_runs_the_pipeline_turn_by_turn(tmp_path, capsys):
    assert main(["demo", "--store", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "commits turn by turn" in out
    for what in ("tool_aging: aged", "summarize: folded", "idle_clearing: cleared"):
        assert what in " ".join(out.split())  # rich may wrap the notes column
    # a second run finds the commits already stored and prints the same figures
    assert main(["demo", "--store", str(tmp_path / "demo")]) == 0
    again = capsys.readouterr().out
    assert again.split("commits turn by turn")[1] == out.split("commits turn by turn")[1]


def test_head_option_commits_the_branch_up_to_that_node(session, capsys):
    store, sid = session
    log = run_json(capsys, "log", sid, "--store", store, "--json")
    nodes = log if isinstance(log, list) else log["nodes"]
    second_user = [n for n in nodes if n["role"] == "user" and not n.get("caller")][1]
    out = run_json(
        capsys,
        "commit",
        sid,
        "--store",
        store,
        "--preset",
        "off",
        "--head",
        second_user["id"],
        "--json",
    )
    assert out["head_node_id"] == second_user["id"]
    assert out["items"][-1]["source_node_id"] == second_user["id"]
    seqs = {n["id"]: n["seq"] for n in nodes}
    assert all(seqs[it["source_node_id"]] <= second_user["seq"] for it in out["items"])


def test_an_unknown_summarizer_is_refused_before_anything_is_derived(session, capsys, tmp_path):
    store, sid = session
    cfg = tmp_path / "ctxrules.toml"
    cfg.write_text(
        "[rules.summarize]\nthreshold_tokens = 50\nsummarizer = 'missing'\n", encoding="utf-8"
    )
    assert main(["commit", sid, "--store", store, "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "no summarizer named 'missing'" in err and "rules.summarize.summarizer" in err
    assert str(cfg) in err and "Traceback" not in err


def test_a_failed_summarizer_is_shown_by_the_cli(session, capsys, tmp_path):
    from ctxrules.plugins import registry

    class Failing:
        name = "test-failing"

        def summarize(self, items, *, budget):
            raise RuntimeError("model unavailable")

    store, sid = session
    cfg = tmp_path / "ctxrules.toml"
    cfg.write_text(
        "[rules.summarize]\nthreshold_tokens = 50\nsummarizer = 'test-failing'\n",
        encoding="utf-8",
    )
    registry("summarizers").items["test-failing"] = Failing()
    try:
        assert main(["commit", sid, "--store", store, "--config", str(cfg)]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "note summarize: no folding: summarizer 'test-failing' failed: RuntimeError" in text
        out = run_json(capsys, "commit", sid, "--store", store, "--config", str(cfg), "--json")
    finally:
        registry("summarizers").items.pop("test-failing", None)
    assert not [it for it in out["items"] if it["state"] in ("summary", "summarized")]
