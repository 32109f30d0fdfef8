"""Incremental rendering: every request of every corpus session is its full render.

``ctxrules.requests.session_requests`` gives the request of every answer of a session and
``render_requests`` renders them all incrementally (``ctxrules.render.render_sessions``).
The oracle is ``render --for``: each request rendered alone by ``render`` with its
``render_defaults`` options (the recorded or inferred tools, system text, model and
parameters; Anthropic's cache breakpoints) and its situation text.  Under the default
rules and the aggressive ones (which age, clear and fold items inside the prefix); and
with what changes between requests on purpose: a situation text of each request's
own, breakpoints with a TTL.  A spy on the core checks that the bodies really were
built from their predecessors, not rendered whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.corpus import FIRST

from ctxrules import _core
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.errors import RenderError
from ctxrules.importers import import_paths
from ctxrules.model import (
    CompactionBlock,
    Context,
    ContextCommit,
    ContextItem,
    TextBlock,
    ThinkingBlock,
)
from ctxrules.providers import Provider
from ctxrules.render import (
    cache_stats,
    clear_cache,
    render,
    render_session,
    render_sessions,
    set_cache_capacity,
)
from ctxrules.requests import (
    Request,
    render_defaults,
    render_requests,
    session_requests,
    session_tool_names,
)
from ctxrules.store import CommitStore, open_store
from ctxrules.store.memory import forget

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def corpus_requests(
    corpus: Path, where: Path, preset: str, *, situation: bool = False
) -> tuple[CommitStore, list[list[Request]]]:
    """The request of every answer of every corpus session, in order, under ``preset``."""
    files = [str(corpus / f) for f in FIRST]
    store = open_store(f"memory:{where}")
    pipeline = Pipeline.from_config(PipelineConfig.preset(preset))
    sessions = [
        session_requests(store, res.id, config=pipeline, situation=situation)
        for res in import_paths(store, files)
    ]
    return store, [s for s in sessions if s]


class Spy:
    """Records what the core reports it reused, around the real call."""

    def __init__(self) -> None:
        self.reused = 0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        out = self.real(*args, **kwargs)
        self.reused += sum(sum(reused) for _, _, reused, _ in out)
        return out

    real = staticmethod(_core.render_sessions)


@pytest.mark.parametrize(
    ("preset", "variant"),
    [("default", "recorded"), ("aggressive", "recorded"), ("default", "situation+ttl")],
)
def test_every_request_of_the_corpus_is_its_full_render(
    corpus, tmp_path, monkeypatch, request, preset, variant
):
    situation = variant != "recorded"
    store, sessions = corpus_requests(corpus, tmp_path / "s", preset, situation=situation)
    request.addfinalizer(lambda: forget(f"memory:{tmp_path / 's'}"))
    assert len(sessions) >= 200 and sum(map(len, sessions)) > 2000
    assert situation == any(r.situation for s in sessions for r in s)
    ttl = "1h" if situation else None
    spy = Spy()
    monkeypatch.setattr(_core, "render_sessions", spy)
    for provider in PROVIDERS:
        got = render_requests(store, sessions, provider, cache_ttl=ttl)
        total = 0
        for requests, rendered in zip(sessions, got):
            assert len(rendered) == len(requests)
            used = session_tool_names(store, requests[0].session_id)
            for r, inc in zip(requests, rendered):
                defaults = render_defaults(store, r, provider, used_tools=used).options
                full = render(
                    r.commit, provider, situation=r.situation or None, cache_ttl=ttl, **defaults
                )
                assert inc == full, f"{provider}: session {r.session_id}, answer {r.answer}"
                total += len(full.body)
        # Most bytes come from the previous body (measured: 60-90 % on this corpus).
        assert spy.reused > total // 2, (provider, spy.reused, total)
        spy.reused = 0
    assert spy.calls == len(PROVIDERS)


# -- the API on made-up sessions -----------------------------------------------------------


def _item(i: int, role: str, text: str = "", **kw: Any) -> ContextItem:
    return ContextItem(source_node_id=f"n{i}", role=role, rendered=text, tokens=3, **kw)  # type: ignore[arg-type]


def _turn(i: int) -> list[ContextItem]:
    """A question, an answer with a tool call, its result, a closing answer."""
    return [
        _item(4 * i, "user", f"question {i}"),
        _item(4 * i + 1, "assistant", "let me look"),
        _item(
            4 * i + 2,
            "tool",
            f'result {i} "quoted"\n',
            name="ls",
            caller=f"n{4 * i + 1}",
            tool_use_id=f"c{i}",
            tool_input='{"p": 1}',
        ),
        _item(4 * i + 3, "assistant", f"answer {i} "),
    ]


def _commits(lists: list[list[ContextItem]]) -> list[ContextCommit]:
    return [
        ContextCommit(
            id=f"c{k}", session_id="s", head_node_id="h", rules_version="r", items=tuple(items)
        )
        for k, items in enumerate(lists)
    ]


def _growing(turns: int) -> list[ContextCommit]:
    items = [it for i in range(turns) for it in _turn(i)]
    return _commits(
        [items[:k] for k in range(1, len(items) + 1) if items[k - 1].role != "assistant"]
    )


TOOLS = [{"name": "ls", "description": "list", "input_schema": {"type": "object"}}]


def _full(commits, provider, options):
    each = options if isinstance(options, list) else [options] * len(commits)
    return [render(c, provider, **o) for c, o in zip(commits, each)]


def test_options_for_every_request_per_session_or_per_request():
    a, b = _growing(3), _growing(2)
    one = {"system": "be brief", "tools": TOOLS}
    per_request = [{**one, "max_tokens": 100 + k} for k in range(len(b))]
    for provider in PROVIDERS:
        got = render_sessions([a, b], [provider], options=one)
        assert [g[0] for g in got] == [_full(a, provider, one), _full(b, provider, one)]
        got = render_sessions([a, b], [provider], options=[one, per_request])
        assert got[1][0] == _full(b, provider, per_request)
        assert render_session(b, provider, options=per_request) == got[1][0]
    # Several providers in one call: result[session][provider].
    both = render_sessions([a], ["gemini", "anthropic"], options=one)
    assert both[0][1] == _full(a, "anthropic", one)
    with pytest.raises(RenderError, match="2 option entries for 1 sessions"):
        render_sessions([a], ["gemini"], options=[one, one])
    with pytest.raises(RenderError, match="session 0: 1 option mappings for"):
        render_sessions([a], ["gemini"], options=[[one]])
    with pytest.raises(RenderError, match="threads"):
        render_sessions([a], ["gemini"], threads=0)


def test_a_session_that_cannot_be_rendered_is_named_and_the_others_are_not_lost():
    good = _growing(2)
    bad = [good[0], b"\xc1 not a commit"]
    with pytest.raises(RenderError, match="commit 1") as err:
        render_sessions([good, bad], ["openai-chat"])
    assert "session 1" in str(err.value)
    got = render_sessions([good, bad, good], ["openai-chat"], errors="return")
    assert isinstance(got[1][0], RenderError)
    assert got[0][0] == got[2][0] == _full(good, "openai-chat", {})
    # Options the core refuses (nested past the limit) stop only their own session.
    deep: Any = 1
    for _ in range(120):
        deep = [deep]
    opts = [{}, [{}, {"extra": {"x": deep}}, {}]]
    got = render_sessions([good[:2], good[:3]], ["openai-chat"], options=opts, errors="return")
    assert got[0][0] == _full(good[:2], "openai-chat", {})
    assert isinstance(got[1][0], RenderError) and "request 1" in str(got[1][0])


def test_provider_compaction_moves_where_its_vendors_request_starts():
    items = [it for i in range(2) for it in _turn(i)]
    anthropic = CompactionBlock(content="SUMMARY", signature="sig")
    openai = CompactionBlock(encrypted_content="ENC", id="cmp_1", vendor="openai")
    compacting = _item(90, "assistant", "ok", blocks=(anthropic, openai, TextBlock(text="ok")))
    later = [_item(91, "user", "next"), _item(92, "assistant", "fine"), _item(93, "user", "more")]
    lists = [items, [*items, compacting, later[0]], [*items, compacting, *later]]
    commits = _commits(lists)
    for provider in PROVIDERS:
        got = render_session(commits, provider, options={"tools": TOOLS})
        assert got == _full(commits, provider, {"tools": TOOLS})
    after = json.loads(render_session(commits, "anthropic")[2].body)
    assert after["messages"][1]["content"][0]["type"] == "compaction"
    assert "question 0" not in json.dumps(after)


@pytest.mark.parametrize("form", ["objects", "bytes", "mixed", "no cache"])
def test_every_form_of_a_commit_gives_the_same_bodies_and_reuses(monkeypatch, form):
    commits = _growing(4)
    as_bytes = [msgspec.msgpack.encode(c) for c in commits]
    given: list[Any] = {
        "objects": commits,
        "bytes": as_bytes,
        "mixed": [b if k % 2 else c for k, (c, b) in enumerate(zip(commits, as_bytes))],
        "no cache": commits,
    }[form]
    clear_cache()
    capacity = cache_stats()["capacity"]
    if form == "no cache":
        # Nothing is remembered between calls: within one, each item object is still
        # read once for the whole session, so its requests still share their items.
        set_cache_capacity(0)
    spy = Spy()
    monkeypatch.setattr(_core, "render_sessions", spy)
    total = 0
    try:
        for provider in PROVIDERS:
            for threads in (1, 2):
                got = render_sessions(
                    [given], [provider], options={"tools": TOOLS}, threads=threads
                )
                want = _full(commits, provider, {"tools": TOOLS})
                assert got[0][0] == want
                total += sum(len(r.body) for r in want)
    finally:
        set_cache_capacity(capacity)
    # An item given once as bytes and once as an object is prepared twice, the object
    # without its bytes: not proven the same, so mixed forms reuse heads and equal
    # texts only (still the same bodies).
    assert spy.reused > (total // 10 if form == "mixed" else total // 2)


def test_fewer_sessions_than_threads_are_cut_into_pieces(monkeypatch):
    # One session on three threads: three pieces of about equal items, each starting
    # with a request written whole (nothing reused), the bodies unchanged.
    commits = _growing(6)
    seen: list[list[int]] = []
    real = _core.render_sessions

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        seen.extend(reused for _, _, reused, _ in out)
        return out

    monkeypatch.setattr(_core, "render_sessions", spy)
    for threads, pieces in ((1, 1), (2, 2), (3, 3)):
        seen.clear()
        got = render_sessions([commits], ["anthropic"], options={"tools": TOOLS}, threads=threads)
        assert got[0][0] == _full(commits, "anthropic", {"tools": TOOLS})
        (reused,) = seen
        assert reused.count(0) == pieces, (threads, reused)
        # Equal items per piece: the later (longer) commits make shorter pieces.
        starts = [k for k, r in enumerate(reused) if r == 0]
        lengths = [b - a for a, b in zip(starts, [*starts[1:], len(reused)])]
        assert starts[0] == 0 and lengths[0] >= lengths[-1], (threads, reused)
    # Two sessions on three threads: cut in two each (the ceiling of 3 / 2).
    seen.clear()
    render_sessions([commits, commits[:4]], ["gemini"], threads=3)
    assert [r.count(0) for r in seen] == [2, 2]


def test_providers_without_a_wire_format_are_rendered_one_by_one():
    class Echo(Provider):
        name = "echo"
        family = "echo"
        default_model = "echo-1"

        def endpoint(self, model: str) -> str:
            return "/echo"

        def build_body(self, context: Context, options: Any) -> dict[str, Any]:
            return {"model": options.model, "turns": len(context.messages)}

    commits = _growing(2)
    got = render_sessions([commits], [Echo(), "gemini"])
    assert got[0][0] == [render(c, Echo()) for c in commits]
    assert got[0][1] == _full(commits, "gemini", {})


# -- property: any edit anywhere, any options ---------------------------------------------

OPTION_SETS = [
    {},
    {"system": "be brief", "tools": TOOLS, "max_tokens": 50},
    {"situation": "now in /tmp", "cache_ttl": "1h", "tools": TOOLS},
    {"cache": False, "extra": {"temperature": 0}},
]


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[ContextCommit], list[dict[str, Any]]]:
    """A session edited request by request: turns added, items aged, folded, dropped,
    copied (equal but another object), system items, thinking and compaction blocks
    arriving; the options the same throughout or changing."""
    items: list[ContextItem] = []
    lists: list[list[ContextItem]] = []
    n = 0
    for _ in range(draw(st.integers(1, 8))):
        op = draw(
            st.sampled_from(
                [
                    "turn",
                    "turn",
                    "user",
                    "age",
                    "fold",
                    "drop",
                    "copy",
                    "system",
                    "think",
                    "compact",
                ]
            )
        )
        n += 1
        if op == "turn" or not items:
            items += _turn(n)
        elif op == "user":
            items.append(_item(1000 + n, "user", f"more {n}  "))
        elif op in ("age", "drop", "copy"):
            k = draw(st.integers(0, len(items) - 1))
            if op == "age":
                items[k] = msgspec.structs.replace(items[k], state="aged", rendered="[aged]")
            elif op == "drop":
                del items[k]
            else:
                items[k] = msgspec.structs.replace(items[k])
        elif op == "fold":
            k = draw(st.integers(0, len(items) - 1))
            folded = [msgspec.structs.replace(it, state="summarized") for it in items[: k + 1]]
            summary = _item(2000 + n, "assistant", f"summary {n}", state="summary")
            items = [*folded, summary, *items[k + 1 :]]
        elif op == "system":
            at = draw(st.sampled_from([0, len(items)]))
            items.insert(at, _item(3000 + n, "system", f"rules {n}"))
        elif op == "think":
            vendor = draw(st.sampled_from(["", "gemini"]))
            block = ThinkingBlock(
                thinking="" if vendor else "hmm", signature=f"S{n}", vendor=vendor
            )
            items.append(_item(4000 + n, "assistant", "so", blocks=(block, TextBlock(text="so"))))
        else:
            vendor = draw(st.sampled_from(["", "openai"]))
            block = (
                CompactionBlock(content=f"SUMMARY {n}", signature="sig")
                if vendor == ""
                else CompactionBlock(encrypted_content=f"ENC {n}", vendor="openai")
            )
            items.append(_item(5000 + n, "assistant", "ok", blocks=(block, TextBlock(text="ok"))))
        lists.append(list(items))
    commits = _commits(lists)
    if draw(st.booleans()):
        options = [draw(st.sampled_from(OPTION_SETS))] * len(commits)
    else:
        options = [draw(st.sampled_from(OPTION_SETS)) for _ in commits]
    return commits, options


@settings(max_examples=60, deadline=None)
@given(session=sessions())
def test_any_session_renders_as_its_requests_alone(session):
    commits, options = session
    got = render_sessions([commits], PROVIDERS, options=[options])
    for j, provider in enumerate(PROVIDERS):
        assert got[0][j] == _full(commits, provider, options), provider
