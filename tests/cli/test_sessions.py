"""``ctxrules sessions``: created time, model, format, source and title per session;
``--json`` every field."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from ctxrules.cli import main
from ctxrules.cli.sessions import TITLE
from ctxrules.store import SessionInfo, open_store

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
CASSETTE = "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml"


def _first_request(path) -> str:
    """The first user line of a Claude Code transcript that is not a <wrapper>, read
    straight from the file."""
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") != "user":
            continue
        content = entry["message"]["content"]
        if isinstance(content, list):
            if any(b.get("type") == "tool_result" for b in content):
                continue
            content = " ".join(b.get("text", "") for b in content)
        text = " ".join(content.split())
        if text and not text.startswith("<"):
            return text
    raise AssertionError("no request line")


def _first_time(path) -> float:
    """The earliest time a message or system line of a Claude Code transcript has."""
    times = [
        datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
        for e in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if e.get("type") in ("user", "assistant", "system") and e.get("timestamp")
    ]
    return min(times)


@pytest.fixture
def listed(tmp_path, corpus, capsys):
    store = str(tmp_path / "store")
    summary_file = tmp_path / "summarised.jsonl"
    summary = {"type": "summary", "summary": "Set up  CLAUDE.md\nfor the repo", "leafUuid": "x"}
    summary_file.write_text((corpus / CC).read_text() + json.dumps(summary) + "\n")
    paths = [str(corpus / CC), str(corpus / CASSETTE), str(summary_file)]
    assert main(["import", *paths, "--store", store, "--json"]) == 0
    cc, cassette, summarised = json.loads(capsys.readouterr().out)["sessions"]
    st = open_store(store)
    try:
        st.create_session(session_id="s_titled", metadata={"title": "  My\ttitle "})
    finally:
        st.close()
    log = json.loads(_run(capsys, "log", cc["id"], "--json", "--store", store))
    assert main(["fork", cc["id"], log[3]["id"], "--store", store, "--json"]) == 0
    fork = json.loads(capsys.readouterr().out)
    ids = {"cc": cc["id"], "cassette": cassette["id"], "summarised": summarised["id"]}
    return store, {**ids, "titled": "s_titled", "fork": fork["id"]}


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_json_has_every_field_and_the_derived_ones(listed, capsys, corpus):
    store, ids = listed
    rows = {r["id"]: r for r in json.loads(_run(capsys, "sessions", "--json", "--store", store))}
    assert set(rows) == set(ids.values())
    st = open_store(store)
    try:
        for sid, row in rows.items():
            info = st.get_session(sid)
            for field in SessionInfo.__struct_fields__:
                assert row[field] == getattr(info, field), (sid, field)
            assert set(row) == {*SessionInfo.__struct_fields__, "created", "model", "title"}
            when = datetime.fromisoformat(row["created"])
            assert when.utcoffset() is not None  # ISO 8601 with the offset (UTC)
            # An imported transcript was created when it was recorded; the others (a
            # cassette records no times, a fork, a session made here) when stored.
            recorded = _first_time(corpus / CC) if sid in (ids["cc"], ids["summarised"]) else None
            want = recorded if recorded is not None else info.created_at
            assert when.timestamp() == pytest.approx(want, abs=1e-6)  # µs kept
            assert (recorded is None) == (abs(info.created_at - when.timestamp()) < 1e-3)
    finally:
        st.close()
    recorded = re.search(r"^\s+model: (\S+)$", (corpus / CASSETTE).read_text(), re.M)
    assert recorded and rows[ids["cassette"]]["model"] == recorded.group(1)
    assert rows[ids["titled"]]["model"] is None
    first = _first_request(corpus / CC)
    assert rows[ids["cc"]]["title"] == first
    assert rows[ids["fork"]]["title"] == first  # a fork's history is its base's
    assert rows[ids["summarised"]]["title"] == "Set up CLAUDE.md for the repo"
    assert rows[ids["titled"]]["title"] == "My title"
    assert rows[ids["cassette"]]["title"] == "What is the largest city in the user country?"


def test_the_listing_shows_created_model_source_and_a_cut_title(listed, capsys, corpus):
    store, ids = listed
    rows = {r["id"]: r for r in json.loads(_run(capsys, "sessions", "--json", "--store", store))}
    header, *lines = _run(capsys, "sessions", "--store", store).splitlines()
    columns = ["ID", "CREATED", "(UTC)", "CALLS", "MODEL", "FORMAT", "SOURCE", "TITLE"]
    assert header.split() == columns
    by_id = {line.split()[0]: line for line in lines}
    assert list(by_id) == list(rows)  # oldest first, one line each
    for sid, line in by_id.items():
        created = datetime.fromisoformat(rows[sid]["created"]).astimezone(timezone.utc)
        assert created.strftime("%Y-%m-%d %H:%M") in line
        assert re.search(rf"\s{rows[sid]['calls']}\s", line)
    cassette = by_id[ids["cassette"]]
    assert rows[ids["cassette"]]["model"] in cassette and " cassette " in cassette
    assert CASSETTE.rsplit("/", 1)[1] in cassette
    assert cassette.endswith(rows[ids["cassette"]]["title"])
    first = _first_request(corpus / CC)
    assert len(first) > TITLE  # so the cut shows
    assert by_id[ids["cc"]].endswith(first[: TITLE - 1] + "…")
    assert f"fork of {ids['cc']}" in by_id[ids["fork"]]
    assert by_id[ids["titled"]].endswith("My title")


def test_an_empty_store_says_how_to_fill_it(tmp_path, capsys):
    open_store(tmp_path / "s").close()
    assert "ctxrules import" in _run(capsys, "sessions", "--store", str(tmp_path / "s"))
    assert json.loads(_run(capsys, "sessions", "--json", "--store", str(tmp_path / "s"))) == []
