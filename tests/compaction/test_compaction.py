"""``ctxrules.compaction.compact`` on real recorded sessions: the boundary and restore
nodes, the record (tokens before and after with the billed-prompt estimate), one
summary call however often the commit is made again, partial compactions keep their
prefix's bytes, and every failure stores nothing but the failure."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from ctxrules import dag
from ctxrules.commit import (
    boundary_of,
    make_commit,
    stored_answers,
)
from ctxrules.commit.answers import NAMESPACE
from ctxrules.compaction import (
    CompactOptions,
    boundaries,
    compact,
    failures,
)
from ctxrules.config import PipelineConfig
from ctxrules.errors import CompactionError, ConfigError, DagError, ValidationError
from ctxrules.importers import import_paths
from ctxrules.plugins import registry
from ctxrules.render import explain, render, session_defaults
from ctxrules.requests import session_tool_names
from ctxrules.store import open_store
from ctxrules.summarizers import ExtractiveSummarizer, SummaryRequest, SummaryResult

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
CC_2X = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"
NOW = 2_000_000_000.0


class Counting:
    """The extractive summarizer, counting its calls."""

    name = "test-counting"

    def __init__(self):
        self.calls = 0

    def summarize(self, items, *, budget, **kwargs):
        self.calls += 1
        return ExtractiveSummarizer().summarize(items, budget=budget)


class Failing:
    name = "test-failing"

    def summarize(self, items, *, budget, **kwargs):
        raise RuntimeError("summary model unavailable")


class Bloated:
    name = "test-bloated"

    def summarize(self, items, *, budget, **kwargs):
        return "word " * 50_000


@pytest.fixture
def summarizers():
    reg = registry("summarizers")
    added = {s.name: s for s in (Counting(), Failing(), Bloated())}
    reg.items.update(added)
    yield added
    for name in added:
        reg.items.pop(name, None)


@pytest.fixture
def imported(tmp_path, corpus):
    """``imported(rel)``: a corpus transcript imported into a new store → (store, id)."""
    opened = []

    def load(rel: str):
        store = open_store(str(tmp_path / f"store{len(opened)}"), create=True)
        opened.append(store)
        (res,) = import_paths(store, [str(corpus / rel)])
        return store, res.id

    yield load
    for st in opened:
        st.close()


def _recorded_model(rel: str) -> str:
    """The model Claude Code recorded on the transcript's first assistant line."""
    path = Path(__file__).parents[1] / "data" / "corpus" / rel
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "assistant" and entry["message"].get("model") != "<synthetic>":
            return str(entry["message"]["model"])
    raise AssertionError(f"no assistant line in {rel}")


def _billed(store, commit):
    """The billed-prompt estimate of the request carrying ``commit`` (through ``explain``,
    a path of its own)."""
    info = store.get_session(commit.session_id)
    tools = session_tool_names(store, commit.session_id)
    defaults = session_defaults(info.metadata, "anthropic", used_tools=tools).options
    model = defaults.pop("model", None)
    return explain(commit, "anthropic", model, **defaults)["input_tokens"]


def test_a_manual_compaction_of_a_real_session(imported, summarizers):
    store, sid = imported(CC)
    head = store.get_session(sid).head
    before = make_commit(sid, now=NOW, store=store)
    nodes_before = store.nodes(sid)
    opts = CompactOptions(summarizer="test-counting")
    result = compact(store, sid, now=NOW, provider="anthropic", options=opts)
    r = result.record
    # the nodes: boundary after the old HEAD, the restore message after it, HEAD there
    added = store.nodes(sid)[len(nodes_before) :]
    assert [n.id for n in added] == [result.boundary, result.restore]
    boundary, restore = added
    assert (boundary.role, boundary.output, boundary.predecessor) == ("system", "", head)
    assert boundary_of(boundary) == r
    assert restore.role == "user" and restore.predecessor == boundary.id
    assert store.get_session(sid).head == restore.id
    # the record
    assert (r.trigger, r.direction, r.previous) == ("manual", "full", head)
    assert r.tokens_before == _billed(store, before)
    commit = make_commit(sid, now=NOW, store=store)
    assert commit.id == result.commit
    assert r.tokens_after == _billed(store, commit) < r.tokens_before
    assert r.measured == f"anthropic:{_recorded_model(CC)}"  # the model the session used
    (sm,) = [it for it in commit.items if it.state == "summary"]
    assert sm.rendered == r.summary and sm.reason == f"compaction:full:{boundary.id}"
    assert r.folded_items == sum(1 for it in commit.items if it.merged_into == sm.source_node_id)
    shown = [it.source_node_id for it in commit.items if it.state != "summarized"]
    anchor = next(it for it in before.items if it.is_anchor)  # the task statement stays
    assert shown == [anchor.source_node_id, sm.source_node_id, restore.id]
    assert boundaries(store, sid) == [(boundary, r)]


def test_the_summary_is_asked_for_once_however_the_commit_is_made_again(imported, summarizers):
    store, sid = imported(CC)
    counting = summarizers["test-counting"]
    result = compact(store, sid, now=NOW, options=CompactOptions(summarizer="test-counting"))
    assert counting.calls == 1  # preview and final commit share the answer
    # the answer is kept in the store under its request's key
    keys = store.kv_keys(NAMESPACE)
    assert len(keys) == 1
    kept = msgspec.json.decode(store.kv_get(NAMESPACE, keys[0]), type=SummaryResult)
    assert kept.text == result.record.summary
    # a commit made from scratch (another rule set, a fork) folds into the same text
    aggressive = PipelineConfig.preset("aggressive")
    again = make_commit(sid, now=NOW + 60, store=store, config=aggressive, rerun=True)
    fork = dag.fork(store, sid)
    forked = make_commit(fork.id, now=NOW + 120, store=store)
    for c in (again, forked):
        texts = [it.rendered for it in c.items if it.reason.startswith("compaction:")]
        assert texts and texts[-1] == result.record.summary
    assert counting.calls == 1


def test_stored_answers_ask_once_and_keep_no_failure(any_store):
    calls = []

    def answer(request):
        calls.append(request.key)
        return SummaryResult(error="down") if request.key == "sr_bad" else SummaryResult(text="T")

    ask = stored_answers(any_store, answer)
    good = SummaryRequest(key="sr_good", rule="r", summarizer="x", items=(), budget=16)
    bad = msgspec.structs.replace(good, key="sr_bad")
    assert ask(good).text == "T" and ask(good).text == "T"
    assert ask(bad).error == "down" and ask(bad).error == "down"
    assert calls == ["sr_good", "sr_bad", "sr_bad"]  # a failure is asked again
    any_store.kv_put(NAMESPACE, "sr_broken", b"not json")
    broken = msgspec.structs.replace(good, key="sr_broken")
    assert ask(broken).text == "T" and calls[-1] == "sr_broken"


def test_regenerating_a_summarize_fold_does_not_call_the_summarizer_again(
    imported, summarizers, tmp_path
):
    """The summarize rule's answers are kept too: a fork's first commit (derived from
    its whole branch) gets the same folds without a summarizer call."""
    store, sid = imported(CC)
    counting = summarizers["test-counting"]
    config = PipelineConfig.preset("aggressive").with_params(
        "summarize", summarizer="test-counting"
    )
    first = make_commit(sid, now=NOW, store=store, config=config)
    assert counting.calls >= 1 and any(it.state == "summary" for it in first.items)
    calls = counting.calls
    fork = dag.fork(store, sid)
    again = make_commit(fork.id, now=NOW, store=store, config=config)
    assert counting.calls == calls
    assert [it for it in again.items if it.state == "summary"] == [
        it for it in first.items if it.state == "summary"
    ]


def test_from_keeps_the_prefix_bytes_and_the_rest_is_folded(imported):
    store, sid = imported(CC)
    before = make_commit(sid, now=NOW, store=store)
    turns = [it for it in before.items if it.role == "assistant" and it.state != "summary"]
    pivot = turns[len(turns) // 2].source_node_id
    cut = [it.source_node_id for it in before.items].index(pivot)
    assert cut > 5  # a real prefix: the request and several turns
    result = compact(store, sid, now=NOW, direction="from", pivot=pivot)
    assert (result.record.trigger, result.record.direction) == ("partial", "from")
    commit = make_commit(sid, now=NOW, store=store)
    assert commit.items[:cut] == before.items[:cut]
    later = {it.source_node_id for it in before.items[cut:]}
    assert all(it.state == "summarized" for it in commit.items if it.source_node_id in later)
    assert [it.state for it in commit.items[-2:]] == ["summary", "full"]  # + the restore

    def prefix(c):
        body = render(msgspec.structs.replace(c, items=c.items[:cut]), "anthropic")
        return body.body

    assert prefix(commit) == prefix(before)


def test_up_to_keeps_the_pivot_and_after(imported):
    store, sid = imported(CC_2X)
    before = make_commit(sid, now=NOW, store=store)
    users = [it for it in before.items if it.role == "user" and it.state == "full"]
    pivot = users[-1].source_node_id
    cut = [it.source_node_id for it in before.items].index(pivot)
    result = compact(store, sid, now=NOW, direction="up_to", pivot=pivot)
    commit = make_commit(sid, now=NOW, store=store)
    tail = [it for it in commit.items if it.state != "summarized"]
    kept = [it.source_node_id for it in before.items[cut:]]
    assert [it.source_node_id for it in tail][-len(kept) - 1 : -1] == kept  # then the restore
    assert result.record.pivot == pivot and result.record.tokens_after < result.record.tokens_before


def test_a_failed_summary_stores_nothing_but_the_failure(imported, summarizers):
    store, sid = imported(CC)
    nodes = store.nodes(sid)
    head = store.get_session(sid).head
    commit = make_commit(sid, now=NOW, store=store)
    with pytest.raises(CompactionError, match="summary model unavailable"):
        compact(store, sid, now=NOW, options=CompactOptions(summarizer="test-failing"))
    assert store.nodes(sid) == nodes and store.get_session(sid).head == head
    assert make_commit(sid, now=NOW, store=store) == commit  # nothing folded
    (failure,) = failures(store, sid)
    assert failure["trigger"] == "manual" and "summary model unavailable" in failure["error"]
    for _ in range(12):  # the last ten are kept
        with pytest.raises(CompactionError):
            compact(store, sid, now=NOW, options=CompactOptions(summarizer="test-failing"))
    assert len(failures(store, sid)) == 10


def test_a_result_no_smaller_is_refused(imported, summarizers):
    store, sid = imported(CC_2X)
    nodes = store.nodes(sid)
    with pytest.raises(CompactionError, match=r"leaves the request at .* not fewer"):
        compact(store, sid, now=NOW, options=CompactOptions(summarizer="test-bloated"))
    assert store.nodes(sid) == nodes


def test_nothing_to_fold_is_a_failure(any_store):
    info = dag.create_session(any_store)
    dag.append(any_store, info.id, "user", "the only request")
    with pytest.raises(CompactionError, match="nothing to fold"):
        compact(any_store, info.id, now=NOW)
    assert len(any_store.nodes(info.id)) == 1


@pytest.mark.parametrize(
    "kwargs,error,says",
    [
        ({"direction": "from"}, ValidationError, "pivot"),
        ({"pivot": "n_x"}, ValidationError, "pivot"),
        ({"direction": "sideways", "pivot": "n_x"}, ValidationError, "direction"),
        ({"trigger": "imported"}, ValidationError, "trigger"),
        ({"trigger": "auto", "direction": "from", "pivot": "n_x"}, ValidationError, "trigger"),
        ({"options": CompactOptions(summarizer="nope")}, ConfigError, "no summarizer"),
        ({"direction": "from", "pivot": "n_nowhere"}, DagError, "not part of session"),
    ],
)
def test_bad_arguments_change_nothing(imported, kwargs, error, says):
    store, sid = imported(CC_2X)
    nodes = store.nodes(sid)
    with pytest.raises(error, match=says):
        compact(store, sid, now=NOW, **kwargs)
    assert store.nodes(sid) == nodes and failures(store, sid) == []


def test_a_pivot_already_folded_is_refused(imported):
    store, sid = imported(CC)
    compact(store, sid, now=NOW)
    after = make_commit(sid, now=NOW, store=store)
    folded = next(
        it.source_node_id for it in after.items if it.state == "summarized" and it.caller is None
    )
    with pytest.raises(DagError, match="not shown in the commit"):
        compact(store, sid, now=NOW + 1, direction="up_to", pivot=folded)


def test_a_head_that_moves_during_the_compaction_is_refused(imported, summarizers):
    store, sid = imported(CC_2X)

    class Interfering:
        """Another writer appends while the summary is made."""

        name = "test-interfering"

        def summarize(self, items, *, budget, **kwargs):
            dag.append(store, sid, "user", "a new message meanwhile")
            return "short summary"

    registry("summarizers").items["test-interfering"] = Interfering()
    try:
        nodes = len(store.nodes(sid))
        with pytest.raises(DagError, match="HEAD moved"):
            compact(store, sid, now=NOW, options=CompactOptions(summarizer="test-interfering"))
        assert len(store.nodes(sid)) == nodes + 1  # only the other writer's node
        assert boundaries(store, sid) == []
    finally:
        registry("summarizers").items.pop("test-interfering")


def test_a_session_already_over_the_window_compacts(any_store):
    """A branch past the model's window (200K for Claude): the summary request is made
    from the items, the compacted request fits again."""
    from ctxrules.testing.scripts import _filler

    info = dag.create_session(any_store, metadata={"model": "claude-sonnet-4-5"})
    dag.append(any_store, info.id, "user", "Refactor src/app.py; never touch tests/.")
    for k in range(30):
        a = dag.append(any_store, info.id, "assistant", f"reading part {k}")
        dag.append(
            any_store,
            info.id,
            "tool",
            _filler(40_000, k),
            name="Bash",
            input={"command": f"cat part{k}.log"},
            caller=a.id,
            metadata={"tool_use_id": f"call{k}"},
        )
    dag.append(any_store, info.id, "assistant", "done reading")
    off = PipelineConfig.preset("off")  # no rule cuts the results: the branch is over
    result = compact(any_store, info.id, now=NOW, provider="anthropic", config=off)
    assert result.record.tokens_before > 200_000
    assert result.record.tokens_after < 20_000
    commit = make_commit(info.id, now=NOW, store=any_store, config=off)
    assert "never touch tests" in commit.items[0].rendered  # the task statement stays


def test_the_same_compaction_makes_the_same_nodes_and_commit(imported, summarizers):
    """Replayed on a copy of the session (as ``ctxrules rerender`` does in each worker),
    a compaction gives the same boundary and restore ids and the same commit; asked again
    at the old HEAD of the same session, it gets nodes of its own."""
    opts = CompactOptions(summarizer="test-counting")
    (s1, sid1), (s2, sid2) = imported(CC), imported(CC)
    assert sid1 == sid2
    head = s1.get_session(sid1).head
    a = compact(s1, sid1, now=NOW, options=opts)
    b = compact(s2, sid2, now=NOW, options=opts)
    assert (a.boundary, a.restore, a.commit) == (b.boundary, b.restore, b.commit)
    s1.set_head(sid1, head)
    again = compact(s1, sid1, now=NOW, options=opts)
    assert again.boundary != a.boundary and again.restore != a.restore
    assert s1.get_node(again.boundary).predecessor == head
