"""``ctxrules view`` without a browser: the answers are the commands' ``--json`` output,
the server listens on loopback only and guards its answers, the export embeds the answers
safely under a policy that allows its own script and style alone, and the page's files
ship in the package and never parse data as HTML.  (The page itself runs in Chromium in
``tests/cli/test_view_browser.py``.)"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import threading

import msgspec
import pytest
from tests.conftest import default_sigint
from tests.view_oracle import SUBAGENTS, main_chain, tool_uses, transcript

from ctxrules.cli import main
from ctxrules.cli.commit import branch_commits
from ctxrules.cli.view import ViewerServer, asset, loopback_host
from ctxrules.cli.viewdata import ViewData, request_key
from ctxrules.config import PipelineConfig
from ctxrules.errors import ConfigError
from ctxrules.store import open_store

NOW = "2026-01-01T00:00:00Z"
NOW_EPOCH = 1767225600.0


def answer(data: ViewData, name: str, **params: str):
    """An answer as the page receives it: through JSON."""
    return json.loads(msgspec.json.encode(data.answer(name, params)))


def run_json(capsys, *argv: str):
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def imported(cli_import):
    store, (sid,) = cli_import(SUBAGENTS)
    return store, sid


@pytest.fixture
def data(imported):
    store_path, sid = imported
    store = open_store(store_path)
    yield ViewData(store=store, config=PipelineConfig(), now=NOW_EPOCH, session=sid)
    store.close()


# -- one implementation: each answer is what the command prints ---------------------------------


def test_answers_are_the_commands_json(imported, data, capsys):
    store, sid = imported
    # (commit --now would run the rules again; without it the stored commit is shown)
    common = ("--store", store, "--preset", "default")
    data.config = PipelineConfig.preset("default")
    graph = answer(data, "graph", session=sid)
    head = graph["head"]
    # The viewer stores nothing: the commits the commands show are stored by them (here
    # each turn's, as `ctxrules commit` at each turn stores it).
    writer = open_store(store)
    branch_commits(writer, sid, head, config=data.config)
    writer.close()
    log = run_json(capsys, "log", sid, "--store", store, "--json")
    assert [n["id"] for n in graph["nodes"]] == [n["id"] for n in log]
    assert answer(data, "node", session=sid, id=log[3]["id"]) == log[3]
    assert answer(data, "sessions") == run_json(capsys, "sessions", "--store", store, "--json")

    timeline = answer(data, "timeline", session=sid, head=head)
    last = timeline["commits"][-1]
    printed = run_json(capsys, "commit", sid, "--head", head, "--json", *common)
    assert last["id"] == printed["id"]
    shown = answer(data, "commit", session=sid, id=last["id"])
    assert [it.pop("text") for it in shown["items"]]  # the viewer adds each item's text
    assert shown == printed
    assert {k: v for k, v in printed.items() if k != "items"} == last

    first = timeline["commits"][0]["id"]
    assert answer(data, "diff", session=sid, a=first, b=last["id"]) == run_json(
        capsys, "commit", sid, "--head", head, "--diff", first, "--json", *common
    )
    assert answer(data, "stats", session=sid, head=head) == run_json(
        capsys, "stats", sid, "--head", head, "--json", "--now", NOW, *common
    )
    # HEAD is an answer: the page shows the request that produced it, as --for does.
    assert answer(data, "render", session=sid, node=head, provider="gemini") == run_json(
        capsys, "render", sid, "--provider", "gemini", "--for", head, "--json", "--explain",
        "--store", store, "--preset", "default",
    )  # fmt: skip


def test_the_graph_counts_match_the_transcript(imported, data, corpus, capsys):
    store, sid = imported
    graph = data.answer("graph", {"session": sid})
    lines = transcript(corpus / SUBAGENTS)
    assert graph["counts"]["tool_calls"] == tool_uses(lines) == 21
    assert graph["counts"]["nodes"] == len(run_json(capsys, "log", sid, "--store", store, "--json"))
    frames = [n for n in graph["nodes"] if n["frame"]]
    # Each sub-agent's first message (a sidechain line without a parent) is a frame.
    starts = [e for e in lines if e.get("isSidechain") and e.get("parentUuid") is None]
    assert len(frames) == len(starts) == 2
    assert graph["roots"] == [graph["nodes"][0]["id"]]  # one conversation, from line 1
    by_id = {n["id"]: n for n in graph["nodes"]}
    assert all(by_id[f["caller"]]["name"] == "Task" for f in frames)
    errors = sum(
        1
        for e in lines
        for b in ((e.get("message") or {}).get("content") or [])
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error")
    )
    assert sum(n["is_error"] for n in graph["nodes"]) == errors == 3


def test_alternatives_and_forks_come_from_the_dag(imported, data):
    from ctxrules import dag

    path, sid = imported
    graph = data.answer("graph", {"session": sid})
    answer = next(n for n in graph["nodes"] if n["role"] == "assistant" and n["caller"] is None)
    writer = open_store(path)  # the viewer's store only reads
    retried = dag.retry(writer, sid, answer["id"])
    fork = dag.fork(writer, sid, answer["id"])
    writer.close()
    graph = data.answer("graph", {"session": sid})
    by_id = {n["id"]: n for n in graph["nodes"]}
    assert by_id[answer["id"]]["alternatives"] == [answer["id"], retried.id]
    assert dag.siblings(data.store, sid, retried.id) == (2, 2)
    assert by_id[retried.id]["on_branch"] and not by_id[answer["id"]]["on_branch"]
    assert graph["head"] == retried.id
    assert graph["forks"] == [{"session": fork.id, "node": answer["id"]}]
    forked = data.answer("graph", {"session": fork.id})
    assert forked["session"]["base_session"] == sid
    assert all(n["inherited"] for n in forked["nodes"])


def test_a_compaction_boundary_carries_its_record(imported, data, capsys):
    store, sid = imported
    done = run_json(capsys, "compact", sid, "--store", store, "--now", NOW, "--json")
    graph = answer(data, "graph", session=sid)
    marked = [n for n in graph["nodes"] if "compaction" in n]
    assert [n["id"] for n in marked] == [done["boundary"]]
    record = dict(done["record"])
    del record["summary"]  # on the node itself, not repeated in the graph
    assert marked[0]["compaction"] == record


def test_bad_requests_are_typed_errors(data):
    from ctxrules.errors import NotFoundError, ValidationError

    with pytest.raises(ValidationError, match="unknown request"):
        data.answer("shell", {})
    with pytest.raises(ValidationError, match="missing parameter 'session'"):
        data.answer("graph", {})
    with pytest.raises(NotFoundError):
        data.answer("node", {"session": data.session, "id": "n_nothing"})


def test_request_keys_sort_and_encode_like_encode_uri_component():
    assert request_key("config", {}) == "config"
    assert request_key("x", {"b": "2", "a": "1", "c": ""}) == "x?a=1&b=2"
    # encodeURIComponent keeps A-Z a-z 0-9 - _ . ! ~ * ' ( ) and encodes the rest as UTF-8
    assert request_key("x", {"k": "a b&c=d/é!~*'()"}) == "x?k=a%20b%26c%3Dd%2F%C3%A9!~*'()"


# -- the server ---------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.7", "::", "example.com", "10.0.0.1"])
def test_a_non_loopback_host_is_refused(imported, capsys, host):
    store, sid = imported
    assert main(["view", sid, "--store", store, "--host", host, "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "loopback" in err and "--export" in err


@pytest.mark.parametrize(
    ("given", "bound"), [("127.0.0.1", "127.0.0.1"), ("localhost", "127.0.0.1"), ("::1", "::1")]
)
def test_loopback_hosts_are_accepted(given, bound):
    assert loopback_host(given) == bound
    with pytest.raises(ConfigError, match="loopback"):
        loopback_host("0.0.0.0")


@pytest.fixture
def server(data):
    srv = ViewerServer(data, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def _get(srv: ViewerServer, path: str, host: str | None = None, method: str = "GET"):
    port = srv.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest(method, path, skip_host=True)
    conn.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


def test_the_server_serves_the_page_under_a_strict_policy(server):
    assert server.server_address[0] == "127.0.0.1"
    for path, kind in (
        ("/", "text/html"),
        ("/viewer.js", "text/javascript"),
        ("/viewer.css", "text/css"),
    ):
        response, body = _get(server, path)
        assert response.status == 200 and response.getheader("Content-Type").startswith(kind)
        policy = response.getheader("Content-Security-Policy")
        assert "default-src 'none'" in policy and "script-src 'self';" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert response.getheader("X-Content-Type-Options") == "nosniff"
        assert body.decode() == asset({"/": "index.html"}.get(path, path[1:]))


def test_the_server_answers_json_and_errors(server, data):
    response, body = _get(server, f"/api/graph?session={data.session}")
    assert response.status == 200 and response.getheader("Content-Type") == "application/json"
    assert json.loads(body)["session"]["id"] == data.session
    response, body = _get(server, f"/api/node?session={data.session}&id=n_nothing")
    assert response.status == 404 and "n_nothing" in json.loads(body)["error"]
    response, body = _get(server, "/api/graph")
    assert response.status == 400 and "missing parameter" in json.loads(body)["error"]
    assert _get(server, "/api/eval")[0].status == 404
    assert _get(server, "/../../etc/passwd")[0].status == 404
    assert _get(server, "/", method="POST")[0].status == 501


@pytest.mark.parametrize("host", ["evil.example:80", "127.0.0.1", "attacker.test", ""])
def test_requests_naming_another_host_are_refused(server, data, host):
    # a page of another site reaching the port through DNS rebinding sends its own name
    response, _ = _get(server, f"/api/graph?session={data.session}", host=host)
    assert response.status == 403


def test_the_command_serves_until_stopped(imported, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    store, sid = imported
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxrules", "view", sid[:6], "--store", store, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:(\d+)/#session=(\S+)", line)
        assert url and url.group(2) == sid, line
        conn = http.client.HTTPConnection("127.0.0.1", int(url.group(1)), timeout=30)
        conn.request("GET", "/api/config")
        assert json.loads(conn.getresponse().read())["session"] == sid
        conn.close()
    finally:
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped" in err


# -- the export ---------------------------------------------------------------------------------


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_the_export_is_one_file_with_the_answers_at_head(imported, tmp_path, capsys, corpus):
    store, sid = imported
    out = tmp_path / "view.html"
    argv = ["view", sid, "--store", store, "--now", NOW, "--export", str(out)]
    assert main(argv) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert "src=" not in page and 'href="/' not in page  # nothing to load
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy
    assert "connect-src" not in policy  # default-src 'none': no requests at all
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert scripts == [asset("viewer.js")] and styles == [asset("viewer.css")]
    assert f"script-src '{_csp_hash(scripts[0])}'" in policy
    assert f"style-src '{_csp_hash(styles[0])}'" in policy
    (embedded,) = re.findall(
        r'<script type="application/json" id="ctxrules-data">(.*?)</script>', page, re.S
    )
    assert not set("<>&") & set(embedded)
    data = json.loads(embedded)
    assert data["session"] == sid
    printed = run_json(capsys, "view", sid, "--store", store, "--now", NOW, "--json")
    assert printed == {"session": sid, "answers": data["answers"]}
    answers = data["answers"]
    graph = answers[request_key("graph", {"session": sid})]["ok"]
    assert answers["sessions"]["ok"][0]["id"] == sid
    timeline = answers[request_key("timeline", {"session": sid, "head": graph["head"]})]["ok"]
    turns, calls = main_chain(transcript(corpus / SUBAGENTS))
    assert len(timeline["commits"]) == timeline["turns"] == turns == 12
    for c in timeline["commits"]:
        assert (
            answers[request_key("commit", {"session": sid, "id": c["id"]})]["ok"]["id"] == c["id"]
        )
    assert timeline["commits"][-1]["totals"]["items"] == turns + calls
    assert all(
        request_key("node", {"session": sid, "id": n["id"]}) in answers for n in graph["nodes"]
    )


def test_every_exported_answer_is_the_servers(imported, data):
    from urllib.parse import parse_qsl

    from ctxrules.cli.view import export_answers

    _, sid = imported
    exported = json.loads(msgspec.json.encode(export_answers(data, sid)))
    kinds = {key.partition("?")[0] for key in exported}
    assert kinds == {"config", "sessions", "timeline", "graph", "node", "commit", "diff"} | {
        "stats",
        "render",
    }
    for key, value in exported.items():
        name, _, query = key.partition("?")
        served = answer(data, name, **dict(parse_qsl(query)))
        if name == "sessions":  # the file names its own session only
            served = [s for s in served if s["id"] == sid]
        assert value == {"ok": served}, key


def test_an_export_shares_one_session_only(cli_import, tmp_path, capsys):
    store, (a, b) = cli_import(SUBAGENTS, "claude-code-jsonl/reliability_coverage-test-fix.jsonl")
    assert main(["view", "--store", store, "--export", str(tmp_path / "x.html")]) == 1
    assert "2 sessions: name the one to export" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
    printed = run_json(capsys, "view", a, "--store", store, "--json")
    assert [s["id"] for s in printed["answers"]["sessions"]["ok"]] == [a]
    assert b not in json.dumps(printed)


def test_embedded_text_cannot_close_the_data_element(tmp_path, capsys):
    hostile = tmp_path / "hostile.json"
    hostile.write_text(
        json.dumps(
            [
                {"role": "user", "content": "</script><script>alert(1)</script><!-- & -->"},
                {"role": "assistant", "content": "</SCRIPT >ok"},
            ]
        )
    )
    store = str(tmp_path / "store")
    assert main(["import", str(hostile), "--store", store]) == 0
    capsys.readouterr()
    out = tmp_path / "view.html"
    assert main(["view", "--store", store, "--export", str(out), "--now", NOW]) == 0
    page = out.read_text(encoding="utf-8")
    # Only our three elements open and close: the data's tags stay inside the JSON string.
    assert len(re.findall(r"<script", page, re.I)) == len(re.findall(r"</script", page, re.I)) == 2
    assert "alert(1)" in page and "<script>alert(1)" not in page
    (embedded,) = re.findall(r'id="ctxrules-data">(.*?)</script>', page, re.S)
    assert "</script><script>alert(1)</script><!-- & -->" in embedded.encode().decode(
        "unicode_escape"
    )


# -- the page's files ---------------------------------------------------------------------------


def test_the_page_files_ship_in_the_package_and_load_nothing_from_outside():
    files = {name: asset(name) for name in ("index.html", "viewer.js", "viewer.css")}
    for name, text in files.items():
        text = text.replace('"http://www.w3.org/2000/svg"', "")  # a namespace name, not a load
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), name
        assert "@import" not in text and "url(" not in text, name
    html = files["index.html"]
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/viewer.js" defer>']
    assert not re.search(r"\son[a-z]+=", html)  # no inline handlers
    assert "style=" not in html


def test_the_script_never_parses_data_as_html():
    js = asset("viewer.js")
    code = re.sub(r"//[^\n]*", "", js)  # comments may name what the code must not do
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "createContextualFragment",
        "DOMParser",
        "srcdoc",
    ):
        assert sink not in code, sink
    # attributes are set through el()/svg() from names in the code: never "style" or on*
    assert not re.search(r"setAttribute\(\s*[\"'](style|on)", code)
    assert "</script" not in js.lower() and "</style" not in asset("viewer.css").lower()


def test_view_is_a_command_with_help_and_examples(capsys):
    from ctxrules.cli import COMMANDS

    assert "view" in COMMANDS
    with pytest.raises(SystemExit):
        main(["view", "--help"])
    text = capsys.readouterr().out
    assert "--export" in text and "examples:" in text and "127.0.0.1" in text
