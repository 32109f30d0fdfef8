"""``ctxrules compact``: the boundary record printed (and as JSON), partial compactions by
node prefix, one-line errors that store nothing, and the marker in ``ctxrules log``."""

from __future__ import annotations

import json
from pathlib import Path

from ctxrules.cli import main
from ctxrules.commit import boundary_of
from ctxrules.store import open_store

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
NOW = "2026-01-01T00:00:00Z"


def _recorded_model(rel: str) -> str:
    """The model Claude Code recorded on the transcript's first assistant line."""
    path = Path(__file__).parents[1] / "data" / "corpus" / rel
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "assistant" and entry["message"].get("model") != "<synthetic>":
            return str(entry["message"]["model"])
    raise AssertionError(f"no assistant line in {rel}")


def test_compact_prints_the_boundary_record_and_log_marks_it(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    assert main(["compact", sid[:8], "--store", store, "--now", NOW]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"compacted session {sid} (manual): ")
    assert f"tokens (anthropic:{_recorded_model(CC)})" in out[0] and "items folded" in out[0]
    assert out[1].startswith("boundary n_") and "; commit cc_" in out[1]
    assert out[2].startswith("restored in n_") and "1 file(s)" in out[2]
    st = open_store(store)
    nodes = st.nodes(sid)
    record = boundary_of(nodes[-2])
    st.close()
    assert f"{record.tokens_before:,} → {record.tokens_after:,} tokens" in out[0]
    assert main(["log", sid, "--store", store]) == 0
    log = capsys.readouterr().out
    marker = (
        f"── compaction (manual): {record.tokens_before:,} → {record.tokens_after:,} tokens, "
        f"{record.folded_items} items folded ──"
    )
    (line,) = [x for x in log.splitlines() if "compaction" in x]
    assert line == f"* {nodes[-2].id} [{nodes[-2].seq}] {marker}"


def test_compact_json_and_a_partial_compaction(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    assert main(["commit", sid, "--store", store, "--json", "--now", NOW]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    pivot = [it["source_node_id"] for it in items if it["role"] == "assistant"][3]
    argv = ["compact", sid, "--from", pivot[:12], "--instructions", "keep file names"]
    assert main([*argv, "--store", store, "--json", "--now", NOW]) == 0
    result = json.loads(capsys.readouterr().out)
    record = result["record"]
    assert (record["trigger"], record["direction"], record["pivot"]) == ("partial", "from", pivot)
    assert record["instructions"] == "keep file names"
    assert record["tokens_after"] < record["tokens_before"]
    assert result["commit"].startswith("cc_") and result["boundary"].startswith("n_")


def test_errors_are_one_line_and_store_nothing(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    st = open_store(store)
    before = st.nodes(sid)
    st.close()
    for argv, says in [
        (["--from", "n_nowhere"], "n_nowhere"),
        (["--summarizer", "no-such"], "no summarizer named 'no-such'"),
    ]:
        assert main(["compact", sid, "--store", store, "--now", NOW, *argv]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ctxrules compact: error:"), err
        assert says in err
    st = open_store(store)
    assert st.nodes(sid) == before
    st.close()
