"""What never folds, on real sessions: system prompts are locked and survive the
aggressive budgets (without the cache ledger: every rule fires) word for word, and the
task anchor is the first real instruction — not SWE-agent's demonstration, not Claude
Code's slash-command line.  The expected texts come from plain JSON parsing of the
corpus files, not from our importers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.presets import every_rule

from ctxrules.commit import Pipeline, make_commit
from ctxrules.config import PipelineConfig
from ctxrules.dag import branch_path
from ctxrules.importers import import_paths
from ctxrules.model import ContextCommit, ContextItem
from ctxrules.render import render_context
from ctxrules.store import open_store
from ctxrules.testing import check_commits, drive_branch

SWE_GPT4 = "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj"
SWE_FC = "swe-agent-traj/function_calling_replace_marshmallow-code__marshmallow-1867.traj"
CC_INIT = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
CC_ORCH = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
CC_PLAIN = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"
OPENHANDS = "openhands-trajectory/basic_gui_mode.json"
TAU = "openai-chat-json/taubench_gpt-4o-airline.json"

#: aggressive's budgets without the cache ledger: every rule fires (tests/presets.py).
AGGRESSIVE = every_rule()
#: The default preset with a summarize threshold low enough for these sessions.
LOW = PipelineConfig.preset("default").with_params("summarize", threshold_tokens=1500)


def _import(tmp_path: Path, path: Path) -> tuple[object, list[str]]:
    store = open_store(tmp_path / "store")
    return store, [r.id for r in import_paths(store, [str(path)])]


def _final(store, sid: str, config: PipelineConfig) -> ContextCommit:
    """The commit at HEAD, derived turn by turn (checked by the kit on the way)."""
    pipeline = Pipeline.from_config(config)
    runs = drive_branch(branch_path(store, sid), pipeline, session_id=sid, delay=3600.0)
    check_commits(runs, pipeline)
    return runs[-1][1].commit


def _anchors(commit: ContextCommit) -> list[ContextItem]:
    return [it for it in commit.items if it.reason == "anchor"]


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


# -- system prompts -------------------------------------------------------------------


@pytest.mark.parametrize("config", [AGGRESSIVE, LOW], ids=["every-rule", "default-low"])
@pytest.mark.parametrize("name", [SWE_GPT4, SWE_FC])
def test_swe_agent_system_prompt_survives_intact(tmp_path, corpus, name, config):
    history = json.loads((corpus / name).read_text(encoding="utf-8"))["history"]
    system = _text(history[0]["content"])
    assert history[0]["role"] == "system" and "SETTING: You are an autonomous" in system
    store, (sid,) = _import(tmp_path, corpus / name)
    commit = _final(store, sid, config)
    assert any(it.state == "summarized" for it in commit.items)  # folding did happen
    (item,) = [it for it in commit.items if it.role == "system"]
    assert item.locked and item.state == "full" and item.rendered == system
    # and it is what a provider gets as its system prompt
    assert [b.text for b in render_context(commit).system] == [system]


def test_unlocked_by_config_the_system_prompt_folds(tmp_path, corpus):
    store, (sid,) = _import(tmp_path, corpus / SWE_GPT4)
    unlocked = every_rule(lock_system=False)
    commit = _final(store, sid, unlocked)
    (item,) = [it for it in commit.items if it.role == "system"]
    assert not item.locked and item.state == "summarized"
    assert Pipeline.from_config(unlocked).version != Pipeline.from_config(AGGRESSIVE).version


def test_a_commit_under_other_lock_settings_is_not_reused(tmp_path, corpus):
    store, (sid,) = _import(tmp_path, corpus / SWE_GPT4)
    locked = make_commit(sid, now=2e9, store=store, config=AGGRESSIVE)
    unlocked = make_commit(sid, now=2e9, store=store, config=every_rule(lock_system=False))
    assert locked.id != unlocked.id and locked.rules_version != unlocked.rules_version
    assert [it.locked for it in locked.items if it.role == "system"] == [True]
    assert [it.locked for it in unlocked.items if it.role == "system"] == [False]


def _openhands_with_system(corpus: Path, tmp_path: Path) -> tuple[Path, str]:
    """The OpenHands trajectory with a system event in front, as OpenHands writes one
    (``action: system``, the prompt in ``args.content``): the corpus file has none."""
    events = json.loads((corpus / OPENHANDS).read_text(encoding="utf-8"))
    prompt = "\n".join(
        f"<RULE_{i}>You are OpenHands agent, a helpful AI assistant that can interact with "
        f"a computer to solve tasks. Rule {i}: keep the workspace at /workspace tidy, run "
        f"the tests after every change and never push without being asked.</RULE_{i}>"
        for i in range(12)
    )
    system = {
        "id": -1,
        "timestamp": events[0]["timestamp"],
        "source": "agent",
        "message": prompt,
        "action": "system",
        "args": {"content": prompt},
    }
    path = tmp_path / "openhands_with_system.json"
    path.write_text(json.dumps([system, *events]), encoding="utf-8")
    return path, prompt


def test_openhands_system_prompt_survives_intact(tmp_path, corpus):
    path, prompt = _openhands_with_system(corpus, tmp_path)
    store, (sid,) = _import(tmp_path, path)
    first_user = next(
        e["args"]["content"]
        for e in json.loads((corpus / OPENHANDS).read_text(encoding="utf-8"))
        if e.get("action") == "message" and e.get("source") == "user"
    )
    low = PipelineConfig.preset("default").with_params("summarize", threshold_tokens=1200)
    commit = _final(store, sid, low)
    assert any(it.state == "summarized" for it in commit.items)
    (item,) = [it for it in commit.items if it.role == "system"]
    assert item.locked and item.state == "full" and item.rendered == prompt
    (anchor,) = _anchors(commit)
    assert anchor.rendered == first_user and anchor.state == "full"


def test_tau_bench_system_prompts_and_first_requests_survive(tmp_path, corpus):
    convs = json.loads((corpus / TAU).read_text(encoding="utf-8"))[:6]
    store = open_store(tmp_path / "store")
    path = tmp_path / "tau6.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    results = import_paths(store, [str(path)])
    assert len(results) == len(convs)
    for res, conv in zip(results, convs):
        system = next(m["content"] for m in conv["traj"] if m["role"] == "system")
        first_user = next(m["content"] for m in conv["traj"] if m["role"] == "user")
        commit = _final(store, res.id, AGGRESSIVE)
        (item,) = [it for it in commit.items if it.role == "system"]
        assert item.locked and item.state == "full" and item.rendered == system
        (anchor,) = _anchors(commit)
        assert anchor.rendered == first_user and anchor.state == "full"


# -- the task anchor ------------------------------------------------------------------


def test_swe_agent_anchor_is_the_issue_not_the_demonstration(tmp_path, corpus):
    history = json.loads((corpus / SWE_GPT4).read_text(encoding="utf-8"))["history"]
    demo = next(m for m in history if m["role"] == "user")
    assert demo.get("is_demo") is True
    task = next(m for m in history if m["role"] == "user" and not m.get("is_demo"))
    assert "ISSUE:" in task["content"]
    store, (sid,) = _import(tmp_path, corpus / SWE_GPT4)
    commit = _final(store, sid, AGGRESSIVE)
    (anchor,) = _anchors(commit)
    assert anchor.rendered == task["content"] and anchor.state == "full"
    # the demonstration is an ordinary item: under aggressive it folds
    (shown,) = [it for it in commit.items if it.rendered == demo["content"]]
    assert not shown.is_anchor and shown.state == "summarized"


def test_swe_agent_without_demonstration_anchors_its_first_request(tmp_path, corpus):
    history = json.loads((corpus / SWE_FC).read_text(encoding="utf-8"))["history"]
    task = next(m for m in history if m["role"] == "user")
    store, (sid,) = _import(tmp_path, corpus / SWE_FC)
    (anchor,) = _anchors(_final(store, sid, AGGRESSIVE))
    assert anchor.rendered == _text(task["content"])


@pytest.mark.parametrize("name", [CC_INIT, CC_ORCH])
def test_claude_code_anchor_is_the_command_expansion(tmp_path, corpus, name):
    lines = _lines(corpus / name)
    wrapper, expansion = lines[0], lines[1]
    assert wrapper["message"]["content"].lstrip().startswith("<command-")
    assert expansion["isMeta"] is True and expansion["parentUuid"] == wrapper["uuid"]
    store, (sid,) = _import(tmp_path, corpus / name)
    commit = _final(store, sid, AGGRESSIVE)
    (anchor,) = _anchors(commit)
    assert anchor.rendered == _text(expansion["message"]["content"])
    assert anchor.state == "full" and anchor.is_anchor
    (shown,) = [it for it in commit.items if it.rendered == wrapper["message"]["content"]]
    assert not shown.is_anchor


def test_the_orchestrator_expansion_holds_the_command_arguments(corpus):
    # Why the expansion alone is the anchor: Claude Code appends the arguments to it, so
    # the wrapper line adds nothing the model needs.
    lines = _lines(corpus / CC_ORCH)
    args = lines[0]["message"]["content"].split("<command-args>")[1].split("</command-args>")[0]
    assert args.strip() and args in _text(lines[1]["message"]["content"])


def _claude_code_with_preamble(corpus: Path, tmp_path: Path) -> tuple[Path, str]:
    """The plain Claude Code session with the lines Claude Code writes before a prompt
    when the user first ran local commands: the caveat, a ``/model`` command and its
    output, a system reminder, an interruption notice, hook feedback."""
    lines = _lines(corpus / CC_PLAIN)
    k = next(i for i, e in enumerate(lines) if e.get("type") == "user")
    first = lines[k]
    texts: list[tuple[str, bool]] = [
        (
            "Caveat: The messages below were generated by the user while running local "
            "commands. DO NOT respond to these messages or otherwise consider them in "
            "your response unless the user explicitly asks you to.",
            True,
        ),
        (
            "<command-name>/model</command-name>\n<command-message>model</command-message>"
            "\n<command-args></command-args>",
            False,
        ),
        (
            "<local-command-stdout>Set model to \u001b[1mopus\u001b[22m</local-command-stdout>",
            False,
        ),
        ("<system-reminder>\nThe user opened src/math_utils.py.\n</system-reminder>", False),
        ("[Request interrupted by user]", False),
        ("Stop hook feedback:\n[scripts/stop.sh]: nothing to check", True),
    ]
    pre = []
    parent = None
    for i, (text, meta) in enumerate(texts):
        entry = {k2: v for k2, v in first.items() if k2 not in ("message", "uuid", "parentUuid")}
        entry.update(
            parentUuid=parent,
            uuid=f"00000000-0000-4000-8000-{i:012d}",
            message={"role": "user", "content": text},
        )
        if meta:
            entry["isMeta"] = True
        pre.append(entry)
        parent = entry["uuid"]
    lines[k] = {**first, "parentUuid": parent}
    out = lines[:k] + pre + lines[k:]
    path = tmp_path / "with_preamble.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in out), encoding="utf-8")
    return path, first["message"]["content"]


def test_claude_code_meta_lines_before_the_prompt_are_not_the_task(tmp_path, corpus):
    path, prompt = _claude_code_with_preamble(corpus, tmp_path)
    store, (sid,) = _import(tmp_path, path)
    commit = _final(store, sid, AGGRESSIVE)
    (anchor,) = _anchors(commit)
    assert anchor.rendered == prompt and anchor.state == "full"


def test_with_no_skip_kinds_the_first_user_line_is_the_anchor(tmp_path, corpus):
    # The documented switch back: anchor_skip = [] anchors the first user line.
    path, _ = _claude_code_with_preamble(corpus, tmp_path)
    store, (sid,) = _import(tmp_path, path)
    commit = _final(store, sid, every_rule(anchor_skip=()))
    (anchor,) = _anchors(commit)
    assert anchor.rendered.startswith("Caveat: The messages below")
    # a pattern skips a line no built-in kind knows
    mine = every_rule(anchor_skip=("caveat", "command", "local_command"), anchor_skip_patterns=())
    (anchor,) = _anchors(_final(store, sid, mine))
    assert anchor.rendered.startswith("<system-reminder>")
    more = every_rule(
        anchor_skip=("caveat", "command", "local_command"),
        anchor_skip_patterns=(r"\A<system-reminder>", r"^\[Request interrupted", "hook feedback:"),
    )
    (anchor,) = _anchors(_final(store, sid, more))
    assert anchor.rendered.startswith("Add a function called multiply_numbers")


def test_anchor_task_off_anchors_nothing(tmp_path, corpus):
    store, (sid,) = _import(tmp_path, corpus / SWE_GPT4)
    commit = _final(store, sid, every_rule(anchor_task=False))
    assert not _anchors(commit) and not any(it.is_anchor for it in commit.items)
