"""``ctxrules view`` in a real headless Chromium (``tests/chromium.py``; ``make setup``
installs Debian's ``chromium``): the page loads a corpus session and shows the counts the
transcript and the commands give, a click on a commit shows its items, a click on a node
its turn, the usage and request tabs show the commands' numbers, retries get a ``< N/M >``
switcher, and a hostile transcript stays text — served and exported.  Screenshots of each
go to ``test-artifacts/viewer/`` (ignored by git) for people to look at."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.chromium import Chromium, Page, find_chromium
from tests.cli.test_merge import ANSWER as MERGE_ANSWER
from tests.view_oracle import SUBAGENTS, main_chain, tool_uses, transcript

from ctxrules.cli import main

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "viewer"
NOW = "2026-01-01T00:00:00Z"
INIT = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"

#: Text that would run if the page parsed transcript text as HTML: each sets
#: window.__pwned (or the title) to say where it came from.
USER_TEXT = (
    "<script>window.__pwned='user';document.title='pwned'</script>"
    "<img src=x onerror=\"window.__pwned='img'\">"
)
TOOL_NAME = "<img src=x onerror=\"window.__pwned='name'\">"
TOOL_ARGS = json.dumps({"q": "</script><script>window.__pwned='args'</script>"})
TOOL_OUTPUT = "</script><script>window.__pwned='tool'</script><svg onload=\"window.__pwned='svg'\">"
ANSWER = "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe><b>bold?</b>"
HOSTILE = [
    {"role": "system", "content": "You are <b>bold</b> & <i>sly</i>"},
    {"role": "user", "content": USER_TEXT},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": TOOL_ARGS},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": TOOL_OUTPUT},
    {"role": "assistant", "content": ANSWER},
]


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    if binary is None:
        pytest.skip("Chromium is not installed: `make setup` installs Debian's chromium package")
    chromium = Chromium(binary)
    yield chromium
    chromium.close()


@pytest.fixture
def page(browser):
    tab = browser.page()
    tab.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    yield tab
    assert tab.exceptions() == []  # the page threw no script error
    browser.call("Target.closeTarget", {"targetId": tab.target})


def shot(page: Page, name: str) -> Path:
    """Save a screenshot of the whole page, from its top, as a test artefact."""
    page.evaluate("window.scrollTo(0, 0)")
    return page.screenshot(ARTIFACTS / f"{name}.png")


@pytest.fixture
def serve(tmp_path):
    """``serve(store)``: run ``ctxrules view`` on the store (any free port, the rules at
    ``NOW``); returns the page's URL.  Stopped when the test ends."""
    procs: list[subprocess.Popen] = []

    def start(store: str) -> str:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxrules", "view", "--store", store, "--port", "0",
             "--now", NOW, "--preset", "default"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(proc)
        line = proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None else "")
        return found.group(1)

    yield start
    for proc in procs:
        proc.terminate()
        proc.communicate(timeout=30)


def store_turn_commits(store: str, sid: str, head: str) -> None:
    """Store the commit at each turn to ``head``, as `ctxrules commit` at each turn would:
    the page keeps the commits it makes in memory (a GET writes nothing), so the
    commands compared with it find the same commits stored."""
    from ctxrules.cli.commit import branch_commits
    from ctxrules.config import PipelineConfig
    from ctxrules.store import open_store

    writer = open_store(store)
    try:
        branch_commits(writer, sid, head, config=PipelineConfig.preset("default"))
    finally:
        writer.close()


def run_json(capsys, *argv: str):
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def open_session(page: Page, url: str, session: str) -> None:
    """Load the page at a session and wait until its HEAD's commit is shown."""
    page.goto(f"{url}#session={session}")
    page.wait_for(f"ctxrulesView.view.session === '{session}'")
    page.wait_for("document.querySelectorAll('#commit tr.item').length > 0", timeout=90)
    page.settle()


def count(page: Page, selector: str) -> int:
    return int(page.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length"))


def text(page: Page, selector: str) -> str:
    return str(page.evaluate(f"document.querySelector({json.dumps(selector)}).textContent"))


def turn_id(page: Page, n: int) -> str:
    """The node id of the ``n``-th turn (1-based) of the main conversation on the page."""
    return str(
        page.evaluate(
            f"document.querySelectorAll('#graph > .thread > .node.turn')[{n - 1}].dataset.id"
        )
    )


def only_own_requests(page: Page, origin: str) -> None:
    made = page.requests()
    assert made and all(u.startswith(origin) or u.startswith("data:") for u in made), made


# -- a corpus session -------------------------------------------------------------------------


@pytest.fixture
def subagents(cli_import):
    store, (sid,) = cli_import(SUBAGENTS)
    return store, sid


def test_the_page_shows_the_graph_and_counts_of_the_transcript(
    page, serve, subagents, corpus, capsys
):
    store, sid = subagents
    url = serve(store)
    open_session(page, url, sid)
    lines = transcript(corpus / SUBAGENTS)
    turns, calls = main_chain(lines)
    nodes = run_json(capsys, "log", sid, "--store", store, "--json")
    # No branches: every node of the session is a row, its tool calls and sub-agents too.
    assert count(page, "#graph .node") == len(nodes) == 45
    assert count(page, "#graph .node.role-tool") == tool_uses(lines) == 21
    sidechains = [e for e in lines if e.get("isSidechain") and e.get("parentUuid") is None]
    assert count(page, "#graph .frame") == len(sidechains) == 2
    assert count(page, "#graph > .thread > .node.turn") == turns == 12
    assert count(page, "#graph .node.head") == 1
    assert count(page, "#graph .error-badge") == 3
    # The timeline holds the commit of each turn; HEAD's is shown, one row per item.
    assert count(page, "#timeline .commit-row") == turns
    assert count(page, "#commit tr.item") == turns + calls == 25
    head = run_json(capsys, "commit", sid, "--store", store, "--preset", "default", "--json")
    assert text(page, "#commit .item-count") == f"{head['totals']['items']} items"
    assert text(page, "#counts").startswith(f"{len(nodes)} nodes")
    only_own_requests(page, url)
    shot(page, "corpus-session")


def test_a_click_on_a_commit_shows_its_items_and_its_diff(page, serve, subagents, capsys):
    store, sid = subagents
    url = serve(store)
    open_session(page, url, sid)
    page.click("#timeline .commit-row:nth-child(5)")
    commit_id = page.evaluate(
        "document.querySelector('#timeline .commit-row:nth-child(5)').dataset.id"
    )
    page.wait_for(
        f"document.querySelector('#commit .commit-head')?.textContent.includes('{commit_id}')"
    )
    page.settle()
    head = page.evaluate("ctxrulesView.view.timeline.commits[4].head_node_id")
    store_turn_commits(store, sid, head)
    printed = run_json(
        capsys, "commit", sid, "--head", head, "--store", store, "--preset", "default", "--json"
    )
    assert printed["id"] == commit_id
    assert count(page, "#commit tr.item") == printed["totals"]["items"] == len(printed["items"])
    for state, total in printed["totals"]["by_state"].items():
        assert count(page, f"#commit tr.item.state-{state}") == total["items"]
    shown = page.evaluate(
        "[...document.querySelectorAll('#commit tr.item')].map(r => r.dataset.node)"
    )
    assert shown == [it["source_node_id"] for it in printed["items"]]
    shot(page, "commit-clicked")
    # the diff against the commit before it, as `ctxrules commit --diff` gives it
    before = page.evaluate("ctxrulesView.view.timeline.commits[3].id")
    page.click("#tabs button[data-tab=diff]")
    page.wait_for(
        f"document.querySelector('#diff .diff-head')?.textContent.includes('{commit_id}')"
    )
    diff = run_json(
        capsys, "commit", sid, "--head", head, "--diff", before, "--store", store,
        "--preset", "default", "--json",
    )  # fmt: skip
    assert text(page, "#diff .diff-part h3") == f"added ({len(diff['added'])})"
    assert f"shared prefix {diff['prefix_items']} items" in text(page, "#diff .prefix")
    shot(page, "diff")


def test_a_click_on_a_node_shows_its_turn(page, serve, subagents):
    store, sid = subagents
    url = serve(store)
    open_session(page, url, sid)
    node = turn_id(page, 5)
    page.click(f"#graph .node[data-id='{node}']")
    page.wait_for(f"ctxrulesView.view.timeline?.head === '{node}'")
    page.settle()
    # the branch up to the fifth turn: five commits, the last one at that node
    assert count(page, "#timeline .commit-row") == 5
    assert node in text(page, "#commit .commit-head")
    assert node in text(page, "#node-detail .node-head")
    assert count(page, "#graph .node.selected") == 1
    shot(page, "node-clicked")


def test_usage_and_request_show_the_commands_numbers(page, serve, subagents, capsys):
    store, sid = subagents
    url = serve(store)
    open_session(page, url, sid)
    head = page.evaluate("ctxrulesView.view.graph.head")
    page.click("#tabs button[data-tab=usage]")
    page.wait_for("document.querySelectorAll('#usage tr.category').length > 0")
    store_turn_commits(store, sid, head)
    stats = run_json(
        capsys, "stats", sid, "--head", head, "--store", store, "--now", NOW,
        "--preset", "default", "--json",
    )  # fmt: skip
    rows = page.evaluate(
        "[...document.querySelectorAll('#usage tr.category')]"
        ".map(r => [r.dataset.name, r.querySelector('.tokens').textContent])"
    )
    assert rows == [[c["name"], f"{c['tokens']:,}"] for c in stats["breakdown"]["categories"]]
    assert text(page, "#usage .used") == f"{stats['usage']['total_used']:,}"
    assert text(page, "#usage .basis") == stats["usage"]["basis"]
    assert count(page, "#usage svg.ring circle") == sum(
        1 for c in stats["breakdown"]["categories"] if c["tokens"]
    )
    shot(page, "usage")
    page.click("#tabs button[data-tab=request]")
    page.wait_for("document.querySelector('#request .cache-read') !== null")
    rendered = run_json(
        capsys, "render", sid, "--provider", "anthropic", "--for", head, "--store", store,
        "--preset", "default", "--json", "--explain",
    )  # fmt: skip
    explain = rendered["explain"]
    assert text(page, "#request .cache-read").startswith(
        f"predicted cache read {explain['cache_read_tokens']:,}"
    )
    assert text(page, "#request .input-tokens").startswith(f"{explain['input_tokens']:,}")
    assert json.loads(text(page, "#request pre.body")) == rendered["body"]
    shot(page, "request")
    page.evaluate(
        "(() => { const s = document.getElementById('provider-select'); s.value = 'gemini';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    page.wait_for(
        "document.querySelector('#request .request-head')?.textContent.startsWith('gemini')"
    )


def test_a_compaction_shows_its_boundary_and_summary(page, serve, subagents, capsys):
    store, sid = subagents
    done = run_json(capsys, "compact", sid, "--store", store, "--now", NOW, "--json")
    url = serve(store)
    open_session(page, url, sid)
    r = done["record"]
    assert count(page, "#graph .boundary") == 1
    assert text(page, "#graph .boundary") == (
        f"compaction ({r['trigger']}): {r['tokens_before']:,} → {r['tokens_after']:,} tokens, "
        f"{r['folded_items']} items folded"
    )
    printed = run_json(capsys, "commit", sid, "--store", store, "--preset", "default", "--json")
    by_state = printed["totals"]["by_state"]
    assert (
        by_state["summary"]["items"] == 1 and by_state["summarized"]["items"] == r["folded_items"]
    )
    for state in ("summary", "summarized"):
        assert count(page, f"#commit tr.item.state-{state}") == by_state[state]["items"]
    shot(page, "compaction")


def test_a_merge_shows_its_pointer_instruction_and_parents(
    page, serve, cli_import, tmp_path, capsys
):
    store, (target, peer) = cli_import(INIT, SUBAGENTS)
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(MERGE_ANSWER))
    done = run_json(
        capsys, "merge", target, peer, "--instruction", "Combine both", "--answer", str(answer),
        "--store", store, "--now", NOW, "--preset", "default", "--json",
    )  # fmt: skip
    url = serve(store)
    open_session(page, url, target)
    node = f"#graph .node[data-id='{done['node']}']"
    assert count(page, f"{node} .merge-badge") == 1
    assert count(page, "#graph .attach-badge") == len(done["peers"]) == 1
    # the merge commit is the one at the instruction: its parents and the attached items
    merge = page.evaluate(
        f"ctxrulesView.view.timeline.commits.findIndex(c => c.head_node_id === '{done['node']}')"
    )
    page.click(f"#timeline .commit-row:nth-child({merge + 1})")
    page.wait_for("document.querySelector('#commit .merge-note') !== null")
    assert text(page, "#commit .merge-note") == "merge of " + ", ".join(done["parent_ids"])
    shown = run_json(capsys, "commit", target, "--head", done["node"], "--store", store, "--json")
    attached = [it["attached_from"] or "" for it in shown["items"]]
    assert (
        page.evaluate(
            "[...document.querySelectorAll('#commit tr.item td.attached')].map(c => c.textContent)"
        )
        == attached
    )
    assert any(attached)
    shot(page, "merge")
    open_session(page, url, peer)
    assert f"into {target} at {done['node']}" in text(page, "#graph-meta")


def test_retries_get_a_switcher_that_moves_nothing(page, serve, subagents):
    from ctxrules import dag
    from ctxrules.store import open_store

    store_path, sid = subagents
    store = open_store(store_path)
    try:
        original = dag.branch_path(store, sid)[-1]
        retried = dag.edit(store, sid, original.id, output="an edited <b>answer</b>")
        head = store.get_session(sid).head
    finally:
        store.close()
    url = serve(store_path)
    open_session(page, url, sid)
    row = f"#graph .node[data-id='{retried.id}']"
    assert text(page, f"{row} .switch .pos") == "2/2"
    assert text(page, f"{row} .preview") == "an edited <b>answer</b>"
    page.click(f"{row} .switch .prev")
    page.wait_for(f"document.querySelector(\"#graph .node[data-id='{original.id}']\") !== null")
    assert text(page, f"#graph .node[data-id='{original.id}'] .switch .pos") == "1/2"
    shot(page, "switcher")
    store = open_store(store_path)
    try:
        assert store.get_session(sid).head == head == retried.id  # display only
    finally:
        store.close()


# -- a hostile transcript -----------------------------------------------------------------------


@pytest.fixture
def hostile(tmp_path, capsys):
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(HOSTILE), encoding="utf-8")
    store = str(tmp_path / "hostile-store")
    assert main(["import", str(path), "--store", store]) == 0
    capsys.readouterr()
    return store


def assert_nothing_ran(page: Page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.title") == "ctxrules view"
    assert count(page, "img, iframe, object, embed, i, [onerror], [onload], [srcdoc]") == 0
    assert count(page, "svg:not(.ring)") == 0


def assert_inline_scripts_are_refused(page: Page) -> None:
    """The page's policy stops an inline script even if one got into the document."""
    added = page.evaluate(
        "(() => { const s = document.createElement('script');"
        " s.textContent = 'window.__inline = 1'; document.body.append(s);"
        " return typeof window.__inline; })()"
    )
    assert added == "undefined"
    assert [m for m in page.console() if "Content Security Policy" in m]


def visit_everything(page: Page) -> None:
    """Open every node, the user message in full, and every tab."""
    ids = page.evaluate("[...document.querySelectorAll('#graph .node')].map(n => n.dataset.id)")
    for node_id in ids:
        page.click(f"#graph .node[data-id='{node_id}']")
        page.wait_for(
            f"document.querySelector('#node-detail .node-head')?.textContent.includes('{node_id}')"
        )
        page.settle()
    for tab in ("diff", "usage", "request", "timeline"):
        page.click(f"#tabs button[data-tab={tab}]")
        page.settle()


def test_a_hostile_transcript_shows_as_text_on_the_served_page(page, serve, hostile):
    url = serve(hostile)
    page.goto(url)  # one session: the page opens it
    page.wait_for("document.querySelectorAll('#commit tr.item').length > 0", timeout=90)
    page.settle()
    assert_nothing_ran(page)
    visit_everything(page)
    assert_nothing_ran(page)
    shown = page.evaluate("document.body.innerText")
    for payload in (TOOL_NAME, ANSWER):
        assert payload in shown
    page.click("#graph .node.role-user")
    page.wait_for("document.querySelector('#node-detail pre.text') !== null")
    assert text(page, "#node-detail pre.text") == USER_TEXT
    assert count(page, "script") == 1  # ours
    only_own_requests(page, url)
    assert not [m for m in page.console() if "Content Security Policy" in m]
    shot(page, "hostile-served")
    assert_inline_scripts_are_refused(page)


def test_a_hostile_export_opens_from_a_file_and_stays_text(page, tmp_path, hostile):
    out = tmp_path / "hostile.html"
    assert main(["view", "--store", hostile, "--export", str(out), "--now", NOW]) == 0
    page.goto(out.as_uri())
    page.wait_for("document.querySelectorAll('#commit tr.item').length > 0")
    page.settle()
    assert text(page, "#mode") == "exported file"
    assert_nothing_ran(page)
    visit_everything(page)
    assert_nothing_ran(page)
    assert TOOL_NAME in page.evaluate("document.body.innerText")
    assert count(page, "script") == 2  # the data and ours
    only_own_requests(page, out.as_uri())
    shot(page, "hostile-export")
    assert_inline_scripts_are_refused(page)


def test_an_export_of_a_corpus_session_works_offline(page, tmp_path, subagents):
    store, sid = subagents
    out = tmp_path / "session.html"
    assert main(["view", sid, "--store", store, "--export", str(out), "--now", NOW]) == 0
    page.goto(out.as_uri())
    page.wait_for("document.querySelectorAll('#commit tr.item').length > 0")
    page.settle()
    assert count(page, "#graph .node") == 45 and count(page, "#timeline .commit-row") == 12
    page.click("#timeline .commit-row:nth-child(3)")
    page.wait_for("ctxrulesView.view.commit === ctxrulesView.view.timeline.commits[2].id")
    page.settle()
    assert count(page, "#commit tr.item") == page.evaluate(
        "ctxrulesView.view.timeline.commits[2].totals.items"
    )
    # a turn other than HEAD is not in the file: the page says so instead of failing
    page.click(f"#graph .node[data-id='{turn_id(page, 2)}']")
    page.wait_for("document.querySelector('#timeline-meta .error') !== null")
    assert "not in this file" in text(page, "#timeline-meta")
    only_own_requests(page, out.as_uri())
    shot(page, "export-offline")
