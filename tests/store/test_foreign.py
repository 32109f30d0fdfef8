"""Foreign files stay foreign: a ``--store`` that is not a ctxrules store is refused with
one clear line and left byte for byte as it was (no journal-mode switch, no tables, no
side files); stores of ours, including ones made before stores carried an
``application_id``, keep opening."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.errors import StoreError
from ctxrules.store import APPLICATION_ID, open_store


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def other_program(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.execute("INSERT INTO users VALUES ('ada')")
    conn.commit()
    conn.close()


def rails_style(path: Path) -> None:
    # Rails (and several other tools) keep applied migrations in a table of this name
    # with one text column.
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO schema_migrations VALUES ('20240101000000')")
    conn.commit()
    conn.close()


def empty_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=0")  # a valid database file with no schema
    conn.execute("VACUUM")
    conn.close()


def only_views(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIEW answer AS SELECT 42 AS x")
    conn.commit()
    conn.close()


def empty_file(path: Path) -> None:
    path.write_bytes(b"")


def not_sqlite(path: Path) -> None:
    path.write_bytes(b"this is not sqlite\n" * 300)


def foreign_app_id(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id=1234")
    conn.execute("CREATE TABLE sessions (id TEXT)")  # our table names do not make it ours
    conn.commit()
    conn.close()


CASES = [
    ("app.sqlite", other_program, "other tables"),
    ("rails.db", rails_style, "schema_migrations"),
    ("blank.db", empty_sqlite, "empty SQLite database"),
    ("views.db", only_views, "views"),
    ("notes.txt", empty_file, "empty file"),
    ("junk.db", not_sqlite, "not a SQLite database"),
    ("tagged.db", foreign_app_id, "application_id"),
]


@pytest.mark.parametrize(("name", "make", "what"), CASES, ids=[c[0] for c in CASES])
def test_a_foreign_file_is_refused_and_left_unchanged(tmp_path, capsys, name, make, what):
    path = tmp_path / name
    make(path)
    before = digest(path)
    with pytest.raises(StoreError, match=what):
        open_store(path)
    assert main(["sessions", "--store", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "not a ctxrules store" in err
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no -wal / -shm left


def test_new_stores_carry_our_application_id(tmp_path):
    open_store(tmp_path / "s").close()
    conn = sqlite3.connect(tmp_path / "s" / "ctxrules.db")
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_store_made_before_application_ids_still_opens(tmp_path):
    st = open_store(tmp_path / "old")
    st.create_session(session_id="kept")
    st.close()
    db = tmp_path / "old" / "ctxrules.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA application_id=0")  # what earlier versions left
    conn.commit()
    conn.close()
    st = open_store(tmp_path / "old")
    assert [s.id for s in st.list_sessions()] == ["kept"]
    st.close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID  # stamped
    conn.close()


def test_an_empty_store_location_is_an_error(capsys, monkeypatch, tmp_path):
    with pytest.raises(StoreError, match="empty"):
        open_store("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXRULES_STORE", "")
    with pytest.raises(StoreError, match=r"CTXRULES_STORE is set but empty"):
        open_store()
    assert not (tmp_path / ".ctxrules").exists()
    monkeypatch.delenv("CTXRULES_STORE")
    assert main(["sessions", "--store", ""]) == 1
    err = capsys.readouterr().err
    assert "--store" in err and err.count("\n") == 1
