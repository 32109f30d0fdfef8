"""The restore message after a compaction: recent files (re-read from disk only under
the working directory, newest first, within the limits, skipped while still shown), the
plan, invoked skills, deferred tools."""

from __future__ import annotations

import os

import pytest

from ctxrules import dag
from ctxrules.compaction import CompactOptions, RestoreLimits, compact
from ctxrules.importers import import_paths
from ctxrules.tokenizers import get_tokenizer

NOW = 2_000_000_000.0
COUNT = get_tokenizer("o200k_base").count


#: What each assistant turn of ``_session`` says besides its read: enough that folding
#: the turns makes the request smaller.
PAD = " ".join(["filler words that carry no facts"] * 60)  # no identifiers to index


def _session(store, reads, *, metadata=None, open_turn=False):
    """A session reading ``reads`` ([(path, recorded text)]) one turn each."""
    info = dag.create_session(store, metadata=metadata)
    dag.append(store, info.id, "user", "Fix the parser; do not change the public API.")
    for k, (path, text) in enumerate(reads):
        a = dag.append(store, info.id, "assistant", f"reading {path}. {PAD}")
        dag.append(
            store,
            info.id,
            "tool",
            text,
            name="Read",
            input={"file_path": path},
            caller=a.id,
            metadata={"tool_use_id": f"r{k}"},
        )
        if not (open_turn and k == len(reads) - 1):
            dag.append(store, info.id, "assistant", f"read {path}")
    return info.id


def _restore(store, sid, **kwargs):
    result = compact(store, sid, now=NOW, **kwargs)
    node = store.get_node(result.restore) if result.restore else None
    return result, (node.output if node is not None else "")


def test_files_under_the_working_directory_are_read_again_from_disk(any_store, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "parser.py").write_text("def parse(): return 'NEW CONTENT ON DISK'\n")
    outside = tmp_path.parent / "outside-secret.txt"
    outside.write_text("SECRET OUTSIDE")
    sid = _session(
        any_store,
        [
            ("src/parser.py", "def parse(): return 'AS RECORDED'"),
            (str(tmp_path / "src" / "parser.py"), "recorded again"),  # the same file, absolute
            ("../outside-secret.txt", "recorded outside"),
            ("/etc/hostname", "recorded hostname"),
        ],
    )
    result, text = _restore(any_store, sid, working_directory=tmp_path)
    assert "NEW CONTENT ON DISK" in text and "AS RECORDED" not in text
    assert "SECRET OUTSIDE" not in text and "recorded outside" in text  # never left the cwd
    assert "recorded hostname" in text
    assert result.restored.from_disk == (str(tmp_path / "src" / "parser.py"), "src/parser.py")
    assert result.restored.files[0] == "/etc/hostname"  # newest read first
    assert "Fix the parser" not in text  # the task statement is kept anyway
    # without a working directory the recorded text is used
    store2_sid = _session(any_store, [("src/parser.py", "def parse(): return 'AS RECORDED'")])
    _, text2 = _restore(any_store, store2_sid)
    assert "AS RECORDED" in text2 and "NEW CONTENT" not in text2
    os.remove(outside)


def test_at_most_five_files_each_cut_to_its_limit(any_store):
    big = " ".join(f"token{k}" for k in range(12_000))  # ~24K tokens
    reads = [(f"f{k}.py", f"content of file {k}\n" + (big if k == 6 else "")) for k in range(7)]
    sid = _session(any_store, reads)
    result, text = _restore(any_store, sid)
    assert result.restored.files == ("f6.py", "f5.py", "f4.py", "f3.py", "f2.py")
    section = text.split("### f6.py (as last read)\n", 1)[1].split("\n### ", 1)[0]
    assert COUNT(section) <= 5_000 and "[… cut:" in section
    assert "content of file 1" not in text


def test_the_total_file_budget_holds(any_store):
    text = " ".join(f"w{k}" for k in range(3_000))
    sid = _session(any_store, [(f"g{k}.py", text) for k in range(5)])
    limits = RestoreLimits(file_tokens=2_000, files_tokens=5_000)
    result, restore = _restore(any_store, sid, options=CompactOptions(restore=limits))
    assert len(result.restored.files) == 3  # 2,000 + 2,000 + the 1,000 left
    files = restore.split("## Files read before the compaction\n\n", 1)[1]
    assert COUNT(files) <= 5_000 + 50  # the section headings


def test_a_file_still_shown_in_full_is_not_restored(any_store):
    sid = _session(any_store, [("a.py", "AAA"), ("b.py", "BBB")], open_turn=True)
    result, text = _restore(any_store, sid)
    assert result.restored.skipped_files == ("b.py",)  # the open turn still shows it
    assert result.restored.files == ("a.py",) and "BBB" not in text


def test_the_plan_is_the_latest_todo_list_of_a_real_session(tmp_path, corpus):
    """Claude Code's TodoWrite calls of a recorded session, compacted while two of the
    todos were still open."""
    from ctxrules.store import open_store

    store = open_store(str(tmp_path / "store"), create=True)
    rel = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    (res,) = import_paths(store, [str(corpus / rel)])
    path = dag.branch_path(store, res.id)
    todo_calls = [c for c in path if c.name == "TodoWrite"]
    second = todo_calls[2]  # one done, two in progress, one pending
    open_items = [t["content"] for t in second.input["todos"] if t["status"] != "completed"]
    done = [t["content"] for t in second.input["todos"] if t["status"] == "completed"]
    assert open_items and done
    dag.checkout(store, res.id, second.caller)  # back to when that list was the latest
    result, text = _restore(store, res.id)
    assert result.restored.plan
    plan = text.split("## Plan\n\n", 1)[1]
    assert all(item in plan for item in open_items)
    assert not any(f"] {item}" in plan for item in done)
    store.close()


def test_skills_and_deferred_tools(any_store):
    tools = [
        {"name": "Read", "input_schema": {"type": "object"}},
        {"name": "deploy", "input_schema": {"type": "object"}, "defer_loading": True},
    ]
    info = dag.create_session(any_store, metadata={"tools": tools})
    dag.append(any_store, info.id, "user", "release it")
    a = dag.append(any_store, info.id, "assistant", "loading the release skill")
    dag.append(
        any_store,
        info.id,
        "tool",
        "Launching skill: release",
        name="Skill",
        input={"skill": "release"},
        caller=a.id,
        metadata={"tool_use_id": "s1"},
    )
    dag.append(
        any_store,
        info.id,
        "user",
        "Base directory for this skill: /skills/release\n\nRELEASE STEPS: tag, build, publish",
    )
    dag.append(any_store, info.id, "assistant", "tagged " + "x " * 400)
    result, text = _restore(any_store, info.id)
    assert result.restored.skills == ("release",)
    assert "RELEASE STEPS: tag, build, publish" in text
    assert result.restored.tools == ("deploy",) and "tool search: deploy" in text


def test_nothing_to_restore_adds_no_node(any_store):
    info = dag.create_session(any_store)
    for k in range(4):
        dag.append(any_store, info.id, "user", f"question {k} " * 100)
        dag.append(any_store, info.id, "assistant", f"answer {k} " * 100)
    result = compact(any_store, info.id, now=NOW)
    assert result.restore is None
    assert any_store.get_session(info.id).head == result.boundary


@pytest.mark.parametrize("limit", [0, 3])
def test_restore_limits_bound_the_files(any_store, limit):
    sid = _session(any_store, [(f"h{k}.py", f"H{k}") for k in range(4)])
    result, _ = _restore(
        any_store, sid, options=CompactOptions(restore=RestoreLimits(max_files=limit))
    )
    assert len(result.restored.files) == limit
