"""``ReadOnlyView``: every read is the store's; writes of history are refused with the
store untouched; commits made through it (``make_commit``) stay in memory, where
later reads find them, over the stored ones; one store connection per thread when
given an opener."""

from __future__ import annotations

import threading

import pytest

from ctxrules import dag
from ctxrules.commit import make_commit
from ctxrules.config import PipelineConfig
from ctxrules.errors import StoreError
from ctxrules.model import Node
from ctxrules.store import ReadOnlyView, open_store


@pytest.fixture
def session(tmp_path):
    path = str(tmp_path / "store")
    store = open_store(path)
    sid = dag.create_session(store).id
    for i in range(4):
        dag.append(store, sid, "user", f"message {i}", node_id=f"n{i}", created_at=1e9 + i)
    make_commit(sid, "n1", now=1e9 + 1, store=store, config=PipelineConfig())  # one stored
    yield path, store, sid
    store.close()


def test_writes_of_history_are_refused(session):
    _, store, sid = session
    view = ReadOnlyView(store)
    node = Node(id="x", seq=0, created_at=1e9, role="user", output="x")
    for write in (
        lambda: view.append(sid, node),
        lambda: view.set_head(sid, "n0"),
        lambda: view.update_metadata(sid, {"a": 1}),
        lambda: view.create_session(),
        lambda: view.start_run(sid, "r", ttl=5),
    ):
        with pytest.raises(StoreError, match="only reads"):
            write()
    assert store.get_session(sid).head == "n3" and len(store.nodes(sid)) == 4


def test_commits_made_stay_in_memory_over_the_stored_ones(session):
    _, store, sid = session
    stored = store.session_commits(sid)
    view = ReadOnlyView(store)
    made = make_commit(sid, "n3", now=1e9 + 3, store=view, config=PipelineConfig())
    assert store.session_commits(sid) == stored  # nothing written
    assert [r.id for r in view.session_commits(sid)][: len(stored)] == [r.id for r in stored]
    chain = view.commit_chain(made.id)
    assert chain[-1].id == made.id and chain[0].id == stored[0].id  # kept over stored
    again = make_commit(sid, "n3", now=1e9 + 3, store=view, config=PipelineConfig())
    assert again.id == made.id and len(view.session_commits(sid)) == len(stored) + 1


def test_an_opener_gives_each_thread_its_own_store(session):
    path, _, sid = session
    opened = []

    def opener():
        opened.append(open_store(path, create=False))
        return opened[-1]

    view = ReadOnlyView(opener)
    seen = []
    threads = [
        threading.Thread(target=lambda: seen.append(view.get_session(sid).head)) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == ["n3"] * 3 and len(opened) == 4  # the constructing thread's, and three
    view.close()
