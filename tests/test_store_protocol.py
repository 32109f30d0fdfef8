"""The ``Store`` Protocol is all the history-graph callers need: the DAG operations, the
importers and the CLI run against a wrapper that forwards only the Protocol's members,
so another backend implementing the Protocol can replace SQLite without touching them."""

from __future__ import annotations

import json

import pytest

import ctxrules.store
from ctxrules import dag
from ctxrules.cli import main
from ctxrules.importers import import_paths
from ctxrules.model import ToolUseBlock
from ctxrules.store import Store, open_store

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
MEMBERS = {n for n in vars(Store) if not n.startswith("_")} | set(Store.__annotations__)


class ProtocolOnly:
    """A store that refuses every attribute the Protocol does not declare."""

    def __init__(self, inner: Store):
        self._inner = inner
        self.used: set[str] = set()

    def __getattr__(self, name: str):
        if name not in MEMBERS:
            raise AttributeError(f"a caller used {name!r}, which Store does not declare")
        self.used.add(name)
        return getattr(self._inner, name)


def test_the_wrapper_refuses_backend_specifics(tmp_path):
    st = ProtocolOnly(open_store(tmp_path / "s"))
    assert isinstance(st, Store)
    with pytest.raises(AttributeError, match="schema_versions"):
        st.schema_versions()
    with pytest.raises(TypeError, match="sesion_id"):
        st.create_session(sesion_id="typo")
    st.close()


def test_dag_operations_and_import_use_only_the_protocol(tmp_path, corpus):
    st = ProtocolOnly(open_store(tmp_path / "s"))
    s = dag.create_session(st)
    u = dag.append(st, s.id, "user", "hi")
    a = dag.append(st, s.id, "assistant", [ToolUseBlock(id="t", name="ls")])
    t = dag.append(st, s.id, "tool", "x", name="ls", caller=a.id)
    dag.retry(st, s.id, t.id)
    e = dag.edit(st, s.id, u.id, output="hello")
    dag.checkout(st, s.id, u.id, to_leaf=True)
    assert dag.siblings(st, s.id, e.id) == (2, 2)
    f = dag.fork(st, s.id, a.id)
    assert [n.id for n in dag.branch_path(st, f.id)][:2] == [u.id, a.id]
    with dag.agent_run(st, s.id, ttl=5):
        pass
    (res,) = import_paths(st, [str(corpus / CC)])
    assert dag.branch_path(st, res.id, nested=True)
    assert {"append", "transaction", "create_session", "is_visible"} <= st.used
    st.close()


def test_cli_history_commands_use_only_the_protocol(tmp_path, corpus, capsys, monkeypatch):
    real = ctxrules.store.open_store
    opened: list[ProtocolOnly] = []

    def wrapped(path=None):
        opened.append(ProtocolOnly(real(path)))
        return opened[-1]

    monkeypatch.setattr(ctxrules.store, "open_store", wrapped)
    store = str(tmp_path / "s")

    def run(*argv):
        assert main([*argv, "--store", store]) == 0, capsys.readouterr().err
        return capsys.readouterr().out

    (s,) = json.loads(run("import", str(corpus / CC), "--json"))["sessions"]
    assert json.loads(run("sessions", "--json"))[0]["id"] == s["id"]
    nodes = json.loads(run("log", s["id"], "--json"))
    assert "<- HEAD" in run("log", s["id"])
    run("checkout", s["id"], nodes[0]["id"])
    assert json.loads(run("fork", s["id"], nodes[0]["id"], "--json"))["head"] == nodes[0]["id"]
    assert len(opened) == 6 and all(w.used for w in opened)  # every command went through it
