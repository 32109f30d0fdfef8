"""The quality checker on a session built in the test, whose facts are known: a fact the
request holds is found, one it lacks is missing, whichever provider renders it; the
retained-token ratio is the commit's tokens over the branch's with no rules.

The summary is written by a summarizer plugin of the test, so what it keeps is part of
the test's construction, not the built-in summarizer's behaviour."""

from __future__ import annotations

import pytest

from ctxrules import dag
from ctxrules.commit import make_commit
from ctxrules.config import PipelineConfig
from ctxrules.errors import NotFoundError
from ctxrules.quality import CATEGORIES, assess, check_quality, folded_node_ids
from ctxrules.render import render

PROVIDERS = ("anthropic", "openai-chat", "openai-responses", "gemini")
FILLER = "\n" + "lorem ipsum dolor sit amet " * 60  # no identifier, no rule word
NOW = 1_800_000_000.0

# What the test summarizer keeps: one of the two constraints, the file, one identifier.
SUMMARY = (
    "Earlier: You must keep the 30 s timeout. Read /repo/src/auth/session.py. Ticket AUTH-4821."
)
SUMMARIZER = f"""
from ctxrules.hookspecs import hookimpl


class Keeper:
    name = "fake-keeper"

    def summarize(self, items, *, budget):
        return {SUMMARY!r}


@hookimpl
def register_summarizers(register):
    register(Keeper())
"""
FOLD_ALL = PipelineConfig(
    pipeline=("summarize",),
    rules={
        "summarize": {
            "threshold_tokens": 1,
            "target_ratio": 0.01,
            "keep_tail_turns": 1,
            "summarizer": "fake-keeper",
        }
    },
)


def build_session(store) -> dict[str, str]:
    """The session: a task, two tool-using turns and a user turn that fold, a last turn
    that stays.  Returns the node ids by name."""
    sid = dag.create_session(store).id
    ids: dict[str, str] = {"session": sid}
    t = iter(range(100))

    def add(key: str, role: str, output="", **kw) -> str:
        call = dag.append(store, sid, role, output, created_at=NOW - 1000 + next(t), **kw)
        ids[key] = call.id
        return call.id

    add("u1", "user", "Fix the flaky login test in tests/test_login.py.")
    a1 = add("a1", "assistant", "I will read src/auth/session.py first." + FILLER)
    add(
        "t1",
        "tool",
        "def login():" + FILLER,
        name="Read",
        caller=a1,
        input={"file_path": "/repo/src/auth/session.py"},
        metadata={"tool_use_id": "tu_1"},
    )
    todos = [
        {"content": "Reproduce the flake", "status": "completed"},
        {"content": "Add a retry guard to the login fixture", "status": "in_progress"},
    ]
    add(
        "t2",
        "tool",
        "Todos have been modified",
        name="TodoWrite",
        caller=a1,
        input={"todos": todos},
        metadata={"tool_use_id": "tu_2"},
    )
    add(
        "u2",
        "user",
        "You must keep the 30 s timeout. Never push to main without review. "
        "Ticket AUTH-4821 has the logs.",
    )
    a2 = add("a2", "assistant", "The token cache at /repo/src/auth/cache.py expires after 900 s.")
    add(
        "t3",
        "tool",
        "FAILED tests/test_login.py::test_token - AssertionError: expected 200, got 401" + FILLER,
        name="Bash",
        caller=a2,
        input={"command": "pytest tests/test_login.py"},
        metadata={"tool_use_id": "tu_3", "is_error": True},
    )
    add("u3", "user", "Thanks, go on.")
    add("a3", "assistant", "Going on.")
    return ids


FAILED_LINE = "FAILED tests/test_login.py::test_token - AssertionError: expected 200, got 401"
EXPECTED = {
    # (found, missing) per category, from the construction above: the task is the kept
    # anchor; "30 s" and tests/test_login.py are also in kept text (the summary, the task).
    "task": (["Fix the flaky login test in tests/test_login.py."], []),
    "constraints": (["You must keep the 30 s timeout."], ["Never push to main without review."]),
    "identifiers": (
        ["src/auth/session.py", "30 s", "AUTH-4821", "tests/test_login.py"],
        ["/repo/src/auth/cache.py", "900 s", FAILED_LINE],
    ),
    "files": (["/repo/src/auth/session.py"], []),
    "todos": ([], ["Add a retry guard to the login fixture"]),
}


@pytest.fixture
def session(plugin_site, any_store):
    plugin_site.install("fake-keeper", "fake_keeper", SUMMARIZER)
    return any_store, build_session(any_store)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_found_and_missing_facts_are_what_the_request_holds(session, provider):
    store, ids = session
    report = check_quality(ids["session"], now=NOW, store=store, config=FOLD_ALL, provider=provider)
    folded = {ids[n] for n in ("a1", "t1", "t2", "u2", "a2", "t3")}
    assert report.folded_nodes == len(folded)
    assert {f.node_id for f in report.facts if f.category != "task"} <= folded
    for name in CATEGORIES:
        found, missing = EXPECTED[name]
        facts = [f for f in report.facts if f.category == name]
        assert sorted(f.text for f in facts if f.found) == sorted(found), name
        assert sorted(report.categories[name].missing) == sorted(missing), name
        score = report.categories[name]
        assert (score.found, score.total) == (len(found), len(found) + len(missing))
        assert score.share == (len(found) / score.total if score.total else None)
    assert report.total == sum(len(f) + len(m) for f, m in EXPECTED.values())
    assert report.provider == provider


def test_the_ratio_is_commit_tokens_over_the_branch_with_no_rules(session):
    store, ids = session
    report = check_quality(ids["session"], now=NOW, store=store, config=FOLD_ALL)
    commit = make_commit(ids["session"], now=NOW, store=store, config=FOLD_ALL)
    plain = make_commit(ids["session"], now=NOW, store=store, config=PipelineConfig.preset("off"))
    assert report.commit_id == commit.id and report.head_node_id == ids["a3"]
    assert report.commit_tokens == commit.total_tokens
    assert report.baseline_tokens == plain.total_tokens
    assert report.retained_ratio == commit.total_tokens / plain.total_tokens
    assert report.retained_ratio <= 0.5  # the filler folded away
    # The same inputs, the same report.
    assert check_quality(ids["session"], now=NOW, store=store, config=FOLD_ALL) == report


def test_a_fact_taken_out_of_the_request_is_reported_missing(session):
    store, ids = session
    commit = make_commit(ids["session"], now=NOW, store=store, config=FOLD_ALL)
    branch = dag.branch_path(store, ids["session"])
    nodes = {c.id: c for c in branch}
    body = render(commit, "anthropic").body
    before = assess(commit, nodes, branch, body=body, baseline_tokens=1)
    assert "AUTH-4821" not in before.categories["identifiers"].missing
    cut = body.replace(b"AUTH-4821", b"AUTH-XXXX")
    after = assess(commit, nodes, branch, body=cut, baseline_tokens=1)
    assert set(after.categories["identifiers"].missing) == {
        *before.categories["identifiers"].missing,
        "AUTH-4821",
    }
    assert after.found == before.found - 1
    # Put a missing one in (the kept user turn now quotes it): found.
    added = body.replace(b"Thanks, go on.", b"Thanks, go on. Never push to main without review.")
    fixed = assess(commit, nodes, branch, body=added, baseline_tokens=1)
    assert fixed.categories["constraints"].missing == ()
    assert fixed.found == before.found + 1


def test_without_a_fold_only_the_task_is_checked(session):
    store, ids = session
    report = check_quality(
        ids["session"], now=NOW, store=store, config=PipelineConfig.preset("off")
    )
    assert report.folded_nodes == 0 and report.retained_ratio == 1.0
    assert [(f.category, f.found) for f in report.facts] == [("task", True)]


def test_a_folded_node_that_cannot_be_found_is_an_error(session):
    store, ids = session
    commit = make_commit(ids["session"], now=NOW, store=store, config=FOLD_ALL)
    branch = dag.branch_path(store, ids["session"])
    nodes = {c.id: c for c in branch if c.id != ids["u2"]}
    assert ids["u2"] in folded_node_ids(commit)
    with pytest.raises(NotFoundError, match=ids["u2"]):
        assess(commit, nodes, branch, body=b"{}", baseline_tokens=1)
