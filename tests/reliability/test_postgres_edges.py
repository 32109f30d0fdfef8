"""Probes: the PostgreSQL store at its edges (hardening, second round).

- Eight ``ctxrules import``s of the same files at once into a fresh schema all exit 0:
  one creates each session, the others report it "already imported".
- A busy timeout PostgreSQL or SQLite cannot hold (``1e308``, ``3e6`` s) is a one-line
  error naming the setting.
- A URL that does not parse (``postgresql://[::1``) is a one-line error.
- A statement timeout set in the URL or on the role (``ALTER ROLE … SET
  statement_timeout``) ends a statement in a ``StoreError``; on the command line, one
  line.
- After the server restarts, reads reconnect, and a running ``ctxrules view`` answers
  its next request (200).
- A frozen server (SIGSTOP) ends a read or a write in bounded time with a
  ``StoreError``, and once it thaws the store goes on.

Against the code before: 1–3 of the eight imports exited 1 ("session … exists
already"); ``OverflowError`` and ``lock_timeout`` tracebacks; a ``ValueError``
traceback; a ``QueryCanceled`` escaping the store (a traceback on the command line);
every read after the restart failed ("lost the connection") and the viewer answered
400 to every request until restarted; the frozen server hung the client until it thawed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ctxrules import dag
from ctxrules.errors import StoreError
from ctxrules.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from _cli import ctxrules, one_line_error, tau_sessions, together
from tests._pg_watchdog import children
from tests.postgres_server import PostgresServer

IMPORTS = 8


def test_concurrent_imports_of_the_same_files_all_succeed(pg_server, tmp_path):
    url = pg_server.new_store()
    source = tau_sessions(tmp_path, 3, start=60)
    outs = together(IMPORTS, "import", str(source), "--store", url)
    lines = [line for out in outs for line in out.splitlines()]
    created = [line.split()[1].rstrip(":") for line in lines if line.startswith("imported ")]
    found = [line.split()[2].rstrip(":") for line in lines if line.startswith("already imported")]
    assert len(created) == len(set(created)) == 3  # each session created once
    assert len(found) == 3 * (IMPORTS - 1) and set(found) == set(created)
    store = open_store(url)
    try:
        assert sorted(s.id for s in store.list_sessions()) == sorted(created)
    finally:
        store.close()
    pg_server.drop_store(url)


@pytest.mark.parametrize("value", ["1e308", "3e6", "nan", "-1"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_busy_timeout_out_of_range_is_one_line(pg_server, tmp_path, backend, value):
    store = pg_server.new_store() if backend == "postgres" else str(tmp_path / "store")
    open_store(store).close()
    env = {**os.environ, "CTXRULES_BUSY_TIMEOUT": value}
    proc = ctxrules("sessions", "--store", store, env=env)
    one_line_error(proc, "CTXRULES_BUSY_TIMEOUT", value)


def test_a_url_that_does_not_parse_is_one_line():
    one_line_error(ctxrules("sessions", "--store", "postgresql://[::1"), "not a PostgreSQL URL")


def test_a_statement_timeout_of_the_url_is_a_store_error(pg_server):
    url = pg_server.new_store()
    timed = url.replace("options=", "options=-cstatement_timeout%3D100%20")
    store = open_store(timed)
    try:
        with pytest.raises(StoreError, match="cancelled a statement"):
            with store.transaction() as conn:
                conn.execute("SELECT pg_sleep(2)")
        with pytest.raises(StoreError, match="cancelled a statement"):
            store._conn.execute("SELECT pg_sleep(2)")  # a read outside a transaction
        assert store.list_sessions() == []  # and the store goes on
    finally:
        store.close()
    pg_server.drop_store(url)


@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own: these probes restart and freeze it."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        try:
            _thaw(server)
        finally:
            server.stop()


def _server_pids(server: PostgresServer) -> list[int]:
    main = int((server.data / "postmaster.pid").read_text().split()[0])
    return [main, *children(main)]


def _signal_server(server: PostgresServer, sig: int) -> None:
    for pid in _server_pids(server):
        with contextlib.suppress(ProcessLookupError):  # a backend that just ended
            os.kill(pid, sig)


def _freeze(server: PostgresServer) -> None:
    _signal_server(server, signal.SIGSTOP)


def _thaw(server: PostgresServer) -> None:
    if (server.data / "postmaster.pid").exists():
        _signal_server(server, signal.SIGCONT)


def _restart(server: PostgresServer) -> None:
    data = str(server.data)
    server._run("pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
    server._run("pg_ctl", "-D", data, "-l", str(server.log), "-w", "start")


def test_reads_reconnect_after_a_server_restart(own_server):
    url = own_server.new_store()
    store = open_store(url)
    try:
        sid = dag.create_session(store).id
        dag.append(store, sid, "user", "before the restart")
        _restart(own_server)
        assert [s.id for s in store.list_sessions()] == [sid]
        assert [n.output for n in store.nodes(sid)] == ["before the restart"]
        dag.append(store, sid, "user", "after")  # and writes too
    finally:
        store.close()


def _get(port: int, path: str) -> tuple[int, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        conn.close()


def test_a_running_viewer_survives_a_server_restart(own_server, tmp_path):
    url = own_server.new_store()
    source = tau_sessions(tmp_path, 2, start=40)
    assert ctxrules("import", str(source), "--store", url).returncode == 0
    viewer = subprocess.Popen(
        [sys.executable, "-m", "ctxrules", "view", "--store", url, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = viewer.stdout.readline()  # type: ignore[union-attr]
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        status, sessions = _get(port, "/api/sessions")
        assert status == 200 and isinstance(sessions, list) and len(sessions) == 2
        _restart(own_server)
        # Each answer below needs the store: one asked before and one never asked.
        status, again = _get(port, "/api/sessions")
        assert status == 200, again
        assert [s["id"] for s in again] == [s["id"] for s in sessions]  # type: ignore[index]
        sid = sessions[0]["id"]  # type: ignore[index]
        status, graph = _get(port, f"/api/graph?session={sid}")
        assert status == 200 and graph["nodes"], graph  # type: ignore[index]
    finally:
        os.killpg(viewer.pid, signal.SIGINT)
        _, err = viewer.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]


def test_a_statement_timeout_of_the_role_is_one_line(own_server, tmp_path):
    role, schema = "ctxrules_slow", "slow_store"
    with own_server.connect() as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {role}")
    url = own_server.url(schema=schema).replace("postgres@", f"{role}@")
    source = tau_sessions(tmp_path, 1, start=50)
    assert ctxrules("import", str(source), "--store", url).returncode == 0
    with own_server.connect() as admin:
        admin.execute(f"ALTER ROLE {role} SET statement_timeout = '500ms'")
    env = {**os.environ, "CTXRULES_BUSY_TIMEOUT": "60"}  # the lock wait outlasts the role's
    holder = own_server.connect()
    try:
        # Every statement on the sessions table now waits for the lock; the role's
        # statement timeout (0.5 s), not the store's lock timeout (60 s), ends the wait.
        holder.execute("BEGIN")
        holder.execute(f"LOCK TABLE {schema}.sessions IN ACCESS EXCLUSIVE MODE")
        one_line_error(ctxrules("sessions", "--store", url, env=env), "cancelled a statement")
        store = open_store(url)
        try:
            with pytest.raises(StoreError, match="cancelled a statement"):
                store.list_sessions()
            with pytest.raises(StoreError, match="cancelled a statement"):
                with store.transaction():
                    dag.create_session(store)
        finally:
            store.close()
        holder.execute("ROLLBACK")
        proc = ctxrules("sessions", "--store", url, env=env)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr  # the store goes on
    finally:
        holder.close()
        with own_server.connect() as admin:
            admin.execute(f"ALTER ROLE {role} RESET statement_timeout")


def _bounded(call, seconds: float) -> BaseException | None:
    """Run ``call`` in a thread; what it raised, or a failure if it still runs after
    ``seconds``."""
    caught: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            caught.append(None)
        except BaseException as exc:
            caught.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(seconds)
    assert caught, f"still waiting on a frozen server after {time.monotonic() - started:.0f} s"
    return caught[0]


@pytest.mark.parametrize("during", ["read", "write"])
def test_a_frozen_server_ends_in_a_store_error(own_server, during):
    url = own_server.new_store()
    store = open_store(url, busy_timeout=0.5)  # statement timeout 11 s, client 16 s
    try:
        sid = dag.create_session(store).id
        dag.append(store, sid, "user", "kept")

        def read() -> None:
            store.nodes(sid)

        def write() -> None:
            with store.transaction():
                dag.append(store, sid, "user", "first")
                _freeze(own_server)
                dag.append(store, sid, "user", "second")

        if during == "read":
            _freeze(own_server)
        try:
            exc = _bounded(read if during == "read" else write, 60)
        finally:
            _thaw(own_server)
        assert isinstance(exc, StoreError) and "did not answer" in str(exc), repr(exc)
        assert [n.output for n in store.nodes(sid)] == ["kept"]  # reconnected; none of it
    finally:
        store.close()
