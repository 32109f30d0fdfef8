"""``ctxrules render``: the body as sent, ``--json``, ``--explain``, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.commit import make_commit
from ctxrules.importers import import_paths
from ctxrules.providers import get_provider, resolve_model
from ctxrules.render import render
from ctxrules.requests import next_request, render_defaults, request_for
from ctxrules.situation import MAIN_SITUATION
from ctxrules.store import open_store

SESSION = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


@pytest.fixture
def imported(corpus: Path, tmp_path: Path) -> tuple[str, str]:
    store_dir = tmp_path / "store"
    (res,) = import_paths(open_store(store_dir), [str(corpus / SESSION)])
    return str(store_dir), res.id


def _answers(store_dir: str, sid: str) -> list[str]:
    store = open_store(store_dir)
    return [n.id for n in store.nodes(sid) if n.role == "assistant" and n.caller is None]


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_prints_the_body_exactly(imported, provider, capsysbinary):
    store_dir, sid = imported
    last = _answers(store_dir, sid)[-1]
    args = ["render", sid, "--provider", provider, "--store", store_dir, "--for", last]
    assert main(args) == 0
    out = capsysbinary.readouterr().out
    store = open_store(store_dir)
    request = request_for(store, sid, last)
    assert request.situation == ""  # a replay adds no text the agent did not send
    defaults = render_defaults(store, request, provider).options
    expected = render(request.commit, provider, **defaults)
    assert out == expected.body + b"\n"
    assert MAIN_SITUATION.encode() not in out
    assert get_provider(provider).validate(json.loads(out)) == []
    # Asked for, the situation layer (L1) comes from the call tree: a main-conversation head.
    assert main([*args, "--situation"]) == 0
    framed = capsysbinary.readouterr().out
    request = request_for(store, sid, last, situation=True)
    assert request.situation == MAIN_SITUATION
    expected = render(request.commit, provider, situation=request.situation, **defaults)
    assert framed == expected.body + b"\n"
    assert MAIN_SITUATION.encode() in framed


def test_a_final_answer_is_never_rendered_as_a_prefill(imported, capsys):
    """Regression: HEAD of an imported session is its recorded final answer; rendering
    "the next request" there used to send that answer back as a trailing assistant
    message (a prefill).  There is no next request yet: refused, naming --for."""
    store_dir, sid = imported
    store = open_store(store_dir)
    head = store.get_session(sid).head
    assert store.get_node(head).role == "assistant"
    assert main(["render", sid, "--provider", "anthropic", "--store", store_dir, "--now", "0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--for " + head in err[0] and "prefill" in err[0]
    # The request that produced it ends with the user's turn (its tool results).
    args = ["render", sid, "--provider", "anthropic", "--store", store_dir, "--for", head]
    assert main([*args, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)["body"]
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert head not in json.dumps(body)


def test_the_next_request_after_tool_results(imported, capsysbinary):
    """At an assistant turn whose tool calls were answered, the next request is that
    conversation: it ends with the tool results, and equals the commit at that head."""
    store_dir, sid = imported
    store = open_store(store_dir)
    answers = _answers(store_dir, sid)
    with_calls = [a for a in answers if store.children(a, session_id=sid, edge="caller")]
    head = with_calls[-1]
    args = ["render", sid, "--provider", "anthropic", "--store", store_dir, "--head", head]
    assert main([*args, "--now", "0"]) == 0
    out = capsysbinary.readouterr().out
    commit = make_commit(sid, head, now=0, store=store)
    request = next_request(store, sid, head, now=0)
    assert request.commit.id == commit.id and request.situation == ""
    expected = render(commit, "anthropic", **render_defaults(store, request, "anthropic").options)
    assert out == expected.body + b"\n"
    assert json.loads(out)["messages"][-1]["role"] == "user"
    # ... and it is the request for the answer that came next.
    nxt = answers[answers.index(head) + 1]
    assert request_for(store, sid, nxt).commit.id == commit.id
    # Regression: on an imported session the predicted cache was always "none" (its
    # commits have no parents).  The previous request is the one for ``head`` itself,
    # sent before its tool results came back; ten seconds after the last of them the
    # cache is warm and everything up to ``head``'s request is read.
    sent = max(c.created_at for c in store.children(head, session_id=sid, edge="caller"))
    assert main([*args, "--now", str(sent + 10), "--json", "--explain"]) == 0
    ex = json.loads(capsysbinary.readouterr().out)["explain"]
    assert ex["previous_request"]["for_node"] == head
    assert ex["cache"]["warm"] is True and ex["cache_read_tokens"] > 0
    assert ex["predicted_cache"]["previous_commit"] is not None
    # An hour later the 5-minute cache has expired: nothing is read, all is written.
    assert main([*args, "--now", str(sent + 3600), "--json", "--explain"]) == 0
    cold = json.loads(capsysbinary.readouterr().out)["explain"]
    assert cold["cache"]["warm"] is False and cold["cache_read_tokens"] == 0
    # Everything is written but the request's own framing after the last breakpoint
    # (the primed reply: Claude Code's recorded uncached input is those few tokens).
    reply = resolve_model(f"anthropic:{cold['model']}").rule("request")
    assert reply > 0 and cold["cache_write_tokens"] == cold["input_tokens"] - reply


def test_for_refuses_what_is_not_an_answer(imported, capsys):
    store_dir, sid = imported
    store = open_store(store_dir)
    user = next(n.id for n in store.nodes(sid) if n.role == "user")
    base = ["render", sid, "--provider", "anthropic", "--store", store_dir]
    assert main([*base, "--for", user]) == 1
    assert main([*base, "--for", "n_missing"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "not an assistant answer" in err[0] and "no node" in err[1]


def test_json_and_explain(imported, capsys, corpus):
    store_dir, sid = imported
    last = _answers(store_dir, sid)[-1]
    args = ["render", sid, "--provider", "anthropic", "--store", store_dir, "--json", "--explain"]
    assert main([*args, "--for", last]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["endpoint"] == "/v1/messages" and doc["for_node"] == last
    assert doc["body"]["messages"][0]["role"] == "user"
    ex = doc["explain"]
    assert 1 <= len(ex["breakpoints"]) <= 4
    # Tool results in the session file, counted here with plain JSON: all rendered paired.
    lines = [json.loads(x) for x in (corpus / SESSION).read_text().splitlines()]
    results = sum(
        1
        for e in lines
        if isinstance(e.get("message", {}).get("content"), list)
        for b in e["message"]["content"]
        if b.get("type") == "tool_result"
    )
    body_results = sum(
        1 for m in doc["body"]["messages"] for b in m["content"] if b["type"] == "tool_result"
    )
    assert body_results == results == 12
    assert ex["degraded_tool_items"] == 0
    # The estimate states its rules; the previous request is the previous answer's.
    assert ex["estimate"]["tokenizer"] == "o200k_base"
    # Framing: each tool_use and tool_result block, each message's turn marker, the
    # request's own, and the line breaks of the text blocks and the system text.
    a = resolve_model(f"anthropic:{ex['model']}")
    body = doc["body"]
    system = body.get("system") or []
    texts = [system] if isinstance(system, str) else [b.get("text", "") for b in system]
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [b["text"] for b in content if b.get("type") == "text"]
    assert ex["estimate"]["framing_tokens"] == round(
        a.rule("tool_block") * body_results * 2
        + a.rule("message") * len(body["messages"])
        + a.rule("request")
        + a.rule("line_break") * sum(t.count("\n") for t in texts)
    )
    assert ex["previous_request"]["for_node"] == _answers(store_dir, sid)[-2]
    assert ex["cache"]["warm"] is True and 0 < ex["cache"]["elapsed_seconds"] < 300
    assert 0 < ex["cache_read_tokens"] <= ex["input_tokens"]
    p = ex["predicted_cache"]
    assert p["total_tokens"] == ex["input_tokens"]
    assert 0 < p["shared_tokens"] <= p["total_tokens"]
    # The answer node carries the recorded usage: shown beside the estimate.
    assert ex["recorded"]["input_tokens"] == 17437


def test_a_later_clock_shrinks_the_predicted_hit(imported, capsys):
    """Aging old tool results (a later --now) rewrites early items: less prefix is shared."""
    store_dir, sid = imported
    last = _answers(store_dir, sid)[-1]
    base = ["render", sid, "--provider", "anthropic", "--store", store_dir, "--json", "--explain"]
    base += ["--for", last]
    assert main([*base, "--now", "0", "--config", _config(store_dir, tail_turns=100)]) == 0
    wide = json.loads(capsys.readouterr().out)["explain"]
    assert main([*base, "--now", "0", "--config", _config(store_dir, tail_turns=1)]) == 0
    narrow = json.loads(capsys.readouterr().out)["explain"]
    assert narrow["states"].get("aged", {}).get("items", 0) > 0
    assert narrow["tokens"]["L2_task"]["tool"] < wide["tokens"]["L2_task"]["tool"]


def _config(folder: str, *, tail_turns: int) -> str:
    path = Path(folder) / f"ctxrules-{tail_turns}.toml"
    path.write_text(f"[rules.tool_aging]\ntail_turns = {tail_turns}\n")
    return str(path)


def test_errors_are_one_line(imported, capsys):
    store_dir, sid = imported
    assert main(["render", sid, "--provider", "nope", "--store", store_dir]) == 1
    assert main(["render", "s_missing", "--provider", "gemini", "--store", store_dir]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("ctxrules render: error:") for e in err)


def test_demo_shows_request_sizes_and_cache_hits(tmp_path, capsys):
    assert main(["demo", "--store", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "rendered requests per turn" in out
    table = out[out.index("rendered requests per turn") :]
    rows = [line for line in table.splitlines() if "%" in line]
    assert rows, table
    for row in rows:
        hit = int(row.split("│")[-2].strip().rstrip("%"))
        assert 0 <= hit <= 100
        cached, sent = row.split("│")[-3].split("/")
        assert int(cached.replace(",", "")) <= int(sent.replace(",", ""))
