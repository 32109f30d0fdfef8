"""Fixtures for tests that run over every store backend (SQLite, in-memory, PostgreSQL).

Each store is seen only through the ``CommitStore`` Protocol (``ProtocolOnly``), so a
test that passes here passes for any backend implementing it.
"""

from __future__ import annotations

import json

import pytest

from ctxrules.store import CommitStore, open_store
from ctxrules.store.memory import forget

#: Every store backend; "postgres" runs on the test run's own server (``pg_server``).
BACKENDS = ("sqlite", "memory", "postgres")


def protocol_members(proto: type) -> set[str]:
    """Public members a Protocol declares, its Protocol bases' included."""
    out: set[str] = set()
    for cls in proto.__mro__:
        if cls is object or not getattr(cls, "_is_protocol", False):
            continue
        out |= {n for n in vars(cls) if not n.startswith("_")}
        out |= set(getattr(cls, "__annotations__", {}))
    return out


MEMBERS = protocol_members(CommitStore)


class ProtocolOnly:
    """A store that refuses every attribute the Protocol does not declare."""

    def __init__(self, inner: CommitStore):
        self._inner = inner
        self.used: set[str] = set()

    def __getattr__(self, name: str):
        if name not in MEMBERS:
            raise AttributeError(f"a caller used {name!r}, which CommitStore does not declare")
        self.used.add(name)
        return getattr(self._inner, name)


@pytest.fixture
def protocol_only() -> type[ProtocolOnly]:
    """The ``ProtocolOnly`` wrapper class, for tests that wrap stores themselves."""
    return ProtocolOnly


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """The backend a test runs over: ``sqlite``, ``memory`` or ``postgres``."""
    return request.param


@pytest.fixture
def store_location(backend, tmp_path, request):
    """``store_location(name)``: the location ``name`` of the backend for this test (a
    directory under ``tmp_path``, ``memory:…``, or the URL of a new PostgreSQL schema);
    the same name, the same store."""
    names: set[str] = set()
    schemas: dict[str, str] = {}

    def location(name: str = "store") -> str:
        if backend == "sqlite":
            return str(tmp_path / name)
        if backend == "postgres":
            if name not in schemas:
                schemas[name] = request.getfixturevalue("pg_server").new_store()
            return schemas[name]
        names.add(f"{tmp_path}/{name}")
        return f"memory:{tmp_path}/{name}"

    yield location
    for mem in names:
        forget(mem)
    for url in schemas.values():
        request.getfixturevalue("pg_server").drop_store(url)


@pytest.fixture
def make_store(store_location):
    """``make_store(name)``: a new store of the backend behind ``ProtocolOnly``."""
    opened: list[ProtocolOnly] = []

    def make(name: str = "store") -> ProtocolOnly:
        opened.append(ProtocolOnly(open_store(store_location(name))))
        return opened[-1]

    yield make
    for st in opened:
        st.close()


@pytest.fixture
def any_store(make_store):
    """An empty store of each backend, seen only through the Protocol."""
    return make_store()


@pytest.fixture
def cli_import(tmp_path, corpus, capsys):
    """``cli_import(*files)``: ``ctxrules import`` corpus files (paths relative to the
    corpus) into a new store under ``tmp_path``; returns the store path and the ids of
    the sessions, in the order the command printed them."""

    def run(*files: str) -> tuple[str, list[str]]:
        from ctxrules.cli import main

        store = str(tmp_path / "store")
        argv = ["import", *(str(corpus / f) for f in files), "--store", store, "--json"]
        assert main(argv) == 0, capsys.readouterr().err
        return store, [s["id"] for s in json.loads(capsys.readouterr().out)["sessions"]]

    return run


def default_sigint() -> None:
    """``preexec_fn`` of a child a test stops with SIGINT: SIGINT acts as it does in a
    terminal, even where the test run itself was started with SIGINT ignored (a shell's
    background job), which every child would inherit."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
