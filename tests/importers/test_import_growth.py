"""A Claude Code transcript that grew since its import appends to its session.

A live session's file is the corpus file cut at some line (what Claude Code had written
by then); the oracle is a fresh import of the whole file into another store: the grown
session must hold the same nodes (ids, edges, content) where the cut fell between API
messages.  Every test runs on the SQLite and the in-memory store, seen through the
Store protocol only.
"""

from __future__ import annotations

import json
import warnings

import pytest

from ctxrules import dag
from ctxrules.errors import ImportFormatError, TranscriptWarning
from ctxrules.importers import import_paths
from ctxrules.model import ToolUseBlock, content_text

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
SIDE = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
V2 = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"


def raw_lines(corpus, name):
    return (corpus / name).read_text(encoding="utf-8").splitlines(keepends=True)


def write(path, lines):
    path.write_text("".join(lines), encoding="utf-8")
    return str(path)


def shape(store, sid):
    """The stored nodes as comparable tuples (seq left out: it only orders)."""
    return {
        n.id: (n.role, n.name, n.predecessor, n.caller, n.output, n.input, n.created_at)
        for n in store.nodes(sid)
    }


def message_ids(lines):
    return [json.loads(x).get("message", {}).get("id") for x in lines]


def between_messages(lines):
    """Cut points (line counts) that fall between two API messages."""
    ids = message_ids(lines)
    return [k for k in range(2, len(lines)) if ids[k - 1] is None or ids[k - 1] != ids[k]]


@pytest.fixture
def fresh(make_store, tmp_path):
    """``fresh(lines)``: a new store with the transcript imported whole (the oracle)."""

    def run(lines, name="live.jsonl"):
        folder = tmp_path / f"oracle{len(lines)}"
        folder.mkdir(exist_ok=True)
        st = make_store(f"oracle{len(lines)}")
        (res,) = import_paths(st, [write(folder / name, lines)])
        return st, res

    return run


@pytest.mark.parametrize("name", [CC, V2])
def test_appending_at_message_boundaries_equals_a_fresh_import(
    any_store, fresh, corpus, tmp_path, name
):
    lines = raw_lines(corpus, name)
    cuts = between_messages(lines)
    first, second = cuts[len(cuts) // 3], cuts[2 * len(cuts) // 3]
    live = tmp_path / "live.jsonl"
    (a,) = import_paths(any_store, [write(live, lines[:first])])
    assert a.created
    (b,) = import_paths(any_store, [write(live, lines[:second])])
    (c,) = import_paths(any_store, [write(live, lines)])
    assert a.id == b.id == c.id and not b.created and not c.created
    assert b.added == b.calls - a.calls > 0 and c.added == c.calls - b.calls > 0
    oracle, whole = fresh(lines)
    assert whole.id == a.id  # ids come from the transcript, not from where it was read
    assert shape(any_store, a.id) == shape(oracle, whole.id)
    info, want = any_store.get_session(a.id), oracle.get_session(whole.id)
    assert info.head == want.head
    assert info.calls == want.calls == len(any_store.nodes(a.id))
    seqs = [n.seq for n in any_store.nodes(a.id)]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # Every edge points at a node stored before it.
    place = {n.id: n.seq for n in any_store.nodes(a.id)}
    for n in any_store.nodes(a.id):
        for edge in (n.predecessor, n.caller):
            assert edge is None or place[edge] < n.seq


def test_reimporting_the_same_bytes_changes_nothing(any_store, snapshot, corpus, tmp_path):
    lines = raw_lines(corpus, CC)
    live = write(tmp_path / "live.jsonl", lines[:12])
    (first,) = import_paths(any_store, [live])
    before = snapshot(any_store)
    (again,) = import_paths(any_store, [live])
    assert snapshot(any_store) == before
    assert again.id == first.id and not again.created and again.added == 0


def test_a_message_split_by_an_import_continues_in_a_second_node(
    any_store, fresh, corpus, tmp_path
):
    lines = raw_lines(corpus, CC)
    ids = message_ids(lines)
    # Lines 6-10 are one API message with five tool_use blocks: cut after line 7.
    assert len(set(ids[5:10])) == 1 and ids[5] is not None
    live = tmp_path / "live.jsonl"
    (a,) = import_paths(any_store, [write(live, lines[:7])])
    stored = {n.id for n in any_store.nodes(a.id)}
    (b,) = import_paths(any_store, [write(live, lines)])
    nodes = {n.id: n for n in any_store.nodes(a.id)}
    parts = [n for n in nodes.values() if n.metadata.get("message_id") == ids[5]]
    assert len(parts) == 2
    first, second = sorted(parts, key=lambda n: n.seq)
    assert first.id in stored and second.id not in stored
    assert second.metadata["continues"] == first.id and second.predecessor == first.id
    got_uses = [b.id for n in (first, second) for b in n.output if isinstance(b, ToolUseBlock)]
    want_uses = [
        blk["id"]
        for x in lines[5:10]
        for blk in json.loads(x)["message"]["content"]
        if blk["type"] == "tool_use"
    ]
    assert got_uses == want_uses
    # Each result hangs on the part that holds its tool_use; nothing else differs.
    for n in nodes.values():
        if n.role == "tool":
            caller = nodes[n.caller]
            uses = [b.id for b in caller.output if isinstance(b, ToolUseBlock)]
            assert n.metadata["tool_use_id"] in uses
    oracle, whole = fresh(lines)
    assert b.calls == oracle.get_session(whole.id).calls + 1


def test_a_sub_agent_imported_before_its_task_result(any_store, corpus, tmp_path):
    """A 1.0.x inline sidechain cut before its Task's result: the first import gives the
    Task an empty tool node (the sidechain hangs off it); the result, when it comes,
    is a node of its own that names it."""
    lines = raw_lines(corpus, SIDE)
    entries = [json.loads(x) for x in lines]
    root = next(i for i, e in enumerate(entries) if e.get("isSidechain"))
    prompt = entries[root]["message"]["content"]
    result = next(
        i
        for i, e in enumerate(entries)
        if not e.get("isSidechain")
        and i > root
        and isinstance(e["message"]["content"], list)
        and e["message"]["content"][0].get("type") == "tool_result"
        and e["message"]["content"][0].get("content") != ""
        and e.get("toolUseResult", {}).get("totalTokens")
    )
    assert isinstance(prompt, str)  # the sidechain's prompt
    live = tmp_path / "live.jsonl"
    (a,) = import_paths(any_store, [write(live, lines[:result])])
    empty = [n for n in any_store.nodes(a.id) if n.metadata.get("result_missing")]
    assert len(empty) == 1
    import_paths(any_store, [write(live, lines)])
    tid = entries[result]["message"]["content"][0]["tool_use_id"]
    answers = [n for n in any_store.nodes(a.id) if n.metadata.get("tool_use_id") == tid]
    late = next(n for n in answers if not n.metadata.get("result_missing"))
    assert late.metadata["completes"] == empty[0].id
    recorded = entries[result]["message"]["content"][0]["content"]
    assert late.caller == empty[0].caller
    assert content_text(late.output) == "\n".join(b["text"] for b in recorded)
    roots = [n for n in any_store.nodes(a.id) if n.metadata.get("task_tool_use_id") == tid]
    assert [r.caller for r in roots] == [empty[0].id]


def test_head_follows_the_transcript_unless_it_was_moved(any_store, fresh, corpus, tmp_path):
    lines = raw_lines(corpus, CC)
    live = tmp_path / "live.jsonl"
    (a,) = import_paths(any_store, [write(live, lines[:12])])
    head = any_store.get_session(a.id).head
    import_paths(any_store, [write(live, lines[:24])])
    oracle, part = fresh(lines[:24])
    moved = any_store.get_session(a.id).head
    assert moved != head and moved == oracle.get_session(part.id).head  # followed it
    dag.checkout(any_store, a.id, head)
    import_paths(any_store, [write(live, lines)])
    assert any_store.get_session(a.id).head == head  # someone moved it: it stays


def test_a_rewritten_transcript_is_refused_and_nothing_stored(
    any_store, snapshot, corpus, tmp_path
):
    lines = raw_lines(corpus, CC)
    live = tmp_path / "live.jsonl"
    import_paths(any_store, [write(live, lines[:12])])
    before = snapshot(any_store)
    edited = list(lines)
    edited[3] = edited[3].replace('"type":"assistant"', '"type":"assistant" ', 1)
    assert edited[3] != lines[3]
    for variant, why in ((edited, "changed within"), (lines[:8], "is shorter")):
        with pytest.raises(ImportFormatError, match=why) as err:
            import_paths(any_store, [write(live, variant)])
        assert str(live) in str(err.value) and "nothing was imported" in str(err.value)
        assert snapshot(any_store) == before


def test_a_cut_off_last_line_waits_for_the_next_import(any_store, fresh, corpus, tmp_path):
    lines = raw_lines(corpus, CC)
    cut = between_messages(lines)[4]
    live = tmp_path / "live.jsonl"
    half = lines[cut][: len(lines[cut]) // 2]
    with pytest.warns(TranscriptWarning, match=rf"live\.jsonl:{cut + 1}: the last line is cut"):
        (a,) = import_paths(any_store, [write(live, [*lines[:cut], half])])
    oracle, part = fresh(lines[:cut], "live.jsonl")
    assert shape(any_store, a.id) == shape(oracle, part.id)  # the cut line is not in
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (b,) = import_paths(any_store, [write(live, lines)])
    assert b.added > 0
    oracle, whole = fresh(lines)
    assert shape(any_store, a.id) == shape(oracle, whole.id)


def test_copies_elsewhere_are_sessions_of_their_own(any_store, corpus, tmp_path):
    lines = raw_lines(corpus, CC)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = write(tmp_path / "a" / "x.jsonl", lines), write(tmp_path / "b" / "x.jsonl", lines)
    first, second = import_paths(any_store, [one, two])
    assert first.created and second.created and first.id != second.id
    assert not {n.id for n in any_store.nodes(first.id)} & {
        n.id for n in any_store.nodes(second.id)
    }
    (again,) = import_paths(any_store, [two])
    assert again.id == second.id and not again.created
