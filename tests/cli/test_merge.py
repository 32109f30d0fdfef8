"""``ctxrules attach`` and ``ctxrules merge`` on sessions imported from the corpus into an
SQLite store: the pointer, the dry-run request, the recorded merge, and what ``log`` and
``commit --json`` show of it."""

from __future__ import annotations

import json

import pytest

from ctxrules.cli import main
from ctxrules.store import open_store
from engine.test_merge import state

RELIABILITY = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"
INIT = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
JAPANESE = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
NOW = "2026-01-01T00:00:00Z"
ANSWER = {
    "id": "msg_merge",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Merged: one plan from both sessions."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 9000, "output_tokens": 12},
}


def run(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def fails(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code != 0 and not out
    return err


def history(store_path: str, *sessions: str) -> dict:
    """Nodes, HEAD, metadata and commits of each session, read from the store."""
    store = open_store(store_path)
    try:
        return state(store, sessions)
    finally:
        store.close()


def texts(body: dict) -> list[str]:
    return [
        b["text"]
        for m in body["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b["type"] == "text"
    ]


def test_attach_stages_a_pointer(cli_import, capsys):
    store, (target, source) = cli_import(RELIABILITY, INIT)
    commit = json.loads(run(capsys, "commit", source, "--store", store, "--now", NOW, "--json"))
    out = json.loads(
        run(capsys, "attach", target[:8], source[:8], "--store", store, "--now", NOW, "--json")
    )
    assert out["session"] == source and out["commit"] == commit["id"]
    assert out["head"] == commit["head_node_id"] and out["locked"] is False
    log = run(capsys, "log", target, "--store", store)
    line = next(x for x in log.splitlines()[1:] if out["node"] in x)
    assert f"[attach {source} at {out['head']} (commit {commit['id']})]" in line
    assert line.endswith("<- HEAD")
    # the next request carries the block: the commit at the pointer shows it
    at = json.loads(run(capsys, "commit", target, "--store", store, "--now", NOW, "--json"))
    assert {it["attached_from"] for it in at["items"]} == {None, commit["id"]}
    err = fails(capsys, "attach", target, source, "--head", "n_nope", "--store", store)
    assert "n_nope" in err


def test_merge_dry_run_then_answer(cli_import, capsys, tmp_path):
    store, (target, first, second) = cli_import(RELIABILITY, INIT, JAPANESE)
    before = history(store, target, first, second)
    args = [
        "merge",
        target,
        first[:10],
        second,
        "--base",
        first,
        "--instruction",
        "Combine both sessions into one plan.",
        "--store",
        store,
        "--now",
        NOW,
    ]
    # --dry-run: the request as it would be sent, and nothing stored
    body = json.loads(run(capsys, *args, "--dry-run"))
    assert history(store, target, first, second) == before
    sent = texts(body)
    assert sent[-1] == "Combine both sessions into one plan."
    for sid in (first, second):
        assert sum(t.startswith(f"<attached session {sid} at ") for t in sent) == 1
    dry = json.loads(run(capsys, *args, "--dry-run", "--json"))
    assert dry["dry_run"] and dry["body"] == body and len(dry["parent_ids"]) == 3
    assert history(store, target, first, second) == before

    # --answer: recorded, the merge commit stored, the peers marked
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(ANSWER))
    out = json.loads(run(capsys, *args, "--answer", str(answer), "--json"))
    assert [p["session"] for p in out["peers"]] == [second, first]  # the base last
    assert [p["base"] for p in out["peers"]] == [False, True]
    assert out["parent_ids"] == dry["parent_ids"]  # (node ids, so commit ids, are new)
    peers = [
        json.loads(run(capsys, "commit", sid, "--store", store, "--now", NOW, "--json"))["id"]
        for sid in (second, first)
    ]
    assert out["parent_ids"][1:] == peers

    # commit --json at the instruction shows the merge commit and its parents
    shown = json.loads(
        run(capsys, "commit", target, "--head", out["node"], "--store", store, "--json")
    )
    assert shown["id"] == out["commit"] and shown["parent_ids"] == out["parent_ids"]
    assert {it["attached_from"] for it in shown["items"]} == {None, *peers}
    # log: the merge line in the target, where each peer went in the peers
    log = run(capsys, "log", target, "--store", store)
    line = next(x for x in log.splitlines()[1:] if out["node"] in x)
    assert f"[merge of {second} at " in line and f"{first} at " in line and "(base)" in line
    assert "Combine both sessions" in line
    head = next(x for x in log.splitlines() if x.endswith("<- HEAD"))
    assert out["answer"] in head and "Merged: one plan" in head
    for sid in (first, second):
        peer_log = run(capsys, "log", sid, "--store", store)
        assert f"into session {target} at {out['node']} (merge commit {out['commit']})" in peer_log
    # the same heads again: attached in the target already, refused
    err = fails(capsys, *args, "--answer", str(answer))
    assert "attached in session" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--answer", "missing.json"], "no such file"),
        (["--answer", "BAD"], "not JSON"),
        (["--answer", "EMPTY"], "holds no content"),
        (["--base", "s_nope", "--dry-run"], "s_nope"),
    ],
)
def test_merge_refusals_store_nothing(cli_import, capsys, tmp_path, extra, message):
    store, (target, peer) = cli_import(RELIABILITY, INIT)
    (tmp_path / "BAD").write_text("{not json")
    (tmp_path / "EMPTY").write_text(json.dumps({**ANSWER, "content": []}))
    extra = [str(tmp_path / e) if e in ("BAD", "EMPTY") else e for e in extra]
    before = history(store, target, peer)
    err = fails(capsys, "merge", target, peer, "--instruction", "merge", "--store", store, *extra)
    assert message in err
    assert history(store, target, peer) == before


def test_merge_needs_an_answer_or_a_dry_run(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["merge", "s_a", "s_b", "--instruction", "x"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["merge", "s_a", "s_b", "--instruction", "x", "--dry-run", "--answer", "f"])
    assert "not allowed with" in capsys.readouterr().err


def test_attach_prices_the_commit_at_the_model_of_the_next_request(tmp_path, capsys):
    # The target's answers are gpt-5's (an openai-chat session), so its next request goes
    # to gpt-5 and the source's commit is made with the rules priced at gpt-5's cache, as
    # ``attach(config=engine)`` makes it — not at the provider's default model (gpt-4o),
    # whose prices decide otherwise (tests/engine/test_priced_commits.py).
    from ctxrules import dag
    from ctxrules.commit import persist
    from ctxrules.config import PipelineConfig
    from ctxrules.context_sources import SourcesConfig
    from ctxrules.engine import Engine, EngineConfig

    path = str(tmp_path / "store")
    store = open_store(path)
    try:
        store.create_session(session_id="s_target", metadata={"provider": "openai-chat"})
        dag.append(store, "s_target", "user", "Where are the handlers?", created_at=1.0)
        dag.append(store, "s_target", "assistant", "In pkg0.", name="gpt-5", created_at=2.0)
        store.create_session(session_id="s_source", metadata={})
        dag.append(store, "s_source", "user", "Try the other package.", created_at=1.0)
        dag.append(store, "s_source", "assistant", "Done: pkg9.", name="gpt-5", created_at=2.0)
    finally:
        store.close()
    out = json.loads(run(capsys, "attach", "s_target", "s_source", "--store", path, "--json"))
    store = open_store(path)
    try:
        engine = Engine(
            store,
            EngineConfig(
                provider="openai-chat",
                sources=SourcesConfig(git_status=False, instruction_files=False, date=False),
            ),
            pipeline=PipelineConfig.preset("default"),
        )
        priced = engine.pipeline_for("gpt-5").version
        assert priced != engine.pipeline_for("gpt-4o").version  # the premise
        assert persist.load(store, out["commit"]).rules_version == priced
        # --model names the next request's model: gpt-4o's prices then
        dag.append(store, "s_source", "user", "And pkg10?", created_at=3.0)
    finally:
        store.close()
    out = json.loads(
        run(
            capsys, "attach", "s_target", "s_source", "--model", "gpt-4o", "--store", path, "--json"
        )
    )
    store = open_store(path)
    try:
        assert (
            persist.load(store, out["commit"]).rules_version
            == engine.pipeline_for("gpt-4o").version
        )
    finally:
        store.close()
