"""``ctxrules tune`` on the command line: the table, the files, the TOML it ends with,
one-line errors before anything runs, and a second run that measures nothing."""

from __future__ import annotations

import json

import pytest

from ctxrules.cli import main
from ctxrules.config import load_config
from ctxrules.tune import _batch

PARAMS = [
    "--param",
    "tool_aging.tail_turns=1..2",
    "--param",
    "result_cap.max_tool_result_chars=1000,4000",
]


def test_a_small_tune(sources, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["tune", *sources, *PARAMS, "--preset", "default", "--out", str(out)]) == 0
    shown = capsys.readouterr()
    assert shown.err == ""
    text = shown.out
    assert "tail_turns" in text and "max_tool_result_chars" in text
    assert "measured 5, reused 0" in text  # 4 settings and the default (3, 4000)
    for name in ("results.csv", "results.json", "frontier.png", "sweep.png", "chosen.toml"):
        assert (out / name).is_file() and name in text
    # It ends with the chosen TOML, the same as the file, which the loader reads.
    toml = (out / "chosen.toml").read_text(encoding="utf-8")
    assert text.endswith(toml)
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    chosen = data["results"][data["chosen"]]
    assert f"# chosen: {chosen['label']}" in text
    rules = {r.name: r for r in load_config(out / "chosen.toml").build()}
    assert rules["tool_aging"].tail_turns == chosen["setting"]["tool_aging.tail_turns"]

    # Again: everything from the cache.
    def never(*a, **k):
        raise AssertionError("measured again")

    monkeypatch.setattr(_batch, "measure", never)
    assert main(["tune", *sources, *PARAMS, "--preset", "default", "--out", str(out)]) == 0
    assert "measured 0, reused 5" in capsys.readouterr().out


def test_json_output(sources, tmp_path, capsys):
    args = [
        "tune",
        *sources,
        "--param",
        # the preset's own tail (1) is in the sweep, so no extra setting is measured
        "tool_aging.tail_turns=1..2",
        "--preset",
        "default",
        "--jobs",
        "1",
    ]
    assert main([*args, "--out", str(tmp_path), "--json", "--objective", "tokens"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["objective"] == "tokens" and data["search"] == "grid"
    assert [r["setting"]["tool_aging.tail_turns"] for r in data["results"]] == [1, 2]
    assert data["toml"].startswith("encoding = ")


def test_the_default_out_folder(sources, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(["tune", *sources, "--param", "tool_aging.tail_turns=1", "--preset", "default"]) == 0
    )
    assert (tmp_path / "ctxrules-tune" / "results.csv").is_file()
    assert len(list((tmp_path / "ctxrules-tune" / "cache").glob("*.json"))) == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--param", "tool_aging.tail_turns=0..2:0"], "--param tool_aging.tail_turns=0..2:0: "),
        (["--param", "tool_aging.nope=1"], "has no parameter 'nope'"),
        (["--param", "nope.x=1"], "unknown rule 'nope'"),
        (["--param", "result_cap.max_tool_result_chars=10,1000"], "must be at least 100"),
        (["--param", "tool_aging.tail_turns=1", "--min-quality", "2"], "between 0 and 1"),
        (["--param", "tool_aging.tail_turns=1", "--budget", "0", "--search", "random"], "budget"),
        (["--param", "tool_aging.tail_turns=1", "--provider", "nope"], "no provider named"),
    ],
)
def test_errors_are_one_line_and_nothing_runs(sources, tmp_path, capsys, monkeypatch, argv, says):
    monkeypatch.setattr(_batch, "measure", lambda *a, **k: pytest.fail("measured"))
    code = main(["tune", *sources, *argv, "--preset", "default", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("ctxrules tune: error: ") and says in err
    assert err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_param_is_required(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tune", "x.jsonl"])
    assert exc.value.code == 2 and "--param" in capsys.readouterr().err


def test_a_missing_source_is_named(tmp_path, capsys):
    missing = str(tmp_path / "nope.jsonl")
    args = ["tune", missing, "--param", "tool_aging.tail_turns=1", "--preset", "default"]
    assert main([*args, "--out", str(tmp_path / "o")]) == 1
    assert missing in capsys.readouterr().err


def test_tune_takes_format_and_exclusions_and_says_what_it_left_out(
    sources, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "runs"
    folder.mkdir()
    for src in sources:
        (folder / src.rsplit("/", 1)[1]).write_bytes(open(src, "rb").read())
    (folder / "notes.txt").write_text("not a transcript\n")
    dropped = str(folder / sources[1].rsplit("/", 1)[1])
    args = ["tune", str(folder), "--param", "tool_aging.tail_turns=2..3", "--preset", "default"]
    args += ["--jobs", "1", "--format", "claude-code", "--exclude-session", dropped]
    assert main([*args, "--out", str(tmp_path / "out"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["sessions"]) == 1 and len(data["excluded"]) == 1
    assert data["skipped"] == [
        {"path": str(folder / "notes.txt"), "reason": "not a claude-code transcript"}
    ]
    assert main([*args, "--out", str(tmp_path / "out2")]) == 0
    text = capsys.readouterr().out
    assert f"skipped {folder / 'notes.txt'}: not a claude-code transcript" in text
    assert f"excluded {data['excluded'][0]}" in text
