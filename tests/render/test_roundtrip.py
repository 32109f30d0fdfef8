"""Round-trip: every recorded request body of the corpus, imported and rendered for the
wire it was recorded on with no rules (preset ``off``), is the recorded body.

Each file of recorded traffic (vcrpy, Ruby VCR and httprr recordings of the Anthropic
Messages, OpenAI Chat Completions, OpenAI Responses and Gemini APIs) is imported with
``cassette-all`` (one session per call), and the request at each session's HEAD is
rendered for its own provider with what the session recorded
(``ctxrules.requests.render_defaults``).  The body must equal the recorded one as JSON
(key order aside) — except ``stream`` / ``stream_options``, how the client read the
answer, which a render never sends (docs/sessions.md).  The expected values are the
recorded bodies themselves, read with plain JSON parsing.

Goal (issue 20): at least 95 % of the bodies, on the fit and the validation set
(``tests/corpus.py``) alike.  ``MISSES`` lists every body that does not round-trip,
with why; a listed body that starts to round-trip, or a new miss, fails the test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.corpus import CORPUS, entries

from ctxrules.cli import main
from ctxrules.commit import make_commit
from ctxrules.config import PipelineConfig
from ctxrules.errors import EmptyTranscriptError
from ctxrules.importers import import_paths
from ctxrules.render import render, render_sessions
from ctxrules.requests import Request, explain_request, render_defaults
from ctxrules.store import open_store

#: The corpus kinds that record provider traffic.
KINDS = ("cassette-yaml", "cassette-yaml-pydantic-ai", "cassette-yaml-ruby-vcr", "httprr")
#: Body fields of how a client reads the answer, never rendered.
TRANSPORT = frozenset({"stream", "stream_options"})
#: The round-trip goal, per split.
GOAL = 0.95
OFF = PipelineConfig.preset("off")

#: Every recorded body that does not round-trip ("file#interaction"), and why.
MISSES: dict[str, str] = {}
#: Recordings of a call whose request body was not recorded (nothing to round-trip).
NO_BODY = {"vcr-cassettes-yaml/gemini/ddtrace__vertexai_generate_content_score.yaml"}


def differences(ours: Any, recorded: Any, at: str = "$") -> list[str]:
    """Where two JSON values differ (dict key order aside), as JSON paths."""
    if type(ours) is not type(recorded):
        return [f"{at}: {type(ours).__name__} instead of {type(recorded).__name__}"]
    if isinstance(ours, dict):
        out = []
        for k in sorted(set(ours) | set(recorded)):
            if k not in ours:
                out.append(f"{at}.{k}: missing")
            elif k not in recorded:
                out.append(f"{at}.{k}: not recorded")
            else:
                out.extend(differences(ours[k], recorded[k], f"{at}.{k}"))
        return out
    if isinstance(ours, list):
        out = [] if len(ours) == len(recorded) else [f"{at}: {len(ours)} not {len(recorded)} long"]
        for i, (a, b) in enumerate(zip(ours, recorded)):
            out.extend(differences(a, b, f"{at}[{i}]"))
        return out
    return [] if ours == recorded else [f"{at}: differs"]


def _body(store: Any, session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request at the session's HEAD rendered for its recorded provider, and the
    recorded body (both without the transport fields)."""
    meta = store.get_session(session).metadata
    provider = meta["provider"]
    commit = make_commit(session, None, now=0.0, store=store, config=OFF)
    request = Request(session_id=session, commit=commit, situation="", sent_at=0.0)
    options = render_defaults(store, request, provider).options
    ours = json.loads(render(commit, provider, **options).body)
    recorded = json.loads(meta["request_body"])
    strip = lambda body: {k: v for k, v in body.items() if k not in TRANSPORT}  # noqa: E731
    return strip(ours), strip(recorded)


def round_trips(tmp: Path) -> dict[str, tuple[str, list[str]]]:
    """Every recorded body of the corpus: "file#interaction" → (split, differences).
    A recording of no request body at all (``NO_BODY``) has none to compare."""
    store = open_store(tmp / "store")
    out: dict[str, tuple[str, list[str]]] = {}
    for entry in entries(kind=KINDS):
        name = entry["path"]
        try:
            imported = import_paths(store, [str(CORPUS / entry["path"])], format="cassette-all")
        except EmptyTranscriptError:
            out[name] = (entry["split"], ["no recorded request body"])
            continue
        for res in imported:
            interaction = store.get_session(res.id).metadata["interaction"]
            ours, recorded = _body(store, res.id)
            out[f"{name}#{interaction}"] = (entry["split"], differences(ours, recorded))
    store.close()
    return out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str]]]:
    return round_trips(tmp_path_factory.mktemp("roundtrip"))


def rates(outcomes: dict[str, tuple[str, list[str]]]) -> dict[str, tuple[int, int]]:
    """(round-tripped, bodies) per split and for the whole corpus."""
    out: dict[str, tuple[int, int]] = {}
    for split in ("fit", "validation", None):
        rows = [
            d
            for key, (s, d) in outcomes.items()
            if (split is None or s == split) and key not in NO_BODY
        ]
        out[split or "corpus"] = (sum(not d for d in rows), len(rows))
    return out


def test_recorded_bodies_round_trip(outcomes):
    found = rates(outcomes)
    report = ", ".join(f"{k} {ok}/{n} ({ok / n:.1%})" for k, (ok, n) in found.items())
    print(f"\nround-trip: {report}")
    assert {k for k, (_, d) in outcomes.items() if d == ["no recorded request body"]} == NO_BODY
    misses = {k: d for k, (_, d) in outcomes.items() if d and k not in NO_BODY}
    for key in sorted(misses):
        print(f"  {key}: {MISSES.get(key, 'NEW')} — {'; '.join(misses[key][:3])}")
    assert sorted(set(misses) - set(MISSES)) == [], "new misses (see the report above)"
    assert sorted(set(MISSES) - set(misses)) == [], "listed misses that now round-trip"
    for split in ("fit", "validation"):
        ok, n = found[split]
        assert n > 0 and ok / n >= GOAL, (split, ok, n)


def test_the_difference_finder_sees_what_differs():
    """The comparison the rate rests on: key order aside, anything else counts."""
    assert differences({"a": 1, "b": [1, {"c": "x"}]}, {"b": [1, {"c": "x"}], "a": 1}) == []
    assert differences({"a": [1]}, {"a": [1, 2]}) == ["$.a: 1 not 2 long"]
    assert differences({"a": {"t": True}}, {"a": {"t": 1}}) == ["$.a.t: bool instead of int"]
    assert differences({"x": "1"}, {}) == ["$.x: not recorded"]
    assert re.fullmatch(r"\$\.m\[0\]: differs", differences({"m": ["a"]}, {"m": ["b"]})[0])


# -- with rules: only what a rule changed differs --------------------------------------

TOOL_VARIATIONS = "vcr-cassettes-yaml/anthropic/chatlas__test_anthropic_tool_variations.yaml"
#: Every tool result aged (a stub instead of the output): the rule changes those only.
AGED = PipelineConfig.preset(
    "off", pipeline=["tool_aging"], rules={"tool_aging": {"tail_turns": 0, "step_turns": 1}}
)


def test_a_rule_changes_only_what_it_changed(tmp_path: Path):
    """With tool results aged, the messages holding an aged result are rewritten and
    nothing else differs from the recording (the tool calls, whose arguments the rule
    left alone, the system, the tools, the other messages); the rewritten messages
    keep their recorded breakpoints; ``--explain`` names each and the rule's reason."""
    store = open_store(tmp_path / "store")
    sid = import_paths(store, [str(CORPUS / TOOL_VARIATIONS)], format="cassette-all")[-1].id
    recorded = json.loads(store.get_session(sid).metadata["request_body"])
    commit = make_commit(sid, None, now=0.0, store=store, config=AGED)
    aged = {it.source_node_id for it in commit.items if it.state == "aged"}
    where = sorted({store.get_node(n).metadata["index"] for n in aged})
    assert len(where) == 2, "both tool results of the recording are aged"
    request = Request(session_id=sid, commit=commit, situation="", sent_at=0.0)
    options = render_defaults(store, request, "anthropic").options
    ours = json.loads(render(commit, "anthropic", **options).body)
    found = [d for d in differences(ours, recorded) if not d.startswith("$.stream")]
    assert found and all(d.startswith("$.messages[") for d in found), found
    assert sorted({int(re.match(r"\$\.messages\[(\d+)\]", d)[1]) for d in found}) == where
    for i in where:
        ours_m, rec_m = ours["messages"][i], recorded["messages"][i]
        assert [b["type"] for b in ours_m["content"]] == [b["type"] for b in rec_m["content"]]
        assert ["cache_control" in b for b in ours_m["content"]] == [
            "cache_control" in b for b in rec_m["content"]
        ]
    assert any("cache_control" in b for i in where for b in recorded["messages"][i]["content"])
    explained = explain_request(store, request, "anthropic", previous=None)["round_trip"]
    assert explained["recorded_for"] == "anthropic" and explained["system_as_recorded"]
    assert [c["element"] for c in explained["rewritten"]] == where
    assert explained["as_recorded"] == explained["elements"] - len(where)
    for c in explained["rewritten"]:
        assert c["changed"] == [
            {"node": n, "state": "aged", "reason": "tail_window"}
            for n in sorted(aged)
            if store.get_node(n).metadata["index"] == c["element"]
        ]
    store.close()


def test_the_incremental_renderer_writes_the_same_bodies(tmp_path: Path):
    """The session renderer's resume path lays out the same recorded form: each
    request of a session rendered incrementally is the body rendered alone, for every
    prefix of a recorded conversation (the recorded elements of the earlier messages,
    the canonical form where the commit ends mid-message)."""
    store = open_store(tmp_path / "store")
    for rel, provider in (
        (TOOL_VARIATIONS, "anthropic"),
        ("vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml", "gemini"),
        ("vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml", "openai-chat"),
    ):
        sid = import_paths(store, [str(CORPUS / rel)], format="cassette-all")[-1].id
        heads = [n.id for n in store.nodes(sid) if n.caller is None]
        commits = [make_commit(sid, h, now=0.0, store=store, config=OFF) for h in heads]
        requests = [Request(session_id=sid, commit=c, situation="", sent_at=0.0) for c in commits]
        options = [render_defaults(store, r, provider).options for r in requests]
        alone = [render(c, provider, **o).body for c, o in zip(commits, options)]
        (together,) = render_sessions([commits], [provider], options=[options])
        assert [r.body for r in together[0]] == alone, rel
        assert json.loads(alone[-1]).get("messages", json.loads(alone[-1]).get("contents"))
    store.close()


def test_explain_says_what_went_out_as_recorded(tmp_path: Path, capsys):
    """``ctxrules render --explain`` of a replayed recording with no rules: every
    recorded message as recorded, the system as recorded, said in one line."""
    store_dir = tmp_path / "store"
    store = open_store(store_dir)
    sid = import_paths(store, [str(CORPUS / TOOL_VARIATIONS)], format="cassette-all")[-1].id
    elements = len(json.loads(store.get_session(sid).metadata["request_body"])["messages"])
    store.close()
    argv = ["render", sid, "--store", str(store_dir), "--provider", "anthropic"]
    assert main([*argv, "--preset", "off", "--explain"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        f"round-trip (recorded for anthropic): {elements} of {elements} recorded messages "
        "as recorded, system as recorded"
    ) in out
