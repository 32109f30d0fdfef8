"""Summarize: folds the oldest run into one summary; anchors, tail, groups and attach blocks
are respected; a failing summarizer loses nothing and says why."""

from __future__ import annotations

import random
import threading
import time

import msgspec
import pytest

from ctxrules.commit import Pipeline, derive_commit, derive_with_summaries
from ctxrules.config import PipelineConfig
from ctxrules.errors import ConfigError
from ctxrules.model import ContextItem
from ctxrules.plugins import registry
from ctxrules.rules import IdleClearing, ResultCap, Summarize, ToolAging
from ctxrules.summarizers import SummaryRequest, SummaryResult, run_summarizer
from ctxrules.testing import Script, Step, check_commits, check_rule, drive, tool_turn


def _run(steps, *rules):
    pipeline = Pipeline.of(rules)
    runs = drive(Script(steps), pipeline)
    check_commits(runs, pipeline)
    return runs[-1][1].commit


def _busy(n=12):
    return [Step(user=f"task step {i}", tools=[("Read", 1500, False)]) for i in range(n)]


def test_over_threshold_folds_oldest_items_into_summaries():
    c = _run(_busy(), Summarize(threshold_tokens=3000, keep_tail_turns=2))
    summaries = [it for it in c.items if it.state == "summary"]
    folded = [it for it in c.items if it.state == "summarized"]
    assert summaries and all(it.source_node_id.startswith("sm_") for it in summaries)
    assert folded and {it.merged_into for it in folded} <= {it.source_node_id for it in summaries}
    # Its two-turn tail alone holds more than the target: the fold after the first
    # waits for a batch (min_run_share), and the commit says so while it is over.
    assert c.total_tokens <= 3000 or any("(min_run_share)" in n for n in c.notes)
    assert c.summary == summaries[-1].rendered  # the commit's summary is the latest one


def test_a_later_fold_appends_a_summary_and_never_rewrites_an_earlier_one():
    """Cache stability: once a summary is in a commit, every later commit carries it
    unchanged, and the rendered request up to its end is the same bytes (what the
    provider cached).  The summarize rule used to fold the previous summary into the
    next one, changing the request from there on at every fold."""
    from ctxrules.render import render_messages

    pipeline = Pipeline.of([Summarize(threshold_tokens=3000, keep_tail_turns=2)])
    runs = drive(Script(_busy(16)), pipeline)
    check_commits(runs, pipeline)
    commits = [gen.commit for _, gen, _ in runs]
    seen: dict[str, ContextItem] = {}
    for k, commit in enumerate(commits):
        shown = {it.source_node_id: it for it in commit.items if it.state == "summary"}
        for sm_id, item in seen.items():
            assert shown.get(sm_id) == item, f"commit {k} rewrote or folded summary {sm_id}"
        seen.update(shown)
    assert len(seen) >= 3  # the session folded several times
    first = next(k for k, c in enumerate(commits) if any(it.state == "summary" for it in c.items))
    pos = next(p for p, it in enumerate(commits[first].items) if it.state == "summary")
    prefix = msgspec.json.encode(render_messages(_upto(commits[first], pos)))
    for commit in commits[first + 1 :]:
        p = next(p for p, it in enumerate(commit.items) if it.state == "summary")
        assert msgspec.json.encode(render_messages(_upto(commit, p))) == prefix


def _upto(commit, pos):
    """The commit cut after item ``pos`` (to render the request prefix up to it)."""
    return msgspec.structs.replace(commit, items=commit.items[: pos + 1])


def test_task_statement_pinned_cited_and_tail_stay_full():
    steps = _busy()
    steps[3] = Step(user="pinned note", pinned=True, tools=[("Read", 1500, False)])
    steps[5] = Step(user="step 5", assistant="the cited answer", tools=[("Read", 1500, False)])
    # cited while still in the tail (an item folded before anyone cites it stays folded)
    steps[6] = Step(user="as you said in step 5", cite_back=1, tools=[("Read", 1500, False)])
    c = _run(steps, Summarize(threshold_tokens=3000, keep_tail_turns=2))
    first = c.items[0]
    assert first.is_anchor and first.state == "full" and first.rendered == "task step 0"
    pinned = next(it for it in c.items if it.rendered == "pinned note")
    assert pinned.state == "full"
    cited = next(it for it in c.items if it.rendered == "the cited answer")
    assert cited.state == "full" and cited.reason.startswith("cited_by:")
    assert any(it.state == "summarized" for it in c.items)  # folding did happen around them
    assert [it.state for it in c.items[-6:]] == ["full"] * 6  # 2 turns × (user, assistant, tool)


def test_assistant_turn_and_its_tools_fold_together():
    c = _run(_busy(), Summarize(threshold_tokens=3000, keep_tail_turns=1))
    by_id = {it.source_node_id: it for it in c.items}
    assert any(it.role == "tool" and it.state == "summarized" for it in c.items)
    for it in c.items:
        if it.role == "tool":
            assert (it.state == "summarized") == (by_id[it.caller].state == "summarized")


def test_attach_block_is_never_split():
    steps = [*_busy(4), Step(attach_back=3, tools=[("Read", 1500, False)]), *_busy(8)]
    c = _run(steps, Summarize(threshold_tokens=3000, keep_tail_turns=1, target_ratio=0.9))
    block = [it.state for it in c.items if it.attached_from]
    assert any(it.state == "summarized" and not it.attached_from for it in c.items)
    assert block and (set(block) == {"summarized"} or "summarized" not in block)


def test_aging_does_not_stop_summarize_in_tool_heavy_sessions():
    # The original design locked aged results, so summarize found no run and did nothing.
    c = _run(_busy(30), ToolAging(tail_turns=2, step_turns=1), Summarize(threshold_tokens=2000))
    assert any(it.state == "summary" for it in c.items)


class _Raising:
    name = "test-raising"

    def summarize(self, items, *, budget):
        raise RuntimeError("model unavailable")


class _Empty:
    name = "test-empty"

    def summarize(self, items, *, budget):
        return "   "


class _Slow:
    """Blocks until released, then returns a text: what a hung model call looks like."""

    name = "test-slow"

    def __init__(self):
        self.release = threading.Event()
        self.finished = threading.Event()
        self.got = None
        self.calls = 0

    def summarize(self, items, *, budget):
        self.got = items
        self.calls += 1
        self.release.wait(5.0)
        self.finished.set()
        return "late"


class _Long:
    """Returns a summary longer than anything it folds, and counts its calls."""

    name = "test-long"

    def __init__(self):
        self.calls = 0

    def summarize(self, items, *, budget):
        self.calls += 1
        return "padding " * 20_000


@pytest.fixture
def bad_summarizers():
    reg = registry("summarizers")
    added = [_Raising(), _Empty(), _Slow(), _Long()]
    for s in added:
        reg.items[s.name] = s
    yield {s.name: s for s in added}
    for s in added:
        reg.items.pop(s.name, None)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("test-raising", "model unavailable"),
        ("test-empty", "returned nothing"),
        ("test-slow", "timed out"),
    ],
)
def test_summarizer_failure_folds_nothing_and_records_why(bad_summarizers, name, says):
    rule = Summarize(threshold_tokens=3000, summarizer=name, timeout_seconds=0.2)
    pipeline = Pipeline.of([rule])
    runs = drive(Script(_busy()), pipeline)
    check_commits(runs, pipeline)
    commits = [gen.commit for _, gen, _ in runs]
    assert not [it for c in commits for it in c.items if it.state in ("summary", "summarized")]
    over = [c for c in commits if c.total_tokens > 3000]
    assert over and any(says in n and "no folding" in n for n in over[0].notes)
    for c in over:  # each commit over the threshold says why it did not fold
        assert any("no folding" in n or "not retrying" in n for n in c.notes)


def test_timed_out_summarizer_cannot_change_anything_later(bad_summarizers):
    slow = bad_summarizers["test-slow"]
    rule = Summarize(threshold_tokens=3000, summarizer="test-slow", timeout_seconds=0.05)
    pipeline = Pipeline.of([rule])
    runs = drive(Script(_busy(12)), pipeline)
    assert any("timed out" in n for _, gen, _ in runs for n in gen.commit.notes)
    # a hung summarizer is not waited for on every commit over the threshold (each
    # commit is derived twice by drive, so without back-off calls == 2 × over)
    over = [gen.commit for _, gen, _ in runs if gen.commit.total_tokens > 3000]
    assert len(over) >= 6 and slow.calls < len(over)
    assert any("not retrying" in n for c in over for n in c.notes)
    before = [msgspec.msgpack.encode(gen.commit) for _, gen, _ in runs]
    slow.release.set()  # the abandoned thread now returns its text
    assert slow.finished.wait(5.0)
    assert isinstance(slow.got, tuple)  # it was handed a copy it cannot grow or shrink
    time.sleep(0.05)
    assert [msgspec.msgpack.encode(gen.commit) for _, gen, _ in runs] == before
    assert all("late" not in it.rendered for _, gen, _ in runs for it in gen.commit.items)
    check_commits(runs, pipeline)


def test_a_summary_that_does_not_shrink_is_not_retried_every_commit(bad_summarizers):
    long = bad_summarizers["test-long"]
    rule = Summarize(threshold_tokens=3000, summarizer="test-long", keep_tail_turns=1)
    pipeline = Pipeline.of([rule])
    runs = drive(Script(_busy(14)), pipeline)
    check_commits(runs, pipeline)
    over = [gen.commit for _, gen, _ in runs if gen.commit.total_tokens > 3000]
    assert len(over) >= 8
    # Without back-off every commit over the threshold would call the summarizer (twice:
    # drive derives each step twice to check the ids), so 2 × len(over) calls.
    assert 1 <= long.calls < len(over)
    for c in over:  # nothing folded, and each commit says why
        assert not any(it.state in ("summary", "summarized") for it in c.items)
        assert any("not shorter" in n or "not retrying" in n for n in c.notes)
        assert any("could not reach the threshold" in n for n in c.notes)
    # Re-running the rules on the last commit (a later `now`, no new node) does not even
    # ask for a summary: the rule is backing off.
    gen = runs[-1][1]
    later = derive_commit(
        gen.commit,
        [],
        session_id="s",
        head_node_id=gen.commit.head_node_id,
        pipeline=Pipeline.of([rule]),
        now=gen.commit.created_at + 60,
    )
    assert later.requests == ()
    assert any("not retrying" in n for n in later.commit.notes)


def test_a_short_run_before_a_kept_item_does_not_stop_folding():
    # The first turn's answer alone sits between the task anchor and a pinned request:
    # its summary is not shorter than it.  That run cannot grow, so it stays as it is
    # and folding goes on after the pinned item (it used to stop there for good, as it
    # did before the /init command line of a Claude Code session once that line was no
    # longer the anchor).
    steps = [Step(user="the task", assistant="ok"), Step(user="a pinned note", pinned=True)]
    steps += _busy(10)
    c = _run(steps, Summarize(threshold_tokens=3000, keep_tail_turns=2))
    ok = next(it for it in c.items if it.role == "assistant" and it.rendered == "ok")
    assert ok.state == "full"
    pinned = next(it for it in c.items if it.rendered == "a pinned note")
    assert pinned.state == "full"
    after = c.items[c.items.index(pinned) + 1 :]
    assert any(it.state == "summarized" for it in after)
    assert c.total_tokens <= 3000 or any("(min_run_share)" in n for n in c.notes)


def test_unreachable_threshold_is_reported():
    steps = [Step(user="x", locked=True, tools=[("Read", 1500, False)]) for _ in range(6)]
    c = _run(steps, Summarize(threshold_tokens=200))
    assert any("could not reach the threshold" in n for n in c.notes)


def test_full_pipeline_from_config_keeps_the_invariants():
    rules = PipelineConfig.preset("aggressive").build()
    assert [type(r) for r in rules] == [ResultCap, ToolAging, IdleClearing, Summarize]
    check_rule(Summarize(threshold_tokens=800, keep_tail_turns=1), examples=15)


# -- pure derive: the summary is an input -----------------------------------------------


def _dense(seed: int, size: int = 1500) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789 \n") for _ in range(size))


def _turn_calls(n: int, output=_dense):
    calls, prev = [], None
    for i in range(n):
        turn = tool_turn(
            {"name": "Read", "output": output(i)},
            user=f"task step {i}",
            prefix=f"t{i}_",
            predecessor=prev,
            seq=1 + 3 * i,
        )
        calls += turn
        prev = turn[1].id
    return calls


def _kw(rule, n=12, output=_dense):
    calls = _turn_calls(n, output)
    kw = dict(session_id="s", head_node_id=calls[-2].id, pipeline=Pipeline.of([rule]), now=1e6)
    return calls, kw


def test_without_an_answer_derive_folds_nothing_and_returns_the_request():
    calls, kw = _kw(Summarize(threshold_tokens=3000, keep_tail_turns=2))
    gen = derive_commit(None, calls, **kw)
    (request,) = gen.requests
    assert request.rule == "summarize" and request.summarizer == "extractive"
    assert request.budget == 2000 and request.timeout_seconds == 60.0
    # the oldest run: after the task statement (an anchor), whole turns with their results
    assert [it.source_node_id for it in request.items[:3]] == ["t0_a", "t0_t1", "t1_u"]
    assert not [it for it in gen.commit.items if it.state in ("summary", "summarized")]
    assert any("waiting for a summary" in n for n in gen.commit.notes)
    answered = derive_commit(None, calls, **kw, summaries={request.key: "the short story"})
    assert answered.requests == ()
    summary = next(it for it in answered.commit.items if it.state == "summary")
    assert summary.rendered == "the short story"
    folded = {it.source_node_id for it in answered.commit.items if it.state == "summarized"}
    assert folded == {it.source_node_id for it in request.items}


def test_derive_looks_up_nothing_runs_no_summarizer_and_reads_no_clock(monkeypatch):
    calls, kw = _kw(Summarize(threshold_tokens=3000, keep_tail_turns=2))
    given = {}

    def answer(request):
        given[request.key] = run_summarizer(request)
        return given[request.key]

    final = derive_with_summaries(None, calls, **kw, answer=answer)
    assert given and any(it.state == "summary" for it in final.commit.items)

    def refuse(*args, **kwargs):
        raise AssertionError("derive_commit reached for a plugin, a thread or the clock")

    import ctxrules.commit.derive
    import ctxrules.plugins
    import ctxrules.tokenizers

    monkeypatch.setattr(ctxrules.plugins, "registry", refuse)
    monkeypatch.setattr(ctxrules.tokenizers, "get_tokenizer", refuse)
    monkeypatch.setattr(ctxrules.commit.derive, "get_tokenizer", refuse, raising=False)
    monkeypatch.setattr(threading, "Thread", refuse)
    for clock in ("time", "monotonic", "perf_counter", "time_ns"):
        monkeypatch.setattr(time, clock, refuse)
    again = derive_commit(None, calls, **kw, summaries=given)
    assert again.requests == () and again.commit.id == final.commit.id
    assert again.delta == final.delta


class _Gated:
    """Answers with a fixed text once released: a fast or a slow model, same answer."""

    name = "test-gated"

    def __init__(self):
        self.release = threading.Event()
        self.calls = 0

    def summarize(self, items, *, budget):
        self.calls += 1
        self.release.wait(10.0)
        return f"Summary of {len(items)} items: the user asked for task steps."


@pytest.fixture
def gated():
    reg = registry("summarizers")
    g = _Gated()
    reg.items[g.name] = g
    yield g
    g.release.set()
    reg.items.pop(g.name, None)


def test_a_slow_summarizer_gives_the_same_commit_as_a_fast_one(gated):
    rule = Summarize(threshold_tokens=3000, summarizer="test-gated", timeout_seconds=0.05)
    calls, kw = _kw(rule)
    gated.release.set()  # fast: answers at once
    fast = derive_with_summaries(None, calls, **kw)
    gated.release.clear()  # slow: answers 0.2 s after being asked, beyond the rule's 0.05 s
    timer = threading.Timer(0.2, gated.release.set)
    timer.start()
    slow = derive_with_summaries(
        None, calls, **kw, answer=lambda request: run_summarizer(request, timeout=None)
    )
    timer.join()
    assert gated.calls == 2
    assert any(it.state == "summary" for it in fast.commit.items)
    assert slow.commit.id == fast.commit.id and slow.delta == fast.delta


def test_a_timed_out_answer_is_an_input_like_any_other(gated):
    rule = Summarize(threshold_tokens=3000, summarizer="test-gated", timeout_seconds=0.05)
    calls, kw = _kw(rule)
    timed_out = derive_with_summaries(None, calls, **kw)  # never released: the limit applies
    gated.release.set()
    assert any("timed out after 0.05s" in n for n in timed_out.commit.notes)
    assert not [it for it in timed_out.commit.items if it.state in ("summary", "summarized")]
    assert timed_out.commit.cursors["summarize.failed_start"] == 1  # backing off, as before
    (request,) = derive_commit(None, calls, **kw).requests
    given = derive_commit(None, calls, **kw, summaries={request.key: SummaryResult(timed_out=True)})
    assert given.commit.id == timed_out.commit.id


def test_an_unknown_summarizer_is_refused_when_the_rule_is_built():
    with pytest.raises(ConfigError, match="no summarizer named 'nope'") as err:
        PipelineConfig.preset("default").with_params("summarize", summarizer="nope").build()
    assert "rules.summarize.summarizer" in str(err.value) and "extractive" in str(err.value)


class _Flaky:
    """A summarizer that fails its first ``failures`` calls, then answers."""

    name = "flaky"

    def __init__(self, failures: int):
        self.failures = failures
        self.calls = 0

    def summarize(self, items, *, budget):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("connection reset")
        return "recovered summary"


def _request() -> SummaryRequest:
    item = ContextItem(source_node_id="n1", role="user", rendered="hello", tokens=1)
    return SummaryRequest(
        key="sr_x", rule="summarize", summarizer="flaky", items=(item,), budget=100
    )


def test_a_transient_summarizer_failure_is_retried_twice():
    flaky = _Flaky(failures=2)
    result = run_summarizer(_request(), summarizer=flaky)
    assert result == SummaryResult(text="recovered summary") and flaky.calls == 3


def test_a_summarizer_failing_every_retry_is_reported_not_raised():
    flaky = _Flaky(failures=10)
    result = run_summarizer(_request(), summarizer=flaky, retries=1)
    assert flaky.calls == 2
    assert result.error == "ConnectionError: connection reset" and not result.text


def test_an_unknown_summarizer_is_not_retried():
    result = run_summarizer(msgspec.structs.replace(_request(), summarizer="no-such"))
    assert "no-such" in result.error and not result.timed_out


def test_a_summary_that_left_out_the_oldest_items_says_so():
    calls, kw = _kw(Summarize(threshold_tokens=3000, keep_tail_turns=2))
    (request,) = derive_commit(None, calls, **kw).requests
    answers = {request.key: SummaryResult(text="short summary", dropped=3)}
    gen = derive_commit(None, calls, **kw, summaries=answers)
    assert any(it.state == "summary" for it in gen.commit.items)
    (note,) = [n for n in gen.commit.notes if "folded" in n]
    assert note.endswith(
        "the summary leaves out the 3 oldest of them (too long for the summarizer's model)"
    )
    plain = derive_commit(
        None, calls, **kw, summaries={request.key: SummaryResult(text="short summary")}
    )
    assert not any("leaves out" in n for n in plain.commit.notes)


def test_summaries_as_long_as_their_budget_still_make_a_commit_in_a_few_rounds():
    """A fold that starts from the previous summary counts the new summary in: without
    that, a summary near its budget left the commit over the target after every fold,
    and each next fold (one round of answers, a model call) gained one small unit."""
    rule = Summarize(threshold_tokens=600, summary_budget_tokens=300, keep_tail_turns=1)
    calls, kw = _kw(rule, 150, output=lambda i: f"line {i}")
    asked = []

    def answer(request):
        asked.append(request)
        return SummaryResult(text=" ".join(f"fact{i}" for i in range(request.budget // 3)))

    final = derive_with_summaries(None, calls, **kw, answer=answer)
    assert any(it.state == "summary" for it in final.commit.items)
    assert len(asked) <= 3, [len(r.items) for r in asked]
