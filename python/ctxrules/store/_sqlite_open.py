"""Opening a SQLite store without touching what is not ours: inspect, create atomically,
and name the process holding the write lock.

A file is inspected before anything writes to it: its header is read as plain bytes
(the magic string and ``application_id``, which our stores carry), and only a file
without an ``application_id`` is opened, read-only, to check for our schema (stores
made before the id existed).  Anything else is refused and left byte for byte as it
was.  A new store is built in a temporary file and linked into place complete, so a
store file is never empty or half made: an empty file is never ours.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import sys
from pathlib import Path

from ..errors import StoreError
from .migrations import apply_pending

__all__ = [
    "APPLICATION_ID",
    "create_store_file",
    "inspect_store_file",
    "sqlite_error",
    "write_lock_holder",
]

#: ``PRAGMA application_id`` of every ctxrules store: "ctxr" in ASCII.
APPLICATION_ID = 0x63747872
_MAGIC = b"SQLite format 3\x00"
_HINT = "point --store / CTXRULES_STORE at a new directory or at a ctxrules store"


def _refuse(path: Path, what: str) -> StoreError:
    return StoreError(f"not a ctxrules store: {what}", where=str(path), hint=_HINT)


def inspect_store_file(path: Path) -> bool:
    """Whether ``path`` is an existing store of ours (``False``: no file there yet).

    ``StoreError`` for anything else; the file is only read.
    """
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        raise _refuse(path, "it is a directory") from None
    except OSError as exc:
        raise StoreError(f"cannot read the store: {exc.strerror}", where=str(path)) from None
    if not header:
        raise _refuse(path, "an empty file (ctxrules never leaves its store file empty)")
    if len(header) < 100 or not header.startswith(_MAGIC):
        raise _refuse(path, "not a SQLite database")
    app_id = int.from_bytes(header[68:72], "big")
    if app_id == APPLICATION_ID:
        return True
    if app_id != 0:
        raise _refuse(path, f"a SQLite database of another program (application_id {app_id:#x})")
    _check_old_schema(path)
    return True


def _check_old_schema(path: Path) -> None:
    """Accept a store made before stores carried an ``application_id``; refuse the rest."""
    # Without a -wal file everything is in the main file, and ``immutable`` reads it with
    # no lock and no side files; with one, a plain read-only open reads it through.
    wal = Path(f"{path}-wal").exists()
    uri = f"{path.absolute().as_uri()}?mode=ro" + ("" if wal else "&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise _refuse(path, f"cannot be read as SQLite ({exc})") from None
    try:
        objects = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
        tables = {n for t, n in objects if t == "table"}
        cols = {r[1] for r in conn.execute("PRAGMA table_info(schema_migrations)")}
        first = None
        if {"version", "name"} <= cols:
            first = conn.execute("SELECT name FROM schema_migrations WHERE version = 1").fetchone()
    except sqlite3.Error as exc:
        raise _refuse(path, f"cannot be read as SQLite ({exc})") from None
    finally:
        conn.close()
    if not objects:
        raise _refuse(path, "an empty SQLite database (ctxrules creates its own)")
    if not tables:
        kinds = sorted({t for t, _ in objects})
        raise _refuse(path, f"a SQLite database holding only {', '.join(kinds)}s")
    if "schema_migrations" in tables and first is None:
        raise _refuse(
            path, "its schema_migrations table is another tool's (no ctxrules history graph)"
        )
    if first != ("history_graph",) or not {"sessions", "nodes"} <= tables:
        shown = ", ".join(sorted(tables)[:5])
        raise _refuse(path, f"a SQLite database with other tables ({shown})")


def sqlite_error(exc: sqlite3.Error, location: str, doing: str = "") -> StoreError:
    """A ``sqlite3`` error as one line naming the store and what to do."""
    name = getattr(exc, "sqlite_errorname", "") or ""  # Python 3.11+
    text = str(exc)
    low = text.lower()
    during = f" while {doing}" if doing else ""
    if name == "SQLITE_FULL" or "disk is full" in low:
        return StoreError(
            f"the disk holding the store is full{during}; nothing of this write was stored",
            where=location,
            hint="free some space and run it again",
        )
    if (
        name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
        or "malformed" in low
        or ("not a database" in low)
    ):
        return StoreError(
            f"the store is damaged ({text})",
            where=location,
            hint="restore it from a backup; `sqlite3 FILE .recover` saves what can still be read",
        )
    if name.startswith("SQLITE_IOERR") or "i/o error" in low:
        return StoreError(
            f"an I/O error{during}: {text}; nothing of this write was stored",
            where=location,
            hint="check the disk (space, health, a network filesystem that went away)",
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in low:
        return StoreError(
            f"the store cannot be written ({text})",
            where=location,
            hint="check the permissions of the store's folder and files",
        )
    return StoreError(
        f"the store failed{during}: {text}",
        where=location,
        hint="check the store's file and disk, then run it again",
    )


def create_store_file(path: Path) -> None:
    """Make a new store file at ``path`` complete or not at all (see the module docstring).

    The registered migrations build the schema in a temporary file beside ``path``,
    which is synced, then hard-linked to ``path``; if another process linked its store
    there first, that one is kept.
    """

    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.new")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            apply_pending(conn, str(path))
            conn.execute("COMMIT")
        finally:
            conn.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return  # another process created the store first: use that one
        except OSError:
            if path.exists():
                return
            os.replace(tmp, path)  # a file system without hard links
        _sync_dir(path.parent)
    except OSError as exc:
        raise StoreError(
            f"cannot create the store: {exc.strerror}",
            where=str(path),
            hint="pass --store PATH or set CTXRULES_STORE to a writable place",
        ) from None
    except sqlite3.Error as exc:
        mapped = sqlite_error(exc, str(path), "creating it")
        raise StoreError(
            f"cannot create the store: {mapped.message}", where=str(path), hint=mapped.hint
        ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _sync_dir(folder: Path) -> None:
    # The link is durable only once the directory entry is; not every OS can open one.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# In WAL mode SQLite's write lock is a POSIX lock on one byte of the -shm file: byte 120
# (the shared-memory lock area starts there; the write lock is its first slot).  Asking
# the kernel who holds that byte names the writing process without any cooperation.
_WRITE_LOCK_BYTE = 120
_FLOCK = "hhqqi4x"  # Linux struct flock: type, whence, start, len, pid


def write_lock_holder(path: str) -> str | None:
    """``"pid N: command"`` of the process holding the store's write lock, if it can be
    told (Linux, a holder on this host); ``None`` otherwise."""
    if not sys.platform.startswith("linux"):
        return None
    # deferred: fcntl exists on POSIX only
    import fcntl

    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY)
    except OSError:
        return None
    try:
        probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, _WRITE_LOCK_BYTE, 1, 0)
        kind, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    finally:
        os.close(fd)
    if kind == fcntl.F_UNLCK or pid <= 0:
        return None
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    command = " ".join(raw.decode(errors="replace").replace("\0", " ").split())  # one line
    if len(command) > 80:
        command = command[:79] + "…"
    return f"pid {pid}: {command}" if command else f"pid {pid}"
