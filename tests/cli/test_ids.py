"""Ids as people type them: a full id or a unique prefix names a session, node or commit
(``ctxrules.dag.resolve_*``), on every command and over both store backends; an
ambiguous prefix lists candidates and what to do, an unknown one says so."""

from __future__ import annotations

import json

import pytest

from ctxrules import dag
from ctxrules.cli import main
from ctxrules.errors import AmbiguousIdError, DagError, NotFoundError
from ctxrules.model import Node
from ctxrules.store import open_store

Q1, A1, Q2, A2 = "n_q1first", "n_a1first", "n_q2second", "n_a2second"


def _chain(*spec: tuple[str, str, str]) -> list[Node]:
    out, prev = [], None
    for node_id, role, text in spec:
        out.append(
            Node(id=node_id, seq=0, created_at=10.0, role=role, output=text, predecessor=prev)
        )
        prev = node_id
    return out


def _fill(store) -> None:
    """Sessions s_alpha1, s_alpha2 (a shared prefix), s_beta and s_a (a full id that is
    also a prefix of the alphas); s_alpha1 holds two turns."""
    nodes = _chain(
        (Q1, "user", "one?"),
        (A1, "assistant", "one."),
        (Q2, "user", "two?"),
        (A2, "assistant", "2"),
    )
    store.create_session(session_id="s_alpha1", nodes=nodes, head=A2)
    store.create_session(
        session_id="s_alpha2", nodes=_chain(("n_other", "user", "hi")), head="n_other"
    )
    store.create_session(
        session_id="s_beta", nodes=_chain(("m_only", "user", "beta")), head="m_only"
    )
    store.create_session(session_id="s_a")


@pytest.fixture
def filled(make_store):
    store = make_store()
    _fill(store)
    return store


# -- the resolver ------------------------------------------------------------------------


def test_sessions_by_full_id_or_unique_prefix(filled):
    assert dag.resolve_session(filled, "s_alpha1").id == "s_alpha1"
    assert dag.resolve_session(filled, "s_b").id == "s_beta"
    assert dag.resolve_session(filled, "s_a").id == "s_a"  # a full id wins over a prefix
    with pytest.raises(AmbiguousIdError) as exc:
        dag.resolve_session(filled, "s_al")
    assert exc.value.candidates == ["s_alpha1", "s_alpha2"]
    text = str(exc.value)
    assert "ambiguous" in text and "s_alpha1" in text and "s_alpha2" in text
    assert "type more characters" in text and "ctxrules sessions" in text
    with pytest.raises(NotFoundError, match="no session 's_zz'"):
        dag.resolve_session(filled, "s_zz")
    with pytest.raises(DagError, match="empty session id"):
        dag.resolve_session(filled, "")


def test_nodes_resolve_within_the_session_and_what_it_inherits(filled):
    assert dag.resolve_node(filled, "s_alpha1", "n_q1").id == Q1
    assert dag.resolve_node(filled, "s_alpha1", A2).id == A2
    with pytest.raises(AmbiguousIdError) as exc:
        dag.resolve_node(filled, "s_alpha1", "n_q")
    assert exc.value.candidates == [Q1, Q2]
    assert "ctxrules log s_alpha1" in str(exc.value)
    # s_alpha2's node is not a candidate in s_alpha1, by prefix or by full id
    with pytest.raises(NotFoundError, match="no node 'n_ot'"):
        dag.resolve_node(filled, "s_alpha1", "n_ot")
    with pytest.raises(DagError, match="not part of session"):
        dag.resolve_node(filled, "s_alpha1", "n_other")
    with pytest.raises(DagError, match="empty node id"):
        dag.resolve_node(filled, "s_alpha1", "")
    fork = dag.fork(filled, "s_alpha1", A1)
    assert dag.resolve_node(filled, fork.id, "n_q1").id == Q1  # inherited
    dag.append(filled, "s_alpha1", "user", "three?", node_id="n_q3later")
    assert dag.resolve_node(filled, "s_alpha1", "n_q3").id == "n_q3later"
    with pytest.raises(NotFoundError):
        dag.resolve_node(filled, fork.id, "n_q3")  # appended after the fork: not inherited


def test_commits_resolve_in_the_session_and_the_sessions_it_was_forked_from(filled):
    from ctxrules.commit import make_commit
    from ctxrules.config import PipelineConfig

    off = PipelineConfig.preset("off")
    mine = make_commit("s_alpha1", now=100.0, store=filled, config=off).id
    other = make_commit("s_beta", now=100.0, store=filled, config=off).id
    assert dag.resolve_commit(filled, "s_alpha1", mine[:10]) == mine
    assert dag.resolve_commit(filled, "s_alpha1", mine) == mine
    fork = dag.fork(filled, "s_alpha1", A2)
    assert dag.resolve_commit(filled, fork.id, mine[:10]) == mine  # the base's history
    assert dag.resolve_commit(filled, "s_alpha1", other) == other  # a full id: any session
    with pytest.raises(NotFoundError, match="no commit"):
        dag.resolve_commit(filled, "s_alpha1", other[:10])  # a prefix: this session's only
    early = make_commit("s_alpha1", Q2, now=100.0, store=filled, config=off).id
    with pytest.raises(AmbiguousIdError) as exc:
        dag.resolve_commit(filled, "s_alpha1", "cc_")
    assert sorted(exc.value.candidates) == sorted([mine, early])


def test_an_ambiguous_prefix_names_a_few_candidates_and_counts_the_rest(make_store):
    store = make_store()
    for i in range(8):
        store.create_session(session_id=f"s_many{i}")
    with pytest.raises(AmbiguousIdError) as exc:
        dag.resolve_session(store, "s_m")
    assert len(exc.value.candidates) == 8
    text = str(exc.value)
    shown = [f"s_many{i}" for i in range(8) if f"s_many{i}" in text]
    assert shown == [f"s_many{i}" for i in range(dag.SHOWN_CANDIDATES)]
    assert f"and {8 - dag.SHOWN_CANDIDATES} more" in text


# -- every command -----------------------------------------------------------------------


@pytest.fixture
def cli(store_location, capsys):
    """``cli(*argv, code=0)``: run a command on a filled store of this backend; returns
    stdout (stderr when ``code`` is not 0)."""
    location = store_location("cli")
    store = open_store(location)
    _fill(store)
    store.close()

    def run(*argv: str, code: int = 0) -> str:
        rc = main([*argv, "--store", location])
        out = capsys.readouterr()
        assert rc == code, out.err
        return out.out if code == 0 else out.err

    return run


def test_log_checkout_and_fork_take_prefixes(cli):
    assert cli("log", "s_alph", code=1).count("\n") == 1
    assert cli("log", "s_b").splitlines()[0].startswith("session s_beta ")
    assert json.loads(cli("log", "s_b", "--json")) == json.loads(cli("log", "s_beta", "--json"))
    moved = json.loads(cli("checkout", "s_alpha1", "n_q1", "--json"))
    assert (moved["session"], moved["head"], moved["node"]) == ("s_alpha1", Q1, Q1)
    assert f"HEAD is {Q1}" in cli("checkout", "s_alpha1", "n_q1")
    forked = json.loads(cli("fork", "s_alpha1", "n_a1", "--json"))
    assert (forked["base_session"], forked["base_node"], forked["head"]) == ("s_alpha1", A1, A1)


def test_commit_head_and_diff_take_node_and_commit_prefixes(cli):
    base = ("commit", "s_alpha1", "--preset", "off", "--now", "100", "--json")
    early = json.loads(cli(*base, "--head", "n_q2"))
    assert early["head_node_id"] == Q2
    assert json.loads(cli(*base, "--head", Q2))["id"] == early["id"]
    late = json.loads(cli(*base))
    assert late["head_node_id"] == A2
    by_commit = json.loads(cli(*base, "--diff", early["id"][:12]))
    assert (by_commit["a"], by_commit["b"]) == (early["id"], late["id"])
    by_node = json.loads(cli(*base, "--diff", "n_q2"))
    assert (by_node["a"], by_node["b"]) == (early["id"], late["id"])
    err = cli(*base, "--diff", "cc_", code=1)
    assert err.count("\n") == 1 and "ambiguous" in err
    assert early["id"] in err and late["id"] in err
    err = cli(*base, "--diff", "cc_0000000000nope", code=1)
    assert "no commit 'cc_0000000000nope'" in err
    err = cli(*base, "--head", "n_q", code=1)
    assert "ambiguous" in err and Q1 in err and Q2 in err and "Traceback" not in err


def test_render_takes_prefixes(cli):
    args = ("--provider", "anthropic", "--preset", "off", "--now", "100", "--json")
    full = json.loads(cli("render", "s_alpha1", "--head", Q2, *args))
    short = json.loads(cli("render", "s_alpha1", "--head", "n_q2", *args))
    assert short == full and full["session"] == "s_alpha1"
    assert json.loads(cli("render", "s_b", *args))["session"] == "s_beta"
    err = cli("render", "s_al", *args, code=1)
    assert err.count("\n") == 1 and "s_alpha1" in err and "s_alpha2" in err


def test_an_unknown_id_says_so_on_one_line(cli):
    for argv, what in (
        (("log", "s_zz"), "no session 's_zz'"),
        (("checkout", "s_alpha1", "n_zz"), "no node 'n_zz'"),
        (("fork", "s_zz", "n_q1"), "no session 's_zz'"),
        (("commit", "s_alpha1", "--head", "zz", "--preset", "off"), "no node 'zz'"),
    ):
        err = cli(*argv, code=1)
        assert err.count("\n") == 1 and what in err, (argv, err)
