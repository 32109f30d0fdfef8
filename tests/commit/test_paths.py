"""Incremental generation sees exactly THE traversal: after any sequence of DAG operations
(turns, late tool results, edits, retries of tool calls, checkouts, forks), the commit
from make_commit lists the nodes of dag.branch_path in the same order."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

import ctxrules
from ctxrules import dag
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.model import TextBlock, ToolUseBlock
from ctxrules.store import open_store

OPS = st.lists(
    st.sampled_from(
        ["turn", "turn", "turn", "late_tool", "edit", "retry_tool", "checkout", "fork", "commit"]
    ),
    min_size=1,
    max_size=14,
)
PIPELINES = [Pipeline.from_config(PipelineConfig.preset(p)) for p in ("off", "aggressive")]


def _ids(commit):
    return [
        it.source_node_id
        for it in commit.items
        if not it.source_node_id.startswith("sm_") and it.attached_from is None
    ]


def _result(store, sid, caller, call_id, text):
    return dag.append(
        store, sid, "tool", text, name="Bash", caller=caller, metadata={"tool_use_id": call_id}
    )


@settings(max_examples=25, deadline=None, database=None)
@given(ops=OPS, pick=st.randoms(use_true_random=False), which=st.integers(0, 1))
def test_commit_items_follow_branch_path(tmp_path_factory, ops, pick, which):
    pipeline = PIPELINES[which]
    store = open_store(tmp_path_factory.mktemp("paths"))
    counter = itertools.count()
    try:
        s = dag.create_session(store)
        sessions = [s.id]
        sid = s.id
        for op in ops:
            n = next(counter)
            nodes = [c for c in dag.branch_path(store, sid)]
            if op == "turn" or not nodes:
                dag.append(store, sid, "user", f"u{n}")
                a = dag.append(
                    store,
                    sid,
                    "assistant",
                    [TextBlock(text=f"a{n}"), ToolUseBlock(id=f"t{n}", name="Bash")],
                )
                _result(store, sid, a.id, f"t{n}", f"r{n}")
            elif op == "late_tool":
                head = store.get_node(store.get_session(sid).head)
                if head.role == "assistant":
                    _result(store, sid, head.id, f"late{n}", f"late{n}")
            elif op == "edit":
                users = [c for c in nodes if c.role == "user" and c.caller is None]
                dag.edit(store, sid, pick.choice(users).id, output=f"edited{n}")
                dag.append(store, sid, "assistant", f"after edit {n}")
            elif op == "retry_tool":
                tools = [c for c in nodes if c.role == "tool"]
                if tools:
                    dag.retry(store, sid, pick.choice(tools).id)
            elif op == "checkout":
                convo = [c for c in nodes if c.caller is None]
                dag.checkout(store, sid, pick.choice(convo).id)
            elif op == "fork":
                sid = dag.fork(store, sid).id
                sessions.append(sid)
            # commit now and then, so later commits have ancestors at various points
            if op == "commit" or pick.random() < 0.5:
                c = ctxrules.make_commit(sid, now=float(n), store=store, config=pipeline)
                assert _ids(c) == [x.id for x in dag.branch_path(store, sid)]
        for sess in sessions:
            if store.get_session(sess).head is None:
                continue
            c = ctxrules.make_commit(sess, now=1e6, store=store, config=pipeline)
            assert _ids(c) == [x.id for x in dag.branch_path(store, sess)]
            again = ctxrules.make_commit(sess, now=2e6, store=store, config=pipeline)
            assert again.id == c.id
    finally:
        store.close()


def test_a_forks_first_commit_shows_a_tool_retried_before_the_fork(tmp_path):
    """The base's commit predates the retry; the fork's commit must not reuse its stale
    variant (found by the property test above: retry_tool, then fork)."""
    store = open_store(tmp_path)
    try:
        sid = dag.create_session(store).id
        tools = []
        for n in range(3):
            dag.append(store, sid, "user", f"u{n}")
            a = dag.append(
                store,
                sid,
                "assistant",
                [TextBlock(text=f"a{n}"), ToolUseBlock(id=f"t{n}", name="Bash")],
            )
            tools.append(_result(store, sid, a.id, f"t{n}", f"r{n}"))
            if n == 1:  # a commit after the turn whose tool is retried later
                ctxrules.make_commit(sid, now=0.0, store=store, config=PIPELINES[0])
        retried = dag.retry(store, sid, tools[0].id)
        fork = dag.fork(store, sid).id
        for pipeline in PIPELINES:
            c = ctxrules.make_commit(fork, now=1.0, store=store, config=pipeline)
            assert retried.id in _ids(c) and tools[0].id not in _ids(c)
            assert _ids(c) == [x.id for x in dag.branch_path(store, fork)]
    finally:
        store.close()
