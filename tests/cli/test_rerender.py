"""``ctxrules rerender``: the summary table and ``--json`` totals, plain progress lines
when stderr is not a terminal (a bar when it is), and one-line typed errors for a bad
SOURCE, a bad ``--param``, an unknown preset and options that do not go together."""

from __future__ import annotations

import io
import json

import pytest

from ctxrules.cli import main
from ctxrules.cli.rerender import _Progress

CASSETTES = "vcr-cassettes-yaml"
OPENHANDS = "openhands-trajectory/basic_gui_mode.json"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["rerender", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_totals_add_up_the_sessions(corpus, first_corpus, capsys, tmp_path):
    out = tmp_path / "out.jsonl"
    cassettes = first_corpus / CASSETTES  # the five pydantic-ai cassettes
    argv = [str(cassettes), str(corpus / OPENHANDS), "--preset", "aggressive"]
    code, stdout, err = _run(capsys, *argv, "--jobs", "1", "--json", "--out", str(out))
    assert code == 0, err
    shown = json.loads(stdout)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    t = shown["totals"]
    assert (shown["replayed"], shown["resumed"], shown["interrupted"]) == (6, 0, False)
    assert t["sessions"] == len(records) == 6 and (t["errors"], t["violations"]) == (0, 0)
    assert t["requests"] == sum(r["requests"] for r in records)
    for group in ("plain", "rules"):
        assert t[group]["prompt_tokens"] == sum(r[group]["prompt_tokens"] for r in records)
    # Gemini has no prices: its session is left out of the cost and counted.
    assert t["plain"]["cost_unpriced_sessions"] == 1
    priced = [r["plain"]["cost_usd"] for r in records if r["plain"]["cost_usd"] is not None]
    assert t["plain"]["cost_usd"] == pytest.approx(sum(priced))
    assert "sessions" not in shown  # with --out, the records are in the file
    # Plain progress lines on a stream that is not a terminal.
    lines = [line for line in err.splitlines() if line.startswith("rerender: ")]
    assert lines[0].startswith("rerender: 0/6 sessions") and lines[-1].startswith(
        "rerender: 6/6 sessions (100%)"
    )


def test_the_table_on_the_terminal(corpus, capsys):
    code, stdout, _ = _run(capsys, str(corpus / OPENHANDS), "--preset", "aggressive", "--jobs", "1")
    assert code == 0
    assert "rerender: 1 sessions, 5 requests" in stdout
    for row in ("prompt tokens", "where recorded", "cache reads", "cost (USD)", "compactions"):
        assert row in stdout
    assert "replayed 1, resumed 0, errors 0, violations 0" in stdout


def test_a_param_changes_the_rules(corpus, capsys):
    argv = [str(corpus / OPENHANDS), "--preset", "off", "--jobs", "1", "--json"]
    code, stdout, err = _run(capsys, *argv)
    assert code == 0, err
    off = json.loads(stdout)["sessions"][0]
    assert off["rules"]["saved_by_rule"] == {}
    argv = [str(corpus / OPENHANDS), "--jobs", "1", "--json", "--config", "/nonexistent.toml"]
    code, _, err = _run(capsys, *argv)
    assert code == 1 and err.count("\n") == 1 and "no such config file" in err
    argv = [str(corpus / OPENHANDS), "--jobs", "1", "--json", "--preset", "default"]
    argv += [
        "--param",
        "result_cap.max_tool_result_chars=100",
        # the shipped aging keeps one turn whole; with three, results of the turns
        # before it stay for the cap to cut
        "--param",
        "tool_aging.tail_turns=3",
        # and the cap of the shipped preset waits for a rewrite that pays, which
        # cutting this session's short results to 100 characters (their marker names
        # what was cut) does not
        "--param",
        "result_cap.cache_aware=false",
    ]
    code, stdout, err = _run(capsys, *argv)
    assert code == 0, err
    capped = json.loads(stdout)["sessions"][0]
    assert capped["rules"]["saved_by_rule"]["result_cap"] > 0
    assert capped["rules_version"] != off["rules_version"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/no/such/place"], "/no/such/place: no such file, folder or store"),
        (["{corpus}", "--preset", "nope"], "unknown preset 'nope'"),
        (["{corpus}", "--param", "tool_aging.tail_turns"], "--param takes RULE.KEY=VALUE"),
        (["{corpus}", "--param", "tail_turns=2"], "--param takes RULE.KEY=VALUE"),
        (["{corpus}", "--param", "nope.x=1"], "rule 'nope' is not in the pipeline"),
        (["{corpus}", "--param", "tool_aging.nope=1"], "rule 'tool_aging' has no parameter 'nope'"),
        (["{corpus}", "--param", "tool_aging.tail_turns=x"], "parameter 'tail_turns' must be int"),
        (["{corpus}", "--provider", "nope"], "nope"),
        (["{corpus}", "--provider", "anthropic", "--model", "gpt-4o"], "gpt-4o"),
        (["{corpus}", "--scheduler", "tcp://127.0.0.1:1"], "needs --backend dask"),
        (["{corpus}", "--jobs", "0"], "jobs must be between 1 and 256, got 0"),
    ],
)
def test_errors_are_one_line(corpus, capsys, argv, message):
    argv = [a.replace("{corpus}", str(corpus / OPENHANDS)) for a in argv]
    code, stdout, err = _run(capsys, *argv)
    assert code == 1 and stdout == ""
    assert err.startswith("ctxrules rerender: error: ") and err.count("\n") == 1, err
    assert message in err


def test_a_terminal_gets_a_bar_with_the_rate():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = _Progress(stream)
    bar.update(0, 4)
    bar.update(2, 4)
    bar.close()
    shown = stream.getvalue()
    assert "2/4" in shown and "sessions/s" in shown and "rerender" in shown
    assert "rerender: 2/4 sessions (50%)" not in shown  # not the plain line


# -- what is read: --format, --exclude-session, and every file left out said ------------

CODEX = "codex-rollouts/agentv/a3_92ff332928_0_full.jsonl"
CLAUDE_21 = "claude-code-jsonl/entirecli/39_7737088f0a_0_full.jsonl"
NOTICES = "gemini-cli/entirecli/ec_38b74f08e3_2_full.json"


def _mixed(corpus, folder):
    """A folder of a Claude Code 2.1 transcript, a Codex rollout, a Gemini CLI session
    of notices only and a README."""
    folder.mkdir()
    for rel in (CLAUDE_21, CODEX, NOTICES):
        (folder / rel.rsplit("/", 1)[1]).write_bytes((corpus / rel).read_bytes())
    (folder / "README.md").write_text("notes\n")
    return folder


def test_rerender_says_what_it_skipped_and_left_out(corpus, capsys, tmp_path):
    folder = _mixed(corpus, tmp_path / "runs")
    codex = str(folder / CODEX.rsplit("/", 1)[1])
    code, out, err = _run(
        capsys, str(folder), "--preset", "off", "--jobs", "1", "--quiet", "--exclude-session", codex
    )
    assert code == 0, err
    lines = out.splitlines()
    notices = folder / NOTICES.rsplit("/", 1)[1]
    assert f"skipped {folder / 'README.md'}: not a transcript format ctxrules knows" in lines
    assert any(line.startswith(f"skipped {notices}: no conversation") for line in lines)
    (excluded,) = [line for line in lines if line.startswith("excluded ")]
    assert "replayed 1," in out  # the Claude Code session; the rollout excluded
    # --json says the same; a session named by id is left out as well.
    sid = excluded.split()[1]
    code, out, _ = _run(
        capsys, str(folder), "--preset", "off", "--jobs", "1", "--json", "--exclude-session", sid
    )
    shown = json.loads(out)
    assert shown["excluded"] == [sid] and shown["replayed"] == 1
    assert {s["path"] for s in shown["skipped"]} == {str(folder / "README.md"), str(notices)}


def test_rerender_format_reads_the_sources_with_that_importer(corpus, capsys, tmp_path):
    folder = _mixed(corpus, tmp_path / "runs")
    code, out, err = _run(
        capsys, str(folder), "--preset", "off", "--jobs", "1", "--json", "--format", "codex"
    )
    assert code == 0, err
    shown = json.loads(out)
    assert shown["replayed"] == 1 and shown["sessions"][0]["format"] == "codex"
    reasons = {s["path"].rsplit("/", 1)[1]: s["reason"] for s in shown["skipped"]}
    assert reasons[CLAUDE_21.rsplit("/", 1)[1]] == "not a codex transcript"


def test_an_exclusion_that_names_nothing_is_an_error(corpus, capsys):
    code, _, err = _run(
        capsys, str(corpus / OPENHANDS), "--jobs", "1", "--exclude-session", "s_nope"
    )
    assert code == 1 and "--exclude-session: --exclude-session 's_nope' names no session" in err
