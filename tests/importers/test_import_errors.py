"""Failed imports: clear errors naming file, line and what to do; nothing written.
Also format detection and idempotent re-import."""

from __future__ import annotations

import json

import pytest

from ctxrules.errors import ImportFormatError, PluginError, TranscriptWarning
from ctxrules.importers import import_paths

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
TAU = "openai-chat-json/taubench_gpt-4o-airline.json"


def lines_of(corpus):
    return (corpus / CC).read_text().splitlines()


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def assert_nothing_written(store, snapshot, before):
    assert snapshot(store) == before


def test_bad_json_names_the_line(corpus, store, tmp_path, snapshot):
    lines = lines_of(corpus)
    lines[4] = lines[4][:-5] + "]]]" + "}"
    path = write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n")
    before = snapshot(store)
    with pytest.raises(ImportFormatError) as err:
        import_paths(store, [path])
    msg = str(err.value)
    assert f"{path}:5" in msg and "bad JSON" in msg and "nothing was imported" in msg
    assert_nothing_written(store, snapshot, before)


def test_bad_json_under_auto_detection_still_names_the_line(corpus, store, tmp_path, snapshot):
    """Detection must not hide a syntax error behind "unknown format"."""
    doc = json.loads((corpus / "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj").read_text())
    text = json.dumps(doc, indent=2).splitlines()
    text[40] += " oops"  # line 41
    traj = write(tmp_path, "broken.traj", "\n".join(text))
    lines = lines_of(corpus)
    lines[0] = lines[0][:30]  # the first line of a .jsonl cut short
    jsonl = write(tmp_path, "first.jsonl", "\n".join(lines) + "\n")
    for path, line in ((traj, 41), (jsonl, 1)):
        with pytest.raises(ImportFormatError, match="bad JSON") as err:
            import_paths(store, [path])
        assert f"{path}:{line}:" in str(err.value) and "tried:" in str(err.value)
    assert snapshot(store) == []


def test_a_cut_off_last_line_is_skipped_with_a_warning(corpus, store, tmp_path):
    """The usual state of a live session: the line being written has no end yet."""
    text = (corpus / CC).read_text()
    cut = text[: len(text) - 200]  # ends inside the last line, no newline
    path = write(tmp_path, "cut.jsonl", cut)
    whole = write(tmp_path, "whole.jsonl", cut[: cut.rfind("\n") + 1])
    with pytest.warns(TranscriptWarning) as caught:
        (res,) = import_paths(store, [path])
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"{path}:{cut.count(chr(10)) + 1}: the last line is cut off")
    (want,) = import_paths(store, [whole])  # the same lines, complete
    assert res.calls == want.calls > 0


def test_a_truncated_line_in_the_middle_is_an_error(corpus, store, tmp_path, snapshot):
    lines = lines_of(corpus)
    lines[10] = lines[10][:-40]  # cut short, yet followed by more lines
    path = write(tmp_path, "cut.jsonl", "\n".join(lines) + "\n")
    before = snapshot(store)
    with pytest.raises(ImportFormatError, match="bad JSON") as err:
        import_paths(store, [path])
    assert f"{path}:11" in str(err.value)
    assert_nothing_written(store, snapshot, before)


def test_truncated_json_document(corpus, store, tmp_path, snapshot):
    data = (corpus / TAU).read_bytes()[:100_000]
    path = tmp_path / "cut.json"
    path.write_bytes(data)
    with pytest.raises(ImportFormatError, match="truncated"):
        import_paths(store, [str(path)], format="openai-chat")
    assert_nothing_written(store, snapshot, [])


def test_tool_result_without_its_call(corpus, store, tmp_path, snapshot):
    lines = lines_of(corpus)
    # Line 4 is the assistant line holding the first tool_use; line 5 answers it.
    assert '"tool_use"' in lines[3] and '"tool_result"' in lines[4]
    del lines[3]
    path = write(tmp_path, "orphan.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError, match="no tool_use before it") as err:
        import_paths(store, [path])
    assert f"{path}:4" in str(err.value)
    assert_nothing_written(store, snapshot, [])


def test_unknown_structure_names_every_format_tried(store, tmp_path):
    path = write(tmp_path, "what.json", json.dumps({"hello": [1, 2, 3]}))
    with pytest.raises(ImportFormatError) as err:
        import_paths(store, [path])
    msg = str(err.value)
    for name in (
        "claude-code",
        "swe-agent",
        "openhands",
        "cassette",
        "anthropic-messages",
        "openai-chat",
    ):
        assert name in msg
    assert "--format" in msg


def test_forced_wrong_format_fails_cleanly(corpus, store, snapshot):
    with pytest.raises(ImportFormatError):
        import_paths(store, [str(corpus / CC)], format="openhands")
    with pytest.raises(PluginError, match="claude-code"):
        import_paths(store, [str(corpus / CC)], format="no-such-format")
    assert_nothing_written(store, snapshot, [])


def test_a_bad_file_among_good_ones_writes_nothing(corpus, store, tmp_path, snapshot):
    bad = write(tmp_path, "bad.jsonl", '{"type": "user", "uuid": "x"\n')
    with pytest.raises(ImportFormatError):
        import_paths(store, [str(corpus / CC), bad])
    assert_nothing_written(store, snapshot, [])


def test_reimport_is_idempotent(corpus, store, snapshot):
    first = import_paths(store, [str(corpus / CC), str(corpus / TAU)])
    state = snapshot(store)
    again = import_paths(store, [str(corpus / TAU), str(corpus / CC)])
    assert snapshot(store) == state
    assert {r.id for r in again} == {r.id for r in first}
    assert not any(r.created for r in again)
    assert all(r.created for r in first)


def test_half_surrogate_escapes_are_repaired_not_fatal(corpus, store, tmp_path):
    lines = lines_of(corpus)
    entry = json.loads(lines[1])
    entry["message"]["content"][0]["text"] = "cut emoji \ud83d here"
    lines[1] = json.dumps(entry)  # json.dumps escapes the half pair as \\ud83d
    assert "\\ud83d" in lines[1]
    path = write(tmp_path, "surrogate.jsonl", "\n".join(lines) + "\n")
    (res,) = import_paths(store, [path])
    texts = [
        b.text
        for n in store.nodes(res.id)
        if isinstance(n.output, list)
        for b in n.output
        if hasattr(b, "text")
    ]
    assert "cut emoji \ufffd here" in texts
    doc = tmp_path / "surrogate.json"
    doc.write_text(json.dumps([{"role": "user", "content": "half \ud83d"}]))
    (res,) = import_paths(store, [str(doc)])
    assert store.nodes(res.id)[0].output == "half \ufffd"


def test_a_session_that_cannot_be_stored_names_the_file(corpus, store, monkeypatch, snapshot):
    """An importer that builds an unstorable node (a bug, or a corrupt file it missed)
    gets an import error naming the file, and the file writes nothing."""
    from ctxrules.importers import ImportedSession
    from ctxrules.importers.swe_agent import SweAgentImporter
    from ctxrules.model import Node

    good = Node(id="n_ok", seq=0, created_at=0.0, role="user", output="fine")
    bad = Node(id="n_bad", seq=0, created_at=0.0, role="user", output={"not": "content"})

    def sessions(self, path, data, key):
        return [
            ImportedSession(key=key, source=path, format=self.name, nodes=[good, bad], head=None)
        ]

    monkeypatch.setattr(SweAgentImporter, "sessions", sessions)
    path = corpus / "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj"
    before = snapshot(store)
    with pytest.raises(ImportFormatError, match="cannot be stored") as err:
        import_paths(store, [str(path)])
    assert str(path) in str(err.value) and "n_bad" in str(err.value)
    assert snapshot(store) == before
