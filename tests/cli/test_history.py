"""The history-graph commands: import, sessions, log, checkout, fork (JSON and text)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import pytest

from ctxrules.cli import main

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def cli(*args, store, process=False):
    """Run a command: in this process (fast), or as a real ``python -m ctxrules``."""
    argv = [*args, "--store", str(store)]
    if process:
        cmd = [sys.executable, "-m", "ctxrules", *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@pytest.fixture
def imported(corpus, tmp_path):
    store = tmp_path / "store"
    out = cli("import", str(corpus / CC), "--json", store=store)
    assert out.returncode == 0, out.stderr
    return store, json.loads(out.stdout)["sessions"]


def test_import_json_and_sessions(corpus, imported):
    store, sessions = imported
    lines = [json.loads(x) for x in (corpus / CC).read_text().splitlines()]
    n_results = sum(
        1
        for e in lines
        if isinstance(e["message"]["content"], list)
        for b in e["message"]["content"]
        if b.get("type") == "tool_result"
    )
    (s,) = sessions
    assert set(s) == {"id", "calls", "source"}  # the shape issue 3 specifies
    assert s["source"] == str(corpus / CC)
    listed = json.loads(cli("sessions", "--json", store=store).stdout)
    every = {"id", "created_at", "head", "source", "import_key", "base_session", "base_node"}
    every |= {"base_seq", "metadata", "calls", "created", "model", "title"}
    assert [set(r) for r in listed] == [every]  # every SessionInfo field, and the derived ones
    assert [(r["id"], r["calls"], r["source"]) for r in listed] == [
        (s["id"], s["calls"], s["source"])
    ]
    assert listed[0]["head"]
    log = json.loads(cli("log", s["id"], "--json", store=store).stdout)
    assert len(log) == s["calls"]
    assert sum(n["role"] == "tool" for n in log) == n_results
    fields = {
        "id",
        "seq",
        "created_at",
        "role",
        "session_id",
        "name",
        "input",
        "output",
        "predecessor",
        "caller",
        "reads",
        "metadata",
    }
    assert all(set(n) == fields for n in log)
    assert [n["seq"] for n in log] == sorted(n["seq"] for n in log)
    again = cli("import", str(corpus / CC), "--json", store=store)
    assert json.loads(again.stdout)["sessions"] == sessions  # found, not duplicated
    assert json.loads(cli("sessions", "--json", store=store).stdout) == listed
    assert "already imported" in cli("import", str(corpus / CC), store=store).stdout


def test_log_tree_marks_head_and_branches(imported, tmp_path):
    store, (s,) = imported
    log = json.loads(cli("log", s["id"], "--json", store=store).stdout)
    first_user = next(n for n in log if n["role"] == "user")
    out = cli("log", s["id"], store=store)
    assert out.returncode == 0, out.stderr
    assert "<- HEAD" in out.stdout and "branch" not in out.stdout
    # Check out an early node, fork there: the fork's log shows the shared history.
    co = cli("checkout", s["id"], first_user["id"], "--json", store=store)
    assert co.returncode == 0, co.stderr
    assert json.loads(co.stdout)["head"] == first_user["id"]
    fk = json.loads(cli("fork", s["id"], first_user["id"], "--json", store=store).stdout)
    assert fk["head"] == first_user["id"] and fk["base_session"] == s["id"]
    assert fk["base_node"] == first_user["id"] and fk["id"] != s["id"]
    fork_log = json.loads(cli("log", fk["id"], "--json", store=store).stdout)
    assert len(fork_log) == len(log)  # everything is shared, nothing copied
    listed = {r["id"]: r for r in json.loads(cli("sessions", "--json", store=store).stdout)}
    assert listed[fk["id"]]["calls"] == 0


def test_errors_are_one_line(imported, tmp_path):
    store, _ = imported
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user"\n')
    for args in (("import", str(bad)), ("log", "s_nope"), ("checkout", "s_nope", "n_x")):
        out = cli(*args, store=store, process=True)  # a real process shows any traceback
        assert out.returncode == 1
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_user_errors_are_one_clear_line_without_a_traceback(corpus, tmp_path, capsys):
    """Bad paths, bad bytes and unknown ids: exit 1, one line naming the place, no write."""
    store = tmp_path / "store"
    assert main(["import", str(corpus / CC), "--store", str(store), "--json"]) == 0
    sid = json.loads(capsys.readouterr().out)["sessions"][0]["id"]
    (tmp_path / "dir").mkdir()
    (tmp_path / "garbage.jsonl").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "a_file").write_text("not a store")
    cases = [
        (["import", str(tmp_path / "missing.jsonl")], "no such file"),
        (["import", str(tmp_path / "dir")], "no transcript in the directory"),
        (["import", str(tmp_path / "garbage.jsonl")], "not UTF-8 text"),
        (["import", str(tmp_path / "empty.jsonl")], "the file is empty"),
        (["import", str(tmp_path / "empty.jsonl"), "--format", "claude-code"], "no lines"),
        (["log", "s_nope"], "no session 's_nope'"),
        (["checkout", sid, "n_nope"], "no node 'n_nope'"),
        (["checkout", "s_nope", "n_nope"], "no session 's_nope'"),
        (["fork", sid, "n_nope"], "no node 'n_nope'"),
        (["fork", sid, ""], "empty node id"),
        (["checkout", sid, ""], "empty node id"),
    ]
    for argv, what in cases:
        assert main([*argv, "--store", str(store)]) == 1, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and what in err, (argv, err)
        if argv[0] == "import":
            assert argv[1] in err and "nothing was imported" in err  # where, and what now
    assert main(["sessions", "--json", "--store", str(store)]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [sid]  # nothing written
    assert main(["sessions", "--store", str(tmp_path / "a_file")]) == 1
    err = capsys.readouterr().err
    assert "a_file" in err and "--store" in err
    assert (tmp_path / "a_file").read_text() == "not a store"


def test_log_tree_shows_a_branch(corpus, tmp_path):
    src = corpus / "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    lines = src.read_text().splitlines()
    second = json.loads(lines[1])
    edited = dict(second, uuid="edited-0000", message={"role": "user", "content": "EDITED"})
    path = tmp_path / "branched.jsonl"
    path.write_text("\n".join([*lines, json.dumps(edited)]) + "\n")
    store = tmp_path / "store"
    (s,) = json.loads(cli("import", str(path), "--json", store=store).stdout)["sessions"]
    tree = cli("log", s["id"], store=store).stdout.splitlines()
    assert [x.strip() for x in tree if x.strip().startswith("branch")] == [
        "branch 1/2",
        "branch 2/2",
    ]
    head_line = next(x for x in tree if "<- HEAD" in x)
    assert "EDITED" in head_line and head_line.startswith("*")
    # Checking out the original prompt moves HEAD there and says < 1/2 >.
    log = json.loads(cli("log", s["id"], "--json", store=store).stdout)
    original = next(
        n for n in log if n["metadata"].get("claude_code", {}).get("uuid") == second["uuid"]
    )
    out = cli("checkout", s["id"], original["id"], store=store)
    assert out.returncode == 0 and "< 1/2 >" in out.stdout
    tree = cli("log", s["id"], store=store).stdout.splitlines()
    assert "EDITED" not in next(x for x in tree if "<- HEAD" in x)
    out = cli("checkout", s["id"], original["id"], "--leaf", "--json", store=store)
    assert json.loads(out.stdout)["head"] == log[-2]["id"]  # that branch's newest end


def test_plugins_lists_the_builtin_importers(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ctxrules", "plugins", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    row = rows["builtin_importers"]
    assert "register_importers" in row["hooks"]
    assert {
        "claude-code",
        "openai-chat",
        "anthropic-messages",
        "swe-agent",
        "openhands",
        "cassette",
        "cassette-all",
    } <= set(row["provides"]["importers"])


def test_log_tree_of_a_session_retried_at_every_turn(tmp_path):
    """One branch per turn nests deeper than Python's recursion limit: still one line per
    node, two branch markers per retried turn, HEAD on the last line."""
    from ctxrules import dag
    from ctxrules.cli.log import tree_lines
    from ctxrules.model import Node
    from ctxrules.store import open_store

    st = open_store(tmp_path / "deep")
    turns, nodes, prev = 1100, [], None
    for i in range(turns):  # one transaction: 2,200 single appends would be 2,200 fsyncs
        for k in ("a", "b"):  # the turn and its retry, siblings under the same node
            nodes.append(
                Node(
                    id=f"{k}{i}",
                    seq=0,
                    created_at=0.0,
                    role="user",
                    output=f"q{i}",
                    predecessor=prev,
                )
            )
        prev = nodes[-1].id
    s = st.create_session(session_id="deep", nodes=nodes, head=prev)
    lines = tree_lines(dag.load_graph(st, s.id))
    st.close()
    markers = [x for x in lines if x.strip().startswith("branch")]
    assert len(markers) == 2 * turns
    assert len(lines) - len(markers) == 2 * turns  # every node once
    assert lines[-1].endswith("<- HEAD") and "q1099" in lines[-1]
